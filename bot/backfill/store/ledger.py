"""The restatement ledger and the verification a backfill owes when it ends, in the caller's
transaction. A request with `verify_due_at` set owes its verification; done, the field is
cleared (so the owed ones are found by a small index range) and `verified_at` kept."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime

from sqlalchemy import or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from bot.backfill.store.models import BackfillRequest, Restatement
from bot.core.after_commit import wake_after_commit

__all__ = ["OWED", "claim", "done", "entries", "owe", "owing", "record"]

OWED = "verifications"
"""The work an owed verification is: the verifier registers for it (`wake_on_commit`)."""


async def owe(session: AsyncSession, request_id: str, due_at: datetime) -> None:
    await session.execute(
        update(BackfillRequest)
        .where(BackfillRequest.id == request_id, BackfillRequest.verified_at.is_(None))
        .values(verify_due_at=due_at)
    )
    wake_after_commit(session, OWED)


async def owing(session: AsyncSession, *, limit: int) -> list[str]:
    """Requests owing their verification, the longest owed first."""
    found = await session.scalars(
        select(BackfillRequest.id)
        .where(BackfillRequest.verify_due_at.is_not(None))
        .order_by(BackfillRequest.verify_due_at)
        .limit(limit)
    )
    return list(found)


async def claim(session: AsyncSession, request_id: str) -> datetime | None:
    """Lock the request and say when its verification is due (None: not owed any more, say
    another process did it)."""
    return await session.scalar(
        select(BackfillRequest.verify_due_at)
        .where(BackfillRequest.id == request_id)
        .with_for_update()
    )


async def done(session: AsyncSession, request_id: str, at: datetime) -> None:
    await session.execute(
        update(BackfillRequest)
        .where(BackfillRequest.id == request_id)
        .values(verify_due_at=None, verified_at=at)
    )


def record(session: AsyncSession, rows: Sequence[Restatement]) -> None:
    session.add_all(rows)


async def entries(
    session: AsyncSession,
    *,
    dag_ids: Collection[str] = (),
    dataset_keys: Collection[str] = (),
    request_ids: Collection[str] = (),
    names: Collection[str] = (),
    with_dataset: bool = False,
    since: datetime | None = None,
    limit: int,
) -> list[Restatement]:
    """Ledger rows of those DAGs, datasets (by key, or by name in any namespace) or requests
    (all when none is given; `with_dataset`: only rows naming a dataset), newest first, at
    most `limit`."""
    query = select(Restatement)
    if since is not None:
        query = query.where(Restatement.restated_at >= since)
    if with_dataset:
        query = query.where(Restatement.dataset_key.is_not(None))
    wanted = []
    if names:
        wanted.append(Restatement.name.in_(list(names)))
    if dag_ids:
        wanted.append(Restatement.dag_id.in_(list(dag_ids)))
    if dataset_keys:
        wanted.append(Restatement.dataset_key.in_(list(dataset_keys)))
    if request_ids:
        wanted.append(Restatement.request_id.in_(list(request_ids)))
    if wanted:
        query = query.where(or_(*wanted))
    found = await session.scalars(
        query.order_by(Restatement.restated_at.desc(), Restatement.id).limit(limit)
    )
    return list(found)
