"""Reading a window of Marquez's event feed (`GET /api/v1/events/lineage`) into run events.

Shared by the poller's main read and the late-event sweep's bucket reads.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from bot.clients.marquez import MarquezClient
from bot.events.rules.event import ParsedEvent
from bot.events.rules.parse import InvalidEvent, parse_event_time, parse_run_event

__all__ = ["MAX_PAGES", "Batch", "FeedReader"]

logger = logging.getLogger(__name__)

MAX_PAGES = 200
"""Pages one read takes at most; a longer backlog is read on by the following polls."""
_REPORTED_INVALID_MAX = 10_000


@dataclass
class Batch:
    """What one read got: the usable run events and the newest eventTime among all events."""

    events: list[ParsedEvent] = field(default_factory=list)
    newest: datetime | None = None
    pages: int = 0
    skipped: int = 0
    complete: bool = False
    """Read up to a short page: every event in the window at the first page was read."""
    total: int | None = None
    """The first page's `totalCount`: events of every kind in the window, before reading."""


class FeedReader:
    """Pages through the feed, oldest first; an unusable event is logged once per process."""

    def __init__(self, page_size: int) -> None:
        self._size = page_size
        self._reported_invalid: set[tuple[str, str, str]] = set()

    async def read(
        self,
        client: MarquezClient,
        after: datetime,
        before: datetime | None = None,
        *,
        max_pages: int = MAX_PAGES,
    ) -> Batch:
        """Pages of events with `after <= eventTime < before` until a short page.

        One window for the whole read and offsets within it: `totalCount` also counts dataset
        and job events, so only a short page says the feed is exhausted. A server that ignores
        the offset (the same full page twice) ends the read rather than looping.
        """
        size = self._size
        batch = Batch()
        previous: list[dict[str, Any]] | None = None
        while batch.pages < max_pages:
            page = await client.lineage_events(
                after=after, before=before, sort_direction="asc", limit=size,
                offset=batch.pages * size,
            )  # fmt: skip
            batch.pages += 1
            if batch.total is None:
                batch.total = page.total_count
            if page.events and page.events == previous:
                logger.warning("Marquez ignored the offset of its event feed; the read ends here")
                return batch
            for body in page.events:
                self._take(batch, body)
            if len(page.events) < size:
                batch.complete = True
                return batch
            previous = page.events
        logger.info("read %d pages of Marquez events; the next poll reads on", batch.pages)
        return batch

    def _take(self, batch: Batch, body: dict[str, Any]) -> None:
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
