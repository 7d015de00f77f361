"""The late-event sweep's arithmetic (pure: no I/O, the clock is an argument).

Marquez's event feed is filtered on each event's own eventTime, so the time axis is cut into
buckets of `width` aligned to the Unix epoch; the sweep (bot/events/service/late_sweep.py) keeps one
Marquez count per bucket behind the poller's main read. This module decides, per poll, which
buckets are counted before the main read, where that read starts, which buckets the sweep
compares, and what a bisect does with a count that differs. See the service for the why.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

__all__ = [
    "EPOCH",
    "LateState",
    "Plan",
    "Step",
    "changed_leaves",
    "floor_bucket",
    "plan",
    "step",
]

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)


def floor_bucket(at: datetime, width: timedelta) -> datetime:
    """The start of the bucket holding `at` (buckets are aligned to the epoch)."""
    span = width // _US
    offset = (at - EPOCH) // _US
    return EPOCH + (offset - offset % span) * _US


@dataclass(frozen=True)
class LateState:
    """What the sweep persists (watch_cursors.late_counts): the origin and the bucket counts.

    `origin` is the first main read's `after` (the watcher's configured start less the
    overlap): nothing before it is ever read, by the main read or by the sweep.
    """

    origin: datetime
    width: timedelta
    counts: Mapping[datetime, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "origin": self.origin.isoformat(),
            "bucket_s": self.width.total_seconds(),
            "counts": {key.isoformat(): n for key, n in sorted(self.counts.items())},
        }

    @classmethod
    def from_json(cls, raw: object, width: timedelta) -> LateState | None:
        """The stored state, or None when there is none or it is for another bucket width
        (counts of other buckets say nothing about these)."""
        if not isinstance(raw, dict) or raw.get("bucket_s") != width.total_seconds():
            return None
        try:
            origin = _aware(datetime.fromisoformat(raw["origin"]))
            counts = {
                _aware(datetime.fromisoformat(key)): int(n)
                for key, n in dict(raw.get("counts") or {}).items()
            }
        except (KeyError, TypeError, ValueError):
            return None
        return cls(origin, width, counts)


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


@dataclass(frozen=True)
class Plan:
    """One poll's sweep: every field is derived by `plan` from the clock, the cursor and the
    stored state."""

    origin: datetime
    width: timedelta
    counts: dict[datetime, int]
    """Known counts of buckets still inside the window (pruned of older ones)."""
    fresh: tuple[datetime, ...]
    """Buckets with no count yet, ending at least `overlap` ago: counted before the main read."""
    read_from: datetime
    """The main read's `after`: every bucket from here on is read in full by the main read."""
    swept: tuple[datetime, ...]
    """Buckets wholly before `read_from` (all counted): the sweep compares their counts."""

    def window(self, key: datetime) -> tuple[datetime, datetime]:
        """The eventTime window `[after, before)` of a bucket (the first is cut at origin)."""
        return max(key, self.origin), key + self.width

    def span(self, keys: Sequence[datetime]) -> tuple[datetime, datetime]:
        """The window of consecutive buckets."""
        return self.window(keys[0])[0], self.window(keys[-1])[1]

    def state(self) -> LateState:
        return LateState(self.origin, self.width, dict(self.counts))


def plan(
    *,
    now: datetime,
    position: datetime,
    overlap: timedelta,
    window: timedelta,
    width: timedelta,
    state: LateState | None,
) -> Plan:
    """Which buckets to count before the main read, where it starts, and what to sweep.

    W1 = floor(position - overlap) is the lowest bucket the main read always covers; W0 =
    floor(now - window) the oldest bucket kept. Buckets before W1 are swept, except unknown
    ones: those are counted now and the main read starts at the lowest of them instead, so
    the main read and the swept buckets leave no gap between them.
    """
    origin = state.origin if state is not None else position - overlap
    w1 = floor_bucket(position - overlap, width)
    first = floor_bucket(max(now - window, origin), width)
    last = floor_bucket(now - overlap, width)  # buckets ending by now - overlap get a count
    counts = {} if state is None else {k: n for k, n in state.counts.items() if k >= first}
    keys: list[datetime] = []
    key = first
    while key < last:
        keys.append(key)
        key += width
    fresh = tuple(k for k in keys if k not in counts)
    lowest = min((k for k in fresh if k < w1), default=w1)
    read_from = max(origin, min(w1, lowest))
    swept = tuple(k for k in keys if k + width <= read_from)
    return Plan(origin, width, counts, fresh, read_from, swept)


class Step(enum.Enum):
    """What a bisect does with a range of buckets whose count Marquez just gave."""

    SAME = "same"  # nothing arrived (or as much left as arrived; see the service's notes)
    SPLIT = "split"  # several buckets, count differs: count the halves
    READ = "read"  # one bucket with more events than known: read it in full
    REBASELINE = "rebaseline"  # one bucket with fewer (retention): take the new count


def step(known: int, observed: int, buckets: int) -> Step:
    if observed == known:
        return Step.SAME
    if buckets > 1:
        return Step.SPLIT
    return Step.READ if observed > known else Step.REBASELINE


async def changed_leaves(
    keys: Sequence[datetime],
    observed: int,
    counts: Mapping[datetime, int],
    count: Callable[[Sequence[datetime]], Awaitable[int]],
) -> list[tuple[datetime, int]]:
    """The buckets among `keys` (consecutive, all in `counts`) whose count differs, with the
    count observed for each, found by bisecting: `count` asks Marquez for a range's count.

    A right half's count is derived (parent's count - left half's) rather than asked for: it
    halves the requests, and an event arriving between the two answers only makes the derived
    count too low, which can delay a find by one poll but never stores a count higher than
    what Marquez held when it was asked.
    """
    found: list[tuple[datetime, int]] = []
    pending = [(tuple(keys), observed)]
    while pending:
        part, seen = pending.pop()
        action = step(sum(counts[k] for k in part), seen, len(part))
        if action is Step.SPLIT:
            middle = len(part) // 2
            left = await count(part[:middle])
            pending += [(part[middle:], seen - left), (part[:middle], left)]
        elif action is not Step.SAME:
            found.append((part[0], seen))
    return sorted(found)
