"""Data incidents through the whole bot: COMPLETE runs pushed to the receiver or read by the
poller from the Marquez stand-in, judged against each dataset's history, alerted in Slack like
failures, and resolved by a later run of the interval whose data is right."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.config import parse_config
from tests.quality.builders import ORDERS_FIELDS, daily_run, output
from tests.support.e2e import Bot
from tests.support.producers import (
    Deliver,
    Events,
    bot_over_empty_marquez,
    incidents,
    shown,
    via_receiver,
)
from tests.support.producers import settled as settled_in

DATA = "C0DATAPLAT"
CONFIG = {
    "teams": [{"name": "data", "channel": DATA, "members": ["U0DATA0001"]}],
    "ownership": [{"pattern": "example.*", "team": "data"}],
    # `poll: False`: the tests poll when they choose (`poll_once`); the scheduled first poll,
    # racing a test's posting, would read part of a batch and leave the rest to the late sweep
    "watch": {"start_from": "2020-01-01T00:00:00Z", "poll": False, "group_wait_s": 0},
}
FIRST = date(2021, 5, 29)
BAD = date(2021, 6, 5)
USUAL = [40_800, 41_300, 40_950, 41_200, 41_050, 40_700, 41_400]


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[Bot]:
    async with bot_over_empty_marquez(tmp_path, parse_config(CONFIG)) as running:
        yield running


async def settled(bot: Bot) -> list[Any]:
    return await settled_in(bot, DATA)


def what_is_wrong(alert: Any) -> list[str]:
    """The lines of the alert's "What is wrong" section."""
    for block in alert.blocks:
        text = (block.get("text") or {}).get("text", "")
        if text.startswith("*What is wrong:*"):
            return [line.removeprefix("• ") for line in text.splitlines()[1:]]
    return []


def history(fields: list[tuple[str, str]] = ORDERS_FIELDS) -> Events:
    return [
        e
        for offset, rows in enumerate(USUAL)
        for e in daily_run(FIRST + timedelta(days=offset), [output("orders", rows, fields=fields)])
    ]


async def test_a_zero_row_run_opens_one_data_incident_and_a_normal_rerun_resolves_it(
    bot: Bot, deliver: Deliver
) -> None:
    await deliver(bot, history() + daily_run(BAD, [output("orders", 0, fields=ORDERS_FIELDS)]))
    [alert] = await settled(bot)
    text = shown(alert)
    assert "example.etl_orders" in alert.text
    assert "wrote bad data" in alert.text
    assert "`orders` wrote 0 rows for 2021-06-05; it usually writes about 41,000 rows" in text
    assert "Approve backfill" in text  # the same buttons as a failure's
    [incident] = await incidents(bot)
    assert (incident.kind, incident.dag_id, incident.state) == (
        "data",
        "example.etl_orders",
        "open",
    )
    assert incident.interval_start is not None
    assert incident.interval_start.date() == BAD

    rerun = daily_run(BAD, [output("orders", 41_100, fields=ORDERS_FIELDS)], attempt=1)
    await deliver(bot, rerun)
    [alert] = await settled(bot)
    assert "now resolved" in shown(alert)
    [reply] = bot.slack.state.thread(DATA, alert.ts)
    assert "put its data right for 2021-06-05" in shown(reply)
    [incident] = await incidents(bot)
    assert incident.state == "resolved"


async def test_a_job_that_always_counted_its_rows_and_sends_no_count_is_an_incident(
    bot: Bot, deliver: Deliver
) -> None:
    """The Spark integration sends no `outputStatistics` for a write of 0 rows and 0 bytes: the
    run's COMPLETE names the dataset (its schema) without a count."""
    silent = daily_run(BAD, [output("orders", None, fields=ORDERS_FIELDS)])
    # the Airflow task around it names the dataset every day without counting: not suspect
    task = [
        {**e, "job": {**e["job"], "name": "example.etl_orders.submit"},
         "run": {**e["run"], "runId": str(uuid.uuid4())}}
        for day in (BAD - timedelta(days=1), BAD + timedelta(days=1))
        for e in daily_run(day, [output("orders", None, fields=ORDERS_FIELDS)])[1:2]
    ]  # fmt: skip
    await deliver(bot, history() + task + silent)
    [alert] = await settled(bot)
    assert what_is_wrong(alert) == [
        "`orders` was written for 2021-06-05 with no row count, where its runs always sent one "
        "(Spark sends none for a write of nothing); it usually writes about 41,000 rows"
    ]
    [incident] = await incidents(bot)
    assert incident.interval_start is not None
    assert incident.interval_start.date() == BAD

    await deliver(bot, daily_run(BAD, [output("orders", 40_900, fields=ORDERS_FIELDS)], attempt=1))
    [alert] = await settled(bot)
    assert "now resolved" in shown(alert)


