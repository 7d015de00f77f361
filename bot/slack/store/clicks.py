"""Clicks recorded before their ack (`bot.slack.store.models.ReceivedClick`): written, marked
handled, and taken for a replay once their grace has passed. Each function commits nothing:
the caller's transaction does."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import CursorResult, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from bot.core.tables import utcnow
from bot.slack.store.models import ClickState, ReceivedClick


async def record(
    session: AsyncSession, *, action_id: str, user: str, payload: dict[str, Any], grace_s: float
) -> int:
    row = ReceivedClick(
        action_id=action_id[:255],
        user=user[:64],
        payload=payload,
        next_attempt_at=utcnow() + timedelta(seconds=grace_s),
    )
    session.add(row)
    await session.flush()
    return row.id


async def mark_handled(session: AsyncSession, click_id: int) -> None:
    await session.execute(
        update(ReceivedClick)
        .where(ReceivedClick.id == click_id, ReceivedClick.state == ClickState.RECEIVED)
        .values(state=ClickState.HANDLED.value, handled_at=utcnow())
    )


async def due(session: AsyncSession, *, now: datetime, limit: int = 20) -> list[ReceivedClick]:
    """Clicks still not handled once their grace (or a replay's lease) is over, oldest first."""
    rows = await session.scalars(
        select(ReceivedClick)
        .where(ReceivedClick.state == ClickState.RECEIVED, ReceivedClick.next_attempt_at <= now)
        .order_by(ReceivedClick.id)
        .limit(limit)
    )
    return list(rows)


async def claim(
    session: AsyncSession, click: ReceivedClick, *, lease_s: float, attempts: int
) -> bool:
    """Take `click` for one replay (False: another process took it first). The last allowed
    attempt marks it failed instead: a click whose replay kills the bot each time stops."""
    now = utcnow()
    values: dict[str, Any] = {
        "attempts": ReceivedClick.attempts + 1,
        "next_attempt_at": now + timedelta(seconds=lease_s),
    }
    if click.attempts + 1 > attempts:
        values = {"state": ClickState.FAILED.value, "handled_at": now}
    result = await session.execute(
        update(ReceivedClick)
        .where(
            ReceivedClick.id == click.id,
            ReceivedClick.state == ClickState.RECEIVED,
            ReceivedClick.next_attempt_at == click.next_attempt_at,
        )
        .values(**values)
        .execution_options(synchronize_session=False)
    )
    assert isinstance(result, CursorResult)
    return result.rowcount == 1 and click.attempts + 1 <= attempts
