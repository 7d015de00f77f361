"""Helpers of the tests against a real Airflow 2.11 (test_airflow2_client.py, test_airflow2_cap.py):
the test DAGs' ids, waiting for a condition, and finding the test DAGs' task processes."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from tests.airflow.harness import RealAirflow
from tests.airflow.harness_procs import pids_with_home

QUICK, LONG, IDLE = "bot_test.quick", "bot_test.long", "bot_test.idle"
"""tests/airflow/dags/bot_test_dags.py: `sleep 1`; `sleep 600`, two runs at a time; `true`."""


async def until(check: Callable[[], Awaitable[bool]], what: str, timeout_s: float = 90) -> None:
    """Poll `check` every half second until it holds; fail naming `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        if await check():
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout_s:g}s")
        await asyncio.sleep(0.5)


def sleeping(airflow: RealAirflow) -> list[int]:
    """Task processes of this Airflow running `sleep 600` (bot_test.long's task)."""
    found = []
    for pid in pids_with_home(airflow.home):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                command = handle.read().split(b"\0")
        except OSError:
            continue
        if command[:2] == [b"sleep", b"600"]:
            found.append(pid)
    return found
