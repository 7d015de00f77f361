"""The scheduling rules of a running backfill (pure functions)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bot.backfill.rules.progress import (
    MAX_REPORT_GAP,
    Counts,
    StepView,
    contiguous,
    duration_text,
    next_moves,
    outcome,
    report_due,
    report_gap,
)
from bot.core.model import Interval

DIAMOND = [
    StepView("a", "root", "pending"),
    StepView("b", "left", "pending", ("root",)),
    StepView("c", "right", "pending", ("root",)),
    StepView("d", "join", "pending", ("left", "right")),
]


def states(**changes: str) -> list[StepView]:
    return [StepView(s.id, s.dag_id, changes.get(s.id, s.state), s.upstream) for s in DIAMOND]


def test_only_the_root_starts_first() -> None:
    assert next_moves(states(), cancelled=False, max_parallel=4).start == ("a",)


def test_branches_start_together_once_their_upstream_succeeded_within_the_limit() -> None:
    moves = next_moves(states(a="succeeded"), cancelled=False, max_parallel=4)
    assert moves.start == ("b", "c")
    limited = next_moves(states(a="succeeded"), cancelled=False, max_parallel=1)
    assert limited.start == ("b",)
    busy = next_moves(states(a="succeeded", b="running"), cancelled=False, max_parallel=1)
    assert busy.start == ()


def test_a_join_waits_for_every_upstream() -> None:
    moves = next_moves(states(a="succeeded", b="succeeded", c="running"), cancelled=False,
                       max_parallel=4)  # fmt: skip
    assert moves.start == ()


def test_a_failure_skips_what_is_downstream_of_it_only() -> None:
    moves = next_moves(states(a="succeeded", b="failed"), cancelled=False, max_parallel=4)
    assert moves.start == ("c",)
    assert [step for step, _ in moves.skip] == ["d"]
    assert "left" in moves.skip[0][1]


def test_a_failed_root_skips_everything_transitively() -> None:
    moves = next_moves(states(a="failed"), cancelled=False, max_parallel=4)
    assert [step for step, _ in moves.skip] == ["b", "c", "d"]
    assert moves.start == ()


def test_cancel_skips_every_pending_step() -> None:
    moves = next_moves(states(a="running"), cancelled=True, max_parallel=4)
    assert moves.start == ()
    assert [step for step, _ in moves.skip] == ["b", "c", "d"]


def test_upstream_outside_the_plan_does_not_block() -> None:
    steps = [StepView("x", "only", "pending", ("excluded_upstream",))]
    assert next_moves(steps, cancelled=False, max_parallel=1).start == ("x",)


def test_outcome() -> None:
    assert outcome(["succeeded", "running"], cancelled=False) is None
    assert outcome(["succeeded", "succeeded"], cancelled=False) == "succeeded"
    assert outcome(["succeeded", "skipped", "failed"], cancelled=False) == "failed"
    assert outcome(["succeeded", "cancelled"], cancelled=True) == "cancelled"


def day(n: int) -> Interval:
    start = datetime(2021, 6, 1, tzinfo=UTC) + timedelta(days=n)
    return Interval(start, start + timedelta(days=1))


def test_contiguous_groups() -> None:
    assert contiguous([day(2), day(0), day(1), day(5)]) == [[day(0), day(1), day(2)], [day(5)]]


def test_counts_pad_runs_not_created_yet_as_queued() -> None:
    counts = Counts.of(["success", "running", "failed", "queued", "up_for_retry"], expected=7)
    assert counts.to_json() == {"queued": 3, "running": 2, "succeeded": 1, "failed": 1}
    assert not counts.finished
    assert Counts.of(["success", "failed"]).finished


def test_duration_text() -> None:
    assert duration_text(timedelta(seconds=12)) == "12s"
    assert duration_text(timedelta(minutes=3, seconds=5)) == "3m 05s"
    assert duration_text(timedelta(hours=1, minutes=2)) == "1h 02m"
    assert duration_text(None) == "—"


# --- report cadence ----------------------------------------------------------------------------

T0 = datetime(2021, 6, 7, 9, 0, tzinfo=UTC)
MIN = timedelta(minutes=1)


def test_a_young_backfill_reports_every_progress_update_s() -> None:
    assert report_gap(timedelta(0), 5) == timedelta(seconds=5)
    assert report_gap(timedelta(seconds=40), 5) == timedelta(seconds=5)
    # A one-minute backfill is still reported every 7.5 s at most.
    assert report_gap(MIN, 5) == timedelta(seconds=7.5)


def test_the_gap_grows_with_age_up_to_half_an_hour() -> None:
    ages = [MIN * m for m in (1, 10, 60, 120, 240, 360, 24 * 60)]
    gaps = [report_gap(age, 5) for age in ages]
    assert gaps == sorted(gaps)
    assert report_gap(timedelta(hours=1), 5) == timedelta(minutes=7, seconds=30)
    assert report_gap(timedelta(hours=4), 5) == MAX_REPORT_GAP
    assert report_gap(timedelta(hours=24), 5) == MAX_REPORT_GAP == timedelta(minutes=30)


def test_a_base_longer_than_the_share_of_age_wins() -> None:
    assert report_gap(timedelta(hours=1), 600) == timedelta(minutes=10)
    assert report_gap(timedelta(hours=24), 3600) == timedelta(hours=1)


def test_the_first_report_waits_the_base_gap_after_the_start() -> None:
    assert not report_due(now=T0 + timedelta(seconds=4), started=T0, last=None, base_s=5)
    assert report_due(now=T0 + timedelta(seconds=5), started=T0, last=None, base_s=5)
    assert report_due(now=T0, started=None, last=None, base_s=5)  # nothing to wait from


def test_a_report_waits_for_the_gap_of_the_backfills_age() -> None:
    started = T0 - timedelta(hours=1)  # gap 7.5 min
    last = T0 - timedelta(minutes=7)
    assert not report_due(now=T0, started=started, last=last, base_s=5)
    assert report_due(now=T0 + MIN, started=started, last=last, base_s=5)


def test_a_failure_waits_only_progress_update_s() -> None:
    started = T0 - timedelta(hours=3)  # gap 22.5 min
    assert report_due(now=T0, started=started, last=T0 - MIN, base_s=60, urgent=True)
    assert not report_due(
        now=T0, started=started, last=T0 - timedelta(seconds=59), base_s=60, urgent=True
    )
    assert not report_due(now=T0, started=started, last=T0 - MIN, base_s=60)


def test_reports_of_a_six_hour_backfill_stay_few() -> None:
    """Reporting as soon as allowed, every 5 s of a 6-hour backfill: the count the cadence
    allows at most (each report is at most one edit and one reply)."""
    now, last, reports = T0, None, 0
    while now < T0 + timedelta(hours=6):
        if report_due(now=now, started=T0, last=last, base_s=5):
            last, reports = now, reports + 1
        now += timedelta(seconds=5)
    assert reports < 70
    short, now, last = 0, T0, None
    while now < T0 + 2 * MIN:
        if report_due(now=now, started=T0, last=last, base_s=5):
            last, short = now, short + 1
        now += timedelta(seconds=1)
    assert short >= 15  # 24 at a fixed 5 s
