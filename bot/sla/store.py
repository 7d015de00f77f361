"""SLA misses the bot has noticed (one row per DAG and interval, so each is told once): the
table, and its queries, which work inside the caller's transaction and never commit."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Index, Integer, String, UniqueConstraint, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Mapped, mapped_column

from bot.core.model import DagRef
from bot.core.tables import Base, UTCDateTime, utcnow


class SlaMiss(Base):
    """A late, missing or overlong run of a DAG for one interval, notified once (as what it
    was first seen to be)."""

    __tablename__ = "sla_misses"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    namespace: Mapped[str] = mapped_column(String(1024))
    dag_id: Mapped[str] = mapped_column(String(1024))
    interval_key: Mapped[str] = mapped_column(String(64))
    kind: Mapped[str] = mapped_column(String(16))
    due: Mapped[datetime] = mapped_column(UTCDateTime())
    reason: Mapped[str] = mapped_column(String(500))
    detected_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    acknowledged_by: Mapped[str | None] = mapped_column(String(64))
    acknowledged_at: Mapped[datetime | None] = mapped_column(UTCDateTime())

    __table_args__ = (
        UniqueConstraint("namespace", "dag_id", "interval_key"),
        Index("ix_sla_misses_detected_at", "detected_at"),
    )


async def exists(session: AsyncSession, dag: DagRef, interval_key: str) -> bool:
    """Whether the miss of `dag` for the interval starting at `interval_key` is known."""
    found = await session.scalar(
        select(SlaMiss.id).where(
            SlaMiss.namespace == dag.namespace,
            SlaMiss.dag_id == dag.dag_id,
            SlaMiss.interval_key == interval_key,
        )
    )
    return found is not None


async def noticed_since(session: AsyncSession, since: datetime, *, limit: int) -> list[SlaMiss]:
    """Misses noticed since `since`, newest first."""
    return list(
        await session.scalars(
            select(SlaMiss)
            .where(SlaMiss.detected_at >= since)
            .order_by(SlaMiss.detected_at.desc())
            .limit(limit)
        )
    )
