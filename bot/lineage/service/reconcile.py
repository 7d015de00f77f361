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

Replicas on one database reconcile one at a time (a lease, `bot/lineage/store/reconcile_state.py`):
the others catch up with what the holder writes. Memory stays at one page: each is parsed,
written and dropped before the next is asked for; what is kept across pages is the jobs' keys.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.clients.marquez import MarquezClient, MarquezError, MarquezNotFound
from bot.config import IndexSettings
from bot.core.http import describe
from bot.core.tables import utcnow
from bot.lineage.service.index import LineageIndex
from bot.lineage.service.index_planner import MarquezFactory, marquez_facts, write_marquez_jobs
from bot.lineage.store.index import mark_deleted, prune_runs, read_state, set_reconciled
from bot.lineage.store.models import LineageJob
from bot.lineage.store.reconcile_state import (
    read_progress,
    record_failure,
    release_lease,
    renew_lease,
    take_lease,
)

logger = logging.getLogger(__name__)
CONFIRM_CONCURRENCY = 8
GOING = frozenset({"NEW", "RUNNING"})
"""Run states whose next event can be the terminal one that re-sorts the job."""
LEASE = timedelta(minutes=15)
"""How long a reconcile holds the lease without writing a page: above a slow Marquez's worst
page (three tries of `marquez_lineage_timeout_s`, up to 600 s, with backoff) and the deletion
check, so a live holder is not overtaken; a dead one keeps the others waiting this long at
most (plans walk Marquez meanwhile)."""
FOLLOW_S = 2.0
CATCH_UP_PAGES = 10
"""Pages a full reconcile writes between loads of what it wrote into this process's index."""
"""How often a replica that does not hold the lease catches up while another loads the index."""
RETRY_FIRST_S = 1.0
RETRY_MAX_S = 60.0


class LeaseLost(RuntimeError):
    """Another replica took the reconcile over (this one stalled past its lease)."""


def why(exc: BaseException) -> str:
    """An error in words: Marquez's and the network's as they are, anything else (a bug) with
    its type, which its message alone may not say (`KeyError: 'x'`)."""
    if isinstance(exc, MarquezError | OSError):
        return describe(exc)
    return f"{type(exc).__name__}: {describe(exc)}"


