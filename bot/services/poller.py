"""The Marquez poller: run events read forward from a cursor kept in the database.

Marquez has no webhooks (shared/fixtures/marquez/NOTES.md §1.12), so the watcher reads
`GET /api/v1/events/lineage?after=…&sortDirection=asc` every `watch.poll_interval_s`. Each poll
re-reads `watch.overlap_s` before its cursor, because `after` filters on the event's own
eventTime and late events carry old ones; re-read events are dropped by the store's identity
(run id, event type, event time). A FAIL followed by a COMPLETE before the next poll is two
events in the feed, so both are stored: nothing depends on a job's latest state.

One transaction per poll stores the events and moves the cursor to the newest eventTime read
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
import json
import logging
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from sqlalchemy import select, update
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.clients.marquez import MarquezClient, MarquezError
from bot.config import Watch
from bot.messages import SENTENCE, clip  # importing it also registers the |mrkdwn filter
from bot.render import environment
from bot.services.ingest import (
    InvalidEvent,
    ParsedEvent,
    parse_event_time,
    parse_run_event,
    store_events,
)
from bot.slack_limits import check_message
from bot.store.models import utcnow
from bot.store.outbox import enqueue
from bot.store.watch_models import EventSource, WatchCursor

__all__ = [
    "FETCH_TIMEOUT_S",
    "MAX_BACKOFF_S",
    "MAX_PAGES",
    "MarquezPoller",
    "describe_duration",
    "recovered",
    "unreachable",
]

logger = logging.getLogger(__name__)

MAX_BACKOFF_S = 300.0
"""Longest wait between two tries while Marquez is failing."""
MAX_PAGES = 200
"""Pages one poll reads at most; a longer backlog is read on by the following polls."""
FETCH_TIMEOUT_S = 120.0
"""One poll's reads must finish within this, however Marquez trickles its answers."""
_FAILURES = (MarquezError, TimeoutError, aiohttp.ClientError)
_REPORTED_INVALID_MAX = 10_000
_ERROR_MAX = 500  # watch_cursors.last_error


@dataclass
class _Batch:
    """What one poll read: the usable run events and the newest eventTime among all events."""

    events: list[ParsedEvent] = field(default_factory=list)
    newest: datetime | None = None
    pages: int = 0
    skipped: int = 0


