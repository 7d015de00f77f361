"""Data incidents from real producers' events (tests/fixtures/openlineage/constructed; its
README names the source each was built from): the Spark integration's `outputStatistics`,
`schema` and `lifecycleStateChange`, and dbt's `dataQualityAssertions`, pushed to the receiver
or read by the poller from the Marquez stand-in. Each opens one incident with the right DAG,
interval and problems, and a later good run of the interval resolves it."""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from bot.config import parse_config
from tests.quality.builders import daily_run
from tests.quality.test_data_incidents import DATA, settled
from tests.support.e2e import Bot
from tests.support.producers import Deliver, Events, bot_over_empty_marquez, incidents, shown

CONSTRUCTED = Path(__file__).resolve().parents[1] / "fixtures" / "openlineage" / "constructed"
CONFIG = {
    "teams": [{"name": "data", "channel": DATA, "members": ["U0DATA0001"]}],
    "ownership": [{"pattern": "default::food_delivery_*", "team": "data"}],
    # two earlier days are all the fixture has: judge volumes from them
    "quality": {"datasets": [{"pattern": "*", "min_runs": 2}]},
    # `poll: False`: the tests poll when they choose (`poll_once`); the scheduled first poll,
    # racing a test's posting, would read part of a batch and leave the rest to the late sweep
    "watch": {"start_from": "2020-01-01T00:00:00Z", "poll": False, "group_wait_s": 0},
}


def fixture(name: str) -> Events:
    events: Events = json.loads((CONSTRUCTED / f"{name}.json").read_text())
    return events


def rerun(events: Events, *, days: int) -> Events:
    """The same runs again (a clear in Airflow): new run ids, `days` later."""
    text = json.dumps(events)
    for run_id in {e["run"]["runId"] for e in events}:
        text = text.replace(run_id, str(uuid.uuid4()))
    moved: Events = json.loads(text)
    for event in moved:
        when = datetime.fromisoformat(event["eventTime"].replace("Z", "+00:00"))
        event["eventTime"] = (when + timedelta(days=days)).isoformat()
    return moved


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[Bot]:
    async with bot_over_empty_marquez(tmp_path, parse_config(CONFIG)) as running:
        yield running


async def test_spark_wrote_zero_rows_and_lost_a_column(bot: Bot, deliver: Deliver) -> None:
    events = fixture("spark_output_statistics")
    await deliver(bot, events)
    [alert] = await settled(bot)
    text = shown(alert)
    assert "food_delivery_orders_7_days wrote bad data" in alert.text  # the DAG, not Spark's job
    day = "2025-06-04 02:00 \u2192 2025-06-05 02:00"
    assert (
        f"`warehouse/orders_7_days` wrote 0 rows for {day}; it usually writes about 41,000 rows"
        in text
    )
    assert (
        f"`warehouse/orders_7_days` lost column discount (decimal(10,2)) in the run for {day}"
        in text
    )
    [incident] = await incidents(bot)
    assert (incident.kind, incident.namespace, incident.dag_id) == (
        "data",
        "default",
        "food_delivery_orders_7_days",
    )

    # the interval rerun with yesterday's data and schema: put right, resolved
    bad_day, good_day = events[20:], events[10:20]
    fixed = copy.deepcopy(bad_day)
    good = next(e for e in good_day if e["eventType"] == "COMPLETE" and e["outputs"])
    for event in fixed:
        if event["outputs"]:
            event["outputs"] = copy.deepcopy(good["outputs"])
            if event["eventType"] != "COMPLETE":
                event["outputs"][0].pop("outputFacets", None)
    await deliver(bot, rerun(fixed, days=1))
    [alert] = await settled(bot)
    assert "now resolved" in shown(alert)
    [reply] = bot.slack.state.thread(DATA, alert.ts)
    assert "put its data right" in shown(reply)


async def test_dbt_failed_tests_name_their_columns_and_a_passing_rerun_resolves(
    bot: Bot, deliver: Deliver
) -> None:
    events = fixture("dbt_test_assertions")
    first, second = events[:8], events[8:]
    await deliver(bot, first)
    [alert] = await settled(bot)  # dbt fails the run: one failure alert, with what failed
    text = shown(alert)
    assert "food_delivery_orders_dbt_tests failed" in alert.text
    assert "`analytics.marts.orders` failed the check `not_null` on column `customer_id`" in text
    assert "`accepted_values` on column `status`" in text
    assert "`order_id`" not in text  # the passing tests are not problems
    [incident] = await incidents(bot)
    assert incident.dag_id == "food_delivery_orders_dbt_tests"

    await deliver(bot, second)  # cleared in Airflow, every test passes
    [alert] = await settled(bot)
    assert "now resolved" in shown(alert)


async def test_spark_truncated_and_dropped_tables_that_others_read(
    bot: Bot, deliver: Deliver
) -> None:
    landing = "s3://food-delivery-raw"
    readers = daily_run(
        datetime(2025, 6, 1).date(),
        [],
        dag="food_delivery_orders_load",
        inputs=[
            {"namespace": landing, "name": n} for n in ("landing/orders", "landing/orders_backup")
        ],
    )
    for event in readers:
        event["job"]["namespace"] = "default"
    await deliver(bot, readers)
    await deliver(bot, fixture("spark_drop_table"))
    [alert] = await settled(bot)
    text = shown(alert)
    assert "food_delivery_orders_retention wrote bad data" in alert.text
    assert "`landing/orders` was emptied (truncated) by the run for" in text
    assert "`landing/orders_backup` was dropped by the run for" in text  # seen on START only
    [incident] = await incidents(bot)
    assert incident.failures == 1
