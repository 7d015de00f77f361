"""Failed runs become incidents: one alert in the owning team's channel with the impact from
Marquez, a working Backfill button, repeats and downstream storms folded into that alert, and
resolution when the DAG succeeds again. Events are stored as the receiver and the poller store
them; the incident processor and everything after it run for real."""

from __future__ import annotations

import asyncio
import itertools
import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from bot.backfill.store.models import BackfillRequest
from bot.config import parse_config
from bot.events.store.models import EventSource, RunEvent
from bot.incidents.service.watcher import IncidentService
from bot.incidents.store.models import Incident
from bot.slack.rules.ids import ActionId, OptionBlock
from standins.marquez.server import StandInServer
from tests.support.e2e import OWNER, Bot, buttons, eventually, running_bot
from tests.support.factories import incident_service

ORDERS, ANALYTICS, LOGISTICS = "C0ORDERS01", "C0ANALYT01", "C0LOGIST01"
CONFIG = {
    "teams": [
        {"name": "orders", "channel": ORDERS, "members": [OWNER]},
        {"name": "logistics", "channel": LOGISTICS, "members": ["U0BOB00001"]},
        {"name": "analytics", "channel": ANALYTICS, "user_groups": ["S0ANALYTIC"]},
    ],
    "ownership": [
        {"pattern": "example.etl_orders*", "team": "orders"},
        {"pattern": "example.*delivery*", "team": "logistics"},
        {"pattern": "reporting::*", "team": "analytics"},
    ],
    "reports": [
        {
            "name": "Weekly delivery times",
            "team": "logistics",
            "datasets": ["food_delivery::public.top_delivery_times"],
        },
        {"name": "Weekly KPIs", "team": "analytics", "datasets": ["reporting::kpis.weekly"]},
    ],
    "watch": {"marquez_web_url": "http://marquez.example.com:3000"},
}
# CONFIG with watch.group_wait_s 0: each alert and edit is sent at once, so no settle waits out
# 2 s of gathering that the tests using it do not look at. The storm's test gathers (`gathered`).
AT_ONCE = {**CONFIG, "watch": {**CONFIG["watch"], "group_wait_s": 0}}  # type: ignore[dict-item]
DAY = datetime(2021, 6, 4, tzinfo=UTC)
SEQUENCE = itertools.count()


@pytest.fixture
async def bot(tmp_path: Path, food_delivery_marquez: StandInServer) -> AsyncIterator[Bot]:
    database = f"sqlite:///{tmp_path / 'bot.db'}"
    async with running_bot(database, food_delivery_marquez, parse_config(AT_ONCE)) as running:
        yield running


@pytest.fixture
async def gathered(tmp_path: Path, food_delivery_marquez: StandInServer) -> AsyncIterator[Bot]:
    """The bot with watch.group_wait_s at its default: the watcher's edits are gathered."""
    database = f"sqlite:///{tmp_path / 'bot.db'}"
    async with running_bot(database, food_delivery_marquez, parse_config(CONFIG)) as running:
        yield running


async def store(bot: Bot, *events: RunEvent) -> None:
    async with bot.services.sessions.begin() as session:
        session.add_all(events)
    while await bot.services.incidents.process():
        pass
    await bot.settle()


def event(
    dag: str, kind: str = "FAIL", *, day: datetime = DAY, job: str | None = None, error: str = ""
) -> RunEvent:
    return RunEvent(
        run_id=str(uuid.uuid4()),
        event_type=kind,
        # each event a second after the previous one, as a scheduler's runs would be
        event_time=day + timedelta(days=1, hours=1, seconds=next(SEQUENCE)),
        namespace="food_delivery",
        job_name=job or dag,
        dag_namespace="food_delivery",
        dag_id=dag,
        nominal_start=day,
        nominal_end=day + timedelta(days=1),
        error_message=error or None,
        source=EventSource.RECEIVER,
    )


def shown(message: Any) -> str:
    return message.text + json.dumps(message.blocks)


