"""One bad event must never silence the bot: absurd dates are refused at the door naming the
field, a year-9999 row already stored neither breaks the alerts of later failures nor the SLA
pass, and a row whose handling keeps failing is set aside (kept, counted in /metrics, told
once in the ops channel, retried from the CLI) while every other event is alerted."""

from __future__ import annotations

import asyncio
import os
import re
import sys
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bot.config import parse_config
from bot.events.store.models import EventSource, RunEvent
from bot.incidents.service.watcher import IncidentService
from standins.marquez.server import StandInServer
from tests.incidents.test_incidents import CONFIG, ORDERS, event, shown, store
from tests.support.e2e import Bot, running_bot
from tests.support.factories import sla_service
from tests.support.story import run_event

OPS = "C0OPS00001"
POISON = "example.etl_orders_7_days"
FAR = datetime(9999, 12, 30, tzinfo=UTC)


@pytest.fixture
async def bot(tmp_path: Path, food_delivery_marquez: StandInServer) -> AsyncIterator[Bot]:
    config = {
        **CONFIG,
        # alerts sent at once (group_wait_s 0): how they are gathered is not the subject here,
        # and a gathered one keeps each settle waiting 2 s
        "watch": {**CONFIG["watch"], "ops_channel": OPS, "group_wait_s": 0},  # type: ignore[dict-item]
        "sla": [{"pattern": "example.etl_orders", "deadline": "2h"}],
    }
    database = f"sqlite:///{tmp_path / 'bot.db'}"
    async with running_bot(database, food_delivery_marquez, parse_config(config)) as running:
        yield running


async def post(bot: Bot, body: dict[str, Any]) -> tuple[int, str]:
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{bot.url}/api/v1/lineage", json=body) as reply,
    ):
        return reply.status, await reply.text()


async def metrics(bot: Bot) -> dict[str, float]:
    async with aiohttp.ClientSession() as http, http.get(f"{bot.url}/metrics") as reply:
        assert reply.status == 200
        assert reply.headers["Content-Type"].startswith("text/plain")
        text = await reply.text()
    found = re.findall(r"^(backfill_bot_\w+) ([0-9.e+]+)$", text, re.MULTILINE)
    return {name: float(value) for name, value in found}


def texts(bot: Bot, channel: str) -> list[str]:
    return [shown(m) for m in bot.slack.state.messages(channel)]


async def test_absurd_dates_are_refused_at_the_door_naming_the_field(bot: Bot) -> None:
    day = datetime(2021, 6, 4, tzinfo=UTC)
    far = run_event("FAIL", day)
    far["run"]["facets"]["nominalTime"]["nominalStartTime"] = "9999-12-31T00:00:00Z"
    status, body = await post(bot, far)
    assert status == 422
    assert "run.facets.nominalTime.nominalStartTime is out of range" in body
    assert "Traceback" not in body

    late = run_event("FAIL", day)
    late["eventTime"] = "9999-12-31T23:59:59Z"
    status, body = await post(bot, late)
    assert (status, "eventTime is out of range" in body) == (422, True)

    early = run_event("FAIL", day)
    early["run"]["facets"]["nominalTime"]["nominalEndTime"] = "0001-01-01T00:00:00Z"
    status, body = await post(bot, early)
    assert (status, "nominalEndTime is out of range" in body) == (422, True)

    assert (await post(bot, run_event("FAIL", day)))[0] == 201  # a sane one still goes in


async def test_a_stored_year_9999_failure_does_not_stop_later_alerts(bot: Bot) -> None:
    legacy = event("example.etl_orders", day=datetime(2021, 6, 4, tzinfo=UTC))
    legacy.nominal_start, legacy.nominal_end = FAR, FAR + timedelta(days=1)
    await store(bot, legacy)  # stored before dates were bounded: an open incident in 9999
    assert len(texts(bot, ORDERS)) == 1

    # a failure downstream is checked against that open incident (its week of slack added to
    # year 9999 raised OverflowError) and must be alerted on its own
    await store(bot, event(POISON, error="java.io.IOException: disk full"))
    alerts = texts(bot, ORDERS)
    assert len(alerts) == 2
    assert any(POISON in text and "disk full" in text for text in alerts)


