"""How long each DAG's recent successful runs took (the alert's backfill estimate): from the
lineage index's DAG runs (Marquez's history), else from the run events the watcher stored."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from bot.core.model import DagRef
from bot.events.store.models import RunEvent
from bot.lineage.rules.history import HISTORY_RUNS, durations
from bot.lineage.store.models import LineageRun

_EVENTS = HISTORY_RUNS * 4  # START and COMPLETE of each run, with room for failed ones


async def run_durations(
    session: AsyncSession, dags: Sequence[DagRef]
) -> dict[str, list[timedelta]]:
    """Recent successful run durations of each DAG (by DAG id), from its DAG-level events."""
    found: dict[str, list[timedelta]] = {}
    for dag in dags:
        indexed = await session.execute(
            select(LineageRun.started_at, LineageRun.ended_at)
            .where(
                LineageRun.dag_namespace == dag.namespace,
                LineageRun.dag_id == dag.dag_id,
                LineageRun.state == "COMPLETED",
                LineageRun.started_at.is_not(None),
                LineageRun.ended_at.is_not(None),
            )
            .order_by(LineageRun.ended_at.desc())
            .limit(HISTORY_RUNS)
        )
        took = [end - start for start, end in indexed if start and end and end >= start]
        if took:
            found[dag.dag_id] = took
            continue
        rows = await session.execute(
            select(RunEvent.run_id, RunEvent.event_type, RunEvent.event_time)
            .where(
                RunEvent.dag_namespace == dag.namespace,
                RunEvent.dag_id == dag.dag_id,
                RunEvent.job_name == dag.dag_id,
                RunEvent.event_type.in_(("START", "COMPLETE")),
            )
            .order_by(RunEvent.event_time.desc())
            .limit(_EVENTS)
        )
        found[dag.dag_id] = durations([(r[0], r[1], r[2]) for r in rows])
    return found
