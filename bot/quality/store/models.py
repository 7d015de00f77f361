"""What runs wrote, kept to judge the next run: one row per dataset written per COMPLETE, and
each dataset's latest schema."""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, Boolean, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from bot.core.tables import Base, UTCDateTime


def dataset_key(namespace: str, name: str) -> str:
    """A dataset's fixed-width key: names run to 1,024 characters each, too long to index
    together on PostgreSQL (a B-tree entry holds about 2,700 bytes)."""
    return hashlib.sha1(f"{namespace}\x00{name}".encode(), usedforsecurity=False).hexdigest()


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
    dag_namespace: Mapped[str] = mapped_column(String(1024))
    dag_id: Mapped[str] = mapped_column(String(1024))
    rows: Mapped[int | None] = mapped_column(BigInteger)
    size: Mapped[int | None] = mapped_column(BigInteger)
    usual: Mapped[bool] = mapped_column(Boolean, default=True)

    __table_args__ = (
        Index("ix_quality_observations_dataset", "dataset_key", "event_time"),
        Index("ix_quality_observations_run", "run_id"),
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
