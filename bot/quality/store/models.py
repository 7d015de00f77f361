"""What runs wrote, kept to judge the next run: one row per dataset written per COMPLETE, and
each dataset's latest schema."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, Boolean, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from bot.core.tables import Base, UTCDateTime, utcnow
from bot.quality.rules.keys import dataset_key

__all__ = ["ColumnLineage", "DatasetSchema", "Observation", "dataset_key"]


class Observation(Base):
    """What one run wrote to one dataset for one interval (rows, bytes), and whether the checks
    found it usual: only usual ones make the history the next run is judged against."""

    __tablename__ = "quality_observations"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    dataset_key: Mapped[str] = mapped_column(String(40))
    namespace: Mapped[str] = mapped_column(String(1024))
    name: Mapped[str] = mapped_column(String(1024))
    interval_key: Mapped[str] = mapped_column(String(64))
    interval_start: Mapped[datetime | None] = mapped_column(UTCDateTime())
    event_time: Mapped[datetime] = mapped_column(UTCDateTime())
    run_id: Mapped[str] = mapped_column(String(64))
    job_name: Mapped[str | None] = mapped_column(String(1024))
    """The job whose run sent it (None before revision 0020): a job that always sent
    statistics for a dataset and sends none is suspect (`silent_finding`)."""
    dag_namespace: Mapped[str] = mapped_column(String(1024))
    dag_id: Mapped[str] = mapped_column(String(1024))
    rows: Mapped[int | None] = mapped_column(BigInteger)
    size: Mapped[int | None] = mapped_column(BigInteger)
    usual: Mapped[bool] = mapped_column(Boolean, default=True)
    seen_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), default=utcnow)
    """When the bot took it in (None before revision 0020): a backfill's verification tells
    its reruns' rows from those they replaced by it, whatever clock the producer keeps."""

    __table_args__ = (
        Index("ix_quality_observations_dataset", "dataset_key", "event_time"),
        Index("ix_quality_observations_run", "run_id"),
        Index("ix_quality_observations_dag", "dag_id", "interval_start"),
    )


class DatasetSchema(Base):
    """A dataset's schema as its latest run wrote it: what the next run's is compared with."""

    __tablename__ = "quality_schemas"

    dataset_key: Mapped[str] = mapped_column(String(40), primary_key=True)
    namespace: Mapped[str] = mapped_column(String(1024))
    name: Mapped[str] = mapped_column(String(1024))
    fields: Mapped[list[Any]] = mapped_column(JSON)
    event_time: Mapped[datetime] = mapped_column(UTCDateTime())


class ColumnLineage(Base):
    """One output column and one input column it is computed from, as the latest run writing
    the output said (`columnLineage`): what tells which DAGs read a column that changed."""

    __tablename__ = "quality_columns"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    out_key: Mapped[str] = mapped_column(String(40))
    out_namespace: Mapped[str] = mapped_column(String(1024))
    out_name: Mapped[str] = mapped_column(String(1024))
    out_column: Mapped[str] = mapped_column(String(250))
    in_key: Mapped[str] = mapped_column(String(40))
    in_column: Mapped[str] = mapped_column(String(250))
    dag_namespace: Mapped[str] = mapped_column(String(1024))
    dag_id: Mapped[str] = mapped_column(String(1024))
    """The DAG whose run writes the output (and so reads the input column)."""

    __table_args__ = (
        Index("ix_quality_columns_in", "in_key", "in_column"),
        Index("ix_quality_columns_out", "out_key"),
    )
