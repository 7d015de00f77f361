"""The lineage index at organisation scale (issue 25), told through what users and operators
see: a preview on an empty index answers at once from an on-demand fetch and says so, while
/readyz and /metrics say how far the index has read Marquez; the full reconcile holds one page
of jobs at a time; replicas on one database run one reconcile; a failed reconcile is logged,
counted and retried instead of leaving the index behind for hours."""

from __future__ import annotations

import asyncio
import gc
import json
import weakref
from collections.abc import AsyncGenerator, Callable
from datetime import timedelta
from typing import Any

import aiohttp

from bot.clients.marquez import MarquezClient
from bot.config import IndexSettings, parse_config
from bot.core.db import make_engine, session_factory, upgrade
from bot.core.tables import utcnow
from bot.lineage.service.index import LineageIndex
from bot.lineage.service.index_planner import write_marquez_jobs
from bot.lineage.service.progress import index_state
from bot.lineage.service.reconcile import LEASE, Reconciler
from bot.lineage.store.reconcile_state import take_lease
from standins.marquez.server import StandInServer, running_standin
from tests.support.e2e import CHANNEL, CONFIG, REQUESTER, eventually, running_bot

COMMAND = "example.etl_orders 2021-06-04..2021-06-06"
SEED_JOBS = 18  # the food_delivery seed's jobs


def listings(server: StandInServer, since: int = 0) -> list[str]:
    """Full listings of Marquez's jobs begun (first pages) since request number `since`."""
    return [
        r for r in server.requests[since:] if r.startswith("GET /api/v1/jobs?") and "offset=0" in r
    ]


async def get_json(url: str) -> Any:
    async with aiohttp.ClientSession() as http, http.get(url) as reply:
        return await reply.json()


async def test_a_preview_on_an_empty_index_answers_at_once_and_says_the_index_is_loading(
    tmp_path: Any,
) -> None:
    # Marquez's catalog pages come slowly (as a big one's do): the full reconcile is still
    # reading when the preview is asked for.
    config = parse_config({**CONFIG, "index": {"page_size": 5}})
    async with (
        running_standin(seed="food_delivery", latency={"jobs": 2.0}) as marquez,
        running_bot(
            f"sqlite:///{tmp_path / 'bot.db'}", marquez, config, wait_for_index=False
        ) as bot,
    ):
        status = await get_json(f"{bot.url}/readyz")
        index = status["checks"]["lineage_index"]
        assert index["ok"] is True
        assert index["state"] == "loading"
        assert index["jobs_read"] < SEED_JOBS

        reply = await bot.slack.slash_command(COMMAND, user_id=REQUESTER, channel_id=CHANNEL)
        assert reply.status == 200
        await eventually(lambda: bot.slack.state.messages(CHANNEL))
        preview = bot.slack.state.messages(CHANNEL)[-1]
        text = json.dumps(preview.blocks)
        assert bot.services.reconciler is not None
        assert bot.services.reconciler.index.freshness.full_reconcile_at is None  # still loading
        for dag in ("example.etl_orders_7_days", "example.etl_delivery_7_days"):
            assert dag in text
        assert "The bot's lineage index is still loading" in text
        assert "asked Marquez what is downstream of example.etl_orders just now" in text
        assert "may be missing" not in text  # the walk saw every affected job's consumers

        reconciler = bot.services.reconciler
        await eventually(lambda: reconciler.index.freshness.full_reconcile_at, timeout_s=60)
        async with aiohttp.ClientSession() as http, http.get(f"{bot.url}/metrics") as reply:
            exposition = await reply.text()
        assert "backfill_bot_lineage_index_complete 1.0" in exposition
        assert f'backfill_bot_lineage_index_jobs{{of="read"}} {SEED_JOBS}.0' in exposition
        assert f'backfill_bot_lineage_index_jobs{{of="total"}} {SEED_JOBS}.0' in exposition

        await bot.slack.slash_command(COMMAND, user_id=REQUESTER, channel_id=CHANNEL)
        await eventually(lambda: len(bot.slack.state.messages(CHANNEL)) == 2)
        later = json.dumps(bot.slack.state.messages(CHANNEL)[-1].blocks)
        assert "still loading" not in later
        assert "Lineage from the bot's index, last reconciled with Marquez" in later


class _Page(list[dict[str, Any]]):
    """A page of jobs that can be watched (a plain list cannot be weakly referenced)."""


def page_watching(url: str) -> tuple[Callable[[], MarquezClient], list[int]]:
    """A client factory whose job pages are watched, and the most pages alive at once (seen
    as each page is handed out: every earlier one should be garbage by then)."""
    alive = [0]
    most = [0]

    def dropped() -> None:
        alive[0] -= 1

    class Watching(MarquezClient):
        def job_pages(
            self, *, on_total: Callable[[int], None] | None = None
        ) -> AsyncGenerator[list[dict[str, Any]]]:
            pages = super().job_pages(on_total=on_total)

            async def watched() -> AsyncGenerator[list[dict[str, Any]]]:
                async for page in pages:
                    gc.collect()
                    handed = _Page(page)
                    del page
                    alive[0] += 1
                    weakref.finalize(handed, dropped)
                    most[0] = max(most[0], alive[0])
                    yield handed
                    del handed

            return watched()

    return lambda: Watching(url, page_size=10), most


