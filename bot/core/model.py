"""Value objects shared by the domain modules."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta


@dataclass(frozen=True, order=True)
class DagRef:
    """An Airflow DAG as Marquez knows it: the job namespace and the DAG id."""

    namespace: str
    dag_id: str

    def __post_init__(self) -> None:
        # DAG refs key every map the planner walks (100,000s of look-ups per plan): hash once.
        object.__setattr__(self, "_hash", hash((self.namespace, self.dag_id)))

    def __hash__(self) -> int:
        return self._hash  # type: ignore[attr-defined,no-any-return]

    def __reduce__(self) -> tuple[type[DagRef], tuple[str, str]]:
        return (DagRef, (self.namespace, self.dag_id))  # the hash is per process: not pickled

    def __str__(self) -> str:
        return self.dag_id


@dataclass(frozen=True, order=True)
class DatasetRef:
    """A dataset by Marquez namespace and name."""

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}:{self.name}"


@dataclass(frozen=True, order=True)
class Interval:
    """A half-open time interval [start, end) in UTC: one data interval of a DAG run."""

    start: datetime
    end: datetime

    def __post_init__(self) -> None:
        if self.start.tzinfo is None or self.end.tzinfo is None:
            raise ValueError("interval bounds must be timezone-aware")
        if self.end < self.start:
            raise ValueError(f"interval ends before it starts: {self.start} > {self.end}")

    def overlaps(self, other: Interval) -> bool:
        if self.start == self.end:
            # A zero-length interval (a point in time) overlaps what contains it.
            return other.start <= self.start < other.end
        if other.start == other.end:
            return self.start <= other.start < self.end
        return self.start < other.end and other.start < self.end

    def to_json(self) -> dict[str, str]:
        return {"start": iso(self.start), "end": iso(self.end)}


@dataclass(frozen=True)
class DateRange:
    """An inclusive range of calendar days, as typed by a user (`2021-06-04..2021-06-06`)."""

    start: date
    end: date

    @property
    def days(self) -> int:
        return (self.end - self.start).days + 1

    def as_interval(self) -> Interval:
        """The UTC time span the days cover: [start 00:00, end+1 00:00)."""
        begin = datetime.combine(self.start, time.min, tzinfo=UTC)
        finish = datetime.combine(self.end + timedelta(days=1), time.min, tzinfo=UTC)
        return Interval(begin, finish)

    def __str__(self) -> str:
        return f"{self.start.isoformat()}..{self.end.isoformat()}"


def iso(moment: datetime) -> str:
    """ISO-8601 in UTC with a `Z`, the way Marquez and Slack users read times."""
    text = moment.astimezone(UTC).isoformat()
    return text.replace("+00:00", "Z")


def merge_intervals(intervals: list[Interval]) -> list[Interval]:
    """Sorted union of intervals: overlapping or touching intervals become one."""
    merged: list[Interval] = []
    for item in sorted(intervals):
        if merged and item.start <= merged[-1].end:
            last = merged[-1]
            merged[-1] = Interval(last.start, max(last.end, item.end))
        else:
            merged.append(item)
    return merged


RUN_EVENT_TYPES = frozenset({"START", "RUNNING", "COMPLETE", "ABORT", "FAIL", "OTHER"})
"""The `eventType`s of an OpenLineage run event (the spec's values)."""
