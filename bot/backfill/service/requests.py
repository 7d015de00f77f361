"""What other capabilities read of backfill requests, in their own transaction: a request,
its state, the ones under way. The store's queries stay the backfill's."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from bot.backfill.rules.states import ACTIVE
from bot.backfill.store import repository
from bot.backfill.store.models import BackfillRequest


async def get(session: AsyncSession, request_id: str) -> BackfillRequest | None:
    """The request as the database has it now (None: there is none)."""
    try:
        return await repository.get_request(session, request_id)
    except repository.RequestNotFound:
        return None


async def state_of(session: AsyncSession, request_id: str | None) -> str | None:
    """A request's state (None for no request, or one that is gone)."""
    return await repository.request_state(session, request_id)


async def under_way(session: AsyncSession, *, limit: int = 500) -> list[BackfillRequest]:
    """Approved and running requests, newest first."""
    return await repository.in_states(session, ACTIVE, limit=limit)
