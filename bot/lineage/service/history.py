"""How long DAG runs took, for other capabilities (the alert's backfill estimate)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from sqlalchemy.ext.asyncio import AsyncSession

from bot.core.model import DagRef
from bot.lineage.store import run_history


async def run_durations(
    session: AsyncSession, dags: Sequence[DagRef]
) -> dict[str, list[timedelta]]:
    """Recent successful run durations of each DAG (by DAG id)."""
    return await run_history.run_durations(session, dags)