class MarquezPoller:
    """Polls Marquez's event feed into `run_events` (source `marquez`); see the module doc."""

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        client_factory: Callable[[], AbstractAsyncContextManager[MarquezClient]],
        watch: Watch,
        *,
        clock: Callable[[], datetime] = utcnow,
        on_stored: Callable[[], None] = lambda: None,
        cursor_name: str = "marquez",
        max_backoff_s: float = MAX_BACKOFF_S,
        fetch_timeout_s: float = FETCH_TIMEOUT_S,
    ) -> None:
        self._sessions = sessions
        self._client_factory = client_factory
        self._watch = watch
        self._clock = clock
        self._on_stored = on_stored
        self._name = cursor_name
        self._max_backoff_s = max_backoff_s
        self._fetch_timeout_s = fetch_timeout_s
        self._overlap = timedelta(seconds=watch.overlap_s)
        self._boot = clock()
        self._failures = 0  # consecutive failed polls of this process
        self._next_try: datetime | None = None
        self._reported_invalid: set[tuple[Any, Any, Any]] = set()
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
        position = await self._position(started)
        try:
            async with asyncio.timeout(self._fetch_timeout_s):
                batch = await self._read(position - self._overlap)
        except _FAILURES as exc:
            await self._failed(started, position, exc)
            return 0
        new = await self._commit(batch, self._clock())
        self._failures, self._next_try = 0, None
        if new:
            try:
                self._on_stored()
            except Exception:  # the events are stored; their processor finds them later
                logger.exception("waking the incident processor failed")
        return new

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

    # -- reading ------------------------------------------------------------------------------

    async def _read(self, after: datetime) -> _Batch:
        """Pages of events with eventTime >= after, oldest first, until a short page.

        One `after` for the whole poll and offsets within it: `totalCount` also counts dataset
        and job events, so only a short page says the feed is exhausted. A server that ignores
        the offset (the same full page twice) ends the poll rather than looping.
        """
        size = self._watch.page_size
        batch = _Batch()
        previous: list[dict[str, Any]] | None = None
        async with self._client_factory() as client:
            while batch.pages < MAX_PAGES:
                page = await client.lineage_events(
                    after=after, sort_direction="asc", limit=size, offset=batch.pages * size
                )
                batch.pages += 1
                if page.events and page.events == previous:
                    logger.warning("Marquez ignored the offset of its event feed; poll ends here")
                    break
                for body in page.events:
                    self._take(batch, body)
                if len(page.events) < size:
                    return batch
                previous = page.events
        logger.info("read %d pages of Marquez events; the next poll reads on", batch.pages)
        return batch

    def _take(self, batch: _Batch, body: dict[str, Any]) -> None:
        try:
            # Even an event the bot cannot use has been read: the cursor may pass it.
            when = parse_event_time(body.get("eventTime"))
            batch.newest = when if batch.newest is None else max(batch.newest, when)
            event = parse_run_event(body)
        except InvalidEvent as exc:
            batch.skipped += 1
            self._report_invalid(body, exc)
            return
        if event is not None:
            batch.events.append(event)

    def _report_invalid(self, body: dict[str, Any], exc: InvalidEvent) -> None:
        # Once per event, not once per poll that re-reads it within the overlap.
        run = body.get("run")
        key = (repr(run.get("runId") if isinstance(run, dict) else None),
               repr(body.get("eventType")), repr(body.get("eventTime")))  # fmt: skip
        if key in self._reported_invalid:
            return
        if len(self._reported_invalid) >= _REPORTED_INVALID_MAX:
            self._reported_invalid.clear()
        self._reported_invalid.add(key)
        logger.warning("skipping a Marquez event the watcher cannot use: %s", exc)

    # -- the cursor -----------------------------------------------------------------------------

    async def _position(self, now: datetime) -> datetime:
        """The cursor; the first poll ever starts at `start_from`, else `lookback_s` before boot."""
        query = select(WatchCursor.position).where(WatchCursor.name == self._name)
        async with self._sessions.begin() as session:
            position = await session.scalar(query)
            if position is None:
                await self._create_cursor(session, now)
                position = await session.scalar(query)
        assert position is not None  # created just above if it was missing
        return position

    def _start(self) -> datetime:
        start = self._watch.start_from
        if start is None:
            return self._boot - timedelta(seconds=self._watch.lookback_s)
        return start if start.tzinfo is not None else start.replace(tzinfo=UTC)

    async def _create_cursor(self, session: AsyncSession, now: datetime) -> None:
        dialect = session.get_bind().dialect.name
        insert: Any = postgresql_insert if dialect == "postgresql" else sqlite_insert
        await session.execute(
            insert(WatchCursor)
            .values(
                name=self._name,
                position=self._start(),
                reachable=True,
                failures=0,
                last_error=None,
                updated_at=now,
            )
            .on_conflict_do_nothing(index_elements=["name"])
        )

    async def _commit(self, batch: _Batch, now: datetime) -> int:
        """Store the events and move the cursor in one transaction; announce a recovery."""
        async with self._sessions.begin() as session:
            # The first statement writes, so the row (SQLite: the database) is ours until
            # commit; `updated_at` is when the position or reachability last changed.
            row = (
                await session.execute(
                    update(WatchCursor)
                    .where(WatchCursor.name == self._name)
                    .values(failures=0, last_error=None)
                    .returning(WatchCursor.position, WatchCursor.reachable, WatchCursor.updated_at)
                )
            ).one()
            fresh = [event for event in batch.events if event.key not in self._stored]
            new = await store_events(session, fresh, source=EventSource.MARQUEZ, received_at=now)
            changes: dict[str, Any] = {}
            if batch.newest is not None and min(batch.newest, now) > row.position:
                changes.update(position=min(batch.newest, now), updated_at=now)
            if not row.reachable:
                changes.update(reachable=True, updated_at=now)
                await self._notice(
                    session,
                    recovered(
                        now - row.updated_at, row.updated_at, row.position - self._overlap, new
                    ),
                )
            if changes:
                await session.execute(
                    update(WatchCursor).where(WatchCursor.name == self._name).values(**changes)
                )
        self._remember(batch.events, changes.get("position", row.position))
        if batch.skipped:
            logger.info("Marquez poll: %d events skipped as unusable", batch.skipped)
        return new

    def _remember(self, events: list[ParsedEvent], position: datetime) -> None:
        """Keep the keys of committed events the next poll may read again (its overlap), so an
        idle poll writes no rows; the database's unique key stays the rule, this only saves
        work."""
        horizon = position - self._overlap
        self._stored.update((e.key, e.event_time) for e in events)
        self._stored = {key: at for key, at in self._stored.items() if at >= horizon}

    async def _failed(self, now: datetime, position: datetime, exc: BaseException) -> None:
        """Keep the cursor, back off, and announce the outage if it is news."""
        reason = _reason(exc)
        self._failures += 1
        doubling = 2 ** min(self._failures, 30)  # bounded: a long outage must not overflow
        delay = min(self._max_backoff_s, self._watch.poll_interval_s * doubling)
        self._next_try = now + timedelta(seconds=delay)
        logger.warning("Marquez poll failed (%s); next try in %.0fs", reason, delay)
        async with self._sessions.begin() as session:
            reachable = await session.scalar(
                update(WatchCursor)
                .where(WatchCursor.name == self._name)
                .values(failures=WatchCursor.failures + 1, last_error=reason[:_ERROR_MAX])
                .returning(WatchCursor.reachable)
            )
            if reachable:
                await session.execute(
                    update(WatchCursor)
                    .where(WatchCursor.name == self._name)
                    .values(reachable=False, updated_at=now)
                )
                await self._notice(session, unreachable(reason, position - self._overlap))

    async def _notice(self, session: AsyncSession, payload: dict[str, Any]) -> None:
        channel = self._watch.ops_channel
        if channel is None:
            logger.warning("%s (no watch.ops_channel to tell)", payload["text"])
            return
        await enqueue(session, channel=channel, payload=payload)


