"""Store operations of the step runner: which requests need attention, step bookkeeping that is
not a state change, what a request has reported and what it still owes (progress lines gathered
for the next report), and the one-backfill-per-DAG rule.

Like `repository`, every function works inside the caller's transaction and never commits.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import and_, or_, select, text, update
from sqlalchemy.ext.asyncio import AsyncSession

from bot.backfill.rules.states import ACTIVE, FOLLOWED, STEP_FINAL, RequestState
from bot.backfill.store.models import BackfillRequest, BackfillStep
from bot.core.model import Interval
from bot.core.tables import utcnow
from bot.lineage.rules.planner import interval_from_json

_MESSAGE = 1000


OWED = "backfill-work"
"""The work a backfill handed to the runner (or cancelled) owes: the runner registers for it
(`wake_on_commit`); `Runner.start` and `Runner.cancel` owe it in the hand-off's transaction."""


async def requests_to_follow(session: AsyncSession, *, limit: int = 500) -> list[str]:
    """Running requests, and cancelled ones whose started work has not wound down yet."""
    rows = await session.scalars(
        select(BackfillRequest.id)
        .where(
            or_(
                BackfillRequest.state.in_(FOLLOWED),
                and_(
                    BackfillRequest.state == RequestState.CANCELLED,
                    BackfillRequest.started_at.is_not(None),
                    BackfillRequest.finished_at.is_(None),
                ),
            )
        )
        .order_by(BackfillRequest.created_at)
        .limit(limit)
    )
    return list(rows)


async def mark_started(session: AsyncSession, request_id: str, *, at: datetime) -> None:
    await session.execute(
        update(BackfillRequest)
        .where(BackfillRequest.id == request_id, BackfillRequest.started_at.is_(None))
        .values(started_at=at)
        .execution_options(synchronize_session=False)
    )


async def mark_finished(session: AsyncSession, request_id: str, *, at: datetime) -> bool:
    """Record the end once; False when another worker already did (it owes the summary)."""
    result = await session.execute(
        update(BackfillRequest)
        .where(BackfillRequest.id == request_id, BackfillRequest.finished_at.is_(None))
        .values(finished_at=at, updated_at=at)
        .execution_options(synchronize_session=False)
    )
    return bool(getattr(result, "rowcount", 0))


async def note_step(
    session: AsyncSession,
    step_id: str,
    *,
    executor_state: Mapping[str, Any] | None = None,
    counts: Mapping[str, Any] | None = None,
    message: str | None = None,
    handle: str | None = None,
    clear_message: bool = False,
) -> None:
    """Write what the executor reported about a step without changing its state."""
    values: dict[str, Any] = {"updated_at": utcnow()}
    if executor_state is not None:
        values["executor_state"] = dict(executor_state)
    if counts is not None:
        values["counts"] = dict(counts)
    if message is not None:
        values["message"] = message[:_MESSAGE]
    elif clear_message:
        values["message"] = None
    if handle is not None:
        values["executor_handle"] = handle[:512]
    await session.execute(
        update(BackfillStep)
        .where(BackfillStep.id == step_id)
        .values(values)
        .execution_options(synchronize_session=False)
    )


@dataclass(frozen=True)
class Reported:
    """Where a request's progress reports stand."""

    digest: str | None
    """Of the status message as last sent (None: never edited by the runner)."""
    at: datetime | None
    """When the last report (an edit or a batch of lines) was owed."""
    lines: tuple[str, ...]
    """Thread lines gathered since, not posted yet."""


async def lock_reported(session: AsyncSession, request_id: str) -> Reported:
    """Read the request's report state and lock its row until the transaction ends: two passes
    over one request (two bot processes) must not both append to the lines they read."""
    row = (
        await session.execute(
            select(
                BackfillRequest.progress_digest,
                BackfillRequest.progress_posted_at,
                BackfillRequest.pending_lines,
            )
            .where(BackfillRequest.id == request_id)
            .with_for_update()
        )
    ).one()
    return Reported(row[0], row[1], tuple(row[2] or ()))


async def keep_lines(session: AsyncSession, request_id: str, lines: Iterable[str]) -> None:
    """Store the lines owed to the thread until the next report (they survive a restart)."""
    await session.execute(
        update(BackfillRequest)
        .where(BackfillRequest.id == request_id)
        .values(pending_lines=list(lines) or None)
        .execution_options(synchronize_session=False)
    )


async def progress_posted(
    session: AsyncSession, request_id: str, *, digest: str | None, at: datetime
) -> None:
    """A report was owed at `at` (its rows are in the outbox): the gathered lines went with it;
    `digest` is the status message it sent (None: the status was not edited)."""
    values: dict[str, Any] = {"progress_posted_at": at, "pending_lines": None}
    if digest is not None:
        values["progress_digest"] = digest
    await session.execute(
        update(BackfillRequest)
        .where(BackfillRequest.id == request_id)
        .values(values)
        .execution_options(synchronize_session=False)
    )


async def lock_dags(session: AsyncSession, dag_ids: Iterable[str]) -> None:
    """Serialize, until this transaction ends, decisions about backfills of these DAGs.

    PostgreSQL: transaction-level advisory locks, taken in a fixed order (no deadlock). SQLite
    allows one writer at a time, and the caller's first UPDATE already waits for it.
    """
    if session.get_bind().dialect.name != "postgresql":
        return
    for dag_id in sorted(set(dag_ids)):
        await session.execute(
            text("SELECT pg_advisory_xact_lock(hashtext(:key))"), {"key": f"backfill:{dag_id}"}
        )


@dataclass(frozen=True)
class Overlap:
    request_id: str
    dag_id: str
    state: str


async def overlapping(
    session: AsyncSession,
    wanted: Iterable[tuple[str, str, Iterable[Interval]]],
    *,
    exclude: str | None = None,
) -> list[Overlap]:
    """Backfills under way (approved, scheduled, running or paused) that would rerun an interval
    of the same DAG.

    `wanted` holds (namespace, dag_id, intervals). Two backfills of one DAG over overlapping
    intervals would race on the same partitions, and Airflow refuses the second one anyway.
    """
    want = {(ns, dag): list(ivs) for ns, dag, ivs in wanted}
    if not want:
        return []
    stmt = (
        select(BackfillStep, BackfillRequest.state)
        .join(BackfillRequest, BackfillRequest.id == BackfillStep.request_id)
        .where(
            BackfillRequest.state.in_(ACTIVE),
            BackfillStep.dag_id.in_(sorted({dag for _, dag in want})),
            BackfillStep.state.not_in(STEP_FINAL),  # what will still run
        )
    )
    if exclude:
        stmt = stmt.where(BackfillRequest.id != exclude)
    found: list[Overlap] = []
    for step, state in (await session.execute(stmt)).all():
        mine = want.get((step.namespace, step.dag_id))
        if mine is None:
            continue
        theirs = [interval_from_json(raw) for raw in step.intervals]
        if any(a.overlaps(b) for a in mine for b in theirs):
            found.append(Overlap(step.request_id, step.dag_id, state))
    return found
