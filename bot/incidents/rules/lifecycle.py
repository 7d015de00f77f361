"""What a run event does to an incident, as pure functions of plain data (the clock is an
argument): the incident state machine, when a failure counts, which error an alert keeps,
when a success resolves, and when a failure downstream belongs to an open incident upstream.

An incident is one outage of a DAG: its failed runs (tasks and the Spark or dbt jobs under
them roll up to their DAG) over consecutive intervals, e.g. the daily runs of 06-04, 05 and 06.
It is `open` until the DAG's own success has arrived, after the latest failure, for every one
of those intervals; a failure after that reopens it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import StrEnum

from bot.core.time_bounds import plus
from bot.events.rules.producers import AirflowRef

FAILED_EVENTS = frozenset({"FAIL", "ABORT"})
GROUP_SLACK = timedelta(days=7)
"""How far after a root's interval a failure downstream still reads its bad data (a weekly
DAG reads the failed day within its week)."""
GROUP_RECENT = timedelta(days=1)
"""Without intervals to compare, a failure downstream within a day of the root's is its."""


class IncidentKind(StrEnum):
    FAILURE = "failure"
    DATA = "data"  # runs that completed, writing or checking data that is wrong


DATA_KEY = "data|"
"""The prefix of a data incident's `interval_key`."""


class IncidentState(StrEnum):
    OPEN = "open"
    RESOLVED = "resolved"


TRANSITIONS: Mapping[str, frozenset[str]] = {
    IncidentState.OPEN: frozenset({IncidentState.RESOLVED}),
    IncidentState.RESOLVED: frozenset({IncidentState.OPEN}),  # it failed again
}
"""Allowed incident moves: state → the states it may move to."""


class EventKind(StrEnum):
    FAILURE = "failure"
    SUCCESS = "success"
    OTHER = "other"  # START, RUNNING, OTHER: nothing to do


def kind_of(event_type: str) -> EventKind:
    if event_type in FAILED_EVENTS:
        return EventKind.FAILURE
    return EventKind.SUCCESS if event_type == "COMPLETE" else EventKind.OTHER


@dataclass(frozen=True)
class EventFacts:
    """The part of a stored run event the incident rules look at."""

    event_type: str
    event_time: datetime
    namespace: str
    job_name: str
    dag_namespace: str
    dag_id: str
    job_type: str | None = None
    dag_run_id: str | None = None
    nominal_start: datetime | None = None
    nominal_end: datetime | None = None
    error_message: str | None = None
    airflow_run_id: str | None = None
    task_id: str | None = None
    try_number: int | None = None

    @property
    def airflow(self) -> AirflowRef:
        """Where in Airflow this failure is: its run, and its task and try if it names one."""
        return AirflowRef(self.airflow_run_id, self.task_id, self.try_number)

    @property
    def dag_level(self) -> bool:
        """The DAG run's own event, not one of a task or a job under it."""
        return self.job_type == "DAG" or (
            self.job_name == self.dag_id and self.namespace == self.dag_namespace
        )

    @property
    def interval_key(self) -> str:
        """What tells one failed run of a DAG from another: its interval's start, else (no
        nominal interval) the event's day, so runs of other days do not merge into one
        incident and a success later that day still resolves it."""
        if self.nominal_start is not None:
            return self.nominal_start.isoformat()
        return f"day:{self.event_time.date().isoformat()}"


@dataclass(frozen=True)
class FailedRun:
    """One interval of an outage: when it last failed, and whether it has succeeded since."""

    key: str
    start: datetime | None
    end: datetime | None
    failed_at: datetime
    succeeded: bool = False


