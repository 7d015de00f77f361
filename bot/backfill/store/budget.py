"""The budget's table: which steps wait for runs at once and which hold them. Every decision
about it is made under `lock`, in the transaction that claims the steps it grants, so two bot
processes never grant the same free run and a restart finds the queue as it was."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import delete, select, text, update
from sqlalchemy.ext.asyncio import AsyncSession

from bot.backfill.store.models import BudgetClaim


async def lock(session: AsyncSession) -> None:
    """Serialize budget decisions until this transaction ends. PostgreSQL: a transaction-level
    advisory lock. SQLite: an UPDATE takes the database's one write lock even when it matches
    nothing, so the reads that follow see every committed grant."""
    if session.get_bind().dialect.name == "postgresql":
        await session.execute(text("SELECT pg_advisory_xact_lock(hashtext('backfill:budget'))"))
        return
    await session.execute(
        update(BudgetClaim)
        .where(BudgetClaim.step_id.is_(None))
        .values(granted=BudgetClaim.granted)
        .execution_options(synchronize_session=False)
    )


async def claims(session: AsyncSession) -> list[BudgetClaim]:
    return list(await session.scalars(select(BudgetClaim)))


async def want(
    session: AsyncSession,
    *,
    step_id: str,
    request_id: str,
    team: str | None,
    pools: Sequence[str],
    wanted: int,
    level: int,
    deadlines: list[dict[str, Any]],
    since: datetime,
    position: int,
) -> None:
    """Queue a step (once: a step already queued or holding runs keeps its row)."""
    if await session.get(BudgetClaim, step_id) is not None:
        return
    session.add(
        BudgetClaim(
            step_id=step_id, request_id=request_id, team=team, pools=list(pools), wanted=wanted,
            granted=0, level=level, deadlines=deadlines, since=since, position=position,
        )
    )  # fmt: skip
    await session.flush()


async def grant(session: AsyncSession, step_id: str, runs: int, *, at: datetime) -> None:
    await session.execute(
        update(BudgetClaim)
        .where(BudgetClaim.step_id == step_id)
        .values(granted=runs, granted_at=at)
        .execution_options(synchronize_session=False)
    )


async def release(session: AsyncSession, step_ids: Iterable[str]) -> int:
    """Give back what these steps hold (or stop their wait); how many rows went."""
    ids = list(step_ids)
    if not ids:
        return 0
    result = await session.execute(
        delete(BudgetClaim)
        .where(BudgetClaim.step_id.in_(ids))
        .execution_options(synchronize_session=False)
    )
    return int(getattr(result, "rowcount", 0) or 0)


async def withdraw(session: AsyncSession, request_id: str) -> int:
    """Take a request's waiting steps out of the queue (it paused, or ended)."""
    result = await session.execute(
        delete(BudgetClaim)
        .where(BudgetClaim.request_id == request_id, BudgetClaim.granted == 0)
        .execution_options(synchronize_session=False)
    )
    return int(getattr(result, "rowcount", 0) or 0)
