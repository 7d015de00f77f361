"""The outbox API: enqueue a Slack message in the caller's transaction; the sender takes due
messages in order and records what happened. Like `repository`, every function works inside the
caller's transaction and never commits."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, CursorResult, and_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from bot.core.after_commit import wake_after_commit
from bot.core.tables import utcnow
from bot.slack.store.models import OutboxMessage, OutboxRole, OutboxState

OWED = "slack"
"""The work an outbox row owes: the Slack sender registers for it (`wake_on_commit`)."""


async def enqueue(
    session: AsyncSession,
    *,
    channel: str,
    payload: Mapping[str, Any],
    method: str = "chat.postMessage",
    role: OutboxRole = OutboxRole.PLAIN,
    request_id: str | None = None,
    user: str | None = None,
    incident_id: str | None = None,
    edit_key: str | None = None,
    gather_s: float = 0.0,
) -> OutboxMessage:
    """Owe Slack one message. `payload` holds the method's arguments besides channel/ts/user.

    Rows of one parent (request or incident) with the same `edit_key` are one Slack message:
    the first posts it, each later one edits it in place with its own (newest) content.
    A row with `gather_s` waits that long before it is due, so that what comes soon after it
    (see `absorb`) goes out with it as one call; it does not hold its channel meanwhile.
    """
    parented = (OutboxRole.STATUS, OutboxRole.THREAD, OutboxRole.STATUS_UPDATE)
    if role in parented and not (request_id or incident_id):
        raise ValueError(f"an outbox message with role {role} needs a request_id or incident_id")
    if method == "chat.postEphemeral" and not user:
        raise ValueError("an ephemeral message needs the user who sees it")
    if edit_key is not None:
        # The key is scoped by the parent; a status message already has its own edit path.
        if not (request_id or incident_id):
            raise ValueError("an outbox message with an edit_key needs a request_id or incident_id")
        if method != "chat.postMessage" or role not in (OutboxRole.PLAIN, OutboxRole.THREAD):
            raise ValueError("only posted PLAIN or THREAD messages can carry an edit_key")
    message = OutboxMessage(
        channel=channel,
        payload=dict(payload),
        method=method,
        role=role.value,
        request_id=request_id,
        incident_id=incident_id,
        user=user,
        edit_key=edit_key,
    )
    if gather_s > 0:
        message.next_attempt_at = utcnow() + timedelta(seconds=gather_s)
        message.error = GATHERING
    session.add(message)
    await session.flush()
    wake_after_commit(session, OWED)
    return message


WAITING_FOR_PARENT = "waiting for the status message"
WAITING_FOR_FIRST_POST = "waiting for the first post of its edit key"
GATHERING = "gathering what comes soon after it"
_WAITS = (WAITING_FOR_PARENT, WAITING_FOR_FIRST_POST, GATHERING)


async def absorb(session: AsyncSession, *, incident_id: str, payload: Mapping[str, Any]) -> bool:
    """Give the incident's alert row that is still gathering (its post, else its edit) this
    newer content, so a burst of changes is one Slack call. False when there is none: it went,
    or a sender has claimed it (a claim clears `error`), and the caller owes an edit instead.

    The row's due time moves by a millisecond, so a sender holding the row as it was read
    before this update fails to claim it and reads it again."""
    row = (
        await session.execute(
            select(OutboxMessage.id, OutboxMessage.next_attempt_at)
            .where(
                OutboxMessage.incident_id == incident_id,
                OutboxMessage.role.in_((OutboxRole.STATUS, OutboxRole.STATUS_UPDATE)),
                OutboxMessage.state == OutboxState.PENDING,
                OutboxMessage.error == GATHERING,
            )
            .order_by(OutboxMessage.id.desc())
            .limit(1)
        )
    ).one_or_none()
    if row is None:
        return False
    result = await session.execute(
        update(OutboxMessage)
        .where(
            OutboxMessage.id == row[0],
            OutboxMessage.state == OutboxState.PENDING,
            OutboxMessage.error == GATHERING,
            OutboxMessage.next_attempt_at == row[1],
        )
        .values(
            payload=dict(payload),
            next_attempt_at=row[1] + timedelta(milliseconds=1),
            updated_at=utcnow(),
        )
        .execution_options(synchronize_session=False)
    )
    assert isinstance(result, CursorResult)
    return result.rowcount == 1


async def due(session: AsyncSession, *, now: datetime, limit: int = 50) -> list[OutboxMessage]:
    """Pending messages whose time has come, oldest first (Slack shows them in that order).

    A channel whose oldest pending message is not due yet (waiting out a Retry-After, or leased
    by a sender that may have died mid-post) gives nothing: its later messages must not
    overtake it. Rows waiting for their thread's parent, or for the first post their edit key
    edits, do not hold the channel, since what they wait for may come after them.
    """
    rows = await session.scalars(
        select(OutboxMessage)
        .where(OutboxMessage.state == OutboxState.PENDING)
        .order_by(OutboxMessage.id)
        .limit(limit * 4)
    )
    held: set[str] = set()
    found: list[OutboxMessage] = []
    for row in rows:
        if row.channel in held:
            continue
        if row.next_attempt_at > now:
            if row.error not in _WAITS:
                held.add(row.channel)
            continue
        found.append(row)
        if len(found) == limit:
            break
    return found


async def superseded(session: AsyncSession, message: OutboxMessage) -> bool:
    """Whether a later row owes the same Slack message's newer content, so this one is stale:
    a later edit of the same status message, or a later row of the same edit key, pending or
    already sent (an edit made at once overtakes an older one still gathering). The row that
    posts a key's message is never stale (there would be nothing to edit)."""
    if message.edit_key is not None:
        if not await _key_started(session, message):
            return False
        same = OutboxMessage.edit_key == message.edit_key
    elif message.role == OutboxRole.STATUS_UPDATE:
        same = OutboxMessage.role == OutboxRole.STATUS_UPDATE
    else:
        return False
    newer = await session.scalar(
        select(OutboxMessage.id)
        .where(
            _same_parent(message),
            same,
            OutboxMessage.state.in_((OutboxState.PENDING, OutboxState.SENT)),
            OutboxMessage.id > message.id,
        )
        .limit(1)
    )
    return newer is not None