def chain(jobs: int) -> list[dict[str, Any]]:
    """COMPLETE events of `jobs` jobs, each reading the one before."""
    return [
        {
            "eventType": "COMPLETE",
            "eventTime": f"2021-06-05T01:{n // 60:02d}:{n % 60:02d}Z",
            "producer": "https://github.com/OpenLineage/OpenLineage/tree/1.9.0/integration/spark",
            "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
            "run": {"runId": f"00000000-0000-4000-8000-{n:012d}"},
            "job": {"namespace": "scale", "name": f"job{n:03d}"},
            "inputs": [{"namespace": "scale", "name": f"ds{n - 1:03d}"}] if n else [],
            "outputs": [{"namespace": "scale", "name": f"ds{n:03d}"}],
        }
        for n in range(jobs)
    ]


async def test_the_full_reconcile_holds_one_page_of_jobs_at_a_time(tmp_path: Any) -> None:
    url = f"sqlite:///{tmp_path / 'index.db'}"
    upgrade(url)
    engine = make_engine(url)
    # Each page's gc.collect() leaves out what the process held before this test: in a worker
    # that has run hundreds of tests, a full collection costs more than a second, once a page.
    gc.collect()
    gc.freeze()
    try:
        async with running_standin() as marquez:
            for event in chain(120):
                marquez.state.ingest(event)
            make, most = page_watching(marquez.url)
            index = LineageIndex(session_factory(engine))
            result = await Reconciler(index.sessions, make, index, IndexSettings()).full()
    finally:
        gc.unfreeze()
    await engine.dispose()
    assert result is not None
    assert result.pages >= 12
    assert result.jobs_read == 120
    assert len(index.lineage.jobs) == 120
    assert most[0] == 1


async def test_replicas_on_one_database_run_one_full_reconcile(database_url: str) -> None:
    upgrade(database_url)
    engines = [make_engine(database_url) for _ in range(2)]
    async with running_standin(seed="food_delivery", latency={"jobs": 0.3}) as marquez:
        indexes = [LineageIndex(session_factory(engine)) for engine in engines]
        replicas = [
            Reconciler(
                index.sessions,
                lambda: MarquezClient(marquez.url, page_size=5),
                index,
                IndexSettings(),
            )
            for index in indexes
        ]
        await asyncio.wait_for(asyncio.gather(*(r.start() for r in replicas)), 60)
        assert len(listings(marquez)) == 1  # one replica read the catalog
        assert [len(i.lineage.jobs) for i in indexes] == [SEED_JOBS, SEED_JOBS]
        assert indexes[0].freshness.full_reconcile_at == indexes[1].freshness.full_reconcile_at
        # A holder that died keeps the others out only until its lease ends.
        async with indexes[0].sessions.begin() as session:
            assert await take_lease(session, "crashed-replica", utcnow(), LEASE)
        assert await replicas[0].full() is None
        later = utcnow() + LEASE + timedelta(seconds=1)
        replicas[1].clock = lambda: later
        taken = await replicas[1].full()
        assert taken is not None
        assert taken.jobs_read == SEED_JOBS
    for engine in engines:
        await engine.dispose()


async def test_a_failed_first_reconcile_is_recorded_counted_and_retried(tmp_path: Any) -> None:
    url = f"sqlite:///{tmp_path / 'index.db'}"
    upgrade(url)
    engine = make_engine(url)
    failures: list[BaseException] = []
    async with running_standin(seed="food_delivery") as marquez:
        index = LineageIndex(session_factory(engine))
        settings = IndexSettings()
        first = [True]

        def make() -> MarquezClient:
            if first[0]:  # a bug, not Marquez: the kind that once killed the task silently
                first[0] = False
                raise KeyError("latestRuns")
            return MarquezClient(marquez.url)

        reconciler = Reconciler(index.sessions, make, index, settings, on_failure=failures.append)
        started = asyncio.create_task(reconciler.start())
        await eventually(lambda: failures)
        state = await eventually(lambda: _errored(index, settings))
        assert state["state"] == "loading"
        assert "KeyError" in state["last_error"]
        await asyncio.wait_for(started, 30)
    after = await index_state(index.sessions, settings)
    await engine.dispose()
    assert [type(e) for e in failures] == [KeyError]
    assert after["state"] == "current"
    assert "last_error" not in after
    assert len(index.lineage.jobs) == SEED_JOBS


async def _errored(index: LineageIndex, settings: IndexSettings) -> dict[str, Any] | None:
    state = await index_state(index.sessions, settings)
    return state if state.get("last_error") else None


async def test_a_reconcile_page_and_an_on_demand_fetch_may_write_the_same_new_jobs(
    database_url: str,
) -> None:
    """While the index loads, a preview's walk and the reconcile's page often bring the same
    jobs at once: both are written, once each, whichever commits first."""
    upgrade(database_url)
    engine = make_engine(database_url)
    sessions = session_factory(engine)
    try:
        for round_ in range(5):
            jobs = [
                {"namespace": "scale", "name": f"r{round_}.job{n}", "parentJobName": f"r{round_}"}
                for n in range(20)
            ]
            await asyncio.gather(*(write_marquez_jobs(sessions, jobs) for _ in range(3)))
        index = LineageIndex(sessions)
        await index.catch_up()
        assert len(index.lineage.jobs) == 100
    finally:
        await engine.dispose()
