"""Verified repairs end to end, over HTTP: a run that wrote 0 rows opens a data incident;
Approve backfill in the alert reruns it on the Airflow stand-in; the rerun's COMPLETE, pushed
to the receiver as the Spark integration sends it, carries a usual count; the backfill's thread
says so ("verified"), the incident resolves, the team owning a report downstream hears which
of its dates changed, and `/backfill history` lists what the backfill rewrote."""

from __future__ import annotations

import json
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from bot.slack.rules.ids import ActionId
from standins.airflow.dags import FOOD_DELIVERY_DAGS, food_delivery_history
from standins.airflow.server import running_airflow_standin
from standins.marquez.server import StandInServer
from standins.slack.server import running_slack_standin
from tests.home.test_home import open_home
from tests.quality.builders import ORDERS_FIELDS, daily_run, output
from tests.support.e2e import Bot, eventually
from tests.support.execution import bot_on
from tests.support.story import (
    ANALYTICS,
    ORDERS,
    OWNER,
    SEND_AT_ONCE,
    alerts,
    backfill_of_incident,
    click,
    incident,
    post_events,
    story_bot,
    story_config,
)

FIRST = date(2021, 5, 29)
BAD = date(2021, 6, 5)
USUAL = [40_800, 41_300, 40_950, 41_200, 41_050, 40_700, 41_400]
REPORT = {"name": "Weekly KPIs", "team": "analytics", "datasets": ["kpis.weekly"]}


def orders_run(day: date, rows: int, attempt: int = 0) -> list[dict[str, Any]]:
    return daily_run(day, [output("public.orders", rows, fields=ORDERS_FIELDS)], attempt=attempt)


def texts(messages: list[Any]) -> list[str]:
    return [m.text + str(m.blocks) for m in messages]


async def verification(bot: Bot, alert: Any) -> str:
    async def found() -> str | None:
        await bot.settle()
        said = [t for t in texts(bot.slack.state.thread(ORDERS, alert.ts)) if "erif" in t]
        return said[0] if said else None

    return await eventually(found, timeout_s=60)


async def test_a_zero_row_run_is_repaired_verified_told_and_listed(
    tmp_path: Path, food_delivery_marquez: StandInServer
) -> None:
    config = story_config(watch=SEND_AT_ONCE, reports=[REPORT])
    async with story_bot(tmp_path, food_delivery_marquez, config) as (bot, _):
        days = [FIRST + timedelta(days=n) for n in range(len(USUAL))]
        history = [e for day, rows in zip(days, USUAL, strict=True) for e in orders_run(day, rows)]
        await post_events(bot, [*history, *orders_run(BAD, 0)])
        [alert] = alerts(bot)
        assert "`public.orders` wrote 0 rows for 2021-06-05" in alert.text + str(alert.blocks)

        await click(bot, alert, ActionId.INCIDENT_APPROVE, OWNER)
        request = await backfill_of_incident(bot)
        assert request.state == "succeeded"
        assert (await incident(bot)).state == "open", "no rows yet say the data is right"

        # the rerun reports what it wrote, after the runner saw it end (as Airflow's events do)
        await post_events(bot, orders_run(BAD, 41_100, attempt=1))
        said = await verification(bot, alert)
        assert "Verified: 1 run wrote rows in the usual range" in said
        assert "no statistics from that producer" in said  # the DAGs downstream send none
        assert "Weekly KPIs" in said
        assert (await incident(bot)).state == "resolved"

        [notice] = [t for t in texts(bot.slack.state.messages(ANALYTICS)) if "restated" in t]
        assert request.id[:8] in notice
        assert "*Weekly KPIs*" in notice
        assert "2021-06-0" in notice  # the report dates the backfill rewrote

        reply = await bot.slack.slash_command(
            "history example.etl_orders", user_id=OWNER, channel_id=ORDERS
        )
        assert reply.status == 200
        [answer] = await eventually(lambda: ephemerals(bot, "restated"))
        assert request.id[:8] in answer
        assert "`example.etl_orders` 2021-06-05 `public.orders`: 0 rows → 41,100 rows" in answer
        # the report's name finds the same backfill (by the datasets it reads)
        await bot.slack.slash_command("history Weekly KPIs", user_id=OWNER, channel_id=ORDERS)
        [kpis] = await eventually(lambda: ephemerals(bot, "restated `Weekly KPIs`"))
        assert request.id[:8] in kpis
        assert "`reporting.weekly_kpis` 2021-05-24: no statistics" in kpis

        home = json.loads(await open_home(bot, OWNER))["blocks"]
        home = " ".join(b.get("text", {}).get("text", "") for b in home)
        assert "Data restated, last 30 days (1)" in home
        assert f"by backfill `{request.id[:8]}` · 1 verified" in home


async def a_zero_row_day_backfilled(bot: Bot) -> tuple[Any, str]:
    """History, a day of 0 rows, its alert's Approve backfill run to its end: (alert, id)."""
    days = [FIRST + timedelta(days=n) for n in range(len(USUAL))]
    history = [e for day, rows in zip(days, USUAL, strict=True) for e in orders_run(day, rows)]
    await post_events(bot, [*history, *orders_run(BAD, 0)])
    [alert] = alerts(bot)
    await click(bot, alert, ActionId.INCIDENT_APPROVE, OWNER)
    request = await backfill_of_incident(bot)
    assert request.state == "succeeded"
    return alert, request.id


