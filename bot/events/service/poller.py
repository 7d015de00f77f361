"""The Marquez poller: run events read forward from a cursor kept in the database.

Marquez has no webhooks (tests/fixtures/marquez/NOTES.md §1.12), so the watcher reads
`GET /api/v1/events/lineage?after=…&sortDirection=asc` every `watch.poll_interval_s`. Each poll
re-reads from the start of the `watch.late_bucket_s` bucket holding cursor − `watch.overlap_s`,
because `after` filters on the event's own eventTime and late events carry old ones; events
later than that are found by the late-event sweep (bot/events/service/late_sweep.py), which keeps
Marquez's count of each bucket behind the read and re-reads a bucket whose count changed.
Re-read events are dropped by the store's identity (run id, event type, event time). A FAIL
followed by a COMPLETE before the next poll is two events in the feed, so both are stored:
nothing depends on a job's latest state.

One transaction per poll stores the events, the sweep's counts, and moves the cursor to the
newest eventTime read by the main read
(never past the clock: a producer whose clock runs ahead must not make the poller skip what
comes next), so a restart neither loses nor re-reads anything. The transaction opens with an
UPDATE of the cursor row, which locks it (a PostgreSQL row lock, SQLite's write lock) until
commit: two bot processes polling one database take turns on it, the cursor only moves
forward, and a reachability change is announced once.

When Marquez is down, slow or answers garbage the cursor stays, polls are skipped with
exponential backoff (in memory, per process), and the ops channel gets one "unreachable"
notice, then one "recovered" notice from the poll that reads on from where the poller stopped.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.clients.marquez import MarquezClient, MarquezError
from bot.config import Watch
from bot.core.metrics import Metrics
from bot.core.tables import utcnow
from bot.events import messages as ops_messages
from bot.events.rules.event import ParsedEvent
from bot.events.service.feed import MAX_PAGES, Batch, FeedReader
from bot.events.service.late_sweep import LateSweep, SweepRun, store_late
from bot.events.store import cursors
from bot.events.store.models import EventSource
from bot.events.store.run_events import store_events
from bot.slack.store.outbox import enqueue

__all__ = [
    "FETCH_TIMEOUT_S",
    "MAX_BACKOFF_S",
    "MAX_PAGES",
    "MarquezPoller",
]

logger = logging.getLogger(__name__)

MAX_BACKOFF_S = 300.0
"""The longest wait between two tries while Marquez is failing that `watch.retry_max_s` may
set (its default is 60 s)."""
FETCH_TIMEOUT_S = 120.0
"""One poll's reads (the sweep's included) must finish within this, however slow Marquez is."""
_FAILURES = (MarquezError, TimeoutError, aiohttp.ClientError)


class MarquezPoller:
    """Polls Marquez's event feed into `run_events` (source `marquez`); see the module doc."""

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        client_factory: Callable[[], AbstractAsyncContextManager[MarquezClient]],
        watch: Watch,
        *,
        clock: Callable[[], datetime] = utcnow,
        on_events: Callable[[list[ParsedEvent]], Awaitable[None]] | None = None,
        on_recovered: Callable[[], Awaitable[object]] | None = None,
        cursor_name: str = "marquez",
        max_backoff_s: float | None = None,
        fetch_timeout_s: float = FETCH_TIMEOUT_S,
        metrics: Metrics,
    ) -> None:
        self._sessions = sessions
        self._metrics = metrics
        self._client_factory = client_factory
        self._watch = watch
        self._clock = clock
        self._on_events = on_events
        self._name = cursor_name
        self._on_recovered = on_recovered
        self._max_backoff_s = min(
            MAX_BACKOFF_S, max_backoff_s if max_backoff_s is not None else watch.retry_max_s
        )
        self._last_failure: datetime | None = None  # of this process's current failing streak
        self._recovered = False
        self._fetch_timeout_s = fetch_timeout_s
        self._overlap = timedelta(seconds=watch.overlap_s)
        self._boot = clock()
        self._failures = 0  # consecutive failed polls of this process
        self._next_try: datetime | None = None
        self._feed = FeedReader(watch.page_size)
        self._late = LateSweep(watch, self._feed)
        self._stored: dict[tuple[str, str, datetime], datetime] = {}

    @property
    def next_try(self) -> datetime | None:
        """While Marquez is failing: when this poller tries again (polls before are skipped)."""
        return self._next_try

    async def poll_once(self) -> int:
        """One poll: read, store and move the cursor; returns how many events were new.

        Marquez failing (unreachable, 5xx, timeouts, garbage) is handled here and returns 0;
        database errors propagate (the next poll simply tries again).
        """
        started = self._clock()
        # Half an interval of slack: the tick meant to retry may fire a hair before next_try.
        slack = timedelta(seconds=self._watch.poll_interval_s / 2)
        if self._next_try is not None and started < self._next_try - slack:
            return 0
        position, late_counts = await self._position(started)
        sweep = self._late.begin(started, position, late_counts)
        read_from = position - self._overlap if sweep is None else sweep.read_from
        try:
            async with self._client_factory() as client:
                async with asyncio.timeout(self._fetch_timeout_s):
                    if sweep is not None:
                        await sweep.count_fresh(client)  # before the main read covering them
                    batch = await self._feed.read(client, read_from)
                if sweep is not None:
                    sweep.main_read(batch)
                    await self._sweep(sweep, client)
        except _FAILURES as exc:
            self._metrics.polls.labels("failed").inc()
            await self._failed(started, position, exc)
            return 0
        late = sweep.found if sweep is not None else []
        types: Counter[str] = Counter()
        new, stored = await self._commit(batch, read_from, sweep, late, self._clock(), types)
        self._metrics.polls.labels("ok").inc()
        for event_type, count in types.items():
            self._metrics.event_ingested(EventSource.MARQUEZ.value, event_type, count)
        self._failures, self._next_try, self._last_failure = 0, None, None
        if self._recovered:
            self._recovered = False
            if self._on_recovered is not None:
                # Alerts raised while Marquez was down said "Downstream: unknown": ask again.
                await self._on_recovered()
        if stored and self._on_events is not None:
            await self._on_events(stored)  # after the commit: never at the events' expense
        return new

    async def _sweep(self, sweep: SweepRun, client: MarquezClient) -> None:
        """The late-event sweep, on its own time budget: a large late flush is read over
        several polls (what one poll read is kept, the rest stays changed in the counts), and
        it never holds back the main read's events or fails the poll."""
        try:
            async with asyncio.timeout(self._fetch_timeout_s):
                await sweep.sweep(client)
        except _FAILURES as exc:
            logger.warning("late-event sweep cut short (%s); the next poll reads on", _reason(exc))

    def schedule(self, scheduler: AsyncIOScheduler) -> None:
        """Poll every `watch.poll_interval_s` on `scheduler` (APScheduler 3), first at once;
        nothing when `watch.poll` is off (the receiver alone feeds the watcher then).

        One poll at a time (`max_instances=1`); polls missed while one ran long collapse into
        one (`coalesce`), and none is dropped for starting late (`misfire_grace_time=None`).
        """
        if not self._watch.poll:
            logger.info("watch.poll is off: Marquez's event feed is not polled")
            return
        scheduler.add_job(
            self._tick,
            "interval",
            seconds=self._watch.poll_interval_s,
            id=f"watch-poll-{self._name}",
            name=f"poll Marquez events ({self._name})",
            max_instances=1,
            coalesce=True,
            misfire_grace_time=None,
            replace_existing=True,
            next_run_time=datetime.now(UTC),
        )

    async def _tick(self) -> None:
        try:
            await self.poll_once()
        except Exception:  # the scheduler keeps polling; the next tick tries again
            logger.exception("polling Marquez events failed")

    # -- the cursor -----------------------------------------------------------------------------

    async def _position(self, now: datetime) -> tuple[datetime, object]:
        """The cursor and the sweep's counts; the first poll ever starts at `start_from`, else
        `lookback_s` before boot."""
        async with self._sessions.begin() as session:
            cursor = await cursors.read(session, self._name, start=self._start(), now=now)
        return cursor.position, cursor.late_counts

    def _start(self) -> datetime:
        start = self._watch.start_from
        if start is None:
            return self._boot - timedelta(seconds=self._watch.lookback_s)
        return start if start.tzinfo is not None else start.replace(tzinfo=UTC)

    async def _commit(
        self,
        batch: Batch,
        read_from: datetime,
        sweep: SweepRun | None,
        late: list[list[ParsedEvent]],
        now: datetime,
        types: Counter[str],
    ) -> tuple[int, list[ParsedEvent]]:
        """Store the events and the sweep's counts, move the cursor, in one transaction;
        announce a recovery. Returns how many events were new, and the events as stored
        (`types` receives the types of the new ones)."""
        stored: list[ParsedEvent] = []
        async with self._sessions.begin() as session:
            row = await cursors.lock_for_commit(session, self._name)
            fresh = [event for event in batch.events if event.key not in self._stored]
            new = await store_events(
                session,
                fresh,
                source=EventSource.MARQUEZ,
                received_at=now,
                resolved=stored,
                new_types=types,
            )
            late_fresh = [[e for e in events if e.key not in self._stored] for events in late]
            new += await store_late(session, late_fresh, now, resolved=stored, new_types=types)
            changes: dict[str, Any] = {}
            counts = None if sweep is None else sweep.state()
            if counts != row.late_counts:
                changes.update(late_counts=counts)
            if batch.newest is not None and min(batch.newest, now) > row.position:
                changes.update(position=min(batch.newest, now), updated_at=now)
            if not row.reachable:
                changes.update(reachable=True, updated_at=now)
                # Down from the first failed poll until some moment between the last failed one
                # (this process's; another's is not known) and this one.
                down = (max(row.updated_at, self._last_failure or row.updated_at), now)
                await self._notice(
                    session,
                    ops_messages.recovered(down, row.updated_at, row.position - self._overlap, new),
                )
                self._recovered = True  # told after the commit (see poll_once)
            if changes:
                await cursors.change(session, self._name, **changes)
        self._remember(batch.events, read_from)
        if batch.skipped:
            # DEBUG: the overlap re-reads an unusable event on every poll, and the feed reader
            # has already warned about each one once.
            logger.debug("Marquez poll: %d events skipped as unusable", batch.skipped)
        return new, stored

    def _remember(self, events: list[ParsedEvent], horizon: datetime) -> None:
        """Keep the keys of committed events the next poll may read again (it starts at or
        after this one's `read_from`), so an idle poll writes no rows; the database's unique
        key stays the rule, this only saves work."""
        self._stored.update((e.key, e.event_time) for e in events)
        self._stored = {key: at for key, at in self._stored.items() if at >= horizon}

    async def _failed(self, now: datetime, position: datetime, exc: BaseException) -> None:
        """Keep the cursor, back off, and announce the outage if it is news."""
        reason = _reason(exc)
        self._failures += 1
        self._last_failure = now
        doubling = 2 ** min(self._failures, 30)  # bounded: a long outage must not overflow
        delay = min(self._max_backoff_s, self._watch.poll_interval_s * doubling)
        self._next_try = now + timedelta(seconds=delay)
        logger.warning("Marquez poll failed (%s); next try in %.0fs", reason, delay)
        async with self._sessions.begin() as session:
            if await cursors.record_failure(session, self._name, reason, now=now):
                await self._notice(
                    session, ops_messages.unreachable(reason, position - self._overlap)
                )

    async def _notice(self, session: AsyncSession, payload: dict[str, Any]) -> None:
        channel = self._watch.ops_channel
        if channel is None:
            logger.warning("%s (no watch.ops_channel to tell)", payload["text"])
            return
        await enqueue(session, channel=channel, payload=payload)
        self._metrics.notice_owed(session, "ops_notice")


def _reason(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "no complete answer in time"
    text = str(exc) or type(exc).__name__
    return " ".join(text.split())
