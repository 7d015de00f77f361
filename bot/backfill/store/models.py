"""What the bot owes before it acts on a backfill: requests and their steps.

Tables on the shared base (`bot.core.tables`): ids, UTC datetimes and named constraints.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    CheckConstraint,
    Date,
    ForeignKey,
    Index,
    Integer,
    String,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column, relationship

from bot.backfill.rules.states import RequestState, StepState
from bot.core.tables import Base, UTCDateTime, new_id, one_of, utcnow


class BackfillRequest(Base):
    """One `/backfill` ask: who asked, the plan shown to them, and where it stands."""

    __tablename__ = "backfill_requests"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    requester: Mapped[str] = mapped_column(String(64))
    channel: Mapped[str | None] = mapped_column(String(64))
    root_dag: Mapped[str] = mapped_column(String(250))
    root_namespace: Mapped[str] = mapped_column(String(1024))
    start_date: Mapped[date] = mapped_column(Date)
    end_date: Mapped[date] = mapped_column(Date)
    options: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    plan: Mapped[dict[str, Any]] = mapped_column(JSON)
    state: Mapped[str] = mapped_column(String(16), default=RequestState.PREVIEWED.value)
    approvers: Mapped[list[str]] = mapped_column(JSON, default=list)
    status_message_ts: Mapped[str | None] = mapped_column(String(32))
    status_channel: Mapped[str | None] = mapped_column(String(64))
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    progress_digest: Mapped[str | None] = mapped_column(String(64))
    progress_posted_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    incident_id: Mapped[str | None] = mapped_column(String(32))
    """The incident whose alert this backfill was started from (its thread is the request's)."""
    thread_ts: Mapped[str | None] = mapped_column(String(32))
    """The thread the request lives in (its alert's ts): its preview, status message and
    progress replies go there instead of the channel."""
    retry_of: Mapped[str | None] = mapped_column(String(32))
    """The failed request this one retries (its failed and skipped DAGs)."""
    start_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    """When a scheduled request (`--at`) may start; None: as soon as it is approved."""
    paused_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    paused_by: Mapped[str | None] = mapped_column(String(64))
    """Who paused it: a Slack user id, or `failure` / `window` when the bot did."""
    pause_reason: Mapped[str | None] = mapped_column(String(300))
    resume_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    """When the bot resumes (or starts) it by itself: its off-peak window opens."""
    failures_seen: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    """Failed runs counted when `--stop-on-failure` last paused it: only a new one pauses."""
    verify_due_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    """Owed once it ended: the check of what its reruns wrote (bot/backfill/service/verify.py),
    done as soon as their statistics are in, and by this time with what there is."""
    verified_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    pending_lines: Mapped[list[str] | None] = mapped_column(JSON)
    """Progress lines seen but not posted yet: the runner gathers them into fewer replies."""
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    version: Mapped[int] = mapped_column(Integer, default=1)

    steps: Mapped[list[BackfillStep]] = relationship(
        back_populates="request",
        order_by="BackfillStep.position",
        cascade="all, delete-orphan",
        passive_deletes=True,
        # Steps are few per request; loading them eagerly keeps async callers off lazy loads.
        lazy="selectin",
    )

    __table_args__ = (
        CheckConstraint(one_of("state", RequestState), name="state"),
        Index("ix_backfill_requests_state_created_at", "state", "created_at"),
        Index("ix_backfill_requests_requester_created_at", "requester", "created_at"),
        Index("ix_backfill_requests_created_at", "created_at"),
        Index("ix_backfill_requests_incident_id", "incident_id"),
        Index("ix_backfill_requests_state_resume_at", "state", "resume_at"),
        Index("ix_backfill_requests_verify_due_at", "verify_due_at"),
    )


class BackfillStep(Base):
    """One DAG of a backfill plan, with the intervals to rerun and the executor's handle."""

    __tablename__ = "backfill_steps"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    request_id: Mapped[str] = mapped_column(
        String(32), ForeignKey("backfill_requests.id", ondelete="CASCADE")
    )
    position: Mapped[int] = mapped_column(Integer)
    dag_id: Mapped[str] = mapped_column(String(250))
    namespace: Mapped[str] = mapped_column(String(1024))
    intervals: Mapped[list[dict[str, str]]] = mapped_column(JSON)
    upstream: Mapped[list[str]] = mapped_column(JSON, default=list)
    executor: Mapped[str | None] = mapped_column(String(32))
    executor_handle: Mapped[str | None] = mapped_column(String(512))
    state: Mapped[str] = mapped_column(String(16), default=StepState.PENDING.value)
    counts: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    message: Mapped[str | None] = mapped_column(String(1000))
    # What the executor needs to find its work again after a restart (backfill ids, run ids).
    executor_state: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)

    request: Mapped[BackfillRequest] = relationship(back_populates="steps")

    __table_args__ = (
        CheckConstraint(one_of("state", StepState), name="state"),
        UniqueConstraint("request_id", "position"),
    )


