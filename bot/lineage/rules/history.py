"""How long a DAG's runs take, from its run history (pure): what the alert's backfill estimate
and the index's history read."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

HISTORY_RUNS = 20
"""Successful runs per DAG the estimate looks at (recent behaviour, not last year's)."""


def durations(events: Sequence[tuple[str, str, datetime]]) -> list[timedelta]:
    """Durations of successful runs from (run id, event type, event time) of one DAG's
    DAG-level events: the time from a run's START to its COMPLETE, newest runs first."""
    starts: dict[str, datetime] = {}
    done: list[tuple[datetime, timedelta]] = []
    for run_id, kind, at in sorted(events, key=lambda e: e[2]):
        if kind == "START":
            starts.setdefault(run_id, at)
        elif kind == "COMPLETE" and run_id in starts:
            took = at - starts.pop(run_id)
            if took >= timedelta(0):
                done.append((at, took))
    done.sort(reverse=True)
    return [took for _, took in done[:HISTORY_RUNS]]