@dataclass(frozen=True)
class IncidentFacts:
    """The part of a stored incident the rules look at."""

    state: str
    dag_id: str
    failed_at: datetime | None
    opened_at: datetime
    dag_run_id: str | None = None
    error_message: str | None = None
    error_job: str | None = None
    interval_start: datetime | None = None
    interval_end: datetime | None = None
    runs: tuple[FailedRun, ...] = ()
    """The outage's intervals, oldest first."""
    airflow_run_id: str | None = None
    airflow_task_id: str | None = None
    try_number: int | None = None

    @property
    def airflow(self) -> AirflowRef:
        """Where in Airflow the failure the alert shows is (its run, task and try)."""
        return AirflowRef(self.airflow_run_id, self.airflow_task_id, self.try_number)

    def run(self, key: str) -> FailedRun | None:
        return next((r for r in self.runs if r.key == key), None)


@dataclass(frozen=True)
class Failure:
    """What a failure of the incident's DAG and interval does to it."""

    ignored: bool = False
    """An old failure arriving late (a restart's backlog) after a resolution: nothing."""
    counts: bool = False
    """A new failed run (a retry, or a reopening), not another report of the same one."""
    takes_error: bool = False
    """The alert shows this event's error from now on."""
    reopens: bool = False
    airflow: AirflowRef = field(default_factory=AirflowRef)
    """Where in Airflow the failure the alert shows is, from now on (`alert_airflow`)."""


def on_failure(incident: IncidentFacts, event: EventFacts) -> Failure:
    reopened = incident.state == IncidentState.RESOLVED
    if reopened and incident.failed_at is not None and event.event_time <= incident.failed_at:
        return Failure(ignored=True)
    same_run = _same_run(incident, event)
    if event.dag_run_id is not None:
        # A task's FAIL and its DAG's FAIL for one DAG run are one failure.
        counts = reopened or not same_run
    else:  # no DAG run to compare: the DAG's own failure is a new run, a task's is not
        counts = reopened or event.dag_level
    takes_error = bool(event.error_message) and (
        not same_run
        or incident.error_message is None
        # in one DAG run the first real error is the cause; the DAG's summary comes last
        or (incident.error_job == incident.dag_id and not event.dag_level)
    )
    return Failure(
        counts=counts,
        takes_error=takes_error,
        reopens=reopened,
        airflow=alert_airflow(incident, event, takes_error=takes_error),
    )


def _same_run(incident: IncidentFacts, event: EventFacts) -> bool:
    return event.dag_run_id is not None and event.dag_run_id == incident.dag_run_id


def alert_airflow(incident: IncidentFacts, event: EventFacts, *, takes_error: bool) -> AirflowRef:
    """Where in Airflow the failure the alert shows is once `event` has been counted, the alert
    showing its error from now on if `takes_error`: the links go where the error came from.

    Within one DAG run the run's task failure is the one to link, whichever event brought the
    error shown: the DAG's own FAIL names no task ("task_failure", or the failed tasks from its
    `airflowState`), so it keeps the task of the run's task failure, and a task failure fills in
    the task of a DAG FAIL that came first. Another run's failure takes over only with the error
    it brings, or when the alert shows no error at all (the latest failed run is then the best
    link); otherwise the links stay with the error they explain.
    """
    new, old = event.airflow, incident.airflow
    if _same_run(incident, event):
        return _filled(new, old) if takes_error else _filled(old, new)
    if takes_error or (incident.error_message is None and new.run_id is not None):
        return new
    return old


def _filled(ref: AirflowRef, other: AirflowRef) -> AirflowRef:
    """`ref` with its gaps filled from `other`, a failure of the same DAG run; a task comes with
    its own try number, never with another task's."""
    if ref.task_id is not None:
        return AirflowRef(ref.run_id or other.run_id, ref.task_id, ref.try_number)
    return AirflowRef(ref.run_id or other.run_id, other.task_id, other.try_number)


@dataclass(frozen=True)
class Success:
    """What the DAG's success for one of the outage's intervals does."""

    runs: tuple[FailedRun, ...]
    """The outage's intervals with this one marked succeeded (unchanged if it does not count)."""
    counts: bool = False
    resolves: bool = False
    """Every interval of the outage has succeeded since it failed."""


