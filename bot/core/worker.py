"""The one shape of the bot's background loops (outbox sender, step runner, incident watcher,
re-hand-off of approved backfills): run a pass, then wait until woken or `every_s` passed,
until stopped. A pass that raises is logged and the loop goes on (one bad pass must not stop
every later one); `stop()` lets the pass under way finish, so no task is cancelled inside a
transaction."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

logger = logging.getLogger(__name__)


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
        while not self._stopping:
            self._wake.clear()  # a wake during the pass makes the next one start at once
            try:
                while await self.work() and self.again_while_busy and not self._stopping:
                    pass
            except Exception:
                logger.exception("%s pass failed; retrying", self.name)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.every_s)
