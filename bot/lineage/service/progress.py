"""How far the lineage index is, in the words `/readyz` and `doctor` use: `loading` (no full
reconcile with Marquez yet: jobs read of total), `current`, or `behind` (its last reconcile
failed, or none succeeded for three reconcile periods). Read from the database, so every
replica says the same of the one reconcile running."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.config import IndexSettings
from bot.core.tables import utcnow
from bot.lineage.service.index import LineageIndex
from bot.lineage.store.reconcile_state import Progress, read_progress

BEHIND_PERIODS = 3


def describe(progress: Progress, settings: IndexSettings, now: datetime) -> dict[str, Any]:
    """`state` with the figures behind it (JSON-ready); `summary` in one line."""
    detail: dict[str, Any] = {"jobs_read": progress.jobs_read, "jobs_total": progress.jobs_total}
    reconciling = progress.reconciling(now)
    if reconciling:
        detail["reconciling_since"] = _iso(progress.started_at)
    if progress.full_reconcile_at is None:
        of = f" of {progress.jobs_total:,}" if progress.jobs_total is not None else ""
        doing = "reading" if reconciling else "waiting to read"
        detail["state"] = "loading"
        detail["summary"] = (
            f"loading: {doing} Marquez's jobs ({progress.jobs_read:,}{of} so far); "
            "plans fetch their DAG's lineage from Marquez meanwhile"
        )
    else:
        detail["full_reconcile_at"] = _iso(progress.full_reconcile_at)
        detail["reconciled_at"] = _iso(progress.reconciled_at)
        last = progress.reconciled_at or progress.full_reconcile_at
        # Late when no reconcile has ended for three periods (one under way is not late: a
        # full one on a big, slow Marquez may take longer than a period).
        ended = max(last, progress.finished_at or last)
        quiet = now - ended > timedelta(seconds=BEHIND_PERIODS * settings.reconcile_interval_s)
        detail["state"] = "behind" if quiet and not reconciling else "current"
        detail["summary"] = f"{detail['state']}: last reconciled with Marquez {_iso(last)}"
    failed = progress.failed_at is not None and (
        progress.reconciled_at is None or progress.failed_at > progress.reconciled_at
    )
    if failed:
        detail["state"] = "behind" if detail["state"] == "current" else detail["state"]
        detail["last_error"] = progress.error
        detail["summary"] += f"; the last reconcile failed ({progress.error}), retrying"
    return detail


async def index_state(
    sessions: async_sessionmaker[AsyncSession],
    settings: IndexSettings,
    index: LineageIndex | None = None,
) -> dict[str, Any]:
    """`describe` of the database's state; with `index` (this process's), `loading` until it
    holds what the database does (loading 100,000 jobs into memory takes a while)."""
    async with sessions() as session:
        progress = await read_progress(session)
    detail = describe(progress, settings, utcnow())
    if index is not None and detail["state"] != "loading" and not index.ready.is_set():
        detail["state"] = "loading"
        detail["summary"] = (
            f"loading: Marquez's {progress.jobs_read:,} jobs are read; this process is loading "
            "them into memory"
        )
    return detail


def _iso(at: datetime | None) -> str | None:
    return at.isoformat().replace("+00:00", "Z") if at is not None else None
