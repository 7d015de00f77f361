"""What changed in the Slack stand-in's workspace, for the browser page's live stream.

Each change is a small dict (`kind` plus where: channel, ts, user); listeners are the page's
server-sent-event streams, each with its own queue. Subscribers that stop reading lose nothing
important: a change only tells the page what to fetch again.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import Any

__all__ = ["ChangeFeed"]

Change = dict[str, Any]
_QUEUE_BOUND = 1000  # a page that stops reading is told to refetch everything instead


class ChangeFeed:
    def __init__(self) -> None:
        self.revision = 0
        self._queues: set[asyncio.Queue[Change | None]] = set()
        self._waiters: set[asyncio.Future[None]] = set()
        self._closed = False

    def publish(self, kind: str, **where: Any) -> None:
        self.revision += 1
        change: Change = {"kind": kind, **{k: v for k, v in where.items() if v is not None}}
        for queue in self._queues:
            if queue.qsize() >= _QUEUE_BOUND:
                continue  # the reader is far behind: it refetches on the next change it reads
            queue.put_nowait(change)
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._waiters.clear()

    async def changed(self, timeout_s: float) -> bool:
        """Wait until the next change (True) or `timeout_s` (False)."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.add(waiter)
        try:
            await asyncio.wait_for(waiter, timeout_s)
            return True
        except TimeoutError:
            return False
        finally:
            self._waiters.discard(waiter)

    async def follow(self, heartbeat_s: float = 15.0) -> AsyncGenerator[Change | None, None]:
        """Changes as they come; None every `heartbeat_s` of silence (to keep proxies from
        closing the stream). Ends when the feed is closed (the stand-in stops)."""
        queue: asyncio.Queue[Change | None] = asyncio.Queue()
        self._queues.add(queue)
        try:
            while not self._closed:
                try:
                    change = await asyncio.wait_for(queue.get(), heartbeat_s)
                except TimeoutError:
                    yield None
                    continue
                if change is None:
                    return
                yield change
        finally:
            self._queues.discard(queue)

    def close(self) -> None:
        """End every stream (the stand-in is stopping: open pages must not hold it up)."""
        self._closed = True
        for queue in self._queues:
            queue.put_nowait(None)
