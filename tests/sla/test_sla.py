"""SLA misses on a fixed clock: a missing run past its deadline notifies the owning team and the
rule's teams once, and tells the teams whose reports read downstream data that they will be late."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.config import parse_config
from bot.events.store.models import EventSource, RunEvent
from bot.lineage.rules.graph import LineageCycleError
from bot.sla.service import SlaService
from bot.slack.rules.ids import ActionId
from standins.marquez.server import StandInServer
from tests.incidents.test_incidents import ANALYTICS, CONFIG, LOGISTICS, ORDERS
from tests.slack.test_slack_scoping import forged_click, refusals
from tests.support.e2e import OWNER, Bot, buttons, eventually, running_bot
from tests.support.factories import sla_service

T0 = datetime(2021, 6, 1, tzinfo=UTC)
DAY = timedelta(days=1)


@pytest.fixture
async def bot(tmp_path: Path, food_delivery_marquez: StandInServer) -> AsyncIterator[Bot]:
    config = {
        **CONFIG,
        "sla": [{"pattern": "example.etl_orders", "deadline": "2h", "notify": ["analytics"]}],
    }
    database = f"sqlite:///{tmp_path / 'bot.db'}"
    async with running_bot(database, food_delivery_marquez, parse_config(config)) as running:
        yield running


def dag_run(dag: str, n: int, *, finished: bool = True) -> list[RunEvent]:
    start, end = T0 + n * DAY, T0 + (n + 1) * DAY
    run_id = str(uuid.uuid4())

    def one(kind: str, at: datetime) -> RunEvent:
        return RunEvent(
            run_id=run_id, event_type=kind, event_time=at, namespace="food_delivery",
            job_name=dag, dag_namespace="food_delivery", dag_id=dag, nominal_start=start,
            nominal_end=end, source=EventSource.MARQUEZ,
        )  # fmt: skip

    events = [one("START", end + timedelta(minutes=5))]
    if finished:
        events.append(one("COMPLETE", end + timedelta(minutes=50)))
    return events


def service(bot: Bot, now: datetime) -> SlaService:
    return sla_service(
        bot.services.sessions,
        bot.services.config,
        bot.services.backfills.planners,
        clock=lambda: now,
    )


def texts(bot: Bot, channel: str) -> list[str]:
    return [m.text + json.dumps(m.blocks) for m in bot.slack.state.messages(channel)]


async def test_a_missing_run_past_its_deadline_is_notified_once(bot: Bot) -> None:
    async with bot.services.sessions.begin() as session:
        for n in range(7):  # runs for 06-01..06-07; nothing for 06-08
            session.add_all(dag_run("example.etl_orders", n))
    due = T0 + 8 * DAY + timedelta(hours=2)

    assert await service(bot, due - timedelta(minutes=1)).check() == 0
    assert await service(bot, due + timedelta(minutes=1)).check() == 1
    assert await service(bot, due + timedelta(minutes=30)).check() == 0  # once per interval
    await bot.settle()

    [orders] = texts(bot, ORDERS)
    assert "example.etl_orders" in orders
    assert "has no run yet for 2021-06-08" in orders
    assert "due 2021-06-09 02:00 UTC" in orders
    analytics = texts(bot, ANALYTICS)
    assert any("has no run yet" in t for t in analytics)  # the rule's notify team
    assert any("*Weekly KPIs* will be late" in t for t in analytics)  # a report they own
    [logistics] = texts(bot, LOGISTICS)
    assert "*Weekly delivery times* will be late" in logistics


async def test_without_a_rule_lateness_is_learned_from_history(bot: Bot) -> None:
    async with bot.services.sessions.begin() as session:
        for n in range(7):
            session.add_all(dag_run("example.etl_orders_7_days", n))
        session.add_all(dag_run("example.etl_orders_7_days", 7, finished=False))
    end = T0 + 8 * DAY
    assert await service(bot, end + timedelta(minutes=40)).check() == 0
    assert await service(bot, end + timedelta(hours=4)).check() == 1
    await bot.settle()
    [notice] = texts(bot, ORDERS)
    assert "has not succeeded yet" in notice
    assert "usually finish within" in notice


async def test_a_notice_names_the_failure_upstream_that_explains_it(bot: Bot) -> None:
    async with bot.services.sessions.begin() as session:
        for n in range(7):
            session.add_all(dag_run("example.etl_orders_7_days", n))
        session.add_all(dag_run("example.etl_orders_7_days", 7, finished=False))
        failed = dag_run("example.etl_orders", 7, finished=False)[0]
        failed.event_type = "FAIL"  # the DAG upstream failed that day: an open incident
        session.add(failed)
    while await bot.services.incidents.process():
        pass
    end = T0 + 8 * DAY
    assert await service(bot, end + timedelta(hours=4)).check() == 2  # the root is late too
    await bot.settle()
    notices = [t for t in texts(bot, ORDERS) if ":hourglass:" in t]
    [weekly] = [t for t in notices if "`example.etl_orders_7_days` has not succeeded" in t]
    assert "Late because `example.etl_orders` failed" in weekly
    assert all("Late because `example.etl_orders` failed" in t for t in notices)


async def test_a_dag_whose_lineage_cannot_be_planned_does_not_stop_the_pass(bot: Bot) -> None:
    real = bot.services.backfills.planners

    @asynccontextmanager
    async def broken_for_one() -> AsyncIterator[Any]:
        async with real() as planner:

            class OneCycle:  # a lineage cycle through one DAG only
                async def impact(self, name: str, namespace: str | None = None) -> Any:
                    if name == "example.etl_orders":
                        raise LineageCycleError("a cycle through example.etl_orders")
                    return await planner.impact(name, namespace)

            yield OneCycle()

    async with bot.services.sessions.begin() as session:
        for dag in ("example.etl_orders", "example.etl_orders_7_days"):
            for n in range(7):
                session.add_all(dag_run(dag, n))
            session.add_all(dag_run(dag, 7, finished=False))
    sla = sla_service(
        bot.services.sessions,
        bot.services.config,
        broken_for_one,
        clock=lambda: T0 + 8 * DAY + timedelta(hours=4),
    )
    assert await sla.check() == 2  # both notified; the cycle only costs its reports
    await bot.settle()
    assert len([t for t in texts(bot, ORDERS) if ":hourglass:" in t]) == 2


async def test_acknowledge_edits_the_clicked_notice_and_a_forged_one_is_refused(bot: Bot) -> None:
    async with bot.services.sessions.begin() as session:
        for n in range(7):
            session.add_all(dag_run("example.etl_orders", n))
    assert await service(bot, T0 + 8 * DAY + timedelta(hours=3)).check() == 1
    await bot.settle()
    [notice] = bot.slack.state.messages(ORDERS)
    miss_id = buttons(notice)[ActionId.SLA_ACK]["value"]

    # the same miss "acknowledged" from a channel the bot told nothing (a crafted click)
    await forged_click(
        bot, notice, ActionId.SLA_ACK, user=OWNER, channel="C0ELSEWHR", value=miss_id
    )
    await forged_click(bot, notice, ActionId.SLA_ACK, user=OWNER, channel=ORDERS, value="99999")
    await bot.settle()
    refused = await refusals(bot, "sla.acknowledge.refused")
    assert [r.detail["refused"] for r in refused] == ["wrong_channel", "unknown_id"]
    assert await refusals(bot, "sla.acknowledged") == []

    await bot.slack.click(
        channel_id=ORDERS, message_ts=notice.ts, action_id=ActionId.SLA_ACK, user_id=OWNER
    )
    await eventually(lambda: f"<@{OWNER}>" in texts(bot, ORDERS)[0])
    assert len(await refusals(bot, "sla.acknowledged")) == 1
