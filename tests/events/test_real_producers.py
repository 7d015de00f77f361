"""Real OpenLineage through the whole bot: events captured from a real Airflow 3.3.2
(tests/fixtures/openlineage/airflow-3.3.2, by tests/airflow/capture_openlineage.py) and events
built exactly as the Airflow provider, Spark and dbt integrations build them
(tests/fixtures/openlineage/constructed; its README.md names each source). They are pushed to
the bot's receiver (as OpenLineage's composite transport does, Marquez getting the same
events) and read by the
poller from the Marquez stand-in. Each scenario checks what a user sees in Slack: which DAG
is alerted, once, with which error and interval, and that the DAG's own success resolves it."""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from bot.config import parse_config
from bot.events.store.models import RunEvent
from tests.support.e2e import Bot
from tests.support.producers import (
    Deliver,
    Events,
    bot_over_empty_marquez,
    delivery,
    incidents,
    shown,
    via_receiver,
)
from tests.support.producers import settled as settled_in

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "openlineage"
AIRFLOW = CORPUS / "airflow-3.3.2"
CONSTRUCTED = CORPUS / "constructed"
DATA = "C0DATAPLAT"
CONFIG = {
    "teams": [{"name": "data", "channel": DATA, "members": ["U0DATA0001"]}],
    "ownership": [
        {"pattern": "airflow-test::ol_test.*", "team": "data"},
        {"pattern": "default::food_delivery_*", "team": "data"},
    ],
    # group_wait_s 0: what each scenario shows in the end is these tests' subject, not how its
    # Slack calls are gathered (tests/incidents/test_watch_grouping.py), and a gathered alert
    # would keep each settle waiting 2 s.
    # `poll: False`: the tests poll when they choose (`poll_once`); the scheduled first poll,
    # racing a test's posting, would read part of a batch and leave the rest to the late sweep
    "watch": {"start_from": "2020-01-01T00:00:00Z", "poll": False, "group_wait_s": 0},
}
TASK_ERROR = "load_orders: 3 of 120 rows have no order_id"


def scenario(name: str, where: Path = AIRFLOW) -> Events:
    events: Events = json.loads((where / f"{name}.json").read_text())
    return events


def dag_event(events: Events, dag: str, kind: str) -> dict[str, Any]:
    return next(e for e in events if e["job"]["name"] == dag and e["eventType"] == kind)


def as_failure(event: dict[str, Any], message: str) -> dict[str, Any]:
    """A COMPLETE turned into a FAIL (NOTES.md: no run of the captures fails there)."""
    failed = copy.deepcopy(event)
    failed["eventType"] = "FAIL"
    failed["run"]["facets"]["errorMessage"] = {
        "_producer": event["producer"],
        "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/ErrorMessageRunFacet.json#/$defs/ErrorMessageRunFacet",
        "message": message,
        "programmingLanguage": "python",
    }
    return failed


def later(event: dict[str, Any], hours: int) -> dict[str, Any]:
    """The same DAG run's event, `hours` later (a rerun of a cleared run)."""
    moved = copy.deepcopy(event)
    when = datetime.fromisoformat(event["eventTime"].replace("Z", "+00:00"))
    moved["eventTime"] = (when + timedelta(hours=hours)).isoformat()
    moved["run"]["runId"] = str(uuid.uuid4())
    return moved


@pytest.fixture(params=["receiver", "poller"])
async def deliver(request: pytest.FixtureRequest) -> Deliver:
    return delivery(request.param)


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[Bot]:
    async with bot_over_empty_marquez(tmp_path, parse_config(CONFIG)) as running:
        yield running


async def settled(bot: Bot) -> list[Any]:
    return await settled_in(bot, DATA)


async def test_a_task_failure_and_its_dag_failure_are_one_alert_with_the_tasks_error(
    bot: Bot, deliver: Deliver
) -> None:
    await deliver(bot, scenario("failure"))
    [alert] = await settled(bot)
    text = shown(alert)
    assert "ol_test.failing" in text
    assert "ol_test.failing.load" not in alert.text  # the DAG is alerted, not its task
    assert "Error in `ol_test.failing.load`" in text  # though the error says where it was
    assert "2021-06-10" in text
    assert "Owned by data" in text  # BOT_CONFIG's owners, though Marquez names none
    assert TASK_ERROR in text
    assert "task_failure" not in text  # the DAG-level summary does not replace the real error
    assert "failed 2 times" not in text  # one DAG run is one failure
    [incident] = await incidents(bot)
    assert (incident.dag_id, incident.failures, incident.state) == ("ol_test.failing", 1, "open")


async def test_every_task_event_rolls_up_to_its_dag_run(bot: Bot) -> None:
    events = scenario("failure") + scenario("success") + scenario("trigger")
    await via_receiver(bot, events)
    async with bot.services.sessions() as session:
        rows = list(await session.scalars(select(RunEvent)))
    assert len(rows) == len(events)
    assert {r.dag_id for r in rows} == {
        "ol_test.failing",
        "ol_test.success",
        "ol_test.parent",
        "ol_test.child",
    }
    for row in rows:
        assert row.job_name.startswith(row.dag_id)
        dag_runs = {r.run_id for r in rows if r.job_name == row.dag_id}
        assert row.dag_run_id in dag_runs  # the DAG run's own id, even for a triggered DAG


