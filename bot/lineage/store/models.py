"""The local lineage index: jobs, their datasets and DAG run history, kept in our database so
that planning and impact read no Marquez catalog on the hot path (issue 9, part 3).

Rows are fed by every run event the bot ingests and reconciled with Marquez in the background
(`bot/lineage/store/index.py` writes them). Every change stamps its rows with the next value
of one counter (`lineage_state.seq`, taken with a row lock, so values commit in order): an
in-memory index — in this process or another one on the same database — catches up with
`WHERE seq > :last`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    ForeignKey,
    Index,
    Integer,
    String,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from bot.core.tables import Base, UTCDateTime, utcnow


class LineageState(Base):
    """The one row (id 1): the change counter and how fresh the index is against Marquez."""

    __tablename__ = "lineage_state"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    seq: Mapped[int] = mapped_column(BigInteger, default=0)
    full_reconcile_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    """When the last complete listing of Marquez's jobs finished."""
    reconciled_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    """When the index last caught up with Marquez (full or incremental)."""
    high_water: Mapped[datetime | None] = mapped_column(UTCDateTime())
    """The newest job `updatedAt` read from Marquez: incremental reads stop below it."""
    reconcile_holder: Mapped[str | None] = mapped_column(String(128))
    """The process reconciling with Marquez now (one at a time across replicas), until
    `reconcile_lease_until`: a holder that died loses it then."""
    reconcile_lease_until: Mapped[datetime | None] = mapped_column(UTCDateTime())
    reconcile_started_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    """When the running (or last) full reconcile started."""
    reconcile_finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    """When the last reconcile (full or incremental) ended, well or not."""
    jobs_read: Mapped[int] = mapped_column(Integer, default=0)
    """Jobs the running (or last) full reconcile has read so far, of `jobs_total`."""
    jobs_total: Mapped[int | None] = mapped_column(Integer)
    """Marquez's `totalCount` on the full reconcile's first page."""
    reconcile_error: Mapped[str | None] = mapped_column(String(1000))
    """Why the last reconcile failed (cleared by the next that succeeds)."""
    reconcile_failed_at: Mapped[datetime | None] = mapped_column(UTCDateTime())


class LineageJob(Base):
    """A job (a DAG itself or one of its tasks) and the DAG it belongs to."""

    __tablename__ = "lineage_jobs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    namespace: Mapped[str] = mapped_column(String(1024))
    name: Mapped[str] = mapped_column(String(1024))
    dag_namespace: Mapped[str] = mapped_column(String(1024))
    dag_id: Mapped[str] = mapped_column(String(1024))
    is_dag: Mapped[bool] = mapped_column(Boolean, default=False)
    source: Mapped[str] = mapped_column(String(16))
    """Where the row was last described from: `event` or `marquez`."""
    in_marquez: Mapped[bool] = mapped_column(Boolean, default=False)
    """Marquez has listed it: a full listing without it marks it deleted."""
    owners: Mapped[list[Any] | None] = mapped_column(JSON)
    """Team names from the job's OpenLineage ownership facet (Marquez only)."""
    marquez_updated_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    seen_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    deleted: Mapped[bool] = mapped_column(Boolean, default=False)
    seq: Mapped[int] = mapped_column(BigInteger, default=0)

    __table_args__ = (
        UniqueConstraint("namespace", "name"),
        Index("ix_lineage_jobs_seq", "seq"),
    )


class LineageDataset(Base):
    """A dataset's name. Most rows are datasets; a row with `alias_of` is another name of one
    (an OpenLineage `symlinks` identifier, as in Marquez's `dataset_symlinks`)."""

    __tablename__ = "lineage_datasets"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    namespace: Mapped[str] = mapped_column(String(1024))
    name: Mapped[str] = mapped_column(String(1024))
    alias_of: Mapped[int | None] = mapped_column(
        Integer, ForeignKey("lineage_datasets.id", ondelete="CASCADE")
    )
    """The dataset this name is an alias of, always a row without `alias_of` (never a chain):
    job IO references that row, never an alias."""

    __table_args__ = (UniqueConstraint("namespace", "name"),)


class LineageIo(Base):
    """A job reads (`in`) or writes (`out`) a dataset."""

    __tablename__ = "lineage_io"

    job_id: Mapped[int] = mapped_column(
        Integer, ForeignKey("lineage_jobs.id", ondelete="CASCADE"), primary_key=True
    )
    dataset_id: Mapped[int] = mapped_column(
        Integer, ForeignKey("lineage_datasets.id", ondelete="CASCADE"), primary_key=True
    )
    direction: Mapped[str] = mapped_column(String(3), primary_key=True)


class LineageRun(Base):
    """A DAG run with its nominal (data) interval: the history schedules are learned from."""

    __tablename__ = "lineage_runs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    dag_namespace: Mapped[str] = mapped_column(String(1024))
    dag_id: Mapped[str] = mapped_column(String(1024))
    run_id: Mapped[str] = mapped_column(String(64))
    nominal_start: Mapped[datetime] = mapped_column(UTCDateTime())
    nominal_end: Mapped[datetime | None] = mapped_column(UTCDateTime())
    state: Mapped[str | None] = mapped_column(String(16))
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    ended_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    seq: Mapped[int] = mapped_column(BigInteger, default=0)

    __table_args__ = (
        UniqueConstraint("dag_namespace", "dag_id", "run_id"),
        Index("ix_lineage_runs_seq", "seq"),
    )
