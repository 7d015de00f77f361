"""A shutdown does not wait for a Marquez that is down: `Reconciler.stop` ends the first full
reconcile's retries at their next wait (bot/web.py stops it with the runner), where before the
process waited out its 15 s grace and cancelled it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from bot.clients.marquez import MarquezClient
from bot.config import IndexSettings
from bot.core.db import make_engine, session_factory, upgrade
from bot.lineage.service import reconcile
from bot.lineage.service.index import LineageIndex
from bot.lineage.service.reconcile import Reconciler


async def test_stop_ends_the_retries_of_a_first_reconcile_marquez_refuses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An hour between tries: only `stop` can end `start` within the test.
    monkeypatch.setattr(reconcile, "RETRY_FIRST_S", 3600.0)
    database = f"sqlite:///{tmp_path / 'bot.db'}"
    upgrade(database)
    engine = make_engine(database)
    failures: list[str] = []
    failed = asyncio.Event()

    def on_failure(exc: BaseException) -> None:
        failures.append(type(exc).__name__)
        failed.set()

    @asynccontextmanager
    async def marquez() -> AsyncIterator[MarquezClient]:
        async with MarquezClient("http://127.0.0.1:9") as client:  # nothing listens there
            yield client

    index = LineageIndex(session_factory(engine))
    reconciler = Reconciler(
        index.sessions, marquez, index, IndexSettings(),
        on_failure=on_failure,
    )  # fmt: skip
    try:
        started = asyncio.create_task(reconciler.start())
        await asyncio.wait_for(failed.wait(), timeout=30)  # it waits to try again
        assert not started.done()
        reconciler.stop()
        await asyncio.wait_for(started, timeout=30)
        assert len(failures) == 1  # tried once, then stopped while waiting
    finally:
        await engine.dispose()
