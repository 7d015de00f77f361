"""`/backfill subscribe`'s rows: channels and DMs subscribed to DAGs' events. Like the other
store modules, every function works in the caller's transaction and never commits."""

from __future__ import annotations

from typing import cast

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from bot.config_hub import EVENT_CLASSES, EventClass
from bot.domain.routing import Subscription as Routed
from bot.store.hub_models import Subscription


def routed(row: Subscription) -> Routed:
    """The row as routing reads it (event classes it does not know are ignored)."""
    events = frozenset(cast(EventClass, e) for e in row.events if e in EVENT_CLASSES)
    return Routed(row.id, row.channel, row.pattern, events, bool(row.downstream))


async def active(session: AsyncSession) -> list[Routed]:
    """Every subscription not removed, oldest first."""
    rows = await session.scalars(
        select(Subscription)
        .where(Subscription.removed_at.is_(None))
        .order_by(Subscription.created_at, Subscription.id)
    )
    return [routed(row) for row in rows]
