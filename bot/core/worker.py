"""The one shape of the bot's background loops (outbox sender, step runner, incident watcher,
re-hand-off of approved backfills): run a pass, then wait until woken or `every_s` passed,
until stopped. A pass that raises is logged, counted (`on_failures`: serve's /metrics) and the
loop goes on after a wait that doubles with each failure in a row, up to `MAX_BACKOFF_S` (one
bad pass must not stop every later one, nor a broken dependency be hammered); `stop()` lets the
pass under way finish, so no task is cancelled inside a transaction.

`supervise` runs any background coroutine the same way: a failure is logged, counted and the
coroutine started again with backoff, so no task of `serve` dies silently."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

logger = logging.getLogger(__name__)
MAX_BACKOFF_S = 60.0
_listeners: list[Callable[[str], None]] = []


def on_failures(listener: Callable[[str], None]) -> Callable[[], None]:
    """Tell `listener` the name of every background task whose pass fails, until the returned
    function is called (serve's metrics, for as long as it runs)."""
    _listeners.append(listener)
    return lambda: _listeners.remove(listener)


def _failed(name: str) -> None:
    for listener in list(_listeners):
        listener(name)


async def supervise(
    name: str,
    run: Callable[[], Awaitable[object]],
    *,
    first_s: float = 1.0,
    stopping: asyncio.Event | None = None,
) -> None:
    """Run `run()` until it returns; each time it raises, log, count and start it again after
    a wait that doubles up to MAX_BACKOFF_S. Once `stopping` is set a failed task is not
    started again: a shutdown does not wait out the backoff of a dependency that is down."""
    delay = first_s
    while True:
        try:
            await run()
            return
        except Exception:
            logger.exception("background task %s failed; restarting in %.1f s", name, delay)
            _failed(name)
        if stopping is None:
            await asyncio.sleep(delay)
        else:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), delay)
            if stopping.is_set():
                return
        delay = min(delay * 2, MAX_BACKOFF_S)


class Worker:
    def __init__(
        self,
        name: str,
        work: Callable[[], Awaitable[object]],
        *,
        every_s: float,
        again_while_busy: bool = False,
    ) -> None:
        """`work` is one pass; with `again_while_busy`, a pass that returns something truthy
        (it found work) is followed at once by another, until one finds nothing."""
        self.name = name
        self.work = work
        self.every_s = every_s
        self.again_while_busy = again_while_busy
        self._wake = asyncio.Event()
        self._stopping = False

    @property
    def stopping(self) -> bool:
        return self._stopping

    def wake(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        """End `run_forever` after the pass under way."""
        self._stopping = True
        self._wake.set()

    async def run_forever(self) -> None:
        failures = 0
        while not self._stopping:
            self._wake.clear()  # a wake during the pass makes the next one start at once
            wait = self.every_s
            try:
                while await self.work() and self.again_while_busy and not self._stopping:
                    pass
                failures = 0
            except Exception:
                failures += 1
                doubled = self.every_s * 2 ** min(failures - 1, 16)  # no overflow, ever
                wait = min(doubled, max(self.every_s, MAX_BACKOFF_S))
                logger.exception("%s pass failed; retrying in %.1f s", self.name, wait)
                _failed(self.name)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), wait)
