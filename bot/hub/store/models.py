"""The hub's tables: what the bot owes each sink beyond Slack, and how each sink is faring."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    CheckConstraint,
    ForeignKey,
    Index,
    Integer,
    String,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from bot.core.tables import Base, UTCDateTime, one_of, utcnow


class DeliveryState(StrEnum):
    PENDING = "pending"
    SENT = "sent"
    FAILED = "failed"  # refused for good by the sink (a 4xx): kept to be looked at


class SinkDelivery(Base):
    """One body owed to one sink, written in the transaction that decided it (like `outbox`).
    Rows of one sink and incident are sent in order: a PagerDuty resolve after its trigger."""

    __tablename__ = "sink_deliveries"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    sink: Mapped[str] = mapped_column(String(64))
    kind: Mapped[str] = mapped_column(String(16))
    event_key: Mapped[str] = mapped_column(String(128))
    """What the row delivers (`incident:<id>:opened`): one row per sink and key, ever."""
    incident_id: Mapped[str | None] = mapped_column(
        String(32), ForeignKey("incidents.id", ondelete="SET NULL")
    )
    body: Mapped[dict[str, Any]] = mapped_column(JSON)
    state: Mapped[str] = mapped_column(String(16), default=DeliveryState.PENDING.value)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    error: Mapped[str | None] = mapped_column(String(500))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    sent_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    held_until: Mapped[datetime | None] = mapped_column(UTCDateTime())
    """Quiet hours: the row waits until then (its `next_attempt_at`) and goes in one digest
    with the sink's other held rows."""

    __table_args__ = (
        CheckConstraint(one_of("state", DeliveryState), name="state"),
        UniqueConstraint("sink", "event_key"),
        Index("ix_sink_deliveries_state_next_attempt_at", "state", "next_attempt_at"),
    )


class SinkHealth(Base):
    """A sink that keeps failing is told once in the ops channel, and once when it recovers."""

    __tablename__ = "sink_health"

    sink: Mapped[str] = mapped_column(String(64), primary_key=True)
    failures: Mapped[int] = mapped_column(Integer, default=0)
    """Failed attempts in a row (any row of the sink); 0 after a success."""
    failing_since: Mapped[datetime | None] = mapped_column(UTCDateTime())
    reported: Mapped[bool] = mapped_column(default=False)
    last_error: Mapped[str | None] = mapped_column(String(500))
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class Subscription(Base):
    """A channel's or DM's `/backfill subscribe`: events of the DAGs `pattern` matches (and,
    with `downstream`, of the DAGs downstream of them). Removed ones are kept (`removed_at`)
    for the audit trail."""

    __tablename__ = "subscriptions"

    id: Mapped[str] = mapped_column(String(16), primary_key=True)
    """What `/backfill unsubscribe` takes: 8 lower-case hex characters."""
    channel: Mapped[str] = mapped_column(String(64))
    pattern: Mapped[str] = mapped_column(String(255))
    events: Mapped[list[str]] = mapped_column(JSON)
    downstream: Mapped[bool] = mapped_column(Boolean, default=False)
    created_by: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    removed_by: Mapped[str | None] = mapped_column(String(64))
    removed_at: Mapped[datetime | None] = mapped_column(UTCDateTime())

    __table_args__ = (Index("ix_subscriptions_channel", "channel"),)
