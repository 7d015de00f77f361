"""What the watcher owes before it acts: the run events it has seen (from Marquez or pushed to
the bot), and where its poll of each event feed stands."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import JSON, CheckConstraint, Index, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from bot.core.tables import Base, UTCDateTime, one_of, utcnow


class EventSource(StrEnum):
    MARQUEZ = "marquez"  # read by the poller from GET /api/v1/events/lineage
    RECEIVER = "receiver"  # pushed to the bot's POST /api/v1/lineage


class RunEvent(Base):
    """One OpenLineage run event, once: (run id, event type, event time) is its identity, so the
    same event from Marquez and from the receiver, or read twice across a poll overlap, is one
    row. `dag_*` is the DAG the run belongs to (a task's parent, else the job itself)."""

    __tablename__ = "run_events"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(String(64))
    event_type: Mapped[str] = mapped_column(String(16))
    event_time: Mapped[datetime] = mapped_column(UTCDateTime())
    namespace: Mapped[str] = mapped_column(String(1024))
    job_name: Mapped[str] = mapped_column(String(1024))
    dag_namespace: Mapped[str] = mapped_column(String(1024))
    dag_id: Mapped[str] = mapped_column(String(1024))
    nominal_start: Mapped[datetime | None] = mapped_column(UTCDateTime())
    nominal_end: Mapped[datetime | None] = mapped_column(UTCDateTime())
    error_message: Mapped[str | None] = mapped_column(String(2000))
    dag_run_id: Mapped[str | None] = mapped_column(String(64))
    """The DAG run this event belongs to (its own run for a DAG, the root's or the parent's
    for a task or a Spark job under it): a task's FAIL and its DAG's FAIL are one failure."""
    job_type: Mapped[str | None] = mapped_column(String(32))
    """`JobTypeJobFacet.jobType` (DAG, TASK, APPLICATION, JOB, QUERY, …) as the producer said."""
    airflow_run_id: Mapped[str | None] = mapped_column(String(250))
    """Airflow's own run id (`scheduled__2021-06-04T00:00:00+00:00`), for links to the run."""
    task_id: Mapped[str | None] = mapped_column(String(250))
    """The Airflow task of a task event, for a link to its log."""
    try_number: Mapped[int | None] = mapped_column(Integer)
    data: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    """A COMPLETE's data facts (`bot/events/rules/data_facts.py`): what the data-quality
    checks read when the watcher handles it."""
    source: Mapped[str] = mapped_column(String(16))
    received_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    processed_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    attempts: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    """Failed tries at handling it (the watcher's, across restarts)."""
    failure: Mapped[str | None] = mapped_column(String(500))
    """Why the last try failed (an exception's type and message)."""
    set_aside_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    """When it was set aside after `attempts` failed tries: kept, counted in /metrics, told
    once in watch.ops_channel, and handled again by `backfill-bot events retry`."""

    __table_args__ = (
        UniqueConstraint("run_id", "event_type", "event_time"),
        CheckConstraint(one_of("source", EventSource), name="source"),
        Index("ix_run_events_processed_at_id", "processed_at", "id"),
        Index("ix_run_events_dag_id_nominal_start", "dag_id", "nominal_start"),
        Index("ix_run_events_event_time", "event_time"),
        Index("ix_run_events_dag_run_id", "dag_run_id"),
        Index("ix_run_events_set_aside_at", "set_aside_at"),
    )


class WatchCursor(Base):
    """Where a poll of an event feed stands, and whether the feed was reachable last time."""

    __tablename__ = "watch_cursors"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    position: Mapped[datetime] = mapped_column(UTCDateTime())
    reachable: Mapped[bool] = mapped_column(default=True)
    failures: Mapped[int] = mapped_column(Integer, default=0)
    last_error: Mapped[str | None] = mapped_column(String(500))
    late_counts: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    """The late-event sweep's per-bucket event counts of the feed behind the cursor (see
    `bot/events/service/late_sweep.py`): a count that changes means an event arrived late there."""
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
