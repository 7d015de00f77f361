"""What the bot owes sinks beyond Slack: enqueue in the caller's transaction; the sink sender
takes due rows (in order per sink and incident) and records what happened. Like `outbox`, no
function commits."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, CursorResult, and_, func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from bot.core.after_commit import wake_after_commit
from bot.core.tables import utcnow
from bot.hub.store.models import DeliveryState, SinkDelivery, SinkHealth

REPORT_AFTER = 3  # failed attempts in a row before a sink is told to be failing


OWED = "sinks"
"""The work a delivery row owes: the sink sender registers for it (`wake_on_commit`)."""


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
    wake_after_commit(session, OWED)
    return True


async def release(session: AsyncSession, sink: str, event_key: str) -> bool:
    """Send a row held for quiet hours now (its event turned out urgent); False if none was."""
    result = await session.execute(
        update(SinkDelivery)
        .where(
            SinkDelivery.sink == sink,
            SinkDelivery.event_key == event_key,
            SinkDelivery.state == DeliveryState.PENDING,
            SinkDelivery.held_until.is_not(None),
        )
        .values(held_until=None, next_attempt_at=utcnow())
        .execution_options(synchronize_session=False)
    )
    assert isinstance(result, CursorResult)
    if result.rowcount != 1:
        return False
    wake_after_commit(session, OWED)
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


DIGEST_NOTE = "in digest "
"""A held row put in a digest: `sent`, its `error` this and the digest's event key."""


def _behind_a_pending_digest() -> ColumnElement[bool]:
    """`SinkDelivery` (a row of an incident) follows a row of its sink and incident that is in
    a digest not sent yet: it waits for the digest (which has no incident of its own)."""
    held, digest = aliased(SinkDelivery), aliased(SinkDelivery)
    return (
        select(held.id)
        .join(
            digest,
            and_(
                digest.sink == held.sink,
                # the key from the note: the digest is found by its unique (sink, event_key)
                digest.event_key == func.substr(held.error, len(DIGEST_NOTE) + 1),
            ),
        )
        .where(
            held.sink == SinkDelivery.sink,
            held.incident_id == SinkDelivery.incident_id,
            held.id < SinkDelivery.id,
            held.state == DeliveryState.SENT,
            held.held_until.is_not(None),
            held.error.startswith(DIGEST_NOTE),
            digest.state == DeliveryState.PENDING,
        )
        .exists()
    )


async def due(session: AsyncSession, *, now: datetime, limit: int = 50) -> list[SinkDelivery]:
    """Pending rows whose time has come, oldest first, skipping any row behind an older pending
    row of the same sink and incident (it goes when that one has). A held row (quiet hours) is
    pending until it is put in a digest (`form_digest`), and the digest is pending until sent:
    a later row of its incident waits for both."""
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
            ~and_(
                SinkDelivery.incident_id.is_not(None),
                or_(blocked, _behind_a_pending_digest()),
            ),
        )
        .order_by(SinkDelivery.id)
        .limit(limit)
    )
    return list(rows)


async def held_over(
    session: AsyncSession, *, now: datetime, kinds: Collection[str]
) -> list[SinkDelivery]:
    """Held rows (quiet hours) of sinks of `kinds` whose time has come, oldest first: what the
    sender puts in digests. A row behind an older pending row of its sink and incident waits,
    unless that one is held and over too (it goes in the same digest, before it); so a page
    that is still being retried is never overtaken by the digest of what followed it, nor a
    digest still being retried by the next one."""
    older = aliased(SinkDelivery)
    behind = (
        select(older.id)
        .where(
            older.sink == SinkDelivery.sink,
            older.incident_id == SinkDelivery.incident_id,
            older.state == DeliveryState.PENDING,
            older.id < SinkDelivery.id,
            or_(
                older.held_until.is_(None),
                older.next_attempt_at > now,
                older.kind.not_in(list(kinds)),
            ),
        )
        .exists()
    )
    blocked = or_(behind, _behind_a_pending_digest())
    rows = await session.scalars(
        select(SinkDelivery)
        .where(
            SinkDelivery.state == DeliveryState.PENDING,
            SinkDelivery.held_until.is_not(None),
            SinkDelivery.next_attempt_at <= now,
            SinkDelivery.kind.in_(list(kinds)),
            ~and_(SinkDelivery.incident_id.is_not(None), blocked),
        )
        .order_by(SinkDelivery.id)
    )
    return list(rows)


class TakenMeanwhile(Exception):
    """Another sender put some of these held rows in its own digest first."""


async def form_digest(
    session: AsyncSession,
    rows: Sequence[SinkDelivery],
    *,
    body: Callable[[list[dict[str, Any]]], dict[str, Any]],
    now: datetime,
) -> SinkDelivery:
    """Put held `rows` (one sink and kind, oldest first, from `held_over`) in one new row due
    at `now`, whose body is `body(their bodies)`, and record them as sent into it (`sent`,
    `sent_at` now, `error` naming the digest); it is delivered like any other row. Raises
    `TakenMeanwhile` when any of them is no longer pending and held over: the caller's
    transaction must then roll back. This must be the transaction's first statement: a
    conditional UPDATE that takes the rows (on SQLite it waits for a competing writer, on
    PostgreSQL for their row locks, and then sees what that one did)."""
    if not rows:
        raise ValueError("a digest needs at least one held row")
    first, last = rows[0], rows[-1]
    key = f"digest:{first.id}-{last.id}"
    ids = [row.id for row in rows]
    result = await session.execute(
        update(SinkDelivery)
        .where(
            SinkDelivery.id.in_(ids),
            SinkDelivery.sink == first.sink,
            SinkDelivery.state == DeliveryState.PENDING,
            SinkDelivery.held_until.is_not(None),
            # a row an older sender claimed on its own has a lease beyond `now`
            SinkDelivery.next_attempt_at <= now,
        )
        .values(state=DeliveryState.SENT.value, sent_at=now, error=DIGEST_NOTE + key)
        .execution_options(synchronize_session=False)
    )
    assert isinstance(result, CursorResult)
    if result.rowcount != len(ids):
        raise TakenMeanwhile(key)
    digest = SinkDelivery(
        sink=first.sink,
        kind=first.kind,
        event_key=key,
        body=body([dict(row.body) for row in rows]),
        incident_id=None,
        next_attempt_at=now,
    )
    session.add(digest)
    await session.flush()
    return digest


async def claim(
    session: AsyncSession, row: SinkDelivery, *, lease_s: float, now: datetime | None = None
) -> bool:
    """Take a due row for `lease_s` seconds from `now` (the sender's clock; this machine's if
    None); False if another sender took it first."""
    result = await session.execute(
        update(SinkDelivery)
        .where(
            SinkDelivery.id == row.id,
            SinkDelivery.state == DeliveryState.PENDING,
            SinkDelivery.next_attempt_at == row.next_attempt_at,
        )
        .values(next_attempt_at=(now or utcnow()) + timedelta(seconds=lease_s))
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