def _same_key_before(message: OutboxMessage) -> ColumnElement[bool]:
    return and_(
        _same_parent(message),
        OutboxMessage.edit_key == message.edit_key,
        OutboxMessage.id < message.id,
    )


async def _key_started(session: AsyncSession, message: OutboxMessage) -> bool:
    """Whether an earlier row of the key posted its message or may still post it."""
    return await first_post_pending(session, message) or (
        await key_message(session, message) is not None
    )


async def key_message(session: AsyncSession, message: OutboxMessage) -> tuple[str, str] | None:
    """(channel, ts) of the Slack message this row's edit key names, once an earlier row of
    the key posted it (None before). Edits record the same ts, superseded rows none."""
    row = (
        await session.execute(
            select(OutboxMessage.channel, OutboxMessage.posted_ts)
            .where(
                _same_key_before(message),
                OutboxMessage.state == OutboxState.SENT,
                OutboxMessage.posted_ts.is_not(None),
            )
            .order_by(OutboxMessage.id)
            .limit(1)
        )
    ).one_or_none()
    if row is None or row[1] is None:
        return None
    return row[0], row[1]


async def first_post_pending(session: AsyncSession, message: OutboxMessage) -> bool:
    """Whether an earlier row of this row's edit key is still pending: the key's message may
    be on its way, so this row must wait rather than post a second one."""
    earlier = await session.scalar(
        select(OutboxMessage.id)
        .where(_same_key_before(message), OutboxMessage.state == OutboxState.PENDING)
        .limit(1)
    )
    return earlier is not None


def _same_parent(message: OutboxMessage) -> ColumnElement[bool]:
    if message.incident_id:
        return OutboxMessage.incident_id == message.incident_id
    return OutboxMessage.request_id == message.request_id


async def posted_payload(session: AsyncSession, channel: str, ts: str) -> dict[str, Any] | None:
    """What the bot posted as the message `ts` of `channel` (None if it posted no such one)."""
    payload = await session.scalar(
        select(OutboxMessage.payload)
        .where(
            OutboxMessage.channel == channel,
            OutboxMessage.posted_ts == ts,
            OutboxMessage.method == "chat.postMessage",
            OutboxMessage.state == OutboxState.SENT,
        )
        .order_by(OutboxMessage.id)
        .limit(1)
    )
    return dict(payload) if payload is not None else None


