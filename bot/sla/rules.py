"""Lateness as a pure function of a DAG's run history, its SLA rule and the clock.

A DAG's expected intervals continue the period its recorded runs show. An interval is late when
its run has not succeeded by its due time: the rule's deadline after the interval ends, or, with
no rule at all, the time such runs usually finish (median delay after the interval end, plus a
margin of three median absolute deviations, at least 15 minutes and half the median). A run is
also late when it has been running longer than the rule's `max_duration`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import pairwise
from statistics import median
from typing import ClassVar, Literal

from bot.core.model import Interval
from bot.core.time_bounds import plus

MIN_SAMPLES = 5  # successful runs needed before a learned deadline is trusted
MIN_MARGIN = timedelta(minutes=15)
HORIZON = timedelta(days=3)  # intervals that ended longer ago than this are history, not news


@dataclass(frozen=True)
class RunFacts:
    """One DAG run as its events tell it."""

    interval: Interval
    started_at: datetime | None
    finished_at: datetime | None
    succeeded: bool


@dataclass(frozen=True)
class Miss:
    interval: Interval
    due: datetime
    kind: Literal["missing", "late", "too_long"]
    reason: str


def _period(runs: Sequence[RunFacts]) -> timedelta | None:
    starts = sorted({r.interval.start for r in runs})
    gaps = sorted(b - a for a, b in pairwise(starts) if b > a)
    # The median gap: one off-schedule manual run must not halve the period.
    return gaps[len(gaps) // 2] if gaps else None


def expected_intervals(runs: Sequence[RunFacts], now: datetime) -> list[Interval]:
    """Recorded intervals, then the period continued up to `now` (intervals ended by then)."""
    known = sorted({r.interval for r in runs})
    period = _period(runs)
    if not known or period is None:
        return known
    last = known[-1]
    extra: list[Interval] = []
    length = last.end - last.start
    # Saturating: a stored time near datetime's end (from before times were bounded at the
    # door) ends the continuation instead of raising OverflowError for the whole DAG.
    start = plus(last.start, period)
    while plus(start, length) <= now and len(extra) < 1000:
        extra.append(Interval(start, start + length))
        start = plus(start, period)
    return known + extra


def learned_delay(runs: Sequence[RunFacts]) -> timedelta | None:
    """When runs of this DAG usually finish after their interval ends, with a margin."""
    delays = [
        (r.finished_at - r.interval.end).total_seconds()
        for r in runs
        if r.succeeded and r.finished_at is not None
    ]
    if len(delays) < MIN_SAMPLES:
        return None
    middle = median(delays)
    spread = median(abs(d - middle) for d in delays)
    margin = max(timedelta(seconds=3 * spread), MIN_MARGIN, timedelta(seconds=middle / 2))
    return timedelta(seconds=middle) + margin


def _text(span: timedelta) -> str:
    minutes = int(span.total_seconds() // 60)
    return f"{minutes // 60}h {minutes % 60:02d}m" if minutes >= 60 else f"{minutes}m"


def misses(
    runs: Sequence[RunFacts],
    *,
    now: datetime,
    deadline: timedelta | None = None,
    max_duration: timedelta | None = None,
) -> list[Miss]:
    """The late, missing and overlong runs of one DAG as of `now` (oldest first)."""
    found: list[Miss] = []
    by_interval: dict[Interval, RunFacts] = {}
    for run in sorted(runs, key=lambda r: r.started_at or r.interval.start):
        by_interval[run.interval] = run  # a rerun replaces the earlier attempt
    ruled = deadline is not None or max_duration is not None
    delay = deadline if ruled else learned_delay(runs)
    if delay is not None:
        why = (
            f"the SLA is {_text(delay)} after the interval ends"
            if deadline is not None
            else f"runs of it usually finish within {_text(delay)} after the interval ends"
        )
        for interval in expected_intervals(runs, now):
            due = plus(interval.end, delay)
            if due > now or now - interval.end > HORIZON:
                continue
            latest = by_interval.get(interval)
            if latest is not None and latest.succeeded:
                continue
            kind: Literal["missing", "late"] = "missing" if latest is None else "late"
            found.append(Miss(interval, due, kind, why))
    if max_duration is not None:
        for run in by_interval.values():
            started = run.started_at
            if started is None or run.finished_at is not None:
                continue
            if now - started > max_duration:
                reason = f"running for {_text(now - started)}, longer than {_text(max_duration)}"
                found.append(Miss(run.interval, plus(started, max_duration), "too_long", reason))
    return sorted(found, key=lambda m: (m.interval.start, m.kind))


@dataclass(frozen=True)
class NoticeUnknown:
    """Acknowledge on something that is not an SLA notice the bot posted there."""

    changed: ClassVar[bool] = False


@dataclass(frozen=True)
class NoticeAcknowledged:
    """Acknowledge recorded: the notice now shows who is on it."""

    changed: ClassVar[bool] = True


AckOutcome = NoticeUnknown | NoticeAcknowledged
