"""The restatement ledger and the verification a backfill owes when it ends, in the caller's
transaction. A request with `verify_due_at` set owes its verification; done, the field is
cleared (so the owed ones are found by a small index range) and `verified_at` kept."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from bot.backfill.store.models import BackfillRequest, RestatedReport, Restatement
from bot.core.after_commit import wake_after_commit

__all__ = [
    "OWED", "Summary", "claim", "done", "due", "entries", "owe", "owing", "record",
    "report_requests", "summaries",
]  # fmt: skip

OWED = "verifications"
"""The work an owed verification is: the verifier registers for it (`wake_on_commit`)."""


async def owe(session: AsyncSession, request_id: str, due_at: datetime) -> None:
    await session.execute(
        update(BackfillRequest)
        .where(BackfillRequest.id == request_id, BackfillRequest.verified_at.is_(None))
        .values(verify_due_at=due_at)
    )
    wake_after_commit(session, OWED)


async def owing(session: AsyncSession, *, limit: int) -> list[tuple[str, datetime]]:
    """Requests owing their verification with when it is due, the longest owed first."""
    found = await session.execute(
        select(BackfillRequest.id, BackfillRequest.verify_due_at)
        .where(BackfillRequest.verify_due_at.is_not(None))
        .order_by(BackfillRequest.verify_due_at)
        .limit(limit)
    )
    return [(request_id, due) for request_id, due in found if due is not None]


async def due(session: AsyncSession, request_id: str) -> datetime | None:
    """When the request's verification is due (None: not owed), without a lock."""
    return await session.scalar(
        select(BackfillRequest.verify_due_at).where(BackfillRequest.id == request_id)
    )


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


async def record(
    session: AsyncSession, rows: Sequence[dict[str, Any]], reports: Sequence[dict[str, Any]]
) -> None:
    """Ledger rows (`restatements` columns) and the reports restated, in batches (a backfill
    of thousands of DAGs writes tens of thousands of rows; no ids are read back)."""
    for first in range(0, len(rows), _BATCH):
        await session.execute(insert(Restatement), list(rows[first : first + _BATCH]))
    if reports:
        await session.execute(insert(RestatedReport), list(reports))


async def entries(
    session: AsyncSession,
    *,
    dag_ids: Collection[str] = (),
    dataset_keys: Collection[str] = (),
    name_keys: Collection[str] = (),
    request_ids: Collection[str] = (),
    limit: int,
) -> list[Restatement]:
    """Ledger rows of those DAGs, datasets (by key, or by name in any namespace) or requests,
    newest first, at most `limit` (one indexed query for each kind asked)."""
    wanted = [
        (Restatement.dag_id, dag_ids),
        (Restatement.dataset_key, dataset_keys),
        (Restatement.name_key, name_keys),
        (Restatement.request_id, request_ids),
    ]
    found: dict[int, Restatement] = {}
    for column, values in wanted:
        if not values:
            continue
        rows = await session.scalars(
            select(Restatement)
            .where(column.in_(list(values)))
            .order_by(Restatement.restated_at.desc(), Restatement.id)
            .limit(limit)
        )
        found.update((row.id, row) for row in rows)
    ordered = sorted(found.values(), key=lambda r: (-r.restated_at.timestamp(), r.id))
    return ordered[:limit]


async def report_requests(
    session: AsyncSession, report: str, *, limit: int
) -> dict[str, list[str]]:
    """The backfills that restated `report`, newest first, each with its DAGs that write what
    the report reads."""
    found = await session.execute(
        select(RestatedReport.request_id, RestatedReport.dags)
        .where(RestatedReport.report == report)
        .order_by(RestatedReport.restated_at.desc(), RestatedReport.id.desc())
        .limit(limit)
    )
    return {request_id: list(dags or ()) for request_id, dags in found}


class Summary(NamedTuple):
    """What one backfill restated of one DAG with one verdict."""

    request_id: str
    dag_namespace: str
    dag_id: str
    verdict: str
    intervals: int
    first: datetime
    last: datetime
    at: datetime


async def summaries(session: AsyncSession, since: datetime, *, limit: int) -> list[Summary]:
    """Per backfill verified since `since`, DAG and verdict: how many dataset intervals and
    the first and last interval start, newest backfill first (the App Home tab)."""
    found = await session.execute(
        select(
            Restatement.request_id, Restatement.dag_namespace, Restatement.dag_id,
            Restatement.verdict, func.count(), func.min(Restatement.interval_start),
            func.max(Restatement.interval_start), func.max(Restatement.restated_at),
        )
        .where(Restatement.restated_at >= since)
        .group_by(
            Restatement.request_id, Restatement.dag_namespace, Restatement.dag_id,
            Restatement.verdict,
        )
        .order_by(func.max(Restatement.restated_at).desc(), Restatement.request_id)
        .limit(limit)
    )  # fmt: skip
    return [Summary(*row) for row in found]


_BATCH = 1_000
