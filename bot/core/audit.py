"""The audit log: who did what, and when, in the caller's transaction. Every capability writes
it (a backfill's transitions, an alert's clicks, a subscription added, a refusal and why)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import JSON, ForeignKey, Index, Integer, String, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Mapped, mapped_column

from bot.core.tables import Base, UTCDateTime, utcnow


class AuditEntry(Base):
    """Who did what to which request, and when. Kept when the request is deleted."""

    __tablename__ = "audit_log"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    actor: Mapped[str] = mapped_column(String(64))
    action: Mapped[str] = mapped_column(String(64))
    request_id: Mapped[str | None] = mapped_column(
        String(32), ForeignKey("backfill_requests.id", ondelete="SET NULL")
    )
    detail: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)

    __table_args__ = (
        Index("ix_audit_log_request_id_at", "request_id", "at"),
        Index("ix_audit_log_at", "at"),
    )


async def add_audit(
    session: AsyncSession,
    *,
    actor: str,
    action: str,
    request_id: str | None = None,
    detail: Mapping[str, Any] | None = None,
    at: datetime | None = None,
) -> AuditEntry:
    """Append an audit row (`actor` is a Slack user id, "cli" or "system"; `action` e.g.
    `request.approved`) in the caller's transaction."""
    entry = AuditEntry(
        at=at or utcnow(),
        actor=actor,
        action=action,
        request_id=request_id,
        detail=dict(detail or {}),
    )
    session.add(entry)
    await session.flush()
    return entry


AUDIT_ID_CHARS = 64
"""An id as someone gave it is kept to this many characters: a forged click can carry anything."""


class Refused(StrEnum):
    """Why a click or a command was refused, as its audit row records it."""

    UNKNOWN_ID = "unknown_id"  # the id names nothing
    WRONG_CHANNEL = "wrong_channel"  # it names something that lives elsewhere
    NOT_ALLOWED = "not_allowed"  # the person may not do this


def _clipped(value: str, limit: int = AUDIT_ID_CHARS) -> str:
    return value if len(value) <= limit else value[: limit - 1] + "…"


async def add_refusal(
    session: AsyncSession,
    *,
    actor: str,
    action: str,
    refused: Refused,
    reason: str,
    given_id: str,
    channel: str | None = None,
    request_id: str | None = None,
    detail: Mapping[str, Any] | None = None,
    at: datetime | None = None,
) -> AuditEntry:
    """Audit a refused click or command (`action` e.g. `show_plan.refused`): who, the id as
    they gave it (clipped), the channel it came from, why (`refused`, and `reason` in words).
    `request_id` links the row to a request only when the id named one."""
    return await add_audit(
        session,
        actor=_clipped(actor),
        action=action,
        request_id=request_id,
        detail={
            "reason": reason,
            "refused": refused.value,
            "id": _clipped(given_id),
            **({"channel": _clipped(channel)} if channel is not None else {}),
            **(detail or {}),
        },
        at=at,
    )


async def list_audit(
    session: AsyncSession, *, request_id: str | None = None, limit: int = 100
) -> list[AuditEntry]:
    """Audit rows, newest first, optionally only those of one request."""
    stmt = select(AuditEntry)
    if request_id is not None:
        stmt = stmt.where(AuditEntry.request_id == request_id)
    stmt = stmt.order_by(AuditEntry.at.desc(), AuditEntry.id.desc()).limit(limit)
    return list((await session.scalars(stmt)).all())