async def test_usual_runs_open_nothing(bot: Bot, deliver: Deliver) -> None:
    await deliver(bot, history())
    assert await settled(bot) == []
    assert await incidents(bot) == []


async def test_a_lost_column_opens_an_incident_until_a_run_writes_it_again(
    bot: Bot, deliver: Deliver
) -> None:
    without = [f for f in ORDERS_FIELDS if f[0] != "discount"]
    await deliver(bot, history() + daily_run(BAD, [output("orders", 41_000, fields=without)]))
    [alert] = await settled(bot)
    assert "`orders` lost column discount (double) in the run for 2021-06-05" in shown(alert)

    # the next day's run, still without it, is no new change: one incident, still open
    await deliver(
        bot, daily_run(BAD + timedelta(days=1), [output("orders", 41_000, fields=without)])
    )
    [alert] = await settled(bot)
    [incident] = await incidents(bot)
    assert incident.state == "open"

    fixed = daily_run(BAD, [output("orders", 41_000, fields=ORDERS_FIELDS)], attempt=1)
    await deliver(bot, fixed)
    [alert] = await settled(bot)
    assert "now resolved" in shown(alert)


async def test_bad_days_next_to_each_other_are_one_outage(bot: Bot, deliver: Deliver) -> None:
    bad = [
        e
        for day in (BAD, BAD + timedelta(days=1))
        for e in daily_run(day, [output("orders", 0, fields=ORDERS_FIELDS)])
    ]
    await deliver(bot, history() + bad)
    [alert] = await settled(bot)
    text = shown(alert)
    assert "2021-06-05 to 2021-06-06" in text
    assert "2 runs with bad data" in text
    [incident] = await incidents(bot)
    assert incident.failures == 2

    await deliver(bot, daily_run(BAD, [output("orders", 41_000, fields=ORDERS_FIELDS)], attempt=1))
    [alert] = await settled(bot)
    assert "now resolved" not in shown(alert)  # 06-06 is still wrong
    assert "_(put right)_" in shown(alert)
    await deliver(
        bot,
        daily_run(
            BAD + timedelta(days=1), [output("orders", 41_000, fields=ORDERS_FIELDS)], attempt=1
        ),
    )
    [alert] = await settled(bot)
    assert "now resolved" in shown(alert)


async def test_bad_data_downstream_of_a_failure_joins_its_incident(
    bot: Bot, deliver: Deliver
) -> None:
    weekly = "example.etl_orders_7_days"
    orders = {"namespace": "food_delivery", "name": "orders"}
    upstream = [
        e
        for offset, rows in enumerate(USUAL)
        for day in [FIRST + timedelta(days=offset)]
        for e in daily_run(day, [output("orders", rows)])
        + daily_run(day, [output("orders_7_days", rows * 7)], dag=weekly, inputs=[orders])
    ]
    await deliver(bot, upstream)
    failed = daily_run(BAD, [output("orders", None)])
    failed[-1] = {**failed[-1], "eventType": "FAIL"}
    await deliver(bot, failed)
    [alert] = await settled(bot)
    assert "failed" in alert.text
    await deliver(bot, daily_run(BAD, [output("orders_7_days", 100)], dag=weekly, inputs=[orders]))
    [alert] = await settled(bot)  # no second alert: it joined the failure upstream
    assert "1 downstream failure joined" in shown(alert)
    failure, data = await incidents(bot)
    assert (data.kind, data.dag_id, data.root_id) == ("data", weekly, failure.id)