async def test_a_failure_alerts_the_owning_team_with_its_impact(bot: Bot) -> None:
    await store(bot, event("example.etl_orders", job="example.etl_orders.load", error="disk full"))

    [alert] = bot.slack.state.messages(ORDERS)
    text = shown(alert)
    assert "example.etl_orders" in text
    assert "2021-06-04" in text
    assert "disk full" in text
    for dag in ("example.etl_orders_7_days", "example.etl_delivery_7_days"):
        assert dag in text
    assert "Weekly delivery times (logistics)" in text
    assert "Weekly KPIs (analytics)" in text
    assert "<!subteam^S0ANALYTIC>" in text
    assert set(buttons(alert)) == {
        ActionId.INCIDENT_APPROVE,
        ActionId.INCIDENT_REVIEW,
        ActionId.INCIDENT_ACK,
        ActionId.INCIDENT_SNOOZE_1H,
        ActionId.INCIDENT_SNOOZE_24H,
        ActionId.INCIDENT_MARQUEZ,
    }
    link = buttons(alert)[ActionId.INCIDENT_MARQUEZ]["url"]
    assert link == "http://marquez.example.com:3000/lineage/job/food_delivery/example.etl_orders"
    assert bot.slack.state.messages(ANALYTICS) == []  # mentioned, not spammed


async def backfill_of(bot: Bot) -> BackfillRequest:
    async def linked() -> str | None:
        async with bot.services.sessions() as session:
            [incident] = list(await session.scalars(select(Incident)))
            return incident.backfill_request_id

    request_id = await eventually(linked, timeout_s=30)
    await bot.settle()
    async with bot.services.sessions() as session:
        request = await session.get(BackfillRequest, request_id)
        assert request is not None
        return request


async def test_approve_backfill_in_the_alert_approves_it_at_once_in_its_thread(bot: Bot) -> None:
    await store(bot, event("example.etl_orders"))
    [alert] = bot.slack.state.messages(ORDERS)
    await bot.slack.click(
        channel_id=ORDERS,
        message_ts=alert.ts,
        action_id=ActionId.INCIDENT_APPROVE,
        user_id=OWNER,
        value=buttons(alert)[ActionId.INCIDENT_APPROVE]["value"],
    )
    request = await backfill_of(bot)
    assert request.state in ("approved", "running")  # the manual executor: handed over
    assert request.approvers == [OWNER]
    assert request.thread_ts == alert.ts
    [alert] = bot.slack.state.messages(ORDERS)  # nothing new in the channel itself
    assert f"Backfill `{request.id}`" in shown(alert)
    assert ActionId.INCIDENT_APPROVE not in buttons(alert)
    replies = bot.slack.state.thread(ORDERS, alert.ts)
    assert any(r.ts == request.status_message_ts for r in replies)


async def test_review_plan_opens_the_plan_and_its_options_and_submitting_previews_it(
    bot: Bot,
) -> None:
    await store(bot, event("example.etl_orders"))
    [alert] = bot.slack.state.messages(ORDERS)
    reply = await bot.slack.click(
        channel_id=ORDERS,
        message_ts=alert.ts,
        action_id=ActionId.INCIDENT_REVIEW,
        user_id=OWNER,
        value=buttons(alert)[ActionId.INCIDENT_REVIEW]["value"],
    )
    assert reply.status == 200
    view = await eventually(lambda: list(bot.slack.state.views.values()), timeout_s=30)
    assert "example.etl_delivery_7_days" in json.dumps(view[0].payload)
    async with bot.services.sessions() as session:
        assert list(await session.scalars(select(BackfillRequest))) == []

    # Its options, submitted: the preview in the alert's thread, with them.
    chosen = {
        OptionBlock.RERUN: {ActionId.OPTION: {"selected_option": {"value": "failed"}}},
        OptionBlock.FLAGS: {ActionId.OPTION: {"selected_options": [{"value": "backwards"}]}},
        OptionBlock.REASON: {ActionId.OPTION: {"value": "disk was full"}},
    }
    await bot.slack.submit_view(view_id=view[0].id, user_id=OWNER, values=chosen)
    request = await backfill_of(bot)
    assert request.state == "previewed"
    assert request.thread_ts == alert.ts
    assert (request.options["rerun"], request.options["backwards"]) == ("failed", True)
    assert request.options["reason"] == "disk was full"
    [preview] = [
        m for m in bot.slack.state.thread(ORDERS, alert.ts) if ActionId.APPROVE in buttons(m)
    ]
    assert "reruns failed and missing runs" in shown(preview)
    assert "newest interval first" in shown(preview)


