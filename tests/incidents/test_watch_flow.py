"""The watcher end to end: OpenLineage events pushed to the bot's receiver or read from Marquez
by the poller become one alert each in the owning team's channel; a flapping failure is still
alerted; restarts and a second bot process on PostgreSQL alert nothing twice; a Slack that
answers 429/5xx to a third of the calls still gets every message exactly once."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp

from bot.config import parse_config
from standins.marquez.server import StandInServer, running_standin
from standins.slack.server import running_slack_standin
from tests.incidents.test_incidents import CONFIG, ORDERS
from tests.support.e2e import Bot, eventually, running_bot, start_bot

PRODUCER = "https://github.com/example/watch-test"
WATCH = {**CONFIG["watch"], "start_from": "2021-06-09T00:00:00Z", "poll_interval_s": 3600}  # type: ignore[dict-item]


def config() -> Any:
    return parse_config({**CONFIG, "watch": WATCH})


def at_once() -> Any:
    """`config()` with each alert sent at once (watch.group_wait_s 0): these tests are not about
    how the watcher gathers its Slack calls, and a gathered alert keeps each settle waiting 2 s."""
    return parse_config({**CONFIG, "watch": {**WATCH, "group_wait_s": 0}})


def run_event(
    kind: str,
    day: datetime,
    *,
    run_id: str,
    error: str | None = None,
    dag: str = "example.etl_orders",
) -> dict[str, Any]:
    facets: dict[str, Any] = {
        "nominalTime": {
            "_producer": PRODUCER,
            "_schemaURL": "https://openlineage.io/spec/facets/1-0-0/NominalTimeRunFacet.json",
            "nominalStartTime": day.isoformat().replace("+00:00", "Z"),
            "nominalEndTime": (day + timedelta(days=1)).isoformat().replace("+00:00", "Z"),
        }
    }
    if error:
        facets["errorMessage"] = {
            "_producer": PRODUCER,
            "_schemaURL": "https://openlineage.io/spec/facets/1-0-0/ErrorMessageRunFacet.json",
            "message": error,
            "programmingLanguage": "python",
        }
    at = day + timedelta(days=1, hours=1 if kind == "START" else 2)
    return {
        "eventType": kind,
        "eventTime": at.isoformat().replace("+00:00", "Z"),
        "run": {"runId": run_id, "facets": facets},
        "job": {"namespace": "food_delivery", "name": dag},
        "producer": PRODUCER,
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        "inputs": [],
        "outputs": [],
    }


def alerts(bot: Bot) -> list[Any]:
    return [m for m in bot.slack.state.messages(ORDERS) if ":rotating_light:" in m.text or
            ":white_check_mark:" in m.text]  # fmt: skip


def shown(message: Any) -> str:
    return message.text + json.dumps(message.blocks)


async def test_a_fail_posted_to_the_receiver_alerts_the_owners(
    tmp_path: Any, food_delivery_marquez: StandInServer
) -> None:
    database = f"sqlite:///{tmp_path / 'bot.db'}"
    async with running_bot(database, food_delivery_marquez, at_once()) as bot:
        day = datetime(2021, 6, 10, tzinfo=UTC)
        body = run_event("FAIL", day, run_id=str(uuid.uuid4()), error="OutOfMemoryError in stage 3")
        async with aiohttp.ClientSession() as http:
            async with http.post(f"{bot.url}/api/v1/lineage", json=body) as reply:
                assert reply.status == 201
            async with http.post(f"{bot.url}/api/v1/lineage", json={"eventTime": "x"}) as bad:
                assert bad.status == 422
                assert "error" in await bad.json()
        [alert] = await eventually(lambda: alerts(bot), timeout_s=20)
        text = shown(alert)
        assert "example.etl_orders" in text
        assert "2021-06-10" in text
        assert "OutOfMemoryError in stage 3" in text
        assert "example.etl_delivery_7_days" in text


async def test_a_flapping_failure_read_from_marquez_is_alerted_then_resolved(
    tmp_path: Any,
) -> None:
    database = f"sqlite:///{tmp_path / 'bot.db'}"
    async with (
        running_standin(seed="food_delivery") as marquez,
        running_bot(database, marquez, at_once()) as bot,
    ):
        day = datetime(2021, 6, 20, tzinfo=UTC)  # after the seed's runs: new to the poller
        failed, rerun = str(uuid.uuid4()), str(uuid.uuid4())
        # fails and succeeds again between two polls: a scan of current states would miss it
        for event in (
            run_event("START", day, run_id=failed),
            run_event("FAIL", day, run_id=failed, error="flaky network"),
            run_event("START", day + timedelta(minutes=30), run_id=rerun),
            run_event("COMPLETE", day + timedelta(minutes=30), run_id=rerun),
        ):
            marquez.state.ingest(_on_day(event, day))
        await bot.services.poller.poll_once()  # (the scheduled first poll may beat it to them)
        await bot.services.incidents.process()
        await eventually(lambda: alerts(bot), timeout_s=20)
        await eventually(lambda: "now resolved" in shown(alerts(bot)[0]), timeout_s=20)
        assert "flaky network" in shown(alerts(bot)[0])

        # a restarted bot (new services, same database) reads and alerts nothing again
        services, runner, _ = await start_bot(database, bot.slack, marquez, at_once())
        try:
            assert await services.poller.poll_once() == 0
            assert await services.incidents.process() == 0
        finally:
            await runner.cleanup()
        await bot.settle()
        assert len(alerts(bot)) == 1


async def test_a_fail_reaching_marquez_hours_late_is_alerted(tmp_path: Any) -> None:
    """The real clock: the poller's cursor is past the FAIL's eventTime when it reaches
    Marquez 3 h late, so only the late-event sweep can read it."""
    database = f"sqlite:///{tmp_path / 'bot.db'}"
    async with (
        running_standin(seed="food_delivery") as marquez,
        running_bot(database, marquez, at_once()) as bot,
    ):
        now = datetime.now(UTC)
        recent = run_event(
            "START", now, run_id=str(uuid.uuid4()), dag="example.etl_delivery_7_days"
        )
        recent["eventTime"] = (now - timedelta(minutes=1)).isoformat().replace("+00:00", "Z")
        marquez.state.ingest(recent)
        await bot.services.poller.poll_once()  # the cursor moves to a minute ago
        day = (now - timedelta(days=2)).replace(hour=0, minute=0, second=0, microsecond=0)
        late = run_event("FAIL", day, run_id=str(uuid.uuid4()), error="stuck in a spool")
        late["eventTime"] = (now - timedelta(hours=3)).isoformat().replace("+00:00", "Z")
        async with (
            aiohttp.ClientSession() as http,  # it reaches Marquez now
            http.post(f"{marquez.url}/api/v1/lineage", json=late) as reply,
        ):
            assert reply.status == 201
        await bot.services.poller.poll_once()
        await bot.services.incidents.process()
        [alert] = await eventually(lambda: alerts(bot), timeout_s=20)
        assert "stuck in a spool" in shown(alert)
        assert day.date().isoformat() in shown(alert)


def _on_day(event: dict[str, Any], day: datetime) -> dict[str, Any]:
    """Keep the nominal interval of `day` (the rerun is for the same interval)."""
    nominal = event["run"]["facets"]["nominalTime"]
    nominal["nominalStartTime"] = day.isoformat().replace("+00:00", "Z")
    nominal["nominalEndTime"] = (day + timedelta(days=1)).isoformat().replace("+00:00", "Z")
    return event


@asynccontextmanager
async def two_bots(database: str, marquez: StandInServer) -> AsyncIterator[list[Any]]:
    async with running_slack_standin() as slack:
        first = await start_bot(database, slack, marquez, at_once())
        second = await start_bot(database, slack, marquez, at_once())
        slack.set_events_url(f"{first[2]}/slack/events")
        try:
            yield [slack, first[0], second[0]]
        finally:
            await first[1].cleanup()
            await second[1].cleanup()


async def test_two_bot_processes_on_postgresql_post_each_alert_once(
    fresh_postgres_db: str,
) -> None:
    async with running_standin(seed="food_delivery") as marquez:
        for n in range(3):  # days apart: three outages, not one
            day = datetime(2021, 6, 10 + 2 * n, tzinfo=UTC)
            marquez.state.ingest(run_event("FAIL", day, run_id=str(uuid.uuid4()), error=f"e{n}"))
        async with two_bots(fresh_postgres_db, marquez) as (slack, one, two):
            await asyncio.gather(one.poller.poll_once(), two.poller.poll_once())
            await asyncio.gather(one.incidents.process(), two.incidents.process())
            await asyncio.gather(one.sender.drain(timeout_s=30), two.sender.drain(timeout_s=30))
            posted = [m for m in slack.state.messages(ORDERS) if ":rotating_light:" in m.text]
            assert len(posted) == 3
            assert len({m.text for m in posted}) == 3


async def test_a_flaky_slack_still_gets_every_alert_exactly_once(tmp_path: Any) -> None:
    database = f"sqlite:///{tmp_path / 'bot.db'}"
    async with running_standin(seed="food_delivery") as marquez:
        for n in range(6):  # days apart: six outages, not one
            day = datetime(2021, 6, 10 + 2 * n, tzinfo=UTC)
            marquez.state.ingest(run_event("FAIL", day, run_id=str(uuid.uuid4()), error=f"e{n}"))
        async with running_bot(database, marquez, at_once()) as bot:
            bot.slack.state.fail_every(3)  # every third Web API call answers 429 or 500
            await bot.services.poller.poll_once()
            await bot.services.incidents.process()
            await bot.services.sender.drain(timeout_s=90)
            posted = [m for m in bot.slack.state.messages(ORDERS) if ":rotating_light:" in m.text]
            assert sorted(m.text for m in posted) == sorted({m.text for m in posted})
            assert len(posted) == 6
            failed = [c for c in bot.slack.state.calls if c.status in (429, 500)]
            assert failed, "the stand-in never failed a call, so this proves nothing"