async def test_odd_statistics_are_logged_and_open_nothing(
    bot: Bot, deliver: Deliver, caplog: pytest.LogCaptureFixture
) -> None:
    odd = daily_run(BAD, [output("orders", None, fields=ORDERS_FIELDS)])
    odd[1]["outputs"][0]["outputFacets"] = {
        "outputStatistics": {"rowCount": -5, "size": "big", "_producer": "x", "_schemaURL": "x"}
    }
    await deliver(bot, history() + odd)
    assert await settled(bot) == []
    assert "outputStatistics.rowCount is negative: -5" in caplog.text
    assert "outputStatistics.size is not a number" in caplog.text


async def test_a_dropped_table_is_an_incident_only_when_another_dag_reads_it(
    bot: Bot, deliver: Deliver
) -> None:
    orders = {"namespace": "food_delivery", "name": "orders"}
    reader = daily_run(FIRST, [output("orders_7_days", 5)], dag="example.weekly", inputs=[orders])
    scratch = daily_run(FIRST, [output("scratch", 5)], dag="example.tmp")
    await deliver(bot, history() + reader + scratch)
    await settled(bot)
    drops = daily_run(BAD, [output("orders", None, lifecycle="DROP")]) + daily_run(
        BAD, [output("scratch", None, lifecycle="DROP")], dag="example.tmp"
    )
    await deliver(bot, drops)
    [alert] = await settled(bot)
    assert "`orders` was dropped by the run for 2021-06-05, and other DAGs read it" in shown(alert)
    [incident] = await incidents(bot)
    assert incident.dag_id == "example.etl_orders"


async def test_a_lost_columns_impact_is_who_reads_it_by_column_lineage(
    bot: Bot, deliver: Deliver
) -> None:
    orders = {"namespace": "food_delivery", "name": "orders"}
    ns = "food_delivery"
    weekly = daily_run(
        FIRST,
        [output("orders_7_days", 5, columns={"discount_total": [(ns, "orders", "discount")],
                                               "orders": [(ns, "orders", "order_id")]})],
        dag="example.weekly", inputs=[orders],
    )  # fmt: skip
    kpis = daily_run(
        FIRST,
        [output("kpis", 5, columns={"discount": [(ns, "orders_7_days", "discount_total")]})],
        dag="example.kpis", inputs=[{"namespace": ns, "name": "orders_7_days"}],
    )  # fmt: skip
    counts = daily_run(
        FIRST,
        [output("order_counts", 5, columns={"n": [(ns, "orders", "order_id")]})],
        dag="example.counts", inputs=[orders],
    )  # fmt: skip
    mail = daily_run(FIRST, [output("mail", 5)], dag="example.mail", inputs=[orders])
    await deliver(bot, history() + weekly + kpis + counts + mail)
    await settled(bot)
    without = [f for f in ORDERS_FIELDS if f[0] != "discount"]
    await deliver(bot, daily_run(BAD, [output("orders", 41_000, fields=without)]))
    [alert] = await settled(bot)
    assert what_is_wrong(alert) == [
        "`orders` lost column discount (double) in the run for 2021-06-05; read by "
        "example.kpis (kpis.discount), example.weekly (orders_7_days.discount_total); "
        "1 DAG read it but not these columns; table level, without column lineage: example.mail"
    ]


async def test_history_schemas_and_column_lineage_on_both_databases(
    tmp_path: Path, database_url: str
) -> None:
    ns = "food_delivery"
    reader = daily_run(
        FIRST,
        [output("orders_7_days", 5, columns={"discount_total": [(ns, "orders", "discount")]})],
        dag="example.weekly", inputs=[{"namespace": ns, "name": "orders"}],
    )  # fmt: skip
    without = [f for f in ORDERS_FIELDS if f[0] != "discount"]
    bad = daily_run(BAD, [output("orders", 0, fields=without)])
    async with bot_over_empty_marquez(tmp_path, parse_config(CONFIG), database_url) as bot:
        await via_receiver(bot, history() + reader)
        await settled(bot)
        await via_receiver(bot, bad)
        [alert] = await settled(bot)
        text = shown(alert)
        assert "`orders` wrote 0 rows for 2021-06-05; it usually writes about 41,000 rows" in text
        assert "lost column discount (double)" in text
        assert "read by example.weekly (orders_7_days.discount_total)" in text
        await via_receiver(
            bot, daily_run(BAD, [output("orders", 41_000, fields=ORDERS_FIELDS)], attempt=1)
        )
        [alert] = await settled(bot)
        assert "now resolved" in shown(alert)