async def test_repeats_update_the_alert_and_a_success_resolves_it(bot: Bot) -> None:
    await store(bot, event("example.etl_orders"))
    await store(bot, event("example.etl_orders", error="still broken"))
    [alert] = bot.slack.state.messages(ORDERS)
    assert "failed 2 times" in shown(alert)
    assert "still broken" in shown(alert)

    await store(bot, event("example.etl_orders", "COMPLETE"))
    [alert] = bot.slack.state.messages(ORDERS)
    assert "now resolved" in shown(alert)
    assert ActionId.INCIDENT_APPROVE not in buttons(alert)
    assert any("Resolved" in shown(r) for r in bot.slack.state.thread(ORDERS, alert.ts))


async def test_a_success_of_one_task_does_not_resolve_the_dag(bot: Bot) -> None:
    await store(bot, event("example.etl_orders"))
    await store(bot, event("example.etl_orders", "COMPLETE", job="example.etl_orders.load"))
    async with bot.services.sessions() as session:
        [incident] = list(await session.scalars(select(Incident)))
    assert incident.state == "open"


async def test_a_storm_of_200_downstream_failures_is_one_alert(gathered: Bot) -> None:
    bot = gathered
    await store(bot, event("example.etl_orders"))
    downstream = ["example.etl_orders_7_days", "example.etl_delivery_7_days"]
    # the days around the failed one, every downstream DAG, over and over (tasks, retries)
    storm = [event(downstream[n % 2], day=DAY + timedelta(days=n % 5)) for n in range(200)]
    await store(bot, *storm)

    assert len(bot.slack.state.messages(ORDERS)) == 1
    assert bot.slack.state.messages(LOGISTICS) == []
    [alert] = bot.slack.state.messages(ORDERS)
    assert "200 downstream failures joined" in shown(alert)
    replies = bot.slack.state.thread(ORDERS, alert.ts)
    assert 1 <= len(replies) <= 2
    grouped = [r for r in replies if "joined this incident" in shown(r)]
    assert len(grouped) == 1  # one grouped reply, edited in place as more join
    updates = [c for c in bot.slack.state.calls if c.method == "chat.update"]
    assert len(updates) <= 5  # superseded edits are never sent


async def test_a_restarted_processor_alerts_nothing_twice(bot: Bot) -> None:
    await store(bot, event("example.etl_orders"))
    fresh = incident_service(
        bot.services.sessions,
        bot.services.config,
        bot.services.backfills.planners,
        marquez_web_url="http://marquez",
    )
    assert await fresh.process() == 0
    await bot.settle()
    assert len(bot.slack.state.messages(ORDERS)) == 1


async def test_snooze_quiets_repeats_until_it_ends(bot: Bot) -> None:
    await store(bot, event("example.etl_orders"))
    [alert] = bot.slack.state.messages(ORDERS)
    incident_id = buttons(alert)[ActionId.INCIDENT_SNOOZE_1H]["value"]
    await bot.slack.click(
        channel_id=ORDERS,
        message_ts=alert.ts,
        action_id=ActionId.INCIDENT_SNOOZE_1H,
        user_id=OWNER,
        value=incident_id,
    )
    await eventually(
        lambda: "Snoozed until" in shown(bot.slack.state.find_message(ORDERS, alert.ts))
    )
    await bot.settle()
    edits = len([c for c in bot.slack.state.calls if c.method == "chat.update"])
    await store(bot, event("example.etl_orders", error="again"))
    assert len([c for c in bot.slack.state.calls if c.method == "chat.update"]) == edits


