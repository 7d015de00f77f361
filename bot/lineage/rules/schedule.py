"""Which data intervals of a DAG overlap a changed time window.

A DAG's schedule comes from an explicit cron rule in BOT_CONFIG, else from its run history in
Marquez (the `nominalStartTime`/`nominalEndTime` of past runs, which Airflow's OpenLineage
integration sets to the run's data interval), else it is unknown and the DAG reruns once for
the changed window itself.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from croniter import croniter

from bot.core.model import Interval, merge_intervals
from bot.lineage.rules.errors import PlanningError

MAX_INTERVALS = 10_000


class ScheduleError(PlanningError, ValueError):
    """A schedule would produce more runs than any sane backfill has."""


class Schedule(Protocol):
    """Maps a changed window to the DAG's data intervals that overlap it."""

    @property
    def source(self) -> str: ...

    def describe(self) -> str: ...

    def intervals(self, window: Interval) -> list[Interval]: ...


def _guard(count: int, what: Callable[[], str]) -> None:
    if count > MAX_INTERVALS:  # `what` is only described when it is needed
        raise ScheduleError(f"{what()} yields more than {MAX_INTERVALS} runs; narrow the range")


@dataclass(frozen=True)
class CronSchedule:
    """Airflow semantics: a run's data interval spans from one cron tick to the next."""

    expr: str
    source: str = "cron"

    def describe(self) -> str:
        return f"cron {self.expr}"

    def intervals(self, window: Interval) -> list[Interval]:
        # croniter is second-resolution; +1 s makes a tick exactly at window.start count as <=.
        ticks = croniter(self.expr, window.start + timedelta(seconds=1))
        tick: datetime = ticks.get_prev(datetime)
        found: list[Interval] = []
        while tick < window.end or (window.start == window.end and tick <= window.start):
            following: datetime = ticks.get_next(datetime)
            candidate = Interval(tick.astimezone(UTC), following.astimezone(UTC))
            if candidate.overlaps(window):
                found.append(candidate)
            _guard(len(found), self.describe)
            tick = following
        return found


@dataclass(frozen=True)
class PeriodicSchedule:
    """A regular schedule inferred from history: intervals of `length` every `period`."""

    anchor: datetime
    period: timedelta
    length: timedelta
    source: str = "history"

    def describe(self) -> str:
        return f"every {_human(self.period)} (from run history)"

    def intervals(self, window: Interval) -> list[Interval]:
        # Starts s = anchor + k*period with s < window.end and s + length > window.start.
        first = -((self.anchor + self.length - window.start) // self.period)
        if (self.anchor + first * self.period) + self.length <= window.start:
            first += 1
        found: list[Interval] = []
        k = first
        while True:
            start = self.anchor + k * self.period
            candidate = Interval(start, start + self.length)
            if start >= window.end and not candidate.overlaps(window):
                break
            if candidate.overlaps(window):
                found.append(candidate)
            _guard(len(found), self.describe)
            k += 1
        return found


@dataclass(frozen=True)
class HistorySchedule:
    """Recorded data intervals where history has them; the inferred period elsewhere.

    Recorded intervals are exact even for calendar schedules (monthly, or daily in a local
    time zone across DST), which a fixed period only approximates; the period fills gaps and
    reaches beyond the recorded span.
    """

    known: tuple[Interval, ...]
    periodic: PeriodicSchedule
    source: str = "history"

    def describe(self) -> str:
        return self.periodic.describe()

    def intervals(self, window: Interval) -> list[Interval]:
        found = {i for i in self.known if i.overlaps(window)}
        for candidate in self.periodic.intervals(window):
            if not any(candidate.overlaps(k) for k in self.known):
                found.add(candidate)
        return sorted(found)


@dataclass(frozen=True)
class Unscheduled:
    """No schedule known: the DAG reruns once over exactly the changed window."""

    source: str = "none"

    def describe(self) -> str:
        return "no schedule known (one run over the changed window)"

    def intervals(self, window: Interval) -> list[Interval]:
        return [window]


def _human(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    for unit, size in (("week", 604800), ("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds % size == 0:
            count = seconds // size
            return unit if count == 1 else f"{count} {unit}s"
    return f"{seconds} s"


def _parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def nominal_intervals(runs: Iterable[Mapping[str, Any]]) -> list[Interval]:
    """The distinct data intervals of Marquez runs that carry a nominal start time."""
    found: set[Interval] = set()
    for run in runs:
        start = _parse_time(run.get("nominalStartTime"))
        if start is None:
            continue
        end = _parse_time(run.get("nominalEndTime")) or start
        if end >= start:
            found.add(Interval(start, end))
    return sorted(found)


def schedule_from_runs(runs: Iterable[Mapping[str, Any]]) -> Schedule:
    """Infer a periodic schedule from run history (the most common spacing of nominal starts)."""
    return schedule_from_intervals(nominal_intervals(runs))


def schedule_from_intervals(intervals: Iterable[Interval]) -> Schedule:
    """`schedule_from_runs` over the distinct nominal intervals of the runs."""
    known = sorted(set(intervals))
    starts = sorted({i.start for i in known})
    gaps = Counter(b - a for a, b in itertools.pairwise(starts) if b > a)
    lengths = Counter(i.end - i.start for i in known if i.end > i.start)
    if gaps:
        period = gaps.most_common(1)[0][0]
    elif lengths:
        period = lengths.most_common(1)[0][0]
    else:
        return Unscheduled()
    length = lengths.most_common(1)[0][0] if lengths else period
    periodic = PeriodicSchedule(anchor=starts[-1], period=period, length=length)
    recorded = tuple(i for i in known if i.end > i.start)
    return HistorySchedule(recorded, periodic) if recorded else periodic


def intervals_for(schedule: Schedule, changed: Iterable[Interval]) -> list[Interval]:
    """The schedule's intervals overlapping any changed window, each once, sorted."""
    result: set[Interval] = set()
    for window in merge_intervals(list(changed)):
        result.update(schedule.intervals(window))
    return sorted(result)
