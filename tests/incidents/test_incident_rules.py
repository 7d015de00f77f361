"""The incident rules as pure functions of plain data (bot/incidents/rules/lifecycle.py)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from bot.core.model import DagRef, DatasetRef
from bot.events.rules.producers import AirflowRef
from bot.incidents.rules.lifecycle import (
    TRANSITIONS,
    EventFacts,
    EventKind,
    FailedRun,
    IncidentFacts,
    IncidentState,
    alert_airflow,
    backfill_range,
    explains,
    joins_outage,
    kind_of,
    on_failure,
    on_success,
    span,
    with_failure,
)
from bot.lineage.rules.impact import (
    KEPT,
    DagImpact,
    Impact,
    ImpactSnapshot,
    ImpactStatus,
    ReportImpact,
)

DAY = datetime(2021, 6, 4, tzinfo=UTC)
T0 = DAY + timedelta(days=1, hours=1)


def event(
    event_type: str = "FAIL",
    *,
    job: str = "etl_orders",
    dag: str = "etl_orders",
    job_type: str | None = None,
    run: str | None = "run-1",
    at: datetime = T0,
    start: datetime | None = DAY,
    end: datetime | None = DAY + timedelta(days=1),
    error: str | None = None,
) -> EventFacts:
    return EventFacts(
        event_type=event_type,
        event_time=at,
        namespace="ns",
        job_name=job,
        dag_namespace="ns",
        dag_id=dag,
        job_type=job_type,
        dag_run_id=run,
        nominal_start=start,
        nominal_end=end,
        error_message=error,
    )


def incident(
    state: str = IncidentState.OPEN,
    *,
    failed_at: datetime | None = T0,
    run: str | None = "run-1",
    error: str | None = "disk full",
    error_job: str | None = "etl_orders.load",
    start: datetime | None = DAY,
    end: datetime | None = DAY + timedelta(days=1),
) -> IncidentFacts:
    return IncidentFacts(
        state=state,
        dag_id="etl_orders",
        failed_at=failed_at,
        opened_at=T0,
        dag_run_id=run,
        error_message=error,
        error_job=error_job,
        interval_start=start,
        interval_end=end,
        runs=(FailedRun(start.isoformat(), start, end, failed_at),)
        if start is not None and failed_at is not None
        else (),
    )


def test_the_state_machine_opens_resolves_and_reopens_only() -> None:
    assert {
        IncidentState.OPEN: {IncidentState.RESOLVED},
        IncidentState.RESOLVED: {IncidentState.OPEN},
    } == TRANSITIONS


@pytest.mark.parametrize(
    ("event_type", "kind"),
    [("FAIL", EventKind.FAILURE), ("ABORT", EventKind.FAILURE), ("COMPLETE", EventKind.SUCCESS)]
    + [(t, EventKind.OTHER) for t in ("START", "RUNNING", "OTHER")],
)
def test_event_kinds(event_type: str, kind: EventKind) -> None:
    assert kind_of(event_type) == kind


def test_a_task_fail_then_its_dags_fail_of_one_dag_run_is_one_failure_keeping_the_real_error() -> (
    None
):
    dag_fail = event(job="etl_orders", job_type="DAG", error="task_failure", at=T0 + timedelta(1))
    outcome = on_failure(incident(), dag_fail)
    assert not outcome.counts
    assert not outcome.takes_error  # the task's message is the cause, not the DAG's summary
    assert not outcome.reopens


def test_a_new_dag_run_of_the_same_interval_counts_and_takes_its_error() -> None:
    outcome = on_failure(incident(), event(run="run-2", error="no space", job="etl_orders.load"))
    assert outcome.counts
    assert outcome.takes_error


def test_a_task_error_replaces_the_dags_summary_of_the_same_run() -> None:
    summary = incident(error="task_failure", error_job="etl_orders")
    outcome = on_failure(summary, event(job="etl_orders.load", error="disk full"))
    assert outcome.takes_error
    assert not outcome.counts


def test_without_dag_run_ids_only_the_dags_own_failure_counts() -> None:
    untracked = incident(run=None)
    assert not on_failure(untracked, event(job="etl_orders.load", run=None)).counts
    assert on_failure(untracked, event(job="etl_orders", run=None)).counts


def test_a_failure_after_a_resolution_reopens_and_an_older_one_is_ignored() -> None:
    resolved = incident(IncidentState.RESOLVED)
    later = on_failure(resolved, event(at=T0 + timedelta(hours=2)))
    assert later.reopens
    assert later.counts
    assert on_failure(resolved, event(at=T0 - timedelta(minutes=1))).ignored


def test_only_the_dags_own_success_after_the_failure_resolves() -> None:
    after = T0 + timedelta(hours=1)
    assert on_success(incident(), event("COMPLETE", at=after)).resolves
    assert on_success(incident(), event("COMPLETE", job="x", job_type="DAG", at=after)).resolves
    assert not on_success(incident(), event("COMPLETE", job="etl_orders.load", at=after)).counts
    assert not on_success(incident(), event("COMPLETE", at=T0)).counts  # not after the failure
    assert not on_success(incident(IncidentState.RESOLVED), event("COMPLETE", at=after)).counts


def daily(day: int, *, at: datetime = T0) -> EventFacts:
    start = DAY + timedelta(days=day)
    return event(start=start, end=start + timedelta(days=1), run=f"run-{day}", at=at)


def outage(*days: int) -> IncidentFacts:
    runs: tuple[FailedRun, ...] = ()
    for day in days:
        runs = with_failure(runs, daily(day))
    start, end = span(runs)
    return replace(incident(start=start, end=end), runs=runs)


def test_consecutive_failed_intervals_are_one_outage_in_order() -> None:
    three = outage(0, 1, 2)
    assert [r.key for r in three.runs] == [daily(d).interval_key for d in (0, 1, 2)]
    assert (three.interval_start, three.interval_end) == (DAY, DAY + timedelta(days=3))
    assert joins_outage(three, daily(3))  # the next day
    assert joins_outage(outage(1), daily(0))  # the day before, arriving late
    assert not joins_outage(three, daily(5))  # a gap: another outage
    assert not joins_outage(replace(three, state=IncidentState.RESOLVED), daily(3))
    assert not joins_outage(three, event(start=None, end=None))


def test_an_outage_resolves_when_every_interval_succeeded_after_failing() -> None:
    after = T0 + timedelta(hours=1)
    three = outage(0, 1, 2)
    first = on_success(three, replace(daily(0, at=after), event_type="COMPLETE"))
    assert first.counts
    assert not first.resolves
    assert [r.succeeded for r in first.runs] == [True, False, False]
    rest = replace(three, runs=first.runs)
    for day in (1, 2):
        done = on_success(rest, replace(daily(day, at=after), event_type="COMPLETE"))
        rest = replace(rest, runs=done.runs)
    assert done.resolves
    again = on_success(rest, replace(daily(0, at=after), event_type="COMPLETE"))
    assert not again.counts  # that interval had succeeded already


def test_an_interval_failing_again_is_one_run_with_its_latest_failure() -> None:
    runs = with_failure(with_failure((), daily(0)), daily(0, at=T0 + timedelta(hours=3)))
    assert len(runs) == 1
    assert runs[0].failed_at == T0 + timedelta(hours=3)
    assert not runs[0].succeeded


def test_a_failure_downstream_is_explained_within_a_week_of_the_roots_interval() -> None:
    root = incident()
    week = event(dag="orders_7_days", start=DAY - timedelta(days=3), end=DAY + timedelta(days=4))
    assert explains(root, week, now=T0)
    later = DAY + timedelta(days=30)
    assert not explains(root, event(start=later, end=later + timedelta(days=1)), now=T0)
    point = event(start=DAY + timedelta(hours=5), end=DAY + timedelta(hours=5))
    assert explains(root, point, now=T0)  # one logical date is a point, not an empty range


def test_without_intervals_a_failure_within_a_day_of_the_roots_is_explained() -> None:
    root = incident(start=None, end=None)
    bare = event(start=None, end=None)
    assert explains(root, bare, now=T0 + timedelta(hours=23))
    assert not explains(root, bare, now=T0 + timedelta(hours=25))


def test_interval_keys_tell_runs_apart_and_fall_back_to_the_events_day() -> None:
    assert event().interval_key == DAY.isoformat()
    assert event(start=None, end=None).interval_key == "day:2021-06-05"


@pytest.mark.parametrize(
    ("start", "end", "days"),
    [
        (DAY, DAY + timedelta(days=1), "2021-06-04"),
        (DAY, DAY + timedelta(days=3), "2021-06-04..2021-06-06"),
        (DAY, DAY, "2021-06-04"),
        (DAY, None, "2021-06-04"),
    ],
)
def test_backfill_range_is_the_failed_days_inclusive(
    start: datetime, end: datetime | None, days: str
) -> None:
    assert backfill_range(start, end) == days


def test_an_impact_snapshot_round_trips_through_json() -> None:
    snapshot = ImpactSnapshot(
        ImpactStatus.KNOWN,
        root_owners=("orders",),
        downstream=(DagImpact("ns", "etl_orders_7_days", ("analytics",)),),
        datasets=("ns.orders",),
        reports=(ReportImpact("Weekly", "ns.orders_7_days", "analytics", "https://r"),),
        teams=("analytics", "orders"),
    )
    read = ImpactSnapshot.from_json(snapshot.to_json())
    assert read.to_json() == snapshot.to_json()
    assert (read.downstream, read.reports, read.teams) == (
        snapshot.downstream,
        snapshot.reports,
        snapshot.teams,
    )
    assert (read.downstream_count, read.datasets_count) == (1, 1)
    assert read.downstream_owners == ("analytics",)
    assert ImpactSnapshot.pending().with_root_owners(["orders"]).root_owners == ("orders",)
    assert snapshot.with_root_owners(["platform"]).root_owners == ("orders",)
    assert ImpactSnapshot.from_json({}).status == ImpactStatus.UNAVAILABLE


def test_a_snapshot_names_the_first_dags_and_counts_and_owns_them_all() -> None:
    root = DagRef("ns", "root")
    below = tuple(DagRef("ns", f"part_{n:03d}") for n in range(KEPT + 50))
    impact = Impact(
        root,
        downstream=below,
        datasets=tuple(DatasetRef("ns", f"out_{n}") for n in range(KEPT + 50)),
        reports=(),
        owners={root: ("orders",), below[-1]: ("late_team",)},  # past the hundredth
    )
    snapshot = impact.snapshot()
    assert [d.dag_id for d in snapshot.downstream] == [d.dag_id for d in below[:KEPT]]
    assert (snapshot.downstream_count, snapshot.datasets_count) == (KEPT + 50, KEPT + 50)
    assert len(snapshot.datasets) == KEPT
    assert snapshot.downstream_owners == ("late_team",)  # who may snooze under all_owners
    assert snapshot.teams == ("late_team", "orders")
    assert snapshot.reach == below  # the incident's downstream rows
    read = ImpactSnapshot.from_json(snapshot.to_json())
    assert (read.downstream_count, read.downstream_owners) == (KEPT + 50, ("late_team",))
    assert read.reach == ()  # rows are written once, from the fresh snapshot


# -- which failure's Airflow run, task and try the alert links to --------------------------------

R1, R2 = "scheduled__2021-06-04T00:00:00+00:00", "manual__2021-06-05T08:00:00+00:00"
NOWHERE = AirflowRef()


def failed(
    job: str = "etl_orders.load",
    *,
    run: str = "run-1",
    error: str | None = None,
    airflow: AirflowRef = NOWHERE,
    at: datetime = T0 + timedelta(minutes=5),
) -> EventFacts:
    """A FAIL of the DAG itself (job etl_orders) or of one of its tasks."""
    return replace(
        event(job=job, job_type="DAG" if job == "etl_orders" else "TASK", run=run, at=at),
        error_message=error,
        airflow_run_id=airflow.run_id,
        task_id=airflow.task_id,
        try_number=airflow.try_number,
    )


def alerting(
    airflow: AirflowRef, *, error: str | None = "disk full", error_job: str | None = None
) -> IncidentFacts:
    """An open incident for run-1 whose alert shows `error` (of `error_job`) and links `airflow`."""
    return replace(
        incident(error=error, error_job=error_job if error else None),
        airflow_run_id=airflow.run_id,
        airflow_task_id=airflow.task_id,
        try_number=airflow.try_number,
    )


def test_the_dags_fail_after_its_task_keeps_the_tasks_run_task_and_try() -> None:
    shown = alerting(AirflowRef(R1, "load", 2), error_job="etl_orders.load")
    dag_fail = failed("etl_orders", error="task_failure", airflow=AirflowRef(R1))
    outcome = on_failure(shown, dag_fail)
    assert not outcome.takes_error
    assert outcome.airflow == AirflowRef(R1, "load", 2)


def test_the_dags_summary_taking_the_alert_keeps_the_task_that_failed_in_its_run() -> None:
    # the task failed without a message; the DAG's "Tasks failed: load" becomes the error shown
    shown = alerting(AirflowRef(R1, "load", 1), error=None)
    summary = failed("etl_orders", error="Task failed: load", airflow=AirflowRef(R1))
    outcome = on_failure(shown, summary)
    assert outcome.takes_error
    assert outcome.airflow == AirflowRef(R1, "load", 1)


def test_a_task_error_replacing_the_dags_summary_brings_its_task_and_try() -> None:
    # the DAG's FAIL arrived first (the scheduler's and the worker's events race)
    shown = alerting(AirflowRef(R1), error="task_failure", error_job="etl_orders")
    task_fail = failed(error="ValueError: 3 rows", airflow=AirflowRef(R1, "load", 3))
    outcome = on_failure(shown, task_fail)
    assert outcome.takes_error
    assert outcome.airflow == AirflowRef(R1, "load", 3)


def test_a_task_failure_without_a_message_fills_in_the_task_of_the_same_run() -> None:
    shown = alerting(AirflowRef(None), error="Task failed: load", error_job="etl_orders")
    quiet = failed(airflow=AirflowRef(R1, "load", 1))
    outcome = on_failure(shown, quiet)
    assert not outcome.takes_error
    assert outcome.airflow == AirflowRef(R1, "load", 1)


def test_a_second_task_of_the_run_does_not_move_the_links_off_the_first_error() -> None:
    shown = alerting(AirflowRef(R1, "load", 1), error_job="etl_orders.load")
    other = failed("etl_orders.report", error="upstream gone", airflow=AirflowRef(R1, "report", 1))
    assert on_failure(shown, other).airflow == AirflowRef(R1, "load", 1)


def test_a_task_never_takes_another_tasks_try() -> None:
    shown = alerting(AirflowRef(R1, "load", 4), error=None)
    other = failed("etl_orders.report", error="boom", airflow=AirflowRef(R1, "report", None))
    outcome = on_failure(shown, other)
    assert outcome.takes_error
    assert outcome.airflow == AirflowRef(R1, "report", None)


def test_another_runs_failure_with_an_error_takes_over_the_links_whole() -> None:
    shown = alerting(AirflowRef(R1, "load", 2), error_job="etl_orders.load")
    new_run = failed("etl_orders", run="run-2", error="task_failure", airflow=AirflowRef(R2))
    outcome = on_failure(shown, new_run)
    assert outcome.counts
    assert outcome.takes_error
    # the old run's task is not the new run's: no link to it
    assert outcome.airflow == AirflowRef(R2)


def test_another_runs_failure_without_an_error_leaves_the_links_with_the_error_shown() -> None:
    shown = alerting(AirflowRef(R1, "load", 2), error_job="etl_orders.load")
    quiet = failed(run="run-2", airflow=AirflowRef(R2, "load", 1))
    outcome = on_failure(shown, quiet)
    assert outcome.counts
    assert outcome.airflow == AirflowRef(R1, "load", 2)


def test_without_any_error_shown_the_latest_failed_run_is_linked() -> None:
    shown = alerting(AirflowRef(R1, "load", 2), error=None)
    assert on_failure(shown, failed(run="run-2", airflow=AirflowRef(R2, "load", 1))).airflow == (
        AirflowRef(R2, "load", 1)
    )
    # a failure that names no Airflow run at all leaves the link where it was
    assert on_failure(shown, failed(run="run-2")).airflow == AirflowRef(R1, "load", 2)


def test_a_reopening_failure_with_an_error_brings_its_own_links() -> None:
    resolved = replace(alerting(AirflowRef(R1, "load", 1)), state=IncidentState.RESOLVED)
    again = failed(run="run-2", error="disk full again", airflow=AirflowRef(R2, "load", 1))
    outcome = on_failure(resolved, again)
    assert outcome.reopens
    assert outcome.airflow == AirflowRef(R2, "load", 1)


def test_alert_airflow_is_what_on_failure_decides() -> None:
    shown = alerting(AirflowRef(R1, "load", 2), error_job="etl_orders.load")
    dag_fail = failed("etl_orders", error="task_failure", airflow=AirflowRef(R1))
    assert alert_airflow(shown, dag_fail, takes_error=False) == on_failure(shown, dag_fail).airflow