async def test_a_rerun_that_wrote_0_rows_again_is_listed_and_the_incident_stays_open(
    tmp_path: Path, food_delivery_marquez: StandInServer, database_url: str
) -> None:
    config = story_config(watch=SEND_AT_ONCE)
    async with story_bot(tmp_path, food_delivery_marquez, config, database=database_url) as (
        bot,
        _,
    ):
        alert, request_id = await a_zero_row_day_backfilled(bot)
        await post_events(bot, orders_run(BAD, 0, attempt=1))  # the feed is still empty
        said = await verification(bot, alert)
        assert "Verified 0 of 14 reruns; 1 run still looks wrong:" in said
        assert (
            "`example.etl_orders` 2021-06-05: `public.orders` wrote 0 rows; "
            "it usually writes about 41,000 rows" in said
        )
        assert (await incident(bot)).state == "open"
        await bot.slack.slash_command("history public.orders", user_id=OWNER, channel_id=ORDERS)
        [answer] = await eventually(lambda: ephemerals(bot, "restated `public.orders`"))
        assert (
            ":warning: `example.etl_orders` 2021-06-05 `public.orders`: 0 rows → 0 rows" in answer
        )
        assert request_id[:8] in answer


async def test_statistics_that_never_come_are_said_so_when_the_wait_is_over(
    tmp_path: Path, food_delivery_marquez: StandInServer
) -> None:
    config = story_config(watch=SEND_AT_ONCE, quality={"verify_within_s": 1})
    async with story_bot(tmp_path, food_delivery_marquez, config) as (bot, _):
        alert, _ = await a_zero_row_day_backfilled(bot)
        said = await verification(bot, alert)  # no rerun event at all
        assert "Could not verify this backfill's reruns." in said
        assert "no statistics arrived within 1 minute (`example.etl_orders`)" in said
        assert "no statistics from that producer" in said
        assert (await incident(bot)).state == "open"


def ephemerals(bot: Bot, text: str) -> list[str]:
    return [e.text + str(e.blocks) for e in bot.slack.state.ephemerals if text in e.text]


async def test_a_lost_column_nobody_downstream_reads_is_repaired_without_the_dags_below(
    tmp_path: Path, food_delivery_marquez: StandInServer
) -> None:
    """Column lineage says example.etl_orders_7_days reads orders' order_id and discount only:
    losing customer_id changes nothing it writes, so Approve backfill reruns the root alone
    (the DAGs below etl_orders_7_days read orders only through it)."""
    config = story_config(watch=SEND_AT_ONCE)
    reads = {"discount_total": [("food_delivery", "public.orders", "discount")],
             "orders": [("food_delivery", "public.orders", "order_id")]}  # fmt: skip
    weekly = [
        e for n in range(len(USUAL)) for e in daily_run(
            FIRST + timedelta(days=n), [output("public.orders_7_days", 7, columns=reads)],
            dag="example.etl_orders_7_days",
            inputs=[{"namespace": "food_delivery", "name": "public.orders"}],
        )
    ]  # fmt: skip
    without = [f for f in ORDERS_FIELDS if f[0] != "customer_id"]
    async with story_bot(tmp_path, food_delivery_marquez, config) as (bot, _):
        days = [FIRST + timedelta(days=n) for n in range(len(USUAL))]
        history = [e for day, rows in zip(days, USUAL, strict=True) for e in orders_run(day, rows)]
        lost = daily_run(BAD, [output("public.orders", 41_000, fields=without)])
        await post_events(bot, [*history, *weekly, *lost])
        [alert] = alerts(bot)
        said = alert.text + str(alert.blocks)
        assert "lost column customer_id (bigint)" in said
        assert "no DAG reads them" in said
        assert "Proposed backfill:* 1 DAG · 1 run" in said

        await click(bot, alert, ActionId.INCIDENT_APPROVE, OWNER)
        request = await backfill_of_incident(bot)
        assert [step.dag_id for step in request.steps] == ["example.etl_orders"]
        assert request.plan["excluded"] == ["example.etl_orders_7_days"]


async def test_a_verification_owed_when_the_bot_stopped_is_made_after_its_restart(
    tmp_path: Path, food_delivery_marquez: StandInServer
) -> None:
    database = f"sqlite:///{tmp_path / 'bot.db'}"
    config = story_config(watch=SEND_AT_ONCE)
    async with (
        running_airflow_standin(
            api=3, dags=FOOD_DELIVERY_DAGS, run_seconds=0.05, history=food_delivery_history()
        ) as airflow,
        running_slack_standin() as slack,
    ):
        async with bot_on(slack, database, food_delivery_marquez, airflow, config) as bot:
            alert, _ = await a_zero_row_day_backfilled(bot)
        # stopped before the rerun's statistics came: the verification it owes is a row
        async with bot_on(slack, database, food_delivery_marquez, airflow, config) as bot:
            await post_events(bot, orders_run(BAD, 41_100, attempt=1))
            said = await verification(bot, alert)
            assert "Verified: 1 run wrote rows in the usual range" in said
            assert (await incident(bot)).state == "resolved"
            verified = [m for m in slack.state.thread(ORDERS, alert.ts) if "erif" in m.text]
            assert len(verified) == 1