# -- notices --------------------------------------------------------------------------------------


def unreachable(reason: str, resume_from: datetime) -> dict[str, Any]:
    """The ops notice posted once when Marquez stops answering usefully."""
    return _render(
        ":warning:",
        "Marquez unreachable",
        "The watcher cannot read Marquez's run events and retries with backoff. It keeps its "
        "place, so no failure is lost: once Marquez answers, it reads on from there.",
        [f"Error: {reason}", f"Resumes from events at {_moment(resume_from)}"],
    )


def recovered(
    down_for: timedelta, since: datetime, read_from: datetime, new: int
) -> dict[str, Any]:
    """The ops notice posted once when Marquez answers again after an outage."""
    events = f"{new} new run event{'' if new == 1 else 's'}"
    return _render(
        ":white_check_mark:",
        "Marquez recovered",
        f"Marquez answers again after {describe_duration(down_for)} unreachable. No events "
        f"were missed: the watcher read on from where it stopped ({events} so far).",
        [f"Unreachable since {_moment(since)}", f"Read on from events at {_moment(read_from)}"],
    )


def describe_duration(value: timedelta) -> str:
    """`45 s`, `12 min`, `3 h 5 min`, `2 d 4 h`: the two largest units that matter."""
    seconds = max(0, int(value.total_seconds()))
    if seconds < 60:
        return f"{seconds} s"
    minutes, hours, days = seconds // 60, seconds // 3600, seconds // 86400
    if hours == 0:
        return f"{minutes} min"
    if days == 0:
        rest = minutes % 60
        return f"{hours} h" + (f" {rest} min" if rest else "")
    rest = hours % 24
    return f"{days} d" + (f" {rest} h" if rest else "")


def _render(icon: str, title: str, text: str, facts: list[str]) -> dict[str, Any]:
    view = {
        "icon": icon,
        "title": title,
        "text": clip(text, SENTENCE),
        "facts": [clip(fact, 500) for fact in facts],
    }
    payload: dict[str, Any] = json.loads(
        environment().get_template("watch/notice.json.j2").render(**view)
    )
    check_message(payload)
    return payload


def _moment(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _reason(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "no complete answer in time"
    text = str(exc) or type(exc).__name__
    return " ".join(text.split())
