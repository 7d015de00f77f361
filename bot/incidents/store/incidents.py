"""Incident SQL: the run events the watcher has still to handle, the incidents they open or
change (moves checked against the domain's state machine), and what an alert shows of them.
Callers own the transaction; rows an incident's change depends on are locked (FOR UPDATE)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, delete, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from bot.events.rules.producers import AirflowRef
from bot.events.store.models import RunEvent
from bot.incidents.rules.lifecycle import (
    DATA_KEY,
    TRANSITIONS,
    EventFacts,
    FailedRun,
    IncidentFacts,
    IncidentKind,
    IncidentState,
    explains_interval,
    joins_outage,
    span,
    with_failure,
)
from bot.incidents.store.models import Incident, IncidentDownstream
from bot.lineage.rules.impact import ImpactSnapshot, ImpactStatus
from bot.slack.store.models import OutboxMessage, OutboxRole


class IllegalIncidentMove(ValueError):
    """A move the incident state machine does not allow: a bug, raised before any write."""


async def unhandled(session: AsyncSession, *, limit: int) -> list[RunEvent]:
    """Stored run events not handled yet, oldest first."""
    return list(
        await session.scalars(
            select(RunEvent)
            .where(RunEvent.processed_at.is_(None))
            .order_by(RunEvent.id)
            .limit(limit)
        )
    )


async def claim(session: AsyncSession, row_id: int, *, now: datetime) -> bool:
    """Take a run event for this transaction (a conditional UPDATE of `processed_at`); False
    when another worker handled it already."""
    result = await session.execute(
        update(RunEvent)
        .where(RunEvent.id == row_id, RunEvent.processed_at.is_(None))
        .values(processed_at=now)
        .execution_options(synchronize_session=False)
    )
    return bool(getattr(result, "rowcount", 0))


async def of_run(
    session: AsyncSession, event: EventFacts, kind: IncidentKind = IncidentKind.FAILURE
) -> Incident | None:
    """The incident of `kind` holding the event's DAG and interval (its first interval, or one
    its outage grew to), locked."""
    exact = await session.scalar(
        select(Incident)
        .where(
            Incident.namespace == event.dag_namespace,
            Incident.dag_id == event.dag_id,
            Incident.interval_key == key_of(event, kind),
        )
        .with_for_update()
    )
    if exact is not None or event.nominal_start is None:
        return exact
    for incident in await _touching(session, event, kind):
        if any(run.key == event.interval_key for run in runs_of(incident)):
            return incident
    return None


def key_of(event: EventFacts, kind: IncidentKind) -> str:
    """The `interval_key` of the incident of `kind` an event opens."""
    return DATA_KEY + event.interval_key if kind == IncidentKind.DATA else event.interval_key


async def outage_of(
    session: AsyncSession, event: EventFacts, kind: IncidentKind = IncidentKind.FAILURE
) -> Incident | None:
    """The open, ungrouped incident of `kind` of the event's DAG whose range the event's
    interval touches or overlaps (the same outage), locked."""
    if event.nominal_start is None:
        return None
    for incident in await _touching(session, event, kind):
        if incident.root_id is None and joins_outage(facts(incident), event):
            return incident
    return None


async def _touching(session: AsyncSession, event: EventFacts, kind: IncidentKind) -> list[Incident]:
    assert event.nominal_start is not None
    end = event.nominal_end or event.nominal_start
    return list(
        await session.scalars(
            select(Incident)
            .where(
                Incident.namespace == event.dag_namespace,
                Incident.dag_id == event.dag_id,
                Incident.kind == kind.value,
                Incident.interval_start <= end,
                func.coalesce(Incident.interval_end, Incident.interval_start)
                >= event.nominal_start,
            )
            .order_by(Incident.opened_at.desc())
            .limit(20)
            .with_for_update()
        )
    )


def runs_of(incident: Incident) -> tuple[FailedRun, ...]:
    """The outage's intervals; an incident from before migration 0007 is its one interval."""
    if incident.runs is None:
        return (
            FailedRun(
                key=incident.interval_key,
                start=incident.interval_start,
                end=incident.interval_end,
                failed_at=incident.failed_at or incident.opened_at,
                succeeded=incident.state == IncidentState.RESOLVED,
            ),
        )
    return tuple(
        FailedRun(
            key=r["key"],
            start=_moment(r["start"]),
            end=_moment(r["end"]),
            failed_at=_moment(r["failed_at"]) or incident.opened_at,
            succeeded=bool(r["succeeded"]),
        )
        for r in incident.runs
    )


