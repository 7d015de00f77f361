"""Run events stored once, with what the store knows of their runs.

An event's identity is (run id, event type, event time), as in Marquez (NOTES.md §1.7), so the
same event read twice across a poll overlap, or pushed to the bot and read back from Marquez,
is one row. Before insert, an event takes what earlier rows say about its run: the DAG recorded
for its parent run (chains deeper than one level), the nominal interval of its run or of its
DAG run (most producers send `nominalTime` on START only, Spark jobs under Airflow never), and
the Airflow run, task and try it ran in (the provider's `airflow` facets are on Airflow's own
events only, never on a Spark job's or a dbt model's).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, replace
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncSession

from bot.core.after_commit import wake_after_commit
from bot.core.tables import utcnow
from bot.events.rules.event import ParsedEvent
from bot.events.store.models import EventSource, RunEvent

__all__ = ["dag_events_since", "keys_between", "store_events"]

# ParsedEvent fields that run_events does not hold
_NOT_COLUMNS = ("inputs", "outputs", "parent_run_id", "symlinks")
_TABLE = RunEvent.__table__
_LOOKUP = 500  # run ids per lookup of stored rows
_CHAIN_MAX = 8  # parent levels resolved within one batch


OWED = "run-events"
"""The work a new run event owes: the incident watcher registers for it (`wake_on_commit`)."""


async def store_events(
    session: AsyncSession,
    events: Iterable[ParsedEvent],
    *,
    source: EventSource,
    received_at: datetime | None = None,
    resolved: list[ParsedEvent] | None = None,
    new_types: Counter[str] | None = None,
) -> int:
    """Insert the events not stored yet, in the caller's transaction; returns how many were new.
    `resolved`, when given, receives the events as stored (deduplicated, with what the store
    knew of their runs), for work after the commit such as the lineage index; `new_types` the
    event types of the rows inserted (what /metrics counts once the caller has committed).

    `INSERT … ON CONFLICT (run_id, event_type, event_time) DO NOTHING` on both SQLite and
    PostgreSQL: a duplicate is skipped by the unique constraint itself, so two writers (the
    receiver and the poller, or two bot processes) racing on one event store it once.

    The nominal interval is the run's, not the event's: Airflow and Marquez's samples send the
    `nominalTime` facet on START only (Marquez keeps it for the run), so an event without it
    takes its run's from the batch or from rows already stored — a FAIL row names its interval.
    """
    unique: dict[tuple[str, str, datetime], ParsedEvent] = {}
    for event in events:
        unique.setdefault(event.key, event)
    if not unique:
        return 0
    at = received_at or utcnow()
    stored = await _resolved(session, list(unique.values()))
    if resolved is not None:
        resolved.extend(stored)
    rows = [
        {
            **{k: v for k, v in asdict(event).items() if k not in _NOT_COLUMNS},
            "source": source.value,
            "received_at": at,
            "processed_at": None,
        }
        for event in stored
    ]
    dialect = session.get_bind().dialect.name
    if dialect == "postgresql":
        insert: Any = postgresql_insert
    elif dialect == "sqlite":
        insert = sqlite_insert
    else:
        raise ValueError(f"run events are stored on SQLite or PostgreSQL, not {dialect}")
    # The Core table, not the ORM entity: no ORM bookkeeping for rows nobody loads. One
    # compiled statement, sent as SQLAlchemy's batched "insertmanyvalues" (RETURNING counts
    # the rows actually inserted; conflicting ones return nothing).
    statement = (
        insert(_TABLE)
        .on_conflict_do_nothing(index_elements=["run_id", "event_type", "event_time"])
        .returning(_TABLE.c.event_type)
    )
    inserted = (await session.execute(statement, rows)).scalars().all()
    if new_types is not None:
        new_types.update(inserted)
    if inserted:
        wake_after_commit(session, OWED)
    return len(inserted)


# -- helpers ----------------------------------------------------------------------------------


async def _resolved(session: AsyncSession, events: list[ParsedEvent]) -> list[ParsedEvent]:
    """`events` with what the store knows of their runs: the DAG recorded for their parent run
    (chains deeper than one level), then the nominal interval of their own run or DAG run and
    the Airflow run, task and try they ran in."""
    owned = await _with_parent_dags(session, events)
    return await _with_airflow(session, await _with_intervals(session, owned))


async def _with_parent_dags(session: AsyncSession, events: list[ParsedEvent]) -> list[ParsedEvent]:
    """An event whose DAG came from its `parent`/`root` facets takes the DAG already recorded
    for its parent run, in this batch or stored: a dbt sql job under a model under `dbt run`
    under an Airflow task lands on the task's DAG even when no producer sends `root`."""
    wanted = sorted({e.parent_run_id for e in events if e.parent_run_id})
    if not wanted:
        return events
    known: dict[str, tuple[str, str, str | None]] = {}
    for chunk in _chunks(wanted):
        found = await session.execute(
            select(_TABLE.c.run_id, _TABLE.c.dag_namespace, _TABLE.c.dag_id, _TABLE.c.dag_run_id)
            .where(_TABLE.c.run_id.in_(chunk))
            .order_by(_TABLE.c.id)
        )
        for run_id, namespace, dag_id, dag_run_id in found:
            known.setdefault(run_id, (namespace, dag_id, dag_run_id))
    # Runs of this batch, as their own events say; parents in the batch resolve first.
    batch = {e.run_id: e for e in events}

    def dag_of(run_id: str, depth: int) -> tuple[str, str, str | None] | None:
        if run_id in known:
            return known[run_id]
        event = batch.get(run_id)
        if event is None:
            return None
        parent = event.parent_run_id
        found = None
        if parent and parent != run_id and depth < _CHAIN_MAX:
            found = dag_of(parent, depth + 1)
        known[run_id] = found or (event.dag_namespace, event.dag_id, event.dag_run_id)
        return known[run_id]

    return [
        _adopt(e, dag) if e.parent_run_id and (dag := dag_of(e.run_id, 0)) is not None else e
        for e in events
    ]


