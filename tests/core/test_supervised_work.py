"""Background work never dies silently (issue 25): a task that raises is logged, counted for
/metrics and started again with backoff; a loop's failing pass waits longer each time."""

from __future__ import annotations

import asyncio
import logging

import pytest

from bot.core.worker import Worker, on_failures, supervise


async def test_a_failing_task_is_logged_counted_and_restarted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    told: list[str] = []
    forget = on_failures(told.append)
    attempts: list[float] = []

    async def flaky() -> None:
        attempts.append(asyncio.get_running_loop().time())
        if len(attempts) < 3:
            raise RuntimeError(f"broken {len(attempts)}")

    try:
        with caplog.at_level(logging.ERROR):
            await asyncio.wait_for(supervise("lineage-index", flaky, first_s=0.1), 5)
    finally:
        forget()
    assert told == ["lineage-index", "lineage-index"]
    assert len(attempts) == 3
    logged = [r for r in caplog.records if "background task lineage-index failed" in r.message]
    assert [r.getMessage().rsplit(" in ", 1)[1] for r in logged] == ["0.1 s", "0.2 s"]  # doubling
    assert logged[0].exc_info is not None  # with its traceback


async def test_a_stop_during_the_backoff_ends_it_without_a_restart() -> None:
    failed = asyncio.Event()
    stopping = asyncio.Event()
    attempts: list[int] = []

    async def broken() -> None:
        attempts.append(1)
        failed.set()
        raise RuntimeError("the database is gone")

    # An hour's backoff: only the stop can end it within the test.
    task = asyncio.create_task(supervise("sink-sender", broken, first_s=3600, stopping=stopping))
    await asyncio.wait_for(failed.wait(), 5)
    assert not task.done()
    stopping.set()
    await asyncio.wait_for(task, 5)
    assert attempts == [1]  # not started again


async def test_a_loop_whose_pass_fails_backs_off_and_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    told: list[str] = []
    forget = on_failures(told.append)
    passes: list[float] = []
    worker: Worker

    async def work() -> None:
        passes.append(asyncio.get_running_loop().time())
        if len(passes) == 4:
            worker.stop()
            return
        raise ValueError("a bad pass")

    worker = Worker("incidents", work, every_s=0.1)
    try:
        with caplog.at_level(logging.ERROR):
            await asyncio.wait_for(worker.run_forever(), 5)
    finally:
        forget()
    assert told == ["incidents"] * 3
    waits = [r.getMessage().rsplit(" in ", 1)[1] for r in caplog.records]
    assert waits == ["0.1 s", "0.2 s", "0.4 s"]