def default_holder() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


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
        holder: str | None = None,
        on_failure: Callable[[BaseException], None] | None = None,
    ) -> None:
        self.sessions = sessions
        self.marquez = marquez
        self.index = index
        self.settings = settings
        self.clock = clock
        self.holder = holder or default_holder()
        self.on_failure = on_failure
        """Told of every failed reconcile (a metric), after it is logged and recorded."""
        self._lock = asyncio.Lock()
        self._stopped = asyncio.Event()
        self._unsettled: set[tuple[str, str]] = set()
        """Jobs whose latest run was still going when last read: their terminal event may sort
        them below the next incremental's stop (see the module's docstring)."""

    async def start(self) -> None:
        """Load the stored index, then make sure it holds a full reconcile: run one (retrying
        any failure with backoff until one succeeds), or follow the replica running it. Plans
        never wait for this: they fetch what they need on demand meanwhile."""
        delay = RETRY_FIRST_S
        while True:
            try:
                await self.index.catch_up()
                if await self.full() is not None:
                    return
                if await self._follow():
                    return
                continue  # the holder let go without finishing: try to take over
            except Exception as exc:  # anything: the index must not wait six hours for another
                await self._failed(exc, "first full reconcile")
            if await self._waited(delay):
                return
            delay = min(delay * 2, RETRY_MAX_S)

    def stop(self) -> None:
        """End `start`'s retries (and its following of another replica) at their next wait:
        a shutdown need not wait for a Marquez that is down."""
        self._stopped.set()

    async def _waited(self, seconds: float) -> bool:
        """Wait `seconds`, or less if stopped meanwhile; True if stopped."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopped.wait(), seconds)
        return self._stopped.is_set()

    async def _follow(self) -> bool:
        """Catch up while another replica holds the lease; True once a full reconcile is in
        the database (that replica's or an earlier one), False if the lease ends without it."""
        while True:
            await self.index.catch_up()
            async with self.sessions() as session:
                progress = await read_progress(session)
            if progress.full_reconcile_at is not None:
                return True
            if not progress.reconciling(self.clock()):
                return False
            if await self._waited(FOLLOW_S):
                return True  # stopped: nothing more to follow

    async def run_full(self) -> None:
        """`full`, logging instead of raising (a scheduler job)."""
        try:
            await self.full()
        except Exception as exc:
            await self._failed(exc, "full reconcile")

    async def run_incremental(self) -> None:
        try:
            await self.incremental()
        except Exception as exc:
            await self._failed(exc, "incremental reconcile")

    async def _failed(self, exc: BaseException, what: str) -> None:
        if isinstance(exc, MarquezError | OSError):
            logger.warning("lineage index: %s with Marquez failed: %s", what, exc)
        else:
            logger.exception("lineage index: %s failed", what)
        if self.on_failure is not None:
            self.on_failure(exc)
        try:
            async with self.sessions.begin() as session:
                await record_failure(session, f"{what}: {why(exc)}", self.clock())
        except Exception:  # the database itself may be what failed
            logger.warning("lineage index: could not record the failure", exc_info=True)

    async def full(self) -> ReconcileResult | None:
        """A full reconcile, or None if another replica holds the lease."""
        async with self._lock, self._leased() as held:
            return await self._full() if held else None

    async def incremental(self) -> ReconcileResult | None:
        """An incremental reconcile (a full one if none ever ran), or None if another replica
        holds the lease: then only what it wrote is loaded."""
        async with self._lock:  # before reading the state: a full reconcile may be under way
            async with self._leased() as held:
                if held:
                    async with self.sessions() as session:
                        state = await read_state(session)
                    if state.high_water is None:
                        return await self._full()
                    return await self._incremental(state.high_water)
            await self.index.catch_up()
            return None

    async def refresh(self) -> None:
        """An incremental reconcile for a planner looking for a new DAG, unless one is under
        way in this process (a full one can take minutes: the planner searches instead)."""
        if self._lock.locked():
            await self.index.catch_up()
            return
        await self.incremental()

    def _leased(self) -> _Lease:
        return _Lease(self)

    async def _renew(self, **progress: Any) -> None:
        async with self.sessions.begin() as session:
            await self._renew_in(session, **progress)

    async def _renew_in(self, session: AsyncSession, **progress: Any) -> None:
        """Extend the lease in `session` (its page is written only if this is still the
        holder: one commit for both)."""
        if not await renew_lease(session, self.holder, self.clock(), LEASE, **progress):
            raise LeaseLost("another replica took the lineage reconcile over")

    async def _full(self) -> ReconcileResult:
        async with self.marquez() as client:
            started = self.clock()
            await self._renew(started=True)
            seen: set[tuple[str, str]] = set()
            pages, high = await self._read(client, None, seen, full=True)
            deleted = await self._deletions(client, seen)
            async with self.sessions.begin() as session:
                # Still the holder? Another replica that took over must not be contradicted.
                if not await renew_lease(session, self.holder, self.clock(), LEASE):
                    raise LeaseLost("another replica took the lineage reconcile over")
                await mark_deleted(session, deleted)
                await set_reconciled(session, at=started, high_water=high, full=True)
                await prune_runs(session, timedelta(days=self.settings.history_days), started)
        await self.index.catch_up()  # sets `ready`: the database now holds a full reconcile
        logger.info("lineage index: full reconcile read %d jobs", len(seen))
        return ReconcileResult(True, len(seen), pages, len(deleted))

    async def _incremental(self, high_water: datetime) -> ReconcileResult:
        async with self.marquez() as client:
            started = self.clock()
            seen: set[tuple[str, str]] = set()
            stop = high_water - timedelta(seconds=self.settings.overlap_s)
            pages, high = await self._read(client, stop, seen, full=False)
            await self._settle(client, self._unsettled - seen, seen)
            async with self.sessions.begin() as session:
                await set_reconciled(session, at=started, high_water=high, full=False)
        await self.index.catch_up()
        return ReconcileResult(False, len(seen), pages, 0)

    async def _read(
        self,
        client: MarquezClient,
        stop: datetime | None,
        seen: set[tuple[str, str]],
        *,
        full: bool,
    ) -> tuple[int, datetime | None]:
        """Write listed jobs page by page until one is older than `stop` (all if None)."""
        pages = 0
        high: datetime | None = None
        now = self.clock()
        total: list[int] = []
        listing = client.job_pages(on_total=total.append)
        async with contextlib.aclosing(listing):  # stopping early drops the page read ahead
            async for page in listing:
                pages += 1
                keep, older, high = self._take(page, stop, seen, high, now)
                del page  # what is written is dropped: one page in memory at a time
                progress: dict[str, Any] = {}
                if full:
                    progress = {"jobs_read": len(seen), "jobs_total": total[0] if total else None}
                renew = partial(self._renew_in, **progress)
                await write_marquez_jobs(self.sessions, keep, also=renew)
                del keep
                if older:
                    break
                if full:
                    if pages % CATCH_UP_PAGES == 0:
                        # this process's index loads as the pages come (as a replica's does),
                        # not all at the end: 100,000 jobs at once held `ready` back 30 s
                        await self.index.catch_up()
                    # Not in an incremental one: a plan looking for a new DAG may be what
                    # asked for it, and waits for its pages.
                    await self.index.let_askers_first()
        return pages, high

    def _take(
        self,
        page: list[dict[str, Any]],
        stop: datetime | None,
        seen: set[tuple[str, str]],
        high: datetime | None,
        now: datetime,
    ) -> tuple[list[dict[str, Any]], bool, datetime | None]:
        """The page's jobs updated at `stop` or later (added to `seen`), whether it had an
        older one, and the high-water mark with them."""
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
        return keep, older, high

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


class _Lease:
    """`async with`: hold the reconcile lease (yielding True) or not (False, another replica
    has it); released on the way out, with the error if the body raised."""

    def __init__(self, reconciler: Reconciler) -> None:
        self.reconciler = reconciler
        self.held = False

    async def __aenter__(self) -> bool:
        r = self.reconciler
        async with r.sessions.begin() as session:
            self.held = await take_lease(session, r.holder, r.clock(), LEASE)
        return self.held

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, _: Any
    ) -> None:
        if not self.held:
            return
        failed = exc is not None and not isinstance(exc, asyncio.CancelledError)
        error = why(exc) if failed and exc is not None else None
        # Shielded: a cancelled reconcile (serve stopping) still gives the lease back.
        await asyncio.shield(self._release(error))

    async def _release(self, error: str | None) -> None:
        r = self.reconciler
        async with r.sessions.begin() as session:
            await release_lease(session, r.holder, error=error, now=r.clock())
