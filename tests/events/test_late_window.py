"""The late-event sweep's arithmetic on plain data: buckets, plans, the bisect."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest

from bot.events.rules.late_window import LateState, Step, changed_leaves, floor_bucket, plan, step

T0 = datetime(2024, 3, 1, 12, tzinfo=UTC)
TEN = timedelta(minutes=10)
DAY = timedelta(days=1)
OVERLAP = timedelta(minutes=5)


def at(hhmm: str, day: int = 1) -> datetime:
    hours, minutes = map(int, hhmm.split(":"))
    return datetime(2024, 2, 29, tzinfo=UTC) + timedelta(days=day, hours=hours, minutes=minutes)


def buckets(first: datetime, last: datetime) -> list[datetime]:
    """Bucket starts from first up to (excluding) last."""
    count = (last - first) // TEN
    return [first + n * TEN for n in range(count)]


def test_buckets_are_aligned_to_the_epoch() -> None:
    assert floor_bucket(at("12:07"), TEN) == at("12:00")
    assert floor_bucket(at("12:10"), TEN) == at("12:10")
    assert floor_bucket(at("12:09") + timedelta(seconds=59.999999), TEN) == at("12:00")
    assert floor_bucket(at("00:30"), timedelta(hours=1)) == at("00:00")
    assert floor_bucket(at("12:00") - timedelta(microseconds=1), TEN) == at("11:50")


def test_the_first_poll_counts_every_bucket_and_reads_from_its_origin() -> None:
    position = T0 - timedelta(hours=1)  # lookback 1 h: origin 10:55
    got = plan(now=T0, position=position, overlap=OVERLAP, window=DAY, width=TEN, state=None)
    assert got.origin == at("10:55")
    assert got.read_from == at("10:55")  # what the poller read before the sweep existed
    assert list(got.fresh) == buckets(at("10:50"), at("11:50"))  # end by now - overlap
    assert got.swept == ()
    assert got.window(at("10:50")) == (at("10:55"), at("11:00"))  # cut at the origin


def test_a_steady_poll_sweeps_every_bucket_before_the_main_read() -> None:
    counts = dict.fromkeys(buckets(at("12:00", 0), at("11:50")), 3)
    state = LateState(at("09:55", 0), TEN, counts)
    got = plan(
        now=T0 + timedelta(seconds=30),
        position=at("11:40"),
        overlap=OVERLAP,
        window=DAY,
        width=TEN,
        state=state,
    )
    assert got.fresh == ()
    assert got.read_from == at("11:30")  # floor(cursor - overlap), not cursor - overlap
    assert list(got.swept) == buckets(at("12:00", 0), at("11:30"))
    assert got.span(got.swept) == (at("12:00", 0), at("11:30"))


def test_a_newly_closed_bucket_is_counted_and_read_by_the_main_read() -> None:
    counts = dict.fromkeys(buckets(at("12:00", 0), at("11:40")), 3)
    state = LateState(at("09:55", 0), TEN, counts)
    got = plan(
        now=at("12:20"), position=at("12:19"), overlap=OVERLAP, window=DAY, width=TEN, state=state
    )
    assert list(got.fresh) == [at("11:40"), at("11:50"), at("12:00")]
    assert got.read_from == at("11:40")  # the lowest one below W1 = 12:10
    assert got.swept[-1] == at("11:30")  # all counted, all before the read
    assert got.counts.keys() == set(buckets(at("12:20", 0), at("11:40")))  # pruned before W0


def test_the_window_never_reaches_before_the_origin() -> None:
    state = LateState(at("08:55"), TEN, {})
    got = plan(
        now=at("12:00"), position=at("11:00"), overlap=OVERLAP, window=DAY, width=TEN, state=state
    )
    assert got.fresh[0] == at("08:50")
    assert got.window(got.fresh[0]) == (at("08:55"), at("09:00"))
    assert got.read_from == at("08:55")  # the first fresh bucket, cut at the origin


@pytest.mark.parametrize("minutes", [0, 3, 7, 10, 29, 95, 600])
def test_main_read_and_swept_buckets_leave_no_gap(minutes: int) -> None:
    """Whatever the stored counts, every bucket before the main read's start is swept and
    every swept bucket is counted: the read and the sweep partition the axis."""
    origin = at("02:00", 0)
    position = at("11:00") - timedelta(minutes=minutes)
    for known in (set(), {at("03:00"), at("10:40")}, set(buckets(at("02:00", 0), at("11:50")))):
        state = LateState(origin, TEN, dict.fromkeys(known, 1))
        got = plan(now=T0, position=position, overlap=OVERLAP, window=DAY, width=TEN, state=state)
        assert set(got.swept) <= set(got.counts) | set(got.fresh)
        assert not set(got.swept) & set(got.fresh)
        start = got.window(got.swept[0])[0] if got.swept else got.read_from
        end = got.window(got.swept[-1])[1] if got.swept else got.read_from
        assert start == max(got.origin, floor_bucket(T0 - DAY, TEN)) or not got.swept
        assert end == got.read_from or got.read_from == got.origin
        assert all(b - a == TEN for a, b in itertools.pairwise(got.swept))
        unknown_below = [k for k in got.fresh if k + TEN <= got.read_from]
        assert unknown_below == []  # a bucket below the read always has a count


def test_the_state_round_trips_through_json() -> None:
    state = LateState(at("09:55"), TEN, {at("10:00"): 4, at("10:10"): 0})
    raw = state.to_json()
    assert raw == {
        "origin": "2024-03-01T09:55:00+00:00",
        "bucket_s": 600.0,
        "counts": {"2024-03-01T10:00:00+00:00": 4, "2024-03-01T10:10:00+00:00": 0},
    }
    assert LateState.from_json(raw, TEN) == state
    assert LateState.from_json(raw, timedelta(minutes=5)) is None  # other buckets: start over
    assert LateState.from_json(None, TEN) is None
    assert LateState.from_json({"bucket_s": 600.0, "origin": "garbage"}, TEN) is None


def test_a_bisect_step_follows_the_counts() -> None:
    assert step(known=5, observed=5, buckets=8) is Step.SAME
    assert step(known=5, observed=6, buckets=8) is Step.SPLIT
    assert step(known=5, observed=4, buckets=8) is Step.SPLIT
    assert step(known=5, observed=6, buckets=1) is Step.READ
    assert step(known=5, observed=4, buckets=1) is Step.REBASELINE


class Marquez:
    """Counts per bucket as Marquez holds them; `asked` records each range count."""

    def __init__(self, counts: dict[datetime, int]) -> None:
        self.counts = counts
        self.asked: list[tuple[datetime, ...]] = []

    async def count(self, keys: Sequence[datetime]) -> int:
        self.asked.append(tuple(keys))
        return sum(self.counts[k] for k in keys)


async def test_the_bisect_finds_one_changed_bucket_in_log2_counts() -> None:
    keys = buckets(at("12:00", 0), at("12:00"))  # 144
    known = dict.fromkeys(keys, 7)
    marquez = Marquez({**known, at("09:00"): 8})
    total = sum(marquez.counts.values())
    assert await changed_leaves(keys, total, known, marquez.count) == [(at("09:00"), 8)]
    # One count per halving (the right half's is derived): 7 or 8 for 144 buckets, each range
    # inside the one before.
    assert len(marquez.asked) in (7, 8)
    for outer, inner in itertools.pairwise(marquez.asked):
        assert set(inner) < set(outer) or inner[0] > outer[-1] or not set(inner) & set(outer)
    assert at("09:00") in marquez.asked[-1] or len(marquez.asked[-1]) == 1


async def test_the_bisect_finds_several_and_nothing_when_nothing_changed() -> None:
    keys = buckets(at("12:00", 0), at("12:00"))
    known = dict.fromkeys(keys, 7)
    marquez = Marquez({**known, at("13:00", 0): 9, at("13:10", 0): 8, at("11:50"): 8})
    total = sum(marquez.counts.values())
    found = await changed_leaves(keys, total, known, marquez.count)
    assert found == [(at("13:00", 0), 9), (at("13:10", 0), 8), (at("11:50"), 8)]
    shrunk = Marquez({**known, at("02:00"): 3})  # retention: found, with its lower count
    found = await changed_leaves(keys, 144 * 7 - 4, known, shrunk.count)
    assert found == [(at("02:00"), 3)]
    # The documented limit: a deletion and an arrival in one range cancel out.
    cancelled = Marquez({**known, at("13:00", 0): 6, at("13:10", 0): 8})
    assert await changed_leaves(keys, 144 * 7, known, cancelled.count) == []
    quiet = Marquez(dict(known))
    assert await changed_leaves(keys, 144 * 7, known, quiet.count) == []
    assert quiet.asked == []


async def test_an_arrival_between_two_counts_is_never_overcounted() -> None:
    """An event reaching the left half between the parent's count and the left's makes the
    derived right count too low: a bucket may be found a poll later, never given a count
    above what Marquez held."""
    keys = buckets(at("10:00"), at("10:40"))  # 4 buckets
    known = dict.fromkeys(keys, 1)
    marquez = Marquez({**known, keys[3]: 2})  # one late event in the last bucket
    observed = sum(marquez.counts.values())
    marquez.counts[keys[0]] += 1  # arrives after `observed` was taken
    found = dict(await changed_leaves(keys, observed, known, marquez.count))
    assert all(count <= marquez.counts[key] for key, count in found.items())
