"""SLA misses the bot has noticed (one row per DAG and interval, so each is told once). Like
`repository`, every function works inside the caller's transaction and never commits."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from bot.core.model import DagRef
from bot.store.watch_models import SlaMiss


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