def _adopt(event: ParsedEvent, dag: tuple[str, str, str | None]) -> ParsedEvent:
    namespace, dag_id, dag_run_id = dag
    return replace(
        event, dag_namespace=namespace, dag_id=dag_id, dag_run_id=dag_run_id or event.dag_run_id
    )


async def _with_intervals(session: AsyncSession, events: list[ParsedEvent]) -> list[ParsedEvent]:
    """Events without a nominal interval take their run's, else their parent run's, else their
    DAG run's (a Spark job under an Airflow task reports none), from the batch or from rows
    already stored."""
    missing = [e for e in events if e.nominal_start is None]
    if not missing:
        return events
    known = {e.run_id: (e.nominal_start, e.nominal_end) for e in events if e.nominal_start}
    wanted = sorted(
        {run for e in missing for run in (e.run_id, e.parent_run_id, e.dag_run_id) if run}
        - known.keys()
    )
    for chunk in _chunks(wanted):
        rows = await session.execute(
            select(_TABLE.c.run_id, _TABLE.c.nominal_start, _TABLE.c.nominal_end)
            .where(_TABLE.c.run_id.in_(chunk), _TABLE.c.nominal_start.is_not(None))
            .order_by(_TABLE.c.id)
        )
        for run_id, start, end in rows:
            known.setdefault(run_id, (start, end))

    def interval(event: ParsedEvent) -> tuple[datetime | None, datetime | None] | None:
        if event.nominal_start is not None:
            return None
        for run_id in (event.run_id, event.parent_run_id, event.dag_run_id):
            if run_id is not None and run_id in known:
                return known[run_id]
        return None

    return [
        replace(e, nominal_start=span[0], nominal_end=span[1])
        if (span := interval(e)) is not None
        else e
        for e in events
    ]


