"""Background reconcile of the local lineage index with Marquez (APScheduler jobs in `serve`).

Full: every job Marquez lists (`GET /api/v1/jobs`, page by page, never the whole catalog in
memory) is written to the index; jobs the index had from Marquez that the listing no longer
shows are checked one by one (a job updated mid-listing moves to the first page and may be
skipped by offset paging) and marked deleted when Marquez answers 404. Runs at start and every
`index.full_reconcile_s`. Incremental: the listing is newest first, so pages are read until a
job older than the high-water mark (less `index.overlap_s`) appears; every
`index.reconcile_interval_s`. Deleted jobs only show up in a full reconcile.

Marquez's `updatedAt` mixes two clocks (tests/fixtures/marquez/FIDELITY.md row 2): a repeated
upsert sets the database's `now()`, a terminal event sets the producer's `eventTime` when it
links the job's new version. So a job can move *down* the listing as it completes, below the
stop, with the new datasets of that version; and a producer whose clock runs ahead can push the
high-water mark into the future. Hence: jobs last seen with a run still going are fetched one
by one by the next incremental reconcile wherever they sort now, and the high-water mark never
passes the bot's own clock at the start of the read (reading more is only a cost).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.clients.marquez import MarquezClient, MarquezError, MarquezNotFound
from bot.config import IndexSettings
from bot.core.tables import utcnow
from bot.lineage.service.index import LineageIndex
from bot.lineage.service.index_planner import MarquezFactory, marquez_facts, write_marquez_jobs
from bot.lineage.store.index import mark_deleted, prune_runs, read_state, set_reconciled
from bot.lineage.store.models import LineageJob

logger = logging.getLogger(__name__)
CONFIRM_CONCURRENCY = 8
GOING = frozenset({"NEW", "RUNNING"})
"""Run states whose next event can be the terminal one that re-sorts the job."""


@dataclass(frozen=True)
class ReconcileResult:
    full: bool
    jobs_read: int
    pages: int
    deleted: int


class Reconciler:
    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        marquez: MarquezFactory,
        index: LineageIndex,
        settings: IndexSettings,
        *,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.sessions = sessions
        self.marquez = marquez
        self.index = index
        self.settings = settings
        self.clock = clock
        self._lock = asyncio.Lock()
        self._unsettled: set[tuple[str, str]] = set()
        """Jobs whose latest run was still going when last read: their terminal event may sort
        them below the next incremental's stop (see the module's docstring)."""

    async def start(self) -> None:
        """Load the index; reconcile fully before it counts as ready if it never was."""
        try:
            await self.index.catch_up()
            if self.index.freshness.full_reconcile_at is not None:
                self.index.ready.set()  # plan from what is stored while the full one runs
            await self.full()
        except (MarquezError, OSError) as exc:
            logger.warning("lineage index: first reconcile with Marquez failed: %s", exc)
        finally:
            self.index.ready.set()

    async def run_full(self) -> None:
        """`full`, logging instead of raising (a scheduler job)."""
        try:
            await self.full()
        except Exception:
            logger.exception("lineage index: full reconcile failed")

    async def run_incremental(self) -> None:
        try:
            await self.incremental()
        except Exception:
            logger.exception("lineage index: incremental reconcile failed")

    async def full(self) -> ReconcileResult:
        async with self._lock:
            return await self._full()

    async def _full(self) -> ReconcileResult:
        async with self.marquez() as client:
            started = self.clock()
            seen: set[tuple[str, str]] = set()
            pages, high = await self._read(client, None, seen)
            deleted = await self._deletions(client, seen)
            async with self.sessions.begin() as session:
                await mark_deleted(session, deleted)
                await set_reconciled(session, at=started, high_water=high, full=True)
                await prune_runs(session, timedelta(days=self.settings.history_days), started)
        await self.index.catch_up()
        self.index.ready.set()  # complete now, whoever started this reconcile
        logger.info("lineage index: full reconcile read %d jobs", len(seen))
        return ReconcileResult(True, len(seen), pages, len(deleted))

    async def incremental(self) -> ReconcileResult:
        async with self._lock:  # before reading the state: a full reconcile may be under way
            async with self.sessions() as session:
                state = await read_state(session)
            if state.high_water is None:
                return await self._full()
            return await self._incremental(state.high_water)

    async def _incremental(self, high_water: datetime) -> ReconcileResult:
        async with self.marquez() as client:
            started = self.clock()
            seen: set[tuple[str, str]] = set()
            stop = high_water - timedelta(seconds=self.settings.overlap_s)
            pages, high = await self._read(client, stop, seen)
            await self._settle(client, self._unsettled - seen, seen)
            async with self.sessions.begin() as session:
                await set_reconciled(session, at=started, high_water=high, full=False)
        await self.index.catch_up()
        return ReconcileResult(False, len(seen), pages, 0)

    async def _read(
        self, client: MarquezClient, stop: datetime | None, seen: set[tuple[str, str]]
    ) -> tuple[int, datetime | None]:
        """Write listed jobs page by page until one is older than `stop` (all if None)."""
        pages = 0
        high: datetime | None = None
        now = self.clock()
        async for page in client.job_pages():
            pages += 1
            keep: list[dict[str, Any]] = []
            older = False
            for job in page:
                found = marquez_facts(job)
                if found is None:
                    continue
                updated = found[0].marquez_updated_at
                if stop is not None and updated is not None and updated < stop:
                    older = True
                    continue
                if updated is not None and (high is None or updated > high):
                    high = min(updated, now)  # a producer's clock ahead never moves it past now
                key = (found[0].namespace, found[0].name)
                seen.add(key)
                self._note_run(key, job)
                keep.append(job)
            await write_marquez_jobs(self.sessions, keep)
            if older:
                break
        return pages, high

    def _note_run(self, key: tuple[str, str], job: dict[str, Any]) -> None:
        run = job.get("latestRun")
        state = run.get("state") if isinstance(run, dict) else None
        if state in GOING:
            self._unsettled.add(key)
        else:
            self._unsettled.discard(key)

    async def _settle(
        self, client: MarquezClient, keys: set[tuple[str, str]], seen: set[tuple[str, str]]
    ) -> None:
        """Fetch the jobs that were going last time and the listing did not reach this time."""
        gate = asyncio.Semaphore(CONFIRM_CONCURRENCY)

        async def fetch(key: tuple[str, str]) -> dict[str, Any] | None:
            async with gate:
                try:
                    return await client.get_job(*key)
                except MarquezNotFound:  # deleted: the next full reconcile marks it
                    self._unsettled.discard(key)
                    return None

        jobs = [job for job in await asyncio.gather(*map(fetch, sorted(keys))) if job is not None]
        for job in jobs:
            found = marquez_facts(job)
            if found is not None:
                key = (found[0].namespace, found[0].name)
                seen.add(key)
                self._note_run(key, job)
        await write_marquez_jobs(self.sessions, jobs)

    async def _deletions(
        self, client: MarquezClient, seen: set[tuple[str, str]]
    ) -> list[tuple[str, str]]:
        async with self.sessions() as session:
            rows = await session.execute(
                select(LineageJob.namespace, LineageJob.name).where(
                    LineageJob.in_marquez.is_(True), LineageJob.deleted.is_(False)
                )
            )
            missing = sorted({(ns, name) for ns, name in rows} - seen)
        gate = asyncio.Semaphore(CONFIRM_CONCURRENCY)

        async def gone(key: tuple[str, str]) -> bool:
            async with gate:
                try:
                    job = await client.get_job(*key)
                except MarquezNotFound:
                    return True
            await write_marquez_jobs(self.sessions, [job])  # updated during the listing
            return False

        answers = await asyncio.gather(*(gone(key) for key in missing))
        return [key for key, answer in zip(missing, answers, strict=True) if answer]
