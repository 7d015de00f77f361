"""The scheduling rules of a running backfill (pure functions)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bot.domain.model import Interval
from bot.domain.progress import Counts, StepView, contiguous, duration_text, next_moves, outcome

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
