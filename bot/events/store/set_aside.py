"""Run events the watcher failed to handle: counted per try, set aside after the last one
(kept, not dropped), listed, and put back to be handled again. Like `repository`, every
function works inside the caller's transaction and never commits."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import CursorResult, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from bot.events.store.models import RunEvent

FAILURE_MAX = 500  # run_events.failure


async def record_failure(
    session: AsyncSession, row_id: int, reason: str, *, now: datetime, max_tries: int
) -> RunEvent | None:
    """Count a failed try at handling the row and keep why; on the `max_tries`-th, set it
    aside (handled no more until retried) and return it, else None."""
    row = await session.get(RunEvent, row_id, with_for_update=True)
    if row is None or row.processed_at is not None:
        return None  # handled meanwhile (another process), or set aside already
    row.attempts += 1
    row.failure = reason[:FAILURE_MAX]
    if row.attempts < max_tries:
        return None
    row.processed_at = row.set_aside_at = now
    await session.flush()
    return row


async def listed(session: AsyncSession, *, limit: int = 100) -> list[RunEvent]:
    """Rows set aside, oldest first."""
    rows = await session.scalars(
        select(RunEvent)
        .where(RunEvent.set_aside_at.is_not(None))
        .order_by(RunEvent.id)
        .limit(limit)
    )
    return list(rows)


async def count(session: AsyncSession) -> int:
    found = await session.scalar(
        select(func.count()).select_from(RunEvent).where(RunEvent.set_aside_at.is_not(None))
    )
    return int(found or 0)


async def retry(session: AsyncSession, ids: Sequence[int] | None = None) -> int:
    """Put rows set aside (all, or those of `ids`) back to be handled, with fresh tries;
    returns how many."""
    query = update(RunEvent).where(RunEvent.set_aside_at.is_not(None))
    if ids is not None:
        query = query.where(RunEvent.id.in_(list(ids)))
    result = await session.execute(
        query.values(
            processed_at=None, set_aside_at=None, attempts=0, failure=None
        ).execution_options(synchronize_session=False)
    )
    assert isinstance(result, CursorResult)
    return result.rowcount
