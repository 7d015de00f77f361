"""The budget shared by every backfill, end to end over signed Slack requests: three teams'
backfills under a budget of one run at once queue behind the one running; the one whose report
is read soonest goes first whatever the order of approval; each status message says its place
and what it waits for; a restarted bot keeps the queue; the report's team is told when it is
correct again; and only an approver may ask for `--priority high`. The Marquez stand-in plans,
the Airflow stand-in (Airflow 3) runs."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bot.backfill.store import repository
from bot.backfill.store.models import BackfillRequest
from bot.config import BotConfig, parse_config
from bot.core.audit import list_audit
from bot.core.db import make_engine, session_factory
from standins.airflow.dags import FOOD_DELIVERY_DAGS, food_delivery_history
from standins.airflow.server import AirflowStandin, running_airflow_standin
from standins.marquez.server import StandInServer
from standins.slack.server import running_slack_standin
from tests.support.e2e import (
    CHANNEL,
    CONFIG,
    OUTSIDER,
    OWNER,
    REQUESTER,
    Bot,
    eventually,
    running_bot,
)
from tests.support.execution import approve, bot_on, load, request_backfill

FLEET, FLEET_LEAD = "U0FLEET001", "U0FLEET002"
MENUS, MENUS_LEAD = "U0MENUS001", "U0MENUS002"
REPORTS_CHANNEL = "C0REPORTS"
SLOW = "example.etl_drivers"


def config(ready_by: str) -> BotConfig:
    return parse_config({
        "teams": [
            {"name": "orders", "channel": CHANNEL, "members": [OWNER, REQUESTER]},
            {"name": "fleet", "members": [FLEET, FLEET_LEAD]},
            {"name": "menus", "members": [MENUS, MENUS_LEAD]},
            {"name": "reporting", "channel": REPORTS_CHANNEL, "members": ["U0REPORT01"]},
        ],
        "ownership": [
            {"pattern": "example.etl_orders*", "team": "orders"},
            {"pattern": "example.etl_drivers", "team": "fleet"},
            {"pattern": "example.etl_menus", "team": "menus"},
        ],
        "reports": [{"name": "Weekly KPIs", "team": "reporting", "datasets": ["kpis.weekly"],
                     "ready_by": ready_by}],
        "execution": {"poll_interval_s": 0.1, "progress_update_s": 0.2,
                      "budget": {"total": 1, "urgent_within": "12h"}},
    })  # fmt: skip


def status_text(bot: Bot, request_id: str, ts: str | None) -> str:
    assert ts, request_id
    message = bot.slack.state.find_message(CHANNEL, ts)
    return json.dumps(message.blocks, ensure_ascii=False)


async def started(bot: Bot, request_id: str) -> bool:
    request = await load(bot, request_id)
    return any(s.state != "pending" for s in request.steps)


async def test_backfills_queue_by_what_is_at_stake_and_the_queue_outlives_a_restart(
    tmp_path: Path, food_delivery_marquez: StandInServer
) -> None:
    # Weekly KPIs is read in three hours: the orders backfill that feeds it goes first.
    ready_by = (datetime.now(UTC) + timedelta(hours=3)).strftime("%H:%M")
    settings = config(ready_by)
    dags = [replace(d, run_seconds=6.0) if d.dag_id == SLOW else d for d in FOOD_DELIVERY_DAGS]
    async with (
        running_airflow_standin(api=3, dags=dags, run_seconds=0.05,
                                history=food_delivery_history()) as airflow,
        running_slack_standin() as slack,
    ):  # fmt: skip
        database = f"sqlite:///{tmp_path / 'bot.db'}"
        async with bot_on(slack, database, food_delivery_marquez, airflow, settings) as bot:
            slow = await approve(
                bot,
                await request_backfill(bot, f"{SLOW} 2021-06-04..2021-06-05 --only", FLEET),
                FLEET_LEAD,
            )
            await eventually(lambda: started(bot, slow), timeout_s=30)
            menus = await approve(
                bot,
                await request_backfill(bot, "example.etl_menus 2021-06-04..2021-06-05 --only",
                                       MENUS),
                MENUS_LEAD,
            )  # fmt: skip
            orders_preview = await request_backfill(
                bot, "example.etl_orders 2021-06-04..2021-06-05"
            )
            preview_text = json.dumps(orders_preview.blocks)
            assert "Weekly KPIs correct about" in preview_text
            assert "after it starts" in preview_text
            orders = await approve(bot, orders_preview)

            async def placed() -> bool:
                texts = {}
                for request_id in (menus, orders):
                    request = await load(bot, request_id)
                    if request.status_message_ts is None:
                        return False
                    texts[request_id] = status_text(bot, request_id, request.status_message_ts)
                return (
                    "2nd of 2 in the queue" in texts[menus]
                    and "1st of 2 in the queue" in texts[orders]
                )

            await eventually(placed, timeout_s=30)
            menus_status = status_text(bot, menus, (await load(bot, menus)).status_message_ts)
            assert "Queued for the backfill budget" in menus_status
            assert "waiting for the bot's budget (1 of 1 runs in use)" in menus_status
            assert not await started(bot, orders)
            # `/backfill status ID` says the same place.
            await bot.slack.slash_command(f"status {menus}", user_id=MENUS, channel_id=CHANNEL)
            await eventually(
                lambda: any("2nd of 2 in the queue" in json.dumps(e.blocks)
                            for e in bot.slack.state.ephemerals if e.user == MENUS)
            )  # fmt: skip

        # A restart while the slow backfill still holds the only run: the queue is in the
        # database, and the orders backfill still goes before the menus one.
        assert (await load_from(database, slow)).finished_at is None
        async with bot_on(slack, database, food_delivery_marquez, airflow, settings) as bot:
            await eventually(lambda: started(bot, orders), timeout_s=60)
            assert not await started(bot, menus)
            for request_id in (slow, orders, menus):
                await eventually(lambda r=request_id: finished(bot, r), timeout_s=90)
                await bot.settle()
                assert (await load(bot, request_id)).state == "succeeded"
            told = slack.state.messages(REPORTS_CHANNEL)
            estimates = [m for m in told if "correct by about" in m.text]
            assert len(estimates) == 1
            assert "Weekly KPIs correct by about" in estimates[0].text
            # and, once each backfill is verified, which dates of the report it restated
            restated = [m for m in told if "restated data your report" in m.text]
            assert len(restated) <= 3
            assert len(told) == len(estimates) + len(restated)
            # Never more than one backfill run active at once in Airflow.
            assert peak_running(airflow) == 1


async def finished(bot: Bot, request_id: str) -> bool:
    return (await load(bot, request_id)).finished_at is not None


def peak_running(airflow: AirflowStandin) -> int:
    """The most backfill runs running together in the stand-in."""
    edges = []
    for run in airflow.state.all_runs():
        if run.backfill_id is not None and run.start_date is not None:
            edges += [(run.start_date, 1), (run.end_date or datetime.max.replace(tzinfo=UTC), -1)]
    peak = running = 0
    for _, step in sorted(edges):  # an end before a start at the same instant
        running += step
        peak = max(peak, running)
    return peak


async def load_from(database: str, request_id: str) -> BackfillRequest:
    engine = make_engine(database)
    try:
        async with session_factory(engine)() as session:
            return await repository.get_request(session, request_id)
    finally:
        await engine.dispose()


async def test_only_an_approver_may_ask_for_high_priority(
    tmp_path: Path, food_delivery_marquez: StandInServer
) -> None:
    async with running_bot(
        f"sqlite:///{tmp_path / 'bot.db'}", food_delivery_marquez, parse_config(CONFIG)
    ) as bot:
        command = "example.etl_orders 2021-06-04..2021-06-05 --priority high"
        reply = await bot.slack.slash_command(command, user_id=OUTSIDER, channel_id=CHANNEL)
        assert reply.status == 200
        await eventually(
            lambda: any("only someone who may approve a backfill of example.etl_orders" in e.text
                        for e in bot.slack.state.ephemerals if e.user == OUTSIDER)
        )  # fmt: skip
        assert bot.slack.state.messages(CHANNEL) == []
        async with bot.services.sessions() as session:
            audit = await list_audit(session)
        refusals = [a for a in audit if a.action == "command.refused"]
        assert any("--priority high" in str(a.detail) for a in refusals)

        preview = await request_backfill(bot, command, OWNER)
        assert "high priority" in json.dumps(preview.blocks)
