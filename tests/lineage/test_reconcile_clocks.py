"""Incremental reconcile stays complete when Marquez's `updatedAt` mixes two clocks.

Marquez sets a job's `updated_at` to the database's `now()` on a repeated upsert and to the
terminal event's `eventTime` when that event links the job's new version
(tests/fixtures/marquez/FIDELITY.md row 2; the stand-in does the same with an injectable clock:
tests/standins/test_marquez_fidelity_runs.py). So a job can sort *down* the newest-first listing
as it completes, and a producer whose clock runs ahead can date a job in the future.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bot.clients.marquez import MarquezClient
from bot.config import IndexSettings
from bot.core.db import make_engine, session_factory, upgrade
from bot.core.model import DagRef
from bot.lineage.service.index import LineageIndex
from bot.lineage.service.reconcile import Reconciler
from standins.http_server import start_app
from standins.marquez.server import MarquezState, create_app

NS = "ns"
RUN_A = "aaaaaaaa-0000-4000-8000-000000000001"
RUN_B = "bbbbbbbb-0000-4000-8000-000000000002"
RUN_C = "cccccccc-0000-4000-8000-000000000003"
NOW = datetime(2024, 3, 1, 12, 0, tzinfo=UTC)


def event(kind: str, at: datetime, job: str, run: str, writes: tuple[str, ...]) -> dict[str, Any]:
    return {
        "eventType": kind,
        "eventTime": at.isoformat().replace("+00:00", "Z"),
        "producer": "https://example.com/tests",
        "run": {"runId": run, "facets": {}},
        "job": {"namespace": NS, "name": job},
        "inputs": [],
        "outputs": [{"namespace": NS, "name": name} for name in writes],
    }


@dataclass
class World:
    """Marquez (the stand-in, its database clock set by the test) and the bot's index."""

    url: str
    clock: list[datetime]
    index: LineageIndex
    reconciler: Reconciler

    async def send(self, *bodies: dict[str, Any]) -> None:
        async with aiohttp.ClientSession() as http:
            for body in bodies:
                async with http.post(f"{self.url}/api/v1/lineage", json=body) as reply:
                    assert reply.status == 201, await reply.text()

    def tick(self, minutes: int) -> None:
        self.clock[0] += timedelta(minutes=minutes)

    def outputs(self, job: str) -> set[str]:
        return {d.name for d in self.index.outputs([DagRef(NS, job)])}


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    clock = [NOW]
    url, runner = await start_app(create_app(MarquezState(clock=lambda: clock[0])), "127.0.0.1", 0)
    database = f"sqlite:///{tmp_path / 'bot.db'}"
    upgrade(database)
    engine = make_engine(database)

    @asynccontextmanager
    async def marquez() -> AsyncIterator[MarquezClient]:
        async with MarquezClient(url) as client:
            yield client

    factory: Callable[[], AbstractAsyncContextManager[MarquezClient]] = marquez
    index = LineageIndex(session_factory(engine))
    # The bot's clock agrees with Marquez's database clock here.
    reconciler = Reconciler(index.sessions, factory, index, IndexSettings(), clock=lambda: clock[0])
    try:
        yield World(url, clock, index, reconciler)
    finally:
        await engine.dispose()
        await runner.cleanup()


async def test_a_job_that_completes_with_an_old_event_time_is_still_indexed(world: World) -> None:
    # `slow` starts (Marquez dates it with its own clock, a repeated upsert) ...
    await world.send(
        event("START", NOW - timedelta(days=2), "slow", RUN_A, ("old_table",)),
        event("COMPLETE", NOW - timedelta(days=2), "slow", RUN_A, ("old_table",)),
        # producers name a run's outputs as it completes (Spark, Airflow operators)
        event("START", NOW - timedelta(hours=2), "slow", RUN_B, ()),
    )
    await world.reconciler.full()
    assert world.outputs("slow") == {"old_table"}
    world.tick(30)
    # ... and completes with a new output table, its producer's clock two hours behind: the
    # terminal event dates the job far below the incremental reconcile's stop.
    await world.send(event("COMPLETE", NOW - timedelta(hours=2), "slow", RUN_B, ("new_table",)))
    world.tick(30)
    await world.send(
        event("START", world.clock[0], "busy", RUN_C, ("busy_table",)),
        event("RUNNING", world.clock[0], "busy", RUN_C, ("busy_table",)),
    )
    result = await world.reconciler.incremental()
    assert not result.full
    assert world.outputs("slow") == {"new_table"}


async def test_a_producer_clock_ahead_does_not_hide_later_jobs(world: World) -> None:
    ahead = NOW + timedelta(days=1)
    await world.send(
        event("START", ahead, "from_the_future", RUN_A, ("future_table",)),
        event("COMPLETE", ahead, "from_the_future", RUN_A, ("future_table",)),
    )
    await world.reconciler.full()
    world.tick(10)
    # a job created now, then upserted again (Marquez's own clock: now, not tomorrow)
    await world.send(
        event("START", world.clock[0], "today", RUN_B, ("today_table",)),
        event("RUNNING", world.clock[0], "today", RUN_B, ("today_table",)),
    )
    world.tick(10)
    result = await world.reconciler.incremental()
    assert not result.full
    assert world.outputs("today") == {"today_table"}
