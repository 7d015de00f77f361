"""The late-event sweep: events reaching Marquez long after their eventTime are still read.

The poller's main read takes `GET /api/v1/events/lineage?after=…` from just behind its cursor,
and Marquez filters that on the event's own eventTime: an event whose eventTime is older (a
producer's clock behind, a buffered transport, a retry an hour later) falls behind the read and
would never be seen. Marquez exposes no receipt time of an event (runs carry the eventTime as
`updatedAt`; a job's `updatedAt` is Marquez's clock until a terminal event sets that event's
time again: FIDELITY.md row 2), so nothing in its API names late arrivals — except counts:
every answer of the feed carries `totalCount`, the number of events of every kind (run,
dataset, job) in the window, and `limit=0` (`@Min(0)`) asks for the count alone.

So the axis behind the main read is cut into buckets of `watch.late_bucket_s`, aligned to the
epoch, back to `watch.late_window_s` before now (bot/events/rules/late_window.py does the
arithmetic), and the sweep keeps Marquez's count of each (watch_cursors.late_counts, written in
the poll's one transaction with the events and the cursor, so a restart re-reads nothing and
events that arrived while the bot was down show up as changed counts). Each poll:

1. Buckets without a count that ended at least `overlap_s` ago (usually none, one per bucket
   width as the clock advances, all of them on the very first poll) are counted BEFORE the
   main read, and the main read starts at the lowest of them if that is below
   W1 = floor(cursor − overlap), else at W1 (not at cursor − overlap: the part of W1's bucket
   before that is not swept yet). Main read and swept buckets meet without a gap, and every
   event a stored count includes was read by the read that followed the count. Counting a
   bucket only once it is `overlap_s` old leaves ordinary lateness to the main read; counting
   it then, rather than when W1 passes it, means a cursor that jumps (first poll, catching up,
   a quiet feed) needs no second read of what it jumped over.
2. ONE count of all buckets wholly before the main read. Equal to the sum of the stored
   counts: nothing arrived late, and that is the idle cost — one request. Different: bisect —
   count the left half (the right half's count is the parent's minus the left's), descend
   into halves that differ, and read each changed bucket in full (pages, oldest first). The
   bucket's new count is the first page's `totalCount`, taken before the read: an event
   arriving mid-read makes the next poll's count differ and the bucket is read again. Counts
   are only ever lowered against Marquez, never raised past what was read, so a race costs a
   re-read, never a missed event. A bucket whose count went down (Marquez's retention) takes
   the new count without a read.
3. Events found are stored like the main read's (identity (run id, type, eventTime), so a
   re-read stores nothing twice) and handed to the incident processor the same way; one INFO
   line says how many and how late.

Without stored counts (the first poll, a cursor from before this column, another
`late_bucket_s`) the origin is the poll's cursor − overlap: nothing is re-read, and the bucket
counts are taken on that poll. Buckets before the origin get no baseline count: a change
there could only be read together with the history around it (Marquez cannot tell which
events are new), and the watcher must not alert on history before its configured start.

Limits, by design: an event more than `late_window_s` behind the clock when it reaches Marquez
is not caught, nor one dated before `origin` (the first poll's `after`: the configured start
less the overlap), the start the main read honours too; so for its first `late_window_s` a
new watcher catches late events dated after its start only. A deletion and a late arrival in
the same poll interval cancel out in a count (deletions are retention, days behind the window).
An event arriving more than `overlap_s` late while its bucket is still read by the main read
is stored by it, and its bucket is re-read once when swept (an over-read, never a miss).
A bucket with no count is counted before the main read covers it; if that read stops early
(`MAX_PAGES`), counts of buckets it did not reach are dropped and taken again next poll.
Sweep requests fail like the main read's (backoff, one notice) and the whole poll is retried;
the sweep never moves the cursor.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from bot.clients.marquez import MarquezClient
from bot.config import Watch
from bot.events.rules.event import ParsedEvent
from bot.events.rules.late_window import LateState, Plan, changed_leaves, plan
from bot.events.service.feed import Batch, FeedReader
from bot.events.store import run_events
from bot.events.store.models import EventSource
from bot.events.store.run_events import store_events

__all__ = ["LEAF_MAX_PAGES", "LateSweep", "SweepRun", "describe_found", "store_late"]

logger = logging.getLogger(__name__)

LEAF_MAX_PAGES = 10_000
"""Pages of one changed bucket read at most (a bucket read short keeps its old count)."""


class LateSweep:
    """Per poller: plans each poll's sweep from the clock, the cursor and the stored counts."""

    def __init__(self, watch: Watch, feed: FeedReader) -> None:
        self._window = timedelta(seconds=watch.late_window_s)
        self._width = timedelta(seconds=watch.late_bucket_s)
        self._overlap = timedelta(seconds=watch.overlap_s)
        self._feed = feed

    @property
    def enabled(self) -> bool:
        return self._window > timedelta(0)

    def begin(self, now: datetime, position: datetime, stored: object) -> SweepRun | None:
        """This poll's sweep (None when `late_window_s` is 0); `stored` is late_counts."""
        if not self.enabled:
            return None
        state = LateState.from_json(stored, self._width)
        planned = plan(
            now=now,
            position=position,
            overlap=self._overlap,
            window=self._window,
            width=self._width,
            state=state,
        )
        return SweepRun(planned, self._feed)