def on_success(incident: IncidentFacts, event: EventFacts) -> Success:
    """The DAG's own success for an interval, after that interval's latest failure, clears it
    (a task's success, or one the failure came after, does not); the last one resolves."""
    run = incident.run(event.interval_key)
    if (
        incident.state != IncidentState.OPEN
        or not event.dag_level
        or run is None
        or run.succeeded
        or event.event_time <= run.failed_at
    ):
        return Success(runs=incident.runs)
    runs = tuple(replace(r, succeeded=True) if r.key == run.key else r for r in incident.runs)
    return Success(runs=runs, counts=True, resolves=all(r.succeeded for r in runs))


def joins_outage(incident: IncidentFacts, event: EventFacts) -> bool:
    """A failure of the DAG for an interval next to (or overlapping) an open outage's range is
    the same outage: one incident and one alert, whose backfill covers the whole range."""
    if incident.state != IncidentState.OPEN or incident.interval_start is None:
        return False
    if event.nominal_start is None:
        return False
    end = incident.interval_end or incident.interval_start
    event_end = event.nominal_end or event.nominal_start
    return event.nominal_start <= end and event_end >= incident.interval_start


def with_failure(runs: tuple[FailedRun, ...], event: EventFacts) -> tuple[FailedRun, ...]:
    """The outage's intervals once `event`'s interval has failed (again), oldest first."""
    key = event.interval_key
    old = next((r for r in runs if r.key == key), None)
    failed_at = max(old.failed_at, event.event_time) if old else event.event_time
    run = FailedRun(key, event.nominal_start, event.nominal_end, failed_at)
    rest = [r for r in runs if r.key != key]
    return tuple(sorted([*rest, run], key=_run_order))


def span(runs: tuple[FailedRun, ...]) -> tuple[datetime | None, datetime | None]:
    """The outage's range: the first interval's start to the last one's end."""
    bounds = [(r.start, r.end or r.start) for r in runs if r.start is not None]
    if not bounds:
        return None, None
    return min(start for start, _ in bounds), max(end for _, end in bounds)


def _run_order(run: FailedRun) -> tuple[int, str]:
    return (0, run.start.isoformat()) if run.start is not None else (1, run.key)


def explains(root: IncidentFacts, event: EventFacts, *, now: datetime) -> bool:
    """Whether a failure of a DAG downstream of `root` is explained by it: the intervals meet
    (with a week's slack for weekly readers), or, for runs without intervals, the root failed
    within the last day."""
    return explains_interval(root, event.nominal_start, event.nominal_end, now=now)


def explains_interval(
    root: IncidentFacts, start: datetime | None, end: datetime | None, *, now: datetime
) -> bool:
    """`explains` for an interval of a DAG downstream of `root` (a run, or a late one)."""
    if root.interval_start is not None and start is not None:
        root_end = plus(root.interval_end or root.interval_start, GROUP_SLACK)
        stop = end or start
        if stop <= start:  # one logical date: a point, not an empty range
            stop = plus(start, timedelta(microseconds=1))
        return start < root_end and stop > root.interval_start
    return now - root.opened_at < GROUP_RECENT


def snoozed(snoozed_until: datetime | None, *, now: datetime) -> bool:
    return snoozed_until is not None and snoozed_until > now


def outage_range(runs: tuple[FailedRun, ...]) -> str | None:
    """The outage's days as `/backfill` takes them: what Approve backfill plans and what the
    alert's proposal counts (None before any failed interval is known)."""
    start, end = span(runs)
    return backfill_range(start, end) if start is not None else None


def backfill_range(start: datetime, end: datetime | None) -> str:
    """A failed interval's days as `/backfill` takes them (inclusive)."""
    first = start.date()
    stop = end or start
    last = (stop - timedelta(microseconds=1)).date() if stop > start else first
    return first.isoformat() if last == first else f"{first.isoformat()}..{last.isoformat()}"