async def test_a_stored_year_9999_run_does_not_stop_the_sla_pass(bot: Bot) -> None:
    t0 = datetime(2021, 6, 1, tzinfo=UTC)

    def run(dag: str, start: datetime, kind: str = "COMPLETE") -> RunEvent:
        return RunEvent(
            run_id=str(uuid.uuid4()), event_type=kind,
            event_time=start + timedelta(days=1, minutes=30), namespace="food_delivery",
            job_name=dag, dag_namespace="food_delivery", dag_id=dag, nominal_start=start,
            nominal_end=start + timedelta(days=1), source=EventSource.MARQUEZ,
        )  # fmt: skip

    async with bot.services.sessions.begin() as session:
        session.add_all(run("example.etl_orders", t0 + n * timedelta(days=1)) for n in range(7))
        # another DAG with one run in 2021 and one in year 9999: its schedule continued from
        # 9999 overflowed, and that aborted the pass for every DAG
        session.add_all([run("example.etl_delivery_7_days", t0), run(POISON, t0)])
        session.add_all([run("example.etl_delivery_7_days", FAR), run(POISON, FAR)])
    due = t0 + timedelta(days=8, hours=2)
    sla = sla_service(
        bot.services.sessions,
        bot.services.config,
        bot.services.backfills.planners,
        clock=lambda: due + timedelta(minutes=1),
    )
    assert await sla.check() == 1
    await bot.settle()
    assert any("has no run yet for 2021-06-08" in text for text in texts(bot, ORDERS))


async def test_a_row_that_keeps_failing_is_set_aside_told_once_and_retried(
    bot: Bot, monkeypatch: pytest.MonkeyPatch
) -> None:
    handle = IncidentService._handle
    broken = True

    async def flaky(self: IncidentService, row: RunEvent, batch: Any) -> None:
        if broken and row.dag_id == POISON:
            raise RuntimeError("the impact of this DAG cannot be worked out")
        await handle(self, row, batch)

    monkeypatch.setattr(IncidentService, "_handle", flaky)
    poison = event(POISON, day=datetime(2021, 6, 20, tzinfo=UTC))
    await store(bot, poison, event("example.etl_orders"))
    for _ in range(3):  # each pass tries the row again, up to the third
        await bot.services.incidents.process()
    await bot.settle()

    # the good event was alerted, the bad one did not hold it up
    assert any("example.etl_orders failed" in text for text in texts(bot, ORDERS))
    [notice] = texts(bot, OPS)
    assert "Run events set aside" in notice
    assert f"FAIL of {POISON}" in notice
    assert "RuntimeError: the impact of this DAG cannot be worked out" in notice
    figures = await metrics(bot)
    assert figures["backfill_bot_run_events_set_aside"] == 1
    assert figures["backfill_bot_run_event_failures_total"] == 3

    for _ in range(3):  # set aside: no more tries, no more notices
        await bot.services.incidents.process()
    await bot.settle()
    assert len(texts(bot, OPS)) == 1
    assert (await metrics(bot))["backfill_bot_run_event_failures_total"] == 3

    broken = False  # the cause is fixed; the operator retries
    await retry_from_cli(bot)
    while await bot.services.incidents.process():
        pass
    await bot.settle()
    assert (await metrics(bot))["backfill_bot_run_events_set_aside"] == 0
    assert any(f"{POISON} failed" in text for text in texts(bot, ORDERS))


async def retry_from_cli(bot: Bot) -> None:
    env = {"DATABASE_URL": str(bot.services.engine.url).replace("+aiosqlite", "")}
    listed = await cli(env, "events", "list")
    assert POISON in listed
    assert "RuntimeError" in listed
    assert "1 run event put back" in await cli(env, "events", "retry", "--all")


async def cli(env: dict[str, str], *args: str) -> str:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", *args,
        env={**os.environ, **env},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await process.communicate()
    text = out.decode()
    assert process.returncode == 0, text
    return text


async def test_events_retry_needs_ids_or_all(tmp_path: Path) -> None:
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'bot.db'}"}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", "events", "retry",
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await process.communicate()
    assert process.returncode == 2
    assert "events retry takes the ids to retry or --all" in err.decode()
    assert "Traceback" not in err.decode()