class SweepRun:
    """One poll's sweep: count fresh buckets, then (after the main read) compare and bisect."""

    def __init__(self, planned: Plan, feed: FeedReader) -> None:
        self._plan = planned
        self._feed = feed
        self.requests = 0
        self.found: list[list[ParsedEvent]] = []
        """Run events of each bucket read completely so far: kept if the sweep is cut short,
        since those buckets' counts are already updated."""

    @property
    def read_from(self) -> datetime:
        """Where the main read starts this poll."""
        return self._plan.read_from

    async def count_fresh(self, client: MarquezClient) -> None:
        """Count the buckets without a count, before the main read that covers them."""
        for key in self._plan.fresh:
            self._plan.counts[key] = await self._count(client, [key])

    def main_read(self, batch: Batch) -> None:
        """Drop the fresh counts of buckets a main read cut short did not reach."""
        if batch.complete:
            return
        reach = batch.newest
        for key in self._plan.fresh:
            if reach is None or self._plan.window(key)[1] > reach:
                self._plan.counts.pop(key, None)

    async def sweep(self, client: MarquezClient) -> list[list[ParsedEvent]]:
        """Compare the buckets behind the main read with Marquez; read the changed ones.
        Returns (and keeps in `found`) the run events of each bucket read; a bucket's count
        changes only once its events are in `found`, so a sweep cut short misses nothing."""
        swept = self._plan.swept
        if not swept:
            return []
        observed = await self._count(client, swept)
        leaves = await changed_leaves(
            swept, observed, self._plan.counts, lambda keys: self._count(client, keys)
        )
        for key, count in leaves:
            if count < self._plan.counts[key]:
                self._plan.counts[key] = count  # retention deleted some: the new baseline
                continue
            after, before = self._plan.window(key)
            batch = await self._feed.read(client, after, before, max_pages=LEAF_MAX_PAGES)
            self.requests += batch.pages
            self.found.append(batch.events)
            if batch.complete and batch.total is not None:
                self._plan.counts[key] = batch.total
        return self.found

    def state(self) -> dict[str, Any]:
        """What to store in watch_cursors.late_counts after this poll."""
        return self._plan.state().to_json()

    async def _count(self, client: MarquezClient, keys: Sequence[datetime]) -> int:
        after, before = self._plan.span(keys)
        self.requests += 1
        page = await client.lineage_events(after=after, before=before, limit=0)
        return page.total_count


async def store_late(
    session: AsyncSession,
    buckets: Sequence[Sequence[ParsedEvent]],
    now: datetime,
    resolved: list[ParsedEvent] | None = None,
    new_types: Counter[str] | None = None,
) -> int:
    """Store the run events of the buckets a sweep read (in the caller's transaction) and log
    the ones that were new; returns how many were (`resolved`, `new_types`: as
    `store_events`)."""
    late: list[ParsedEvent] = []
    for events in buckets:
        if not events:
            continue
        # What the bucket already had in run_events, to say which events were late.
        lo, hi = min(e.event_time for e in events), max(e.event_time for e in events)
        known = await run_events.keys_between(session, lo, hi)
        late += [e for e in events if e.key not in known]
    new = await store_events(
        session,
        late,
        source=EventSource.MARQUEZ,
        received_at=now,
        resolved=resolved,
        new_types=new_types,
    )
    if new:
        logger.info(describe_found(new, late, len(buckets), now))
    return new


def describe_found(new: int, events: Sequence[ParsedEvent], buckets: int, now: datetime) -> str:
    """The INFO line for late events stored by a sweep."""
    ages = [now - event.event_time for event in events] or [timedelta(0)]
    return (
        f"late-event sweep: {new} late run event{'' if new == 1 else 's'} stored from "
        f"{buckets} changed bucket{'' if buckets == 1 else 's'}, eventTime {_age(min(ages))} "
        f"to {_age(max(ages))} behind the clock"
    )


def _age(value: timedelta) -> str:
    seconds = max(0, int(value.total_seconds()))
    hours, rest = divmod(seconds, 3600)
    return f"{hours} h {rest // 60:02d} min" if hours else f"{rest // 60} min {rest % 60:02d} s"