async def _with_airflow(session: AsyncSession, events: list[ParsedEvent]) -> list[ParsedEvent]:
    """Events that do not say where in Airflow they ran take it from the runs above them, in the
    batch or stored: the Airflow run id from any event of their DAG run, the task and its try
    from their parent run (a Spark application or a `dbt run` started by a task, and through
    those the jobs under them). An alert showing a Spark or dbt error then links to the log of
    the task that ran it. An event's own DAG run is never given a task: only events with a
    parent run take one."""
    lacks_task = [e for e in events if e.task_id is None and e.parent_run_id]
    lacks_run = [e for e in events if e.airflow_run_id is None and e.dag_run_id]
    if not lacks_task and not lacks_run:
        return events
    by_run: dict[str, list[ParsedEvent]] = {}
    for event in events:
        by_run.setdefault(event.run_id, []).append(event)

    stored_tasks: dict[str, tuple[str, int | None]] = {}
    wanted = sorted({e.parent_run_id for e in lacks_task if e.parent_run_id})
    for chunk in _chunks(wanted):
        found = await session.execute(
            select(_TABLE.c.run_id, _TABLE.c.task_id, _TABLE.c.try_number)
            .where(_TABLE.c.run_id.in_(chunk), _TABLE.c.task_id.is_not(None))
            .order_by(_TABLE.c.id)
        )
        for run_id, task_id, try_number in found:
            stored_tasks.setdefault(run_id, (task_id, try_number))

    airflow_runs = {
        e.dag_run_id: e.airflow_run_id for e in events if e.dag_run_id and e.airflow_run_id
    }
    wanted = sorted({e.dag_run_id for e in lacks_run if e.dag_run_id} - airflow_runs.keys())
    for chunk in _chunks(wanted):
        named = await session.execute(
            select(_TABLE.c.dag_run_id, _TABLE.c.airflow_run_id)
            .where(_TABLE.c.dag_run_id.in_(chunk), _TABLE.c.airflow_run_id.is_not(None))
            .order_by(_TABLE.c.id)
        )
        for dag_run_id, airflow_run_id in named:
            airflow_runs.setdefault(dag_run_id, airflow_run_id)

    tasks: dict[str, tuple[str, int | None] | None] = {}

    def task_of(run_id: str, depth: int) -> tuple[str, int | None] | None:
        """The task a run ran in: its own, else its parent's (a parent in the batch resolves
        first, whatever the order of the batch)."""
        if run_id in tasks:
            return tasks[run_id]
        own = by_run.get(run_id, [])
        found = next(((e.task_id, e.try_number) for e in own if e.task_id is not None), None)
        found = found or stored_tasks.get(run_id)
        parent = next((e.parent_run_id for e in own if e.parent_run_id), None)
        if found is None and parent and parent != run_id and depth < _CHAIN_MAX:
            tasks[run_id] = None  # a cycle of parents ends here
            found = task_of(parent, depth + 1)
        tasks[run_id] = found
        return found

    def placed(event: ParsedEvent) -> ParsedEvent:
        run_id = event.airflow_run_id
        if run_id is None and event.dag_run_id is not None:
            run_id = airflow_runs.get(event.dag_run_id)
        task = (event.task_id, event.try_number)
        if event.task_id is None and event.parent_run_id and event.parent_run_id != event.run_id:
            task = task_of(event.parent_run_id, 0) or task
        return replace(event, airflow_run_id=run_id, task_id=task[0], try_number=task[1])

    return [placed(e) for e in events]


def _chunks(values: list[str]) -> Iterable[list[str]]:
    """Bounded IN lists (bind-parameter limits)."""
    for first in range(0, len(values), _LOOKUP):
        yield values[first : first + _LOOKUP]


async def dag_events_since(session: AsyncSession, since: datetime) -> list[RunEvent]:
    """DAG-level events (a task's events describe part of a run) from `since` on, in the
    order they were stored."""
    rows = await session.scalars(
        select(RunEvent)
        .where(RunEvent.event_time >= since, RunEvent.job_name == RunEvent.dag_id)
        .order_by(RunEvent.id)
    )
    return list(rows)


async def keys_between(
    session: AsyncSession, lo: datetime, hi: datetime
) -> set[tuple[str, str, datetime]]:
    """(run id, event type, event time) of the stored events whose time is in [lo, hi]."""
    rows = await session.execute(
        select(RunEvent.run_id, RunEvent.event_type, RunEvent.event_time).where(
            RunEvent.event_time >= lo, RunEvent.event_time <= hi
        )
    )
    return {(row[0], row[1], row[2]) for row in rows}