def set_runs(incident: Incident, runs: tuple[FailedRun, ...]) -> None:
    """Record the outage's intervals and the range they span."""
    incident.runs = [
        {
            "key": r.key,
            "start": _iso(r.start),
            "end": _iso(r.end),
            "failed_at": _iso(r.failed_at),
            "succeeded": r.succeeded,
        }
        for r in runs
    ]
    start, end = span(runs)
    if start is not None:
        incident.interval_start, incident.interval_end = start, end


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _moment(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


async def get(session: AsyncSession, incident_id: str, *, lock: bool = False) -> Incident | None:
    query = select(Incident).where(Incident.id == incident_id)
    return await session.scalar(query.with_for_update() if lock else query)


async def open_roots(session: AsyncSession) -> list[Incident]:
    """Open incidents that are not grouped under another, oldest first."""
    return list(
        await session.scalars(
            select(Incident)
            .where(Incident.state == IncidentState.OPEN, Incident.root_id.is_(None))
            .order_by(Incident.opened_at)
        )
    )


async def open_roots_above(session: AsyncSession, namespace: str, dag_id: str) -> list[Incident]:
    """Open incidents, not grouped under another, with this DAG downstream, oldest first."""
    below = IncidentDownstream
    return list(
        await session.scalars(
            select(Incident)
            .join(below, below.incident_id == Incident.id)
            .where(below.namespace == namespace, below.dag_id == dag_id)
            .where(Incident.state == IncidentState.OPEN, Incident.root_id.is_(None))
            .order_by(Incident.opened_at)
        )
    )


def downstream_rows(incident_id: str, impact: ImpactSnapshot) -> list[dict[str, str]] | None:
    """The `incident_downstream` rows of an impact just worked out (every DAG downstream; the
    incident's own row lists only the first hundred); None for one read back from that row,
    whose rows stay as they are."""
    if impact.status == ImpactStatus.KNOWN and impact.downstream_count and not impact.reach:
        return None
    return [
        {"incident_id": incident_id, "namespace": dag.namespace, "dag_id": dag.dag_id}
        for dag in impact.reach
    ]


async def clear_downstream(session: AsyncSession, incident_id: str) -> None:
    below = IncidentDownstream
    await session.execute(delete(below).where(below.incident_id == incident_id))


async def add_downstream(session: AsyncSession, rows: list[dict[str, str]]) -> None:
    table = cast(Table, IncidentDownstream.__table__)  # Core's executemany: the ORM's costs 3x
    await session.execute(insert(table), rows)


async def grouped_dags(session: AsyncSession, root_id: str, *, limit: int = 50) -> list[str]:
    """Distinct DAGs whose failures joined the root, by name."""
    return list(
        await session.scalars(
            select(Incident.dag_id)
            .where(Incident.root_id == root_id)
            .group_by(Incident.dag_id)
            .order_by(Incident.dag_id)
            .limit(limit)
        )
    )


def opened(
    event: EventFacts,
    impact: ImpactSnapshot | None,
    *,
    now: datetime,
    root_id: str | None = None,
    kind: IncidentKind = IncidentKind.FAILURE,
) -> Incident:
    """A new incident for a failed run, or of `kind` data for a run with bad data (`root_id`:
    grouped under an incident upstream)."""
    incident = Incident(
        namespace=event.dag_namespace,
        dag_id=event.dag_id,
        interval_key=key_of(event, kind),
        kind=kind.value,
        interval_start=event.nominal_start,
        interval_end=event.nominal_end,
        state=IncidentState.OPEN,
        root_id=root_id,
        failures=1,
        grouped=0,
        error_message=event.error_message,
        error_job=event.job_name if event.error_message else None,
        dag_run_id=event.dag_run_id,
        failed_at=event.event_time,
        impact=impact.to_json() if impact is not None else {},
        opened_at=now,
        alerted_at=now,
        updated_at=now,
    )
    set_airflow(incident, event.airflow)
    set_runs(incident, with_failure((), event))
    return incident


def set_airflow(incident: Incident, ref: AirflowRef) -> None:
    """Record where in Airflow the failure the alert shows is: its run, task and try (the alert's
    links to the run and to the task's log; `bot/incidents/rules/lifecycle.py` `alert_airflow`
    decides)."""
    incident.airflow_run_id = ref.run_id
    incident.airflow_task_id = ref.task_id
    incident.try_number = ref.try_number


def move(incident: Incident, to: IncidentState, *, now: datetime) -> None:
    """Change the incident's state as the state machine allows (a no-op when it is there)."""
    if incident.state == to:
        return
    if to not in TRANSITIONS.get(incident.state, frozenset()):
        raise IllegalIncidentMove(f"incident cannot move from {incident.state} to {to}")
    incident.state = to
    incident.resolved_at = now if to == IncidentState.RESOLVED else None
    incident.updated_at = now


def facts(incident: Incident) -> IncidentFacts:
    return IncidentFacts(
        state=incident.state,
        dag_id=incident.dag_id,
        failed_at=incident.failed_at,
        opened_at=incident.opened_at,
        dag_run_id=incident.dag_run_id,
        error_message=incident.error_message,
        error_job=incident.error_job,
        interval_start=incident.interval_start,
        interval_end=incident.interval_end,
        runs=runs_of(incident),
        airflow_run_id=incident.airflow_run_id,
        airflow_task_id=incident.airflow_task_id,
        try_number=incident.try_number,
    )


def event_facts(row: RunEvent) -> EventFacts:
    return EventFacts(
        event_type=row.event_type,
        event_time=row.event_time,
        namespace=row.namespace,
        job_name=row.job_name,
        dag_namespace=row.dag_namespace,
        dag_id=row.dag_id,
        job_type=row.job_type,
        dag_run_id=row.dag_run_id,
        nominal_start=row.nominal_start,
        nominal_end=row.nominal_end,
        error_message=row.error_message,
        airflow_run_id=row.airflow_run_id,
        task_id=row.task_id,
        try_number=row.try_number,
    )


def impact_of(incident: Incident) -> ImpactSnapshot:
    return ImpactSnapshot.from_json(incident.impact)


async def cause_of_lateness(
    session: AsyncSession,
    namespace: str,
    dag_id: str,
    start: datetime,
    end: datetime | None,
    *,
    now: datetime,
) -> str | None:
    """The DAG whose open incident explains why this DAG's run for the interval is late: its
    own failure, else a failure upstream of it whose impact has it downstream."""
    own = await session.scalars(
        select(Incident).where(
            Incident.namespace == namespace,
            Incident.dag_id == dag_id,
            Incident.state == IncidentState.OPEN,
            Incident.root_id.is_(None),
        )
    )
    if any(run.start == start for incident in own for run in runs_of(incident)):
        return dag_id  # this very run failed
    for incident in await open_roots_above(session, namespace, dag_id):
        if explains_interval(facts(incident), start, end, now=now):
            return incident.dag_id
    return None


async def last_alert_payload(session: AsyncSession, incident_id: str) -> dict[str, Any] | None:
    """What the alert was last posted or edited to (an edit to the same is not owed)."""
    payload = await session.scalar(
        select(OutboxMessage.payload)
        .where(
            OutboxMessage.incident_id == incident_id,
            OutboxMessage.role.in_((OutboxRole.STATUS, OutboxRole.STATUS_UPDATE)),
        )
        .order_by(OutboxMessage.id.desc())
        .limit(1)
    )
    return dict(payload) if payload is not None else None
