"""`/backfill subscribe`'s rows: channels and DMs subscribed to DAGs' events. Like the other
store modules, every function works in the caller's transaction and never commits. Rows are
never deleted: `remove` stamps `removed_by` / `removed_at`, for the audit trail."""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from datetime import datetime

from sqlalchemy import CursorResult, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from bot.config.hub import EVENT_CLASSES, EventClass
from bot.core.tables import utcnow
from bot.hub.rules.routing import Subscription as Routed
from bot.hub.store.models import Subscription

_ID_TRIES = 20


def routed(row: Subscription) -> Routed:
    """The row as routing reads it (event classes it does not know are ignored)."""
    events: frozenset[EventClass] = frozenset(e for e in row.events if e in EVENT_CLASSES)
    return Routed(row.id, row.channel, row.pattern, events, bool(row.downstream))


async def active(session: AsyncSession) -> list[Routed]:
    """Every subscription not removed, oldest first."""
    rows = await session.scalars(
        select(Subscription)
        .where(Subscription.removed_at.is_(None))
        .order_by(Subscription.created_at, Subscription.id)
    )
    return [routed(row) for row in rows]


async def of_channel(session: AsyncSession, channel: str) -> list[Subscription]:
    """The channel's (or DM's) subscriptions not removed, oldest first."""
    rows = await session.scalars(
        select(Subscription)
        .where(Subscription.channel == channel, Subscription.removed_at.is_(None))
        .order_by(Subscription.created_at, Subscription.id)
    )
    return list(rows)


async def count_active(session: AsyncSession, channel: str) -> int:
    """How many subscriptions of the channel are not removed."""
    count = await session.scalar(
        select(func.count())
        .select_from(Subscription)
        .where(Subscription.channel == channel, Subscription.removed_at.is_(None))
    )
    return int(count or 0)


def _ordered(events: Iterable[str]) -> list[str]:
    wanted = set(events)
    return [e for e in EVENT_CLASSES if e in wanted] + sorted(wanted - set(EVENT_CLASSES))


async def find_same(
    session: AsyncSession,
    *,
    channel: str,
    pattern: str,
    events: Iterable[str],
    downstream: bool,
) -> Subscription | None:
    """The channel's active subscription with this pattern, event classes (in any order) and
    `downstream`, if there is one."""
    wanted = set(events)
    for row in await of_channel(session, channel):
        same = row.pattern == pattern and bool(row.downstream) == downstream
        if same and set(row.events) == wanted:
            return row
    return None


async def get(session: AsyncSession, subscription_id: str) -> Subscription | None:
    """The subscription with this id, removed or not."""
    return await session.get(Subscription, subscription_id)


async def _new_id(session: AsyncSession) -> str:
    for _ in range(_ID_TRIES):
        candidate = secrets.token_hex(4)
        if await session.get(Subscription, candidate) is None:
            return candidate
    raise RuntimeError("no free subscription id after many tries")  # 4 billion ids


async def add(
    session: AsyncSession,
    *,
    channel: str,
    pattern: str,
    events: Iterable[str],
    downstream: bool,
    created_by: str,
    at: datetime | None = None,
) -> Subscription:
    """A new subscription of `channel` (a channel id, or a user id for their DM with the bot),
    with a fresh 8-hex-character id; event classes stored in `EVENT_CLASSES` order."""
    row = Subscription(
        id=await _new_id(session),
        channel=channel,
        pattern=pattern,
        events=_ordered(events),
        downstream=downstream,
        created_by=created_by,
        created_at=at or utcnow(),
    )
    session.add(row)
    await session.flush()
    return row


async def remove(
    session: AsyncSession, subscription_id: str, *, by: str, at: datetime | None = None
) -> bool:
    """Mark the subscription removed by `by`; False if it was removed already (or is unknown).
    One conditional UPDATE, so two removals at once record one."""
    result = await session.execute(
        update(Subscription)
        .where(Subscription.id == subscription_id, Subscription.removed_at.is_(None))
        .values(removed_by=by, removed_at=at or utcnow())
        .execution_options(synchronize_session=False)
    )
    assert isinstance(result, CursorResult)
    return result.rowcount == 1
