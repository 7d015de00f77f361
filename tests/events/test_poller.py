"""The Marquez poller against the Marquez stand-in over HTTP, on SQLite and PostgreSQL.

Time is an injected clock: backoff and the cursor's "never past now" rule are checked without
sleeping. Marquez going down is a URL that refuses connections; garbage and slowness come from
tiny aiohttp apps.
"""

from __future__ import annotations

import asyncio
import socket
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.clients.marquez import MarquezClient, RetryPolicy
from bot.config import Watch
from bot.core.after_commit import wake_on_commit
from bot.core.db import make_engine, session_factory, upgrade
from bot.events.service.poller import MarquezPoller
from bot.events.store import run_events
from bot.events.store.models import RunEvent, WatchCursor
from bot.slack.messages.ops import describe_duration
from bot.slack.store.models import OutboxMessage
from standins.marquez.server import StandInServer
from standins.seeds.food_delivery import food_delivery_events
from tests.support.factories import poller as make_poller

Sessions = async_sessionmaker[AsyncSession]
SEED_START = datetime(2021, 5, 1, tzinfo=UTC)
SEED_NEWEST = datetime(2021, 6, 14, 4, 6, tzinfo=UTC)  # the seed's last eventTime
T0 = datetime(2024, 3, 1, 12, tzinfo=UTC)
OPS = "C0OPS"


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


