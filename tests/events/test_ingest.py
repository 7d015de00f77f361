"""Run events in: OpenLineage parsing on real events (Marquez's samples, the food_delivery seed,
the example pipeline's history), and storage without duplicates on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.core.db import make_engine, session_factory, upgrade
from bot.events.rules.event import ParsedEvent
from bot.events.rules.parse import ERROR_MAX, NAME_MAX, InvalidEvent, parse_run_event
from bot.events.rules.producers import AirflowRef
from bot.events.store.models import EventSource, RunEvent
from bot.events.store.run_events import store_events
from bot.incidents.rules.lifecycle import on_failure
from bot.incidents.store import incidents as incident_store
from bot.incidents.store.models import Incident
from pipeline.food_delivery.lineage import history_events
from standins.seeds.food_delivery import food_delivery_events
from tests.support.paths import MARQUEZ_FIXTURES, OPENLINEAGE_FIXTURES

Sessions = async_sessionmaker[AsyncSession]
OPEN_LINEAGE = MARQUEZ_FIXTURES / "open_lineage"  # Marquez's own sample events
PRODUCERS = OPENLINEAGE_FIXTURES
RUN = "0b7a7a8e-9f4c-4d2b-8a44-3d9e5c1f0a11"
OTHER_RUN = "0b7a7a8e-9f4c-4d2b-8a44-3d9e5c1f0a22"


def minimal(**changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "eventType": "FAIL",
        "eventTime": "2024-03-01T10:00:00.000Z",
        "run": {"runId": RUN},
        "job": {"namespace": "food_delivery", "name": "example.etl_orders"},
        "producer": "https://example.com/tests",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
    }
    body.update(changes)
    return body


def parsed(body: Any) -> ParsedEvent:
    event = parse_run_event(body)
    assert event is not None
    return event


# -- parsing ------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", sorted(OPEN_LINEAGE.glob("*.json")), ids=lambda p: p.stem)
def test_marquez_samples_parse_or_are_skipped_by_kind(path: Path) -> None:
    body = json.loads(path.read_text())
    event = parse_run_event(body)
    if path.stem in ("event_dataset_event", "event_job_event"):
        assert event is None
        return
    assert event is not None
    assert event.run_id == body["run"]["runId"]
    assert event.event_time.tzinfo is UTC
    assert event.event_type == body.get("eventType", "OTHER")


def test_a_task_rolls_up_to_the_dag_named_by_its_parent_facet() -> None:
    event = parsed(json.loads((OPEN_LINEAGE / "event_full.json").read_text()))
    assert (event.job_name, event.dag_id) == ("myjob.mytask", "myjob")
    assert event.nominal_start == datetime(2020, 12, 17, 3, 0, 0, 1000, tzinfo=UTC)
    assert event.nominal_end == datetime(2020, 12, 17, 4, 0, 0, 1000, tzinfo=UTC)


def test_every_seed_event_parses_and_its_failures_carry_the_error() -> None:
    events = [parsed(body) for body in food_delivery_events()]
    failures = [e for e in events if e.event_type == "FAIL"]
    assert len(failures) == 3
    assert {e.dag_id for e in failures} == {"example.etl_orders"}
    assert all(e.error_message == 'relation "tmp_orders" does not exist' for e in failures)
    tasks = {(e.job_name, e.dag_id) for e in events if e.job_name != e.dag_id}
    assert ("example.etl_delivery_7_days.extract", "example.etl_delivery_7_days") in tasks
    assert len({e.key for e in events}) == len(events)


def test_pipeline_history_fail_has_dag_interval_and_error() -> None:
    bodies = history_events(date(2021, 6, 1), date(2021, 6, 3), fail_dates=[date(2021, 6, 2)])
    failures = [parsed(b) for b in bodies if b["eventType"] == "FAIL"]
    task = next(e for e in failures if e.job_name == "example.etl_orders.spark_job")
    dag = next(e for e in failures if e.job_name == "example.etl_orders")
    for event in (task, dag):
        assert (event.dag_namespace, event.dag_id) == ("food_delivery", "example.etl_orders")
        assert event.nominal_start == datetime(2021, 6, 2, tzinfo=UTC)
        assert event.nominal_end == datetime(2021, 6, 3, tzinfo=UTC)
        assert event.error_message is not None
        assert event.error_message.startswith('relation "tmp_orders" does not exist')


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("2024-03-01T10:00:00Z", datetime(2024, 3, 1, 10, tzinfo=UTC)),
        ("2024-03-01T12:00:00+02:00", datetime(2024, 3, 1, 10, tzinfo=UTC)),
        ("2024-03-01T05:30-0430", datetime(2024, 3, 1, 10, tzinfo=UTC)),
        ("2024-03-01T10:00:00.123456789Z", datetime(2024, 3, 1, 10, 0, 0, 123456, tzinfo=UTC)),
        # Marquez reads a time without a zone as UTC; refusing it would lose what Marquez keeps.
        ("2024-03-01T10:00:00.5", datetime(2024, 3, 1, 10, 0, 0, 500000, tzinfo=UTC)),
    ],
)
def test_event_times_are_utc_instants(raw: str, expected: datetime) -> None:
    assert parsed(minimal(eventTime=raw)).event_time == expected


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"eventTime": None}, "eventTime is required"),
        ({"eventTime": "2021-11-03"}, "eventTime is not an ISO-8601 date-time"),
        ({"eventTime": "2021-02-30T00:00:00Z"}, "eventTime is not a valid date-time"),
        ({"eventTime": 1700000000}, "eventTime must be an ISO-8601 date-time string"),
        ({"eventType": "failed"}, "eventType must be one of ABORT, COMPLETE, FAIL"),
        ({"eventType": "RESUME"}, "eventType must be one of"),
        ({"run": {"runId": "run-42"}}, "run.runId must be a UUID, got 'run-42'"),
        ({"run": {}}, "run.runId is required"),
        ({"run": "x"}, "run must be an object"),
        ({"job": {"namespace": "ns"}}, "job.name is required"),
        ({"job": {"namespace": "ns", "name": " "}}, "job.name must be a non-empty string"),
        ({"job": {"namespace": "ns", "name": "a\x00b"}}, "job.name contains a NUL"),
        ({"job": {"namespace": "ns", "name": "\ud800"}}, "job.name contains a NUL"),
        ({"job": {"namespace": "ns", "name": "x" * (NAME_MAX + 1)}}, "job.name is longer"),
        ({"run": {"runId": RUN, "facets": []}}, "run.facets must be an object"),
        (
            {"run": {"runId": RUN, "facets": {"parent": {"run": {"runId": RUN}}}}},
            "run.facets.parent.job must be an object",
        ),
        (
            {"run": {"runId": RUN, "facets": {"nominalTime": {"nominalEndTime": "x"}}}},
            "run.facets.nominalTime.nominalStartTime is required",
        ),
        (
            {"run": {"runId": RUN, "facets": {"nominalTime": {"nominalStartTime": "soon"}}}},
            "run.facets.nominalTime.nominalStartTime is not an ISO-8601 date-time",
        ),
    ],
)
def test_malformed_run_events_say_why(changes: dict[str, Any], reason: str) -> None:
    with pytest.raises(InvalidEvent, match="^" + reason.replace("(", r"\(")):
        parse_run_event(minimal(**changes))


def test_every_problem_is_reported_at_once() -> None:
    with pytest.raises(InvalidEvent) as raised:
        parse_run_event({"eventType": "BOOM", "job": {}})
    assert str(raised.value) == (
        "eventTime is required; eventType must be one of ABORT, COMPLETE, FAIL, OTHER, "
        "RUNNING, START; run is required; job.namespace is required; job.name is required"
    )


@pytest.mark.parametrize("body", [[minimal()], "event", 42, None])
def test_anything_but_an_object_is_not_an_event(body: Any) -> None:
    with pytest.raises(InvalidEvent, match="must be a JSON object"):
        parse_run_event(body)


@pytest.mark.parametrize(
    "schema_url",
    [
        "https://openlineage.io/spec/2-0-2/OpenLineage.json#/definitions/DatasetEvent",
        "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/JobEvent",
    ],
)
def test_dataset_and_job_events_are_valid_but_not_stored(schema_url: str) -> None:
    assert parse_run_event({"schemaURL": schema_url}) is None


def test_missing_event_type_is_other_and_run_ids_are_canonical() -> None:
    body = minimal(run={"runId": RUN.upper()})
    del body["eventType"]
    event = parsed(body)
    assert (event.event_type, event.run_id) == ("OTHER", RUN)


def test_old_airflow_parent_named_like_the_task_rolls_up_to_the_prefix() -> None:
    parent = {"run": {"runId": RUN}, "job": {"namespace": "af", "name": "dag.x.task"}}
    body = minimal(
        job={"namespace": "af", "name": "dag.x.task"},
        run={"runId": RUN, "facets": {"parent": parent}},
    )
    assert parsed(body).dag_id == "dag.x"


def test_the_root_facet_names_the_dag_when_nothing_else_does() -> None:
    # A Spark application started by an Airflow task: parent = the task, root = its DAG run.
    parent = {
        "run": {"runId": RUN},
        "job": {"namespace": "af", "name": "etl_dag.load"},
        "root": {"run": {"runId": OTHER_RUN}, "job": {"namespace": "af", "name": "etl_dag"}},
    }
    event = parsed(minimal(run={"runId": RUN, "facets": {"parent": parent}}))
    assert (event.dag_namespace, event.dag_id, event.dag_run_id) == ("af", "etl_dag", OTHER_RUN)


def test_job_namespaces_are_rewritten_as_marquez_does() -> None:
    parent = {"run": {"runId": RUN}, "job": {"namespace": "my dags", "name": "d"}}
    body = minimal(
        job={"namespace": "my dags", "name": "d.t"},
        run={"runId": RUN, "facets": {"parent": parent}},
    )
    event = parsed(body)
    assert (event.namespace, event.dag_namespace) == ("my_dags", "my_dags")


def test_error_messages_are_clipped_and_cleaned_never_refused() -> None:
    def with_error(facet: Any) -> ParsedEvent:
        return parsed(minimal(run={"runId": RUN, "facets": {"errorMessage": facet}}))

    long = with_error({"message": "x" * 5000}).error_message
    assert long is not None
    assert len(long) == ERROR_MAX
    assert long.endswith("…")
    assert with_error({"message": "bad\x00 \ud800byte"}).error_message == "bad ?byte"
    assert with_error({"message": 42}).error_message is None
    assert with_error("oops").error_message is None


# -- storage ------------------------------------------------------------------------------------


@pytest.fixture
async def sessions(database_url: str) -> AsyncIterator[Sessions]:
    upgrade(database_url)
    engine = make_engine(database_url)
    try:
        yield session_factory(engine)
    finally:
        await engine.dispose()


async def store(sessions: Sessions, events: list[ParsedEvent], source: EventSource) -> int:
    async with sessions.begin() as session:
        return await store_events(session, events, source=source)


async def rows(sessions: Sessions) -> list[RunEvent]:
    async with sessions() as session:
        return list(await session.scalars(select(RunEvent).order_by(RunEvent.id)))


async def test_seed_events_are_stored_once_whatever_the_source(sessions: Sessions) -> None:
    events = [parsed(body) for body in food_delivery_events()]
    assert await store(sessions, events, EventSource.RECEIVER) == len(events)
    assert await store(sessions, events, EventSource.MARQUEZ) == 0
    assert await store(sessions, events[:5] + events[:5], EventSource.MARQUEZ) == 0
    stored = await rows(sessions)
    assert len(stored) == len(events)
    assert {r.source for r in stored} == {"receiver"}
    assert all(r.processed_at is None for r in stored)


async def test_events_without_an_interval_take_their_runs(sessions: Sessions) -> None:
    seed = [parsed(body) for body in food_delivery_events()]
    fail = next(e for e in seed if e.event_type == "FAIL")
    start = next(e for e in seed if e.run_id == fail.run_id and e.event_type == "START")
    assert (fail.nominal_start, start.nominal_start) == (None, datetime(2021, 6, 4, tzinfo=UTC))
    other = parsed(minimal())  # a run nobody told the interval of
    assert await store(sessions, [start], EventSource.MARQUEZ) == 1
    assert await store(sessions, [fail, other], EventSource.RECEIVER) == 2
    stored = {r.event_type: r for r in await rows(sessions) if r.run_id == fail.run_id}
    assert (stored["FAIL"].nominal_start, stored["FAIL"].nominal_end) == (
        start.nominal_start,
        start.nominal_end,
    )
    assert all(r.nominal_start is None for r in await rows(sessions) if r.run_id == RUN)
    assert await store(sessions, seed, EventSource.MARQUEZ) == len(seed) - 2
    seed_runs = {e.run_id for e in seed}
    assert all(r.nominal_start for r in await rows(sessions) if r.run_id in seed_runs)


async def test_stored_rows_keep_every_field_and_instant(sessions: Sessions) -> None:
    bodies = history_events(date(2021, 6, 2), date(2021, 6, 2), fail_dates=[date(2021, 6, 2)])
    fail = next(parsed(b) for b in bodies if b["eventType"] == "FAIL")
    received = datetime(2024, 1, 1, 12, tzinfo=UTC)
    async with sessions.begin() as session:
        await store_events(session, [fail], source=EventSource.MARQUEZ, received_at=received)
    (row,) = await rows(sessions)
    assert ParsedEvent(
        row.run_id, row.event_type, row.event_time, row.namespace, row.job_name,
        row.dag_namespace, row.dag_id, row.nominal_start, row.nominal_end, row.error_message,
        row.dag_run_id, row.job_type, airflow_run_id=row.airflow_run_id, task_id=row.task_id,
        try_number=row.try_number,
    ) == replace(fail, inputs=(), outputs=(), parent_run_id=None)  # fmt: skip
    assert (row.source, row.received_at) == ("marquez", received)

    # One instant spelled in two zones is one event; a microsecond later is another.
    utc = parsed(minimal(eventTime="2024-03-01T10:00:00.000Z"))
    paris = parsed(minimal(eventTime="2024-03-01T11:00:00+01:00"))
    later = parsed(minimal(eventTime="2024-03-01T10:00:00.000001Z"))
    complete = parsed(minimal(eventType="COMPLETE"))
    assert await store(sessions, [utc], EventSource.RECEIVER) == 1
    assert await store(sessions, [paris, later, complete], EventSource.MARQUEZ) == 2


async def test_large_batches_are_counted_exactly(sessions: Sessions) -> None:
    base = parsed(minimal())
    start = base.event_time
    events = [replace(base, event_time=start + timedelta(seconds=n)) for n in range(1200)]
    assert await store(sessions, events[:700], EventSource.MARQUEZ) == 700
    assert await store(sessions, events, EventSource.MARQUEZ) == 500
    async with sessions() as session:
        assert await session.scalar(select(func.count()).select_from(RunEvent)) == 1200


# -- what the store knows of parents and DAG runs -------------------------------------------------

DAG_RUN, TASK_RUN, JOB_RUN, QUERY_RUN = (
    f"0b7a7a8e-9f4c-4d2b-8a44-3d9e5c1f0b{n:02}" for n in range(4)
)


def child(run: str, name: str, parent: tuple[str, str], **facets: Any) -> dict[str, Any]:
    link = {"run": {"runId": parent[0]}, "job": {"namespace": "af", "name": parent[1]}}
    return minimal(
        eventType="START",
        job={"namespace": "af", "name": name},
        run={"runId": run, "facets": {"parent": link, **facets}},
    )


async def test_a_chain_deeper_than_one_level_rolls_up_to_the_dag_recorded_for_its_parent(
    sessions: Sessions,
) -> None:
    # dbt without `root`: query -> model -> `dbt run` -> Airflow task -> DAG, sent in two batches
    nominal = {
        "nominalStartTime": "2021-06-04T00:00:00Z",
        "nominalEndTime": "2021-06-05T00:00:00Z",
    }
    dag = minimal(
        eventType="START",
        job={"namespace": "af", "name": "etl"},
        run={"runId": DAG_RUN, "facets": {"nominalTime": nominal}},
    )
    task = child(TASK_RUN, "etl.dbt", (DAG_RUN, "etl"))
    assert await store(sessions, [parsed(dag), parsed(task)], EventSource.RECEIVER) == 2
    job = child(JOB_RUN, "dbt-run-project", (TASK_RUN, "etl.dbt"))
    query = child(QUERY_RUN, "project.model.sql", (JOB_RUN, "dbt-run-project"))
    # the deepest first: its parent is only in the same batch
    assert await store(sessions, [parsed(query), parsed(job)], EventSource.RECEIVER) == 2
    stored = {r.run_id: r for r in await rows(sessions)}
    for run in (TASK_RUN, JOB_RUN, QUERY_RUN):
        assert (stored[run].dag_namespace, stored[run].dag_id) == ("af", "etl")
        assert stored[run].dag_run_id == DAG_RUN
        # none of them said its interval: the DAG run's is theirs
        assert stored[run].nominal_start == datetime(2021, 6, 4, tzinfo=UTC)
        assert stored[run].nominal_end == datetime(2021, 6, 5, tzinfo=UTC)


async def test_an_unknown_parent_leaves_the_root_as_the_dag(sessions: Sessions) -> None:
    parent = {
        "run": {"runId": TASK_RUN},
        "job": {"namespace": "af", "name": "etl.load"},
        "root": {"run": {"runId": DAG_RUN}, "job": {"namespace": "af", "name": "etl"}},
    }
    body = minimal(
        job={"namespace": "spark", "name": "app"}, run={"runId": RUN, "facets": {"parent": parent}}
    )
    assert await store(sessions, [parsed(body)], EventSource.RECEIVER) == 1
    [row] = await rows(sessions)
    assert (row.dag_namespace, row.dag_id, row.dag_run_id, row.nominal_start) == (
        "af",
        "etl",
        DAG_RUN,
        None,
    )


# -- where in Airflow each event ran --------------------------------------------------------------


def fixture_events(name: str) -> list[ParsedEvent]:
    """A file of real (airflow-3.3.2/) or producer-built (constructed/) events, parsed."""
    return [parsed(body) for body in json.loads((PRODUCERS / name).read_text())]


def test_a_real_airflow_3_failure_names_its_run_task_and_try() -> None:
    events = fixture_events("airflow-3.3.2/failure.json")
    run_id = "manual__2026-11-24T01:09:59.421277+00:00"
    places = {
        (e.job_name, e.event_type): (e.airflow_run_id, e.task_id, e.try_number) for e in events
    }
    assert places[("ol_test.failing.load", "FAIL")] == (run_id, "load", 1)
    assert places[("ol_test.failing.prepare", "COMPLETE")] == (run_id, "prepare", 1)
    # the DAG run's own events: its run, no task
    assert places[("ol_test.failing", "START")] == (run_id, None, None)
    assert places[("ol_test.failing", "FAIL")] == (run_id, None, None)


def test_hostile_airflow_facets_cost_the_link_never_the_event() -> None:
    facets = {
        "airflow": {
            "dagRun": {"run_id": "r" * 251},
            "task": {"task_id": "load\x00"},
            "taskInstance": {"try_number": 2**40},
        }
    }
    event = parsed(minimal(run={"runId": RUN, "facets": facets}))
    assert (event.airflow_run_id, event.task_id, event.try_number) == (None, None, None)
    assert event.event_type == "FAIL"


async def test_airflow_places_are_stored_with_the_event(sessions: Sessions) -> None:
    events = fixture_events("airflow-3.3.2/failure.json")
    assert await store(sessions, events, EventSource.RECEIVER) == len(events)
    stored = {(r.job_name, r.event_type): r for r in await rows(sessions)}
    row = stored[("ol_test.failing.load", "FAIL")]
    assert (row.airflow_run_id, row.task_id, row.try_number) == (
        "manual__2026-11-24T01:09:59.421277+00:00",
        "load",
        1,
    )


SPARK_SQL = (
    "food_delivery_orders_aggregation.execute_insert_into_hadoop_fs_relation_command"
    ".warehouse_orders_daily"
)
SPARK_RUN = "scheduled__2025-06-02T02:00:00+00:00"


@pytest.mark.parametrize("order", ["as sent", "deepest first", "one by one"])
async def test_spark_jobs_under_a_task_take_its_run_task_and_try(
    sessions: Sessions, order: str
) -> None:
    # Spark's events carry no `airflow` facet: the application's parent is the task's run, the
    # SQL job's parent the application's; both ran in task aggregate_orders_spark, try 1.
    events = fixture_events("constructed/spark_under_airflow.json")
    if order == "deepest first":
        assert await store(sessions, events[::-1], EventSource.RECEIVER) == len(events)
    elif order == "one by one":
        for event in events:
            assert await store(sessions, [event], EventSource.MARQUEZ) == 1
    else:
        assert await store(sessions, events, EventSource.RECEIVER) == len(events)
    places = {
        (r.job_name, r.event_type): (r.airflow_run_id, r.task_id, r.try_number)
        for r in await rows(sessions)
    }
    task = (SPARK_RUN, "aggregate_orders_spark", 1)
    assert places[(SPARK_SQL, "FAIL")] == task
    assert places[("food_delivery_orders_aggregation", "START")] == task
    assert places[("food_delivery_orders_spark.aggregate_orders_spark", "FAIL")] == task
    # the DAG run itself is never given a task
    assert places[("food_delivery_orders_spark", "FAIL")] == (SPARK_RUN, None, None)


async def test_a_job_whose_parents_are_unknown_names_no_task(sessions: Sessions) -> None:
    parent = {
        "run": {"runId": TASK_RUN},
        "job": {"namespace": "af", "name": "etl.load"},
        "root": {"run": {"runId": DAG_RUN}, "job": {"namespace": "af", "name": "etl"}},
    }
    body = minimal(
        job={"namespace": "spark", "name": "app"}, run={"runId": RUN, "facets": {"parent": parent}}
    )
    assert await store(sessions, [parsed(body)], EventSource.RECEIVER) == 1
    [row] = await rows(sessions)
    assert (row.airflow_run_id, row.task_id, row.try_number) == (None, None, None)


async def replay(sessions: Sessions, events: list[ParsedEvent]) -> Incident:
    """What the incident processor records of the DAG run's failures, oldest row first: the
    first opens the incident, each later one goes through the rules (as `_repeat` does)."""
    assert await store(sessions, events, EventSource.RECEIVER) == len(events)
    now = datetime(2026, 1, 1, tzinfo=UTC)
    incident: Incident | None = None
    for row in await rows(sessions):
        if row.event_type != "FAIL":
            continue
        event = incident_store.event_facts(row)
        if incident is None:
            incident = incident_store.opened(event, None, now=now)
            continue
        outcome = on_failure(incident_store.facts(incident), event)
        if outcome.takes_error:
            incident.error_message, incident.error_job = event.error_message, event.job_name
        incident_store.set_airflow(incident, outcome.airflow)
        incident.dag_run_id = event.dag_run_id or incident.dag_run_id
    assert incident is not None
    return incident


async def test_a_real_failures_alert_links_the_task_not_the_dags_summary(
    sessions: Sessions,
) -> None:
    incident = await replay(sessions, fixture_events("airflow-3.3.2/failure.json"))
    assert incident.error_job == "ol_test.failing.load"
    assert incident_store.facts(incident).airflow == AirflowRef(
        "manual__2026-11-24T01:09:59.421277+00:00", "load", 1
    )


async def test_the_dags_fail_arriving_first_still_ends_on_the_task(sessions: Sessions) -> None:
    # the scheduler's DAG FAIL and the worker's task FAIL race (airflow-3.3.2/README.md)
    events = fixture_events("airflow-3.3.2/failure.json")
    dag_fail, task_fail = events[-1], events[-2]
    incident = await replay(sessions, [*events[:-2], dag_fail, task_fail])
    assert incident.error_job == "ol_test.failing.load"
    assert (incident.airflow_run_id, incident.airflow_task_id, incident.try_number) == (
        "manual__2026-11-24T01:09:59.421277+00:00",
        "load",
        1,
    )


async def test_a_dbt_models_error_links_the_task_that_ran_dbt(sessions: Sessions) -> None:
    incident = await replay(sessions, fixture_events("constructed/dbt_chain.json"))
    assert incident.error_job == "model.food_delivery.orders_daily.sql.1"
    assert (incident.airflow_run_id, incident.airflow_task_id, incident.try_number) == (
        "scheduled__2025-06-02T02:00:00+00:00",
        "dbt_run_marts",
        1,
    )