async def test_a_downstream_failure_weeks_later_alerts_on_its_own(bot: Bot) -> None:
    await store(bot, event("example.etl_orders"))
    later = DAY + timedelta(days=30)
    await store(bot, event("example.etl_orders_7_days", day=later))
    assert len(bot.slack.state.messages(ORDERS)) == 2


async def test_an_alert_does_not_wait_for_a_slow_impact_which_is_edited_in(bot: Bot) -> None:
    gate = asyncio.Event()
    real = bot.services.backfills.planners

    @asynccontextmanager
    async def slow_planners() -> AsyncIterator[Any]:
        async with real() as planner:

            class Slow:  # the lineage index still busy with a DAG it had not seen
                async def impact(self, name: str, namespace: str | None = None) -> Any:
                    await gate.wait()
                    return await planner.impact(name, namespace)

            yield Slow()

    watch = bot.services.config.watch.model_copy(update={"impact_wait_s": 0.05})
    config = bot.services.config.model_copy(update={"watch": watch})

    def service() -> IncidentService:
        return incident_service(
            bot.services.sessions,
            config,
            slow_planners,
            marquez_web_url="http://marquez",
        )

    first = service()
    async with bot.services.sessions.begin() as session:
        session.add(event("example.etl_orders", error="disk full"))
        session.add(event("example.etl_customers", error="no such table"))
    assert await first.process() == 2  # neither row waits for the other's impact
    await bot.settle()
    alerts = bot.slack.state.messages(ORDERS)
    assert len(alerts) == 1  # (etl_customers has no team channel)
    assert "being worked out" in shown(alerts[0])  # posted before its impact was known
    assert "disk full" in shown(alerts[0])

    first.stop()  # a restart before the impact is known: the next process works it out
    await asyncio.sleep(0)
    restarted = service()
    assert await restarted.process() == 0
    gate.set()
    await restarted.settled()
    await bot.settle()
    [alert] = bot.slack.state.messages(ORDERS)
    assert "example.etl_delivery_7_days" in shown(alert)
    assert "being worked out" not in shown(alert)
    [reply] = bot.slack.state.thread(ORDERS, alert.ts)
    assert "<!subteam^S0ANALYTIC>" in shown(reply)  # an edit notifies nobody: the reply does


async def test_three_failed_days_are_one_incident_whose_backfill_covers_them(bot: Bot) -> None:
    days = [DAY + timedelta(days=n) for n in range(3)]
    for day in days:  # the example story: 06-04, 05 and 06 fail as they come
        await store(bot, event("example.etl_orders", day=day, error=f"disk full on {day:%d}"))

    [alert] = bot.slack.state.messages(ORDERS)
    assert "failed 3 times" in shown(alert)
    assert "2021-06-04" in shown(alert)
    assert "2021-06-06" in shown(alert)
    assert "disk full on 06" in shown(alert)  # the latest error
    incident_id = buttons(alert)[ActionId.INCIDENT_APPROVE]["value"]
    await bot.slack.click(
        channel_id=ORDERS,
        message_ts=alert.ts,
        action_id=ActionId.INCIDENT_APPROVE,
        user_id=OWNER,
        value=incident_id,
    )
    request = await backfill_of(bot)
    assert (request.start_date.isoformat(), request.end_date.isoformat()) == (
        "2021-06-04",
        "2021-06-06",
    )

    for day in days[:2]:  # the backfill's runs succeed one by one: not resolved yet
        await store(bot, event("example.etl_orders", "COMPLETE", day=day))
    assert "now resolved" not in shown(bot.slack.state.find_message(ORDERS, alert.ts))
    await store(bot, event("example.etl_orders", "COMPLETE", day=days[2]))
    assert "now resolved" in shown(bot.slack.state.find_message(ORDERS, alert.ts))
    async with bot.services.sessions() as session:
        assert len(list(await session.scalars(select(Incident)))) == 1


async def test_a_failure_after_a_gap_is_another_outage(bot: Bot) -> None:
    await store(bot, event("example.etl_orders"))
    await store(bot, event("example.etl_orders", day=DAY + timedelta(days=2)))
    assert len(bot.slack.state.messages(ORDERS)) == 2
