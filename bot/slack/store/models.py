"""The outbox: every Slack message the bot owes, a row before it is sent (`bot.slack.store.outbox`
writes and claims them, `bot.slack.service.sender` delivers them); and the clicks that decide
something, a row before they are acknowledged (`bot.slack.store.clicks`)."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import JSON, Boolean, CheckConstraint, ForeignKey, Index, Integer, String, false
from sqlalchemy.orm import Mapped, mapped_column

from bot.core.tables import Base, UTCDateTime, one_of, utcnow


class OutboxState(StrEnum):
    PENDING = "pending"
    SENT = "sent"
    FAILED = "failed"


class OutboxRole(StrEnum):
    """How a message relates to a request's status message (the parent of its thread)."""

    PLAIN = "plain"  # a message on its own
    STATUS = "status"  # the status message itself: its ts is recorded on the request
    THREAD = "thread"  # a reply in the thread of the request's status message
    STATUS_UPDATE = "status_update"  # chat.update of the request's status message


OUTBOX_METHODS = ("chat.postMessage", "chat.update", "chat.postEphemeral")


class OutboxMessage(Base):
    """A Slack message the bot owes, written before it is sent (one sender delivers them)."""

    __tablename__ = "outbox"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    method: Mapped[str] = mapped_column(String(32), default="chat.postMessage")
    role: Mapped[str] = mapped_column(String(16), default=OutboxRole.PLAIN.value)
    channel: Mapped[str] = mapped_column(String(64))
    user: Mapped[str | None] = mapped_column(String(64))
    request_id: Mapped[str | None] = mapped_column(
        String(32), ForeignKey("backfill_requests.id", ondelete="SET NULL")
    )
    # An incident alert plays the part of a request's status message for its own rows.
    incident_id: Mapped[str | None] = mapped_column(
        String(32), ForeignKey("incidents.id", ondelete="SET NULL", use_alter=True)
    )
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)
    state: Mapped[str] = mapped_column(String(16), default=OutboxState.PENDING.value)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    posted_ts: Mapped[str | None] = mapped_column(String(32))
    edit_key: Mapped[str | None] = mapped_column(String(64))
    """Rows of one parent with the same key are one message: the first posts it, later ones
    edit it in place (e.g. the single "N failures downstream joined" reply)."""
    error: Mapped[str | None] = mapped_column(String(500))
    in_doubt: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    """Whether Slack may already have this message although no success was recorded: its
    sender died holding it, or an attempt got no answer (or an edge's). Looked for in Slack
    (by its metadata) before it is posted again."""
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)

    __table_args__ = (
        CheckConstraint(one_of("state", OutboxState), name="state"),
        CheckConstraint(one_of("role", OutboxRole), name="role"),
        CheckConstraint(one_of("method", OUTBOX_METHODS), name="method"),
        Index("ix_outbox_state_next_attempt_at", "state", "next_attempt_at"),
        Index("ix_outbox_request_id", "request_id"),
        Index("ix_outbox_incident_id", "incident_id"),
    )


class ClickState(StrEnum):
    RECEIVED = "received"  # acknowledged to Slack; its listener may not have finished
    HANDLED = "handled"  # decided and answered
    FAILED = "failed"  # replayed CLICK_ATTEMPTS times without finishing: logged, left


class ReceivedClick(Base):
    """A button click that decides something, recorded before Slack is told it arrived: a bot
    killed after the ack and before the decision replays it when it starts again."""

    __tablename__ = "slack_clicks"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    action_id: Mapped[str] = mapped_column(String(255))
    user: Mapped[str] = mapped_column(String(64))
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)
    state: Mapped[str] = mapped_column(String(16), default=ClickState.RECEIVED.value)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    """When a replay may take it: a grace after it arrived (its own listener is at work), then
    a lease while a replay runs it."""
    received_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    handled_at: Mapped[datetime | None] = mapped_column(UTCDateTime())

    __table_args__ = (
        CheckConstraint(one_of("state", ClickState), name="state"),
        Index("ix_slack_clicks_state_next_attempt_at", "state", "next_attempt_at"),
    )
