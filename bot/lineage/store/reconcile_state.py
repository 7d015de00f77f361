"""The reconcile's lease and progress on `lineage_state`, each in the caller's transaction.

Replicas on one database run one reconcile with Marquez at a time: a process takes the lease
(`reconcile_holder` until `reconcile_lease_until`) with one conditional UPDATE, which SQLite's
write lock and PostgreSQL's row lock each let one writer win; it renews the lease with every
page it writes, so a holder that died (or hangs) loses it within `lease` and another replica
takes over. Progress (`jobs_read` of `jobs_total`) lives in the same row, so `/readyz` and
`doctor` on any replica say how far the one reconcile got.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from bot.lineage.store.models import LineageState

ERROR_CHARS = 1000


@dataclass(frozen=True)
class Progress:
    """How far the lineage index is, as every replica can read it."""

    full_reconcile_at: datetime | None
    reconciled_at: datetime | None
    holder: str | None
    lease_until: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    jobs_read: int
    jobs_total: int | None
    error: str | None
    failed_at: datetime | None

    def reconciling(self, now: datetime) -> bool:
        return self.holder is not None and self.lease_until is not None and self.lease_until > now


async def take_lease(session: AsyncSession, holder: str, now: datetime, lease: timedelta) -> bool:
    """Become the one reconciling process unless another holds a lease that has not ended."""
    state = LineageState.__table__.c
    result = await session.execute(
        update(LineageState)
        .where(
            LineageState.id == 1,
            or_(
                state.reconcile_holder.is_(None),
                state.reconcile_holder == holder,
                state.reconcile_lease_until.is_(None),
                state.reconcile_lease_until < now,
            ),
        )
        .values(reconcile_holder=holder, reconcile_lease_until=now + lease)
    )
    return int(getattr(result, "rowcount", 0) or 0) == 1


async def renew_lease(
    session: AsyncSession,
    holder: str,
    now: datetime,
    lease: timedelta,
    *,
    jobs_read: int | None = None,
    jobs_total: int | None = None,
    started: bool = False,
) -> bool:
    """Extend a lease this process holds (False if it lost it), recording a full reconcile's
    progress: `started` resets it for a new one."""
    values: dict[str, object] = {"reconcile_lease_until": now + lease}
    if started:
        values.update(reconcile_started_at=now, jobs_read=0, jobs_total=None)
    if jobs_read is not None:
        values["jobs_read"] = jobs_read
    if jobs_total is not None:
        values["jobs_total"] = jobs_total
    result = await session.execute(
        update(LineageState)
        .where(LineageState.id == 1, LineageState.reconcile_holder == holder)
        .values(**values)
    )
    return int(getattr(result, "rowcount", 0) or 0) == 1


async def release_lease(
    session: AsyncSession, holder: str, *, error: str | None = None, now: datetime
) -> None:
    """Give the lease up; `error` records why the reconcile failed (None clears the last)."""
    values: dict[str, object] = {
        "reconcile_holder": None,
        "reconcile_lease_until": None,
        "reconcile_finished_at": now,
    }
    if error is None:
        values.update(reconcile_error=None, reconcile_failed_at=None)
    else:
        values.update(reconcile_error=error[:ERROR_CHARS], reconcile_failed_at=now)
    await session.execute(
        update(LineageState)
        .where(LineageState.id == 1, LineageState.reconcile_holder == holder)
        .values(**values)
    )


async def record_failure(session: AsyncSession, error: str, now: datetime) -> None:
    """A reconcile that failed before it held the lease (Marquez down at its first request)."""
    await session.execute(
        update(LineageState)
        .where(LineageState.id == 1)
        .values(reconcile_error=error[:ERROR_CHARS], reconcile_failed_at=now)
    )


async def read_progress(session: AsyncSession) -> Progress:
    row = (await session.execute(select(LineageState).where(LineageState.id == 1))).scalar_one()
    return Progress(
        row.full_reconcile_at,
        row.reconciled_at,
        row.reconcile_holder,
        row.reconcile_lease_until,
        row.reconcile_started_at,
        row.reconcile_finished_at,
        row.jobs_read or 0,
        row.jobs_total,
        row.reconcile_error,
        row.reconcile_failed_at,
    )
