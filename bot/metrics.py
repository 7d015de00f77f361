"""What `GET /metrics` serves, in Prometheus' text format (prometheus-client).

One registry per bot (not the library's global one), so two bots in one process (tests, the
demo) count apart. Counters are incremented where things happen; gauges that describe the
database (rows set aside, …) are read from it when scraped, so every process of one database
reports the same figure.
"""

from __future__ import annotations

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge
from prometheus_client.exposition import generate_latest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.store import set_aside

CONTENT_TYPE = CONTENT_TYPE_LATEST


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.run_event_failures = Counter(
            "backfill_bot_run_event_failures",
            "Failed tries at handling a stored run event (an exception in the watcher).",
            registry=self.registry,
        )
        self.run_events_set_aside = Gauge(
            "backfill_bot_run_events_set_aside",
            "Run events set aside after failing every try; `backfill-bot events retry` "
            "handles them again.",
            registry=self.registry,
        )

    async def refresh(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        """Read the gauges that describe the database."""
        async with sessions() as session:
            self.run_events_set_aside.set(await set_aside.count(session))

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
