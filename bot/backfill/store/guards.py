"""Guards for work that follows a state without changing it: handing an approved request to
the executor exactly once, and moving a request's thread parent to a new status message."""

from __future__ import annotations

from sqlalchemy import CursorResult, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from bot.backfill.store.models import BackfillRequest
from bot.core.audit import AuditEntry
from bot.core.tables import utcnow

HANDED_OFF = "request.handed_off"


async def hold(session: AsyncSession, request_id: str, *, state: str) -> bool:
    """Lock the request for this transaction if it is in `state` (a conditional UPDATE, so a
    concurrent cancel waits for us, or we see its result)."""
    result = await session.execute(
        update(BackfillRequest)
        .where(BackfillRequest.id == request_id, BackfillRequest.state == state)
        .values(version=BackfillRequest.version + 1, updated_at=utcnow())
        .execution_options(synchronize_session=False)
    )
    assert isinstance(result, CursorResult)
    return result.rowcount == 1


async def was_handed_off(session: AsyncSession, request_id: str) -> bool:
    count = await session.scalar(
        select(func.count())
        .select_from(AuditEntry)
        .where(AuditEntry.request_id == request_id, AuditEntry.action == HANDED_OFF)
    )
    return bool(count)


async def forget_status_message(session: AsyncSession, request_id: str) -> None:
    """The request's thread parent is about to change: replies wait for the new one."""
    await session.execute(
        update(BackfillRequest)
        .where(BackfillRequest.id == request_id)
        .values(status_message_ts=None, updated_at=utcnow())
        .execution_options(synchronize_session=False)
    )