async def parent_post_state(session: AsyncSession, message: OutboxMessage) -> str | None:
    """State of the latest row that posts this row's parent (None if it never had one)."""
    return await session.scalar(
        select(OutboxMessage.state)
        .where(_same_parent(message), OutboxMessage.role == OutboxRole.STATUS)
        .order_by(OutboxMessage.id.desc())
        .limit(1)
    )


async def claim(session: AsyncSession, message: OutboxMessage, *, lease_s: float) -> bool:
    """Take a due message for `lease_s` seconds; False if another sender took it first."""
    now = utcnow()
    result = await session.execute(
        update(OutboxMessage)
        .where(
            OutboxMessage.id == message.id,
            OutboxMessage.state == OutboxState.PENDING,
            OutboxMessage.next_attempt_at == message.next_attempt_at,
        )
        # The error of a claimed row is stale; "waiting for the parent" must not let later
        # messages overtake it while it is being sent.
        # Until the send is recorded, the row may be in Slack: a sender that finds it again
        # (this one died, its lease ended) looks for it there before posting it.
        .values(
            next_attempt_at=now + timedelta(seconds=lease_s),
            updated_at=now,
            error=None,
            in_doubt=True,
        )
        .execution_options(synchronize_session=False)
    )
    assert isinstance(result, CursorResult)
    return result.rowcount == 1


async def mark_sent(
    session: AsyncSession, message: OutboxMessage, *, ts: str | None, channel: str | None = None
) -> None:
    """Record delivery (a parent's own message is recorded by its owner too: `Parents.record`,
    in the same transaction). `channel`:
    where Slack says it posted, when that is not the row's (a DM posted to by user id is its
    D… conversation: later edits, and the check of a click on it, need that id)."""
    now = utcnow()
    values: dict[str, Any] = {
        "state": OutboxState.SENT.value, "posted_ts": ts, "updated_at": now, "error": None,
        "in_doubt": False,
    }  # fmt: skip
    if channel and channel != message.channel:
        values["channel"] = channel
        message.channel = channel
    await session.execute(
        update(OutboxMessage).where(OutboxMessage.id == message.id).values(**values)
    )


async def wait(
    session: AsyncSession,
    message: OutboxMessage,
    *,
    at: datetime,
    reason: str,
    in_doubt: bool = False,
) -> None:
    """Put the row back until `at` without counting an attempt: it waits for another row (its
    thread's parent, its key's first post), which will be sent or give up on its own.
    `in_doubt`: whether an earlier attempt may have posted it (nothing was sent this time)."""
    await session.execute(
        update(OutboxMessage)
        .where(OutboxMessage.id == message.id)
        .values(next_attempt_at=at, error=reason, updated_at=utcnow(), in_doubt=in_doubt)
    )


async def release(session: AsyncSession, message: OutboxMessage) -> None:
    """Give a claimed row back, due at once and known not to be in Slack: the message an
    earlier attempt posted, found and adopted, did not carry it."""
    await session.execute(
        update(OutboxMessage)
        .where(OutboxMessage.id == message.id)
        .values(next_attempt_at=utcnow(), error=None, updated_at=utcnow(), in_doubt=False)
    )


async def retry_later(
    session: AsyncSession,
    message: OutboxMessage,
    *,
    at: datetime,
    error: str,
    in_doubt: bool = False,
    counted: bool = True,
) -> None:
    """Try again at `at`, counting a failed attempt unless `counted` is false (a rate limit).
    `in_doubt`: whether Slack may have posted it anyway (no answer, or an edge's), so the
    next attempt looks for it first."""
    await session.execute(
        update(OutboxMessage)
        .where(OutboxMessage.id == message.id)
        .values(
            attempts=OutboxMessage.attempts + (1 if counted else 0),
            next_attempt_at=at,
            error=error[:500],
            updated_at=utcnow(),
            in_doubt=in_doubt,
        )
    )


async def mark_failed(session: AsyncSession, message: OutboxMessage, *, error: str) -> None:
    await session.execute(
        update(OutboxMessage)
        .where(OutboxMessage.id == message.id)
        .values(
            state=OutboxState.FAILED.value,
            attempts=OutboxMessage.attempts + 1,
            error=error[:500],
            updated_at=utcnow(),
        )
    )


async def pending_count(session: AsyncSession) -> int:
    rows = await session.scalars(
        select(OutboxMessage.id).where(OutboxMessage.state == OutboxState.PENDING)
    )
    return len(list(rows))