async def test_a_succeeding_dag_raises_no_alert(bot: Bot, deliver: Deliver) -> None:
    await deliver(bot, scenario("success"))
    assert await settled(bot) == []


async def test_a_triggered_dag_is_its_own_and_its_success_resolves_its_incident(
    bot: Bot, deliver: Deliver
) -> None:
    events = scenario("trigger")
    complete = dag_event(events, "ol_test.child", "COMPLETE")
    failing = [as_failure(e, "child broke") if e is complete else e for e in events]
    await deliver(bot, failing)
    [alert] = await settled(bot)
    assert "ol_test.child" in shown(alert)
    assert "ol_test.parent" not in alert.text  # the triggering DAG did not fail
    [incident] = await incidents(bot)
    assert incident.dag_id == "ol_test.child"

    await deliver(bot, [later(complete, hours=1)])  # someone reran it in Airflow
    [alert] = await settled(bot)
    assert "now resolved" in shown(alert)
    [incident] = await incidents(bot)
    assert incident.state == "resolved"


async def test_a_manual_run_is_one_logical_date_in_words(bot: Bot, deliver: Deliver) -> None:
    events = scenario("manual")
    complete = dag_event(events, "ol_test.manual", "COMPLETE")
    await deliver(bot, [as_failure(e, "boom") if e is complete else e for e in events])
    [alert] = await settled(bot)
    text = shown(alert)
    assert "2021-06-10 12:34 UTC (one logical date: a manual or triggered run)" in text
    assert "→" not in text  # not an empty "12:34 → 12:34" interval


# -- events built as the integrations build them ----------------------------------------------


async def rows_of(bot: Bot) -> list[RunEvent]:
    async with bot.services.sessions() as session:
        return list(await session.scalars(select(RunEvent).order_by(RunEvent.id)))


async def test_every_real_event_is_accepted_by_marquez_and_by_the_bot(bot: Bot) -> None:
    files = sorted(CONSTRUCTED.glob("*.json")) + sorted(AIRFLOW.glob("*.json"))
    assert len(files) >= 12
    for path in files:
        await via_receiver(bot, json.loads(path.read_text()))  # 201 each, or it fails here


async def test_a_spark_job_under_an_airflow_task_is_the_dags_one_failure_with_sparks_error(
    bot: Bot, deliver: Deliver
) -> None:
    events = scenario("spark_under_airflow", CONSTRUCTED)
    await deliver(bot, events)
    [alert] = await settled(bot)
    text = shown(alert)
    assert "food_delivery_orders_spark" in text
    assert "Job aborted due to stage failure" in text  # Spark's own error, the first one
    assert "Error in `food_delivery_orders_aggregation.execute_insert" in text
    assert " · failed 2 times" not in text
    # Spark sends COMPLETE after FAIL for the same SQL run: that does not resolve anything
    [incident] = await incidents(bot)
    assert (incident.state, incident.failures) == ("open", 1)
    rows = await rows_of(bot)
    assert {(r.dag_namespace, r.dag_id) for r in rows} == {
        ("default", "food_delivery_orders_spark")
    }
    dag_start = next(r for r in rows if r.job_type == "DAG" and r.event_type == "START")
    for row in rows:  # Spark sends no nominalTime: its jobs take the DAG run's interval
        assert row.dag_run_id == dag_start.run_id
        assert row.nominal_start == dag_start.nominal_start


async def test_a_dbt_chain_rolls_up_through_every_level_to_the_airflow_dag(
    bot: Bot, deliver: Deliver
) -> None:
    await deliver(bot, scenario("dbt_chain", CONSTRUCTED))
    [alert] = await settled(bot)
    text = shown(alert)
    assert "food_delivery_orders_dbt" in text
    assert "Database Error in model orders_daily" in text
    rows = await rows_of(bot)
    dbt_rows = [r for r in rows if r.namespace == "dbt"]
    assert {r.job_type for r in dbt_rows} == {"JOB", "MODEL", "SQL"}
    assert {(r.dag_namespace, r.dag_id) for r in rows} == {("default", "food_delivery_orders_dbt")}
    [incident] = await incidents(bot)
    assert incident.failures == 1


async def test_an_old_integrations_events_still_roll_up_and_fail_once(
    bot: Bot, deliver: Deliver
) -> None:
    await deliver(bot, scenario("old_style_parent", CONSTRUCTED))
    [alert] = await settled(bot)
    [incident] = await incidents(bot)
    assert (incident.dag_id, incident.failures) == ("food_delivery_orders", 1)
    assert incident.interval_start is not None  # the DAG's FAIL takes its START's interval
    assert incident.interval_start.isoformat()[:10] in shown(alert)


async def test_a_triggered_dag_fails_and_its_rerun_resolves_it(bot: Bot, deliver: Deliver) -> None:
    await deliver(bot, scenario("airflow33_triggered_dag", CONSTRUCTED))
    [alert] = await settled(bot)
    text = shown(alert)
    assert "food_delivery_courier_payouts" in text
    assert "now resolved" in text  # the second run of the same interval completed
    assert "could not obtain lock on relation" in text
    [incident] = await incidents(bot)
    assert (incident.dag_id, incident.failures, incident.state) == (
        "food_delivery_courier_payouts",
        1,
        "resolved",
    )