class BudgetClaim(Base):
    """A step's claim on the budget shared by every backfill (`execution.budget`): waiting
    (`granted` 0) or holding `granted` runs at once until the step ends. Its queue rank is
    kept with it (priority, the request's approval, the deadlines of its reports), so the
    queue is read from this table alone."""

    __tablename__ = "backfill_budget"

    step_id: Mapped[str] = mapped_column(
        String(32), ForeignKey("backfill_steps.id", ondelete="CASCADE"), primary_key=True
    )
    request_id: Mapped[str] = mapped_column(
        String(32), ForeignKey("backfill_requests.id", ondelete="CASCADE")
    )
    team: Mapped[str | None] = mapped_column(String(64))
    pools: Mapped[list[str]] = mapped_column(JSON, default=list)
    wanted: Mapped[int] = mapped_column(Integer)
    granted: Mapped[int] = mapped_column(Integer, default=0)
    level: Mapped[int] = mapped_column(Integer, default=1)
    deadlines: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    since: Mapped[datetime] = mapped_column(UTCDateTime())
    position: Mapped[int] = mapped_column(Integer)
    granted_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)

    __table_args__ = (Index("ix_backfill_budget_request_id", "request_id"),)


class Restatement(Base):
    """The restatement ledger: one interval of one dataset a backfill rewrote (or of one DAG,
    `name` None, when its producer sends no statistics), with the rows before and after where
    they are known, whether the rewrite looks right, when, why and by whom. Kept for good: it
    answers "is June trustworthy?" long after the backfill."""

    __tablename__ = "restatements"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    request_id: Mapped[str] = mapped_column(String(32))
    dag_namespace: Mapped[str] = mapped_column(String(1024))
    dag_id: Mapped[str] = mapped_column(String(250))
    interval_start: Mapped[datetime] = mapped_column(UTCDateTime())
    interval_end: Mapped[datetime] = mapped_column(UTCDateTime())
    dataset_key: Mapped[str | None] = mapped_column(String(40))
    namespace: Mapped[str | None] = mapped_column(String(1024))
    name: Mapped[str | None] = mapped_column(String(1024))
    name_key: Mapped[str | None] = mapped_column(String(40))
    """The dataset's name alone, hashed (`/backfill history NAME` in any namespace)."""
    rows_before: Mapped[int | None] = mapped_column(BigInteger)
    rows_after: Mapped[int | None] = mapped_column(BigInteger)
    unit: Mapped[str] = mapped_column(String(8), default="rows")
    verdict: Mapped[str] = mapped_column(String(16))
    """right | wrong | unknown (bot/quality/rules/verify.py)."""
    why: Mapped[str | None] = mapped_column(String(64))
    usual: Mapped[int | None] = mapped_column(BigInteger)
    incident_id: Mapped[str | None] = mapped_column(String(32))
    reason: Mapped[str | None] = mapped_column(String(300))
    requested_by: Mapped[str] = mapped_column(String(64))
    approved_by: Mapped[str | None] = mapped_column(String(64))
    restated_at: Mapped[datetime] = mapped_column(UTCDateTime())

    __table_args__ = (
        CheckConstraint("verdict IN ('right', 'wrong', 'unknown')", name="verdict"),
        Index("ix_restatements_dag", "dag_id", "restated_at"),
        Index("ix_restatements_dataset", "dataset_key", "restated_at"),
        Index("ix_restatements_name", "name_key", "restated_at"),
        Index("ix_restatements_request", "request_id"),
        Index("ix_restatements_restated_at", "restated_at"),
    )


class RestatedReport(Base):
    """A BOT_CONFIG report whose data a backfill restated, with the days of it that changed:
    what `/backfill history REPORT` finds the backfills by."""

    __tablename__ = "restated_reports"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    request_id: Mapped[str] = mapped_column(String(32))
    report: Mapped[str] = mapped_column(String(250))
    days: Mapped[list[str]] = mapped_column(JSON, default=list)
    wrong_days: Mapped[list[str]] = mapped_column(JSON, default=list)
    dags: Mapped[list[str]] = mapped_column(JSON, default=list)
    """The backfill's DAGs that write what the report reads."""
    restated_at: Mapped[datetime] = mapped_column(UTCDateTime())

    __table_args__ = (Index("ix_restated_reports_report", "report", "restated_at"),)
