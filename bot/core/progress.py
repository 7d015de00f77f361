"""Slow work that says so: await a result, and tell someone once if it takes long."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")
logger = logging.getLogger(__name__)


async def with_notice(
    work: Awaitable[T], *, after_s: float, notice: Callable[[], Awaitable[object]]
) -> T:
    """`work`'s result; if it is not there after `after_s`, `notice()` is awaited once while
    the work goes on (a failed notice is logged: it must not cost the result)."""
    task = asyncio.ensure_future(work)
    try:
        done, _ = await asyncio.wait({task}, timeout=after_s)
        if not done:
            try:
                await notice()
            except Exception:
                logger.exception("telling that the work is slow failed")
        return await task
    finally:
        if not task.done():  # our caller was cancelled: so is the work
            task.cancel()
