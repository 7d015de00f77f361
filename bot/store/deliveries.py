"""What the bot owes sinks beyond Slack: enqueue in the caller's transaction; the sink sender
takes due rows (in order per sink and incident) and records what happened. Like `outbox`, no
function commits."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import CursorResult, and_, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from bot.store.hub_models import DeliveryState, SinkDelivery, SinkHealth
from bot.store.models import utcnow

REPORT_AFTER = 3  # failed attempts in a row before a sink is told to be failing


async def enqueue(
    session: AsyncSession,
    *,
    sink: str,
    kind: str,
    event_key: str,
    body: Mapping[str, Any],
    incident_id: str | None = None,
    held_until: datetime | None = None,
) -> bool:
    """Owe `sink` this body once; False if it was owed already (the same sink and event).
    `held_until` (quiet hours): not sent before then, and then in one digest."""
    found = await session.scalar(
        select(SinkDelivery.id).where(
            SinkDelivery.sink == sink, SinkDelivery.event_key == event_key
        )
    )
    if found is not None:
        return False
    row = SinkDelivery(
        sink=sink, kind=kind, event_key=event_key, body=dict(body), incident_id=incident_id
    )
    if held_until is not None:
        row.held_until = row.next_attempt_at = held_until
    session.add(row)
    await session.flush()
    return True


async def sinks_told(session: AsyncSession, incident_id: str, key_prefix: str) -> list[str]:
    """The sinks owed (or sent) a row of this incident whose key starts with `key_prefix`."""
    rows = await session.scalars(
        select(SinkDelivery.sink)
        .where(
            SinkDelivery.incident_id == incident_id, SinkDelivery.event_key.startswith(key_prefix)
        )
        .order_by(SinkDelivery.id)
    )
    return list(dict.fromkeys(rows))


async def ensure_health(session: AsyncSession, sinks: list[str]) -> None:
    """A health row per sink, so a failing attempt can lock its row (FOR UPDATE) on PostgreSQL
    instead of two processes racing to insert it."""
    known = set(await session.scalars(select(SinkHealth.sink).where(SinkHealth.sink.in_(sinks))))
    for sink in sinks:
        if sink not in known:
            session.add(SinkHealth(sink=sink, failures=0, reported=False))


async def due(session: AsyncSession, *, now: datetime, limit: int = 50) -> list[SinkDelivery]:
    """Pending rows whose time has come, oldest first, skipping any row behind an older pending
    row of the same sink and incident (it goes when that one has)."""
    older = aliased(SinkDelivery)
    blocked = (
        select(older.id)
        .where(
            older.sink == SinkDelivery.sink,
            older.incident_id == SinkDelivery.incident_id,
            older.state == DeliveryState.PENDING,
            older.id < SinkDelivery.id,
        )
        .exists()
    )
    rows = await session.scalars(
        select(SinkDelivery)
        .where(
            SinkDelivery.state == DeliveryState.PENDING,
            SinkDelivery.next_attempt_at <= now,
            ~and_(SinkDelivery.incident_id.is_not(None), blocked),
        )
        .order_by(SinkDelivery.id)
        .limit(limit)
    )
    return list(rows)


async def claim(session: AsyncSession, row: SinkDelivery, *, lease_s: float) -> bool:
    """Take a due row for `lease_s` seconds; False if another sender took it first."""
    result = await session.execute(
        update(SinkDelivery)
        .where(
            SinkDelivery.id == row.id,
            SinkDelivery.state == DeliveryState.PENDING,
            SinkDelivery.next_attempt_at == row.next_attempt_at,
        )
        .values(next_attempt_at=utcnow() + timedelta(seconds=lease_s))
        .execution_options(synchronize_session=False)
    )
    assert isinstance(result, CursorResult)
    return result.rowcount == 1


async def mark_sent(session: AsyncSession, row_id: int) -> None:
    await session.execute(
        update(SinkDelivery)
        .where(SinkDelivery.id == row_id)
        .values(
            state=DeliveryState.SENT.value,
            attempts=SinkDelivery.attempts + 1,
            sent_at=utcnow(),
            error=None,
        )
    )


async def retry_later(session: AsyncSession, row_id: int, *, at: datetime, error: str) -> None:
    await session.execute(
        update(SinkDelivery)
        .where(SinkDelivery.id == row_id)
        .values(attempts=SinkDelivery.attempts + 1, next_attempt_at=at, error=error[:500])
    )


async def mark_failed(session: AsyncSession, row_id: int, *, error: str) -> None:
    await session.execute(
        update(SinkDelivery)
        .where(SinkDelivery.id == row_id)
        .values(
            state=DeliveryState.FAILED.value, attempts=SinkDelivery.attempts + 1, error=error[:500]
        )
    )


async def attempts_of(session: AsyncSession, row_id: int) -> int:
    return int(
        await session.scalar(select(SinkDelivery.attempts).where(SinkDelivery.id == row_id)) or 0
    )


async def failed_attempt(session: AsyncSession, sink: str, *, error: str, now: datetime) -> bool:
    """Count a failed attempt; True exactly once per failing spell, when it is time to tell
    (after REPORT_AFTER in a row)."""
    health = await session.get(SinkHealth, sink, with_for_update=True)
    if health is None:
        health = SinkHealth(sink=sink, failures=0, reported=False)
        session.add(health)
    health.failures += 1
    health.failing_since = health.failing_since or now
    health.last_error, health.updated_at = error[:500], now
    if health.failures >= REPORT_AFTER and not health.reported:
        health.reported = True
        return True
    return False


async def delivered(session: AsyncSession, sink: str, *, now: datetime) -> bool:
    """A success; True if the sink had been reported failing (time to tell it recovered)."""
    health = await session.get(SinkHealth, sink, with_for_update=True)
    if health is None or health.failures == 0:
        return False
    was_reported = health.reported
    health.failures, health.failing_since, health.reported = 0, None, False
    health.last_error, health.updated_at = None, now
    return was_reported


async def pending_by_sink(session: AsyncSession) -> dict[str, int]:
    rows = await session.execute(
        select(SinkDelivery.sink, func.count())
        .where(SinkDelivery.state == DeliveryState.PENDING)
        .group_by(SinkDelivery.sink)
    )
    return {sink: int(count) for sink, count in rows.all()}


async def failing_sinks(session: AsyncSession) -> set[str]:
    rows = await session.scalars(select(SinkHealth.sink).where(SinkHealth.reported.is_(True)))
    return set(rows)