class Target:
    """Where the pollers' clients connect; tests point it elsewhere to take Marquez down."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.timeout_s = 5.0
        self.requests = 0

    def client(self) -> AbstractAsyncContextManager[MarquezClient]:
        self.requests += 1  # one client per poll
        return MarquezClient(self.url, retry=RetryPolicy(attempts=1), timeout_s=self.timeout_s)


@dataclass
class Env:
    sessions: Sessions
    target: Target
    clock: Clock
    woken: list[int]

    def poller(self, **watch: Any) -> MarquezPoller:
        settings = {"poll_interval_s": 30, "overlap_s": 300, "page_size": 50, "ops_channel": OPS}
        return make_poller(
            self.sessions,
            self.target.client,
            Watch(**{**settings, **watch}),
            clock=self.clock,
        )

    async def count(self) -> int:
        async with self.sessions() as session:
            return int(await session.scalar(select(func.count()).select_from(RunEvent)) or 0)

    async def cursor(self) -> WatchCursor:
        async with self.sessions() as session:
            row = await session.get(WatchCursor, "marquez")
            assert row is not None
            return row

    async def notices(self) -> list[str]:
        return [f"{channel} {payload['text']}" for channel, payload in await self.payloads()]

    async def payloads(self) -> list[tuple[str, dict[str, Any]]]:
        async with self.sessions() as session:
            rows = await session.scalars(select(OutboxMessage).order_by(OutboxMessage.id))
            return [(r.channel, r.payload) for r in rows]


@asynccontextmanager
async def environment(url: str, standin_url: str) -> AsyncIterator[Env]:
    upgrade(url)
    engine = make_engine(url)
    try:
        env = Env(session_factory(engine), Target(standin_url), Clock(T0), [])
        # what a new run event wakes (the incident watcher, in the bot)
        wake_on_commit(env.sessions, run_events.OWED, lambda: env.woken.append(1))
        yield env
    finally:
        await engine.dispose()


@pytest.fixture
async def env(database_url: str, marquez_standin: StandInServer) -> AsyncIterator[Env]:
    async with environment(database_url, marquez_standin.url) as built:
        yield built


@pytest.fixture
async def sqlite_env(tmp_path: Any, marquez_standin: StandInServer) -> AsyncIterator[Env]:
    async with environment(f"sqlite:///{tmp_path / 'bot.db'}", marquez_standin.url) as built:
        yield built


def run_event(
    event_type: str, at: datetime, *, dag: str = "example.etl_orders", run_id: str | None = None
) -> dict[str, Any]:
    facets: dict[str, Any] = {}
    if event_type == "FAIL":
        facets["errorMessage"] = {
            "_producer": "https://example.com/tests",
            "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/ErrorMessageRunFacet.json",
            "message": "boom",
            "programmingLanguage": "python",
        }
    return {
        "eventType": event_type,
        "eventTime": at.isoformat().replace("+00:00", "Z"),
        "run": {"runId": run_id or str(uuid.uuid4()), "facets": facets},
        "job": {"namespace": "food_delivery", "name": dag},
        "producer": "https://example.com/tests",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
    }


def refused_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


@asynccontextmanager
async def tiny_server(
    handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
) -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_get("/api/v1/events/lineage", handler)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        yield str(server.make_url("")).rstrip("/")
    finally:
        await server.close()


def backing_off(poller: MarquezPoller) -> datetime | None:
    return poller.next_try  # (a call, so mypy forgets what earlier asserts narrowed)


# -- reading ------------------------------------------------------------------------------------


async def test_seed_history_is_stored_once(env: Env, marquez_standin: StandInServer) -> None:
    seed = food_delivery_events()
    for body in seed:
        marquez_standin.state.ingest(body)
    env.clock.now = SEED_NEWEST + timedelta(days=1)
    poller = env.poller(start_from=SEED_START)
    assert await poller.poll_once() == len(seed)  # 9 pages of 50
    assert await poller.poll_once() == 0
    assert await env.count() == len(seed)
    cursor = await env.cursor()
    assert (cursor.position, cursor.reachable, cursor.failures) == (SEED_NEWEST, True, 0)
    assert env.woken == [1]
    # A restart: a new poller on the same database reads on from the cursor, not from start_from.
    restarted = env.poller(start_from=SEED_START, lookback_s=10 * 365 * 86400)
    assert await restarted.poll_once() == 0
    assert await env.count() == len(seed)
    assert await env.notices() == []


async def test_a_failure_healed_before_the_next_poll_is_still_seen(
    env: Env, marquez_standin: StandInServer
) -> None:
    poller = env.poller()  # first poll starts lookback_s (1 h) before boot
    state = marquez_standin.state
    state.ingest(run_event("START", T0 - timedelta(minutes=10), run_id=str(uuid.UUID(int=1))))
    assert await poller.poll_once() == 1
    state.ingest(run_event("FAIL", T0 - timedelta(minutes=5), run_id=str(uuid.UUID(int=1))))
    state.ingest(run_event("START", T0 - timedelta(minutes=4)))
    state.ingest(run_event("COMPLETE", T0 - timedelta(minutes=3)))
    env.clock.advance(30)
    assert await poller.poll_once() == 3
    async with env.sessions() as session:
        fail = await session.scalar(select(RunEvent).where(RunEvent.event_type == "FAIL"))
    assert fail is not None
    assert (fail.dag_id, fail.error_message, fail.source) == (
        "example.etl_orders",
        "boom",
        "marquez",
    )


@pytest.mark.parametrize(("late_window_s", "caught"), [(0, 1), (86400, 2)])
async def test_late_events_within_the_overlap_are_caught(
    sqlite_env: Env, marquez_standin: StandInServer, late_window_s: float, caught: int
) -> None:
    env, state = sqlite_env, marquez_standin.state
    poller = env.poller(overlap_s=300, late_window_s=late_window_s)
    state.ingest(run_event("COMPLETE", T0 - timedelta(minutes=1)))
    assert await poller.poll_once() == 1
    # Reported late: eventTimes before the cursor, one within the overlap, one beyond it
    # (without the sweep, only the overlap catches late events; test_late_sweep.py has more).
    state.ingest(run_event("FAIL", T0 - timedelta(minutes=5)))
    state.ingest(run_event("FAIL", T0 - timedelta(minutes=7)))
    env.clock.advance(30)
    assert await poller.poll_once() == caught
    assert (await env.cursor()).position == T0 - timedelta(minutes=1)


async def test_the_cursor_never_passes_the_clock(
    sqlite_env: Env, marquez_standin: StandInServer
) -> None:
    env, state = sqlite_env, marquez_standin.state
    poller = env.poller(overlap_s=0)
    state.ingest(run_event("START", T0 + timedelta(hours=6)))  # a producer clock running ahead
    assert await poller.poll_once() == 1
    assert (await env.cursor()).position == T0
    state.ingest(run_event("FAIL", T0 + timedelta(seconds=10)))
    env.clock.advance(30)
    assert await poller.poll_once() == 1


async def test_unusable_events_are_skipped_and_passed(
    sqlite_env: Env, marquez_standin: StandInServer, caplog: pytest.LogCaptureFixture
) -> None:
    env, state = sqlite_env, marquez_standin.state
    poller = env.poller()
    bad = run_event("FAIL", T0 - timedelta(minutes=1), run_id="not-a-uuid")  # Marquez takes it
    state.ingest(run_event("START", T0 - timedelta(minutes=2)))
    state.ingest(bad)
    assert await poller.poll_once() == 1
    assert await poller.poll_once() == 0
    assert (await env.cursor()).position == T0 - timedelta(minutes=1)
    assert [r.getMessage() for r in caplog.records if "cannot use" in r.getMessage()] == [
        "skipping a Marquez event the watcher cannot use: run.runId must be a UUID, "
        "got 'not-a-uuid'"
    ]


async def test_two_processes_share_one_cursor(env: Env, marquez_standin: StandInServer) -> None:
    for minute in range(120):
        marquez_standin.state.ingest(run_event("COMPLETE", T0 - timedelta(minutes=minute)))
    first, second = env.poller(), env.poller()
    # From lookback (1 h) + overlap (5 min) before boot: minutes 0..65.
    assert sum(await asyncio.gather(first.poll_once(), second.poll_once())) == 66
    assert await env.count() == 66
    assert (await env.cursor()).position == T0
    env.target.url = refused_url()
    env.clock.advance(30)
    assert list(await asyncio.gather(first.poll_once(), second.poll_once())) == [0, 0]
    assert len(await env.notices()) == 1
    assert (await env.cursor()).failures == 2


# -- Marquez failing ----------------------------------------------------------------------------


async def test_an_outage_is_announced_once_and_loses_nothing(
    env: Env, marquez_standin: StandInServer
) -> None:
    state, up = marquez_standin.state, marquez_standin.url
    poller = env.poller(poll_interval_s=30)
    state.ingest(run_event("COMPLETE", T0 - timedelta(minutes=1)))
    assert await poller.poll_once() == 1

    env.target.url = refused_url()
    env.clock.advance(30)
    assert await poller.poll_once() == 0
    ((channel, notice),) = await env.payloads()
    assert channel == OPS
    assert notice["text"].startswith(":warning: Marquez unreachable: The watcher cannot read")
    facts = [element["text"] for element in notice["blocks"][1]["elements"]]
    assert facts[0].startswith("Error: Marquez at http://127.0.0.1:")
    assert facts[0].endswith(
        "is unreachable: Connection refused (1 attempt, GET /api/v1/events/lineage)"
    )
    assert facts[1] == "Resumes from events at 2024-03-01 11:54:00 UTC"  # cursor - overlap
    assert poller.next_try == env.clock.now + timedelta(seconds=60)
    requests = env.target.requests
    env.clock.advance(30)
    assert await poller.poll_once() == 0  # backing off: not even tried
    assert env.target.requests == requests
    for wait in (30, 60, 60):  # tries at +60 s, then every 60 s (watch.retry_max_s)
        env.clock.advance(wait)
        assert await poller.poll_once() == 0
    assert poller.next_try == env.clock.now + timedelta(seconds=60)
    assert env.target.requests == requests + 3
    cursor = await env.cursor()
    assert (cursor.reachable, cursor.failures, cursor.position) == (
        False,
        4,
        T0 - timedelta(minutes=1),
    )
    assert cursor.last_error is not None
    assert "unreachable" in cursor.last_error

    # Failures while Marquez was unreachable to the bot (but not to the pipelines).
    down_at = env.clock.now
    for n in range(75):
        state.ingest(run_event("FAIL", down_at - timedelta(seconds=5 * n)))
    env.target.url = up
    env.clock.advance(60)
    assert await poller.poll_once() == 75
    notices = await env.notices()
    assert len(notices) == 2
    # Down since the first failed poll; back between the last failed one and this one.
    assert notices[1] == (
        f"{OPS} :white_check_mark: Marquez recovered: Marquez answers again after 3 min to "
        "4 min unreachable. No events were missed: the watcher read on from where it stopped "
        "(75 new run events so far)."
    )
    cursor = await env.cursor()
    assert (cursor.reachable, cursor.failures, cursor.last_error) == (True, 0, None)
    assert backing_off(poller) is None
    env.clock.advance(30)
    assert await poller.poll_once() == 0
    assert len(await env.notices()) == 2


async def test_garbage_and_slowness_count_as_down(sqlite_env: Env) -> None:
    env = sqlite_env
    release = asyncio.Event()

    async def html(_: web.Request) -> web.Response:
        return web.Response(text="<html><title>Gateway</title></html>", content_type="text/html")

    async def wrong_shape(_: web.Request) -> web.Response:
        return web.json_response({"events": "none", "totalCount": 0})

    async def slow(_: web.Request) -> web.Response:
        await release.wait()
        return web.json_response({"events": [], "totalCount": 0})

    poller = env.poller(poll_interval_s=1)
    env.target.timeout_s = 0.2
    async with tiny_server(html) as a, tiny_server(wrong_shape) as b, tiny_server(slow) as c:
        for url, error in ((a, "response is not JSON"), (b, "'events' list"), (c, "no answer")):
            env.target.url = url
            env.clock.advance(600)
            assert await poller.poll_once() == 0
            last_error = (await env.cursor()).last_error
            assert last_error is not None
            assert error in last_error
        release.set()
    (notice,) = await env.notices()
    assert "Marquez unreachable" in notice


async def test_a_server_ignoring_the_offset_ends_the_poll(sqlite_env: Env) -> None:
    env = sqlite_env
    page = [run_event("COMPLETE", T0 - timedelta(minutes=n)) for n in range(50)]

    async def same_page(_: web.Request) -> web.Response:
        return web.json_response({"events": page, "totalCount": 10_000})

    async with tiny_server(same_page) as url:
        env.target.url = url
        assert await env.poller(page_size=50).poll_once() == 50
    assert (await env.cursor()).position == T0


async def test_no_ops_channel_means_log_only(
    sqlite_env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    env = sqlite_env
    env.target.url = refused_url()
    assert await env.poller(ops_channel=None).poll_once() == 0
    assert await env.notices() == []
    assert any("Marquez unreachable" in r.getMessage() for r in caplog.records)


async def test_polls_are_scheduled_at_once_then_on_the_interval(
    sqlite_env: Env, marquez_standin: StandInServer
) -> None:
    env = sqlite_env
    stored = asyncio.Event()
    marquez_standin.state.ingest(run_event("FAIL", T0 - timedelta(minutes=1)))
    poller = make_poller(
        env.sessions,
        env.target.client,
        Watch(poll_interval_s=45),
        clock=env.clock,
    )
    wake_on_commit(env.sessions, run_events.OWED, stored.set)
    scheduler = AsyncIOScheduler()
    make_poller(env.sessions, env.target.client, Watch(poll=False)).schedule(scheduler)
    assert scheduler.get_jobs() == []
    poller.schedule(scheduler)
    (job,) = scheduler.get_jobs()
    assert (job.max_instances, job.coalesce, job.misfire_grace_time) == (1, True, None)
    assert job.trigger.interval == timedelta(seconds=45)
    scheduler.start()
    try:
        await asyncio.wait_for(stored.wait(), timeout=10)
    finally:
        scheduler.shutdown(wait=False)
    assert await env.count() == 1


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0 s"),
        (59, "59 s"),
        (60, "1 min"),
        (3600, "1 h"),
        (3900, "1 h 5 min"),
        (86400 * 2 + 3600 * 4 + 60, "2 d 4 h"),
    ],
)
def test_durations_read_naturally(seconds: int, text: str) -> None:
    assert describe_duration(timedelta(seconds=seconds)) == text
