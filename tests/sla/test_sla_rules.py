"""Lateness from history, rules and a fixed clock (pure)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bot.core.model import Interval
from bot.sla.rules import RunFacts, expected_intervals, learned_delay, misses

DAY = timedelta(days=1)
T0 = datetime(2021, 6, 1, tzinfo=UTC)


def daily(
    n: int, *, done_after: timedelta | None = timedelta(hours=1), ok: bool = True
) -> RunFacts:
    interval = Interval(T0 + n * DAY, T0 + (n + 1) * DAY)
    finished = interval.end + done_after if done_after is not None else None
    return RunFacts(
        interval, interval.end + timedelta(minutes=5), finished, ok and finished is not None
    )


HISTORY = [daily(n, done_after=timedelta(minutes=50 + 5 * (n % 3))) for n in range(7)]


def test_expected_intervals_continue_the_period_up_to_now() -> None:
    now = T0 + 9 * DAY + timedelta(hours=3)
    ends = [i.end for i in expected_intervals(HISTORY, now)]
    assert ends[-1] == T0 + 9 * DAY
    assert len(ends) == 9


def test_learned_delay_needs_enough_successful_runs() -> None:
    assert learned_delay(HISTORY[:4]) is None
    delay = learned_delay(HISTORY)
    assert delay is not None
    assert timedelta(minutes=55) < delay < timedelta(hours=2)


def test_a_run_missing_past_its_deadline_is_a_miss_once_due() -> None:
    interval_end = T0 + 8 * DAY  # interval 7 has no run at all
    before = misses(HISTORY, now=interval_end + timedelta(hours=1), deadline=timedelta(hours=2))
    assert before == []
    after = misses(HISTORY, now=interval_end + timedelta(hours=3), deadline=timedelta(hours=2))
    assert [(m.interval.end, m.kind) for m in after] == [(interval_end, "missing")]
    assert after[0].due == interval_end + timedelta(hours=2)
    assert "SLA is 2h 00m" in after[0].reason


def test_without_a_rule_the_usual_completion_time_decides() -> None:
    running = RunFacts(Interval(T0 + 7 * DAY, T0 + 8 * DAY), T0 + 8 * DAY, None, False)
    runs = [*HISTORY, running]
    assert misses(runs, now=T0 + 8 * DAY + timedelta(minutes=40)) == []
    late = misses(runs, now=T0 + 8 * DAY + timedelta(hours=3))
    assert [m.kind for m in late] == ["late"]
    assert "usually finish" in late[0].reason


def test_a_failed_run_stays_late_until_a_rerun_succeeds() -> None:
    failed = daily(7, done_after=timedelta(minutes=30), ok=False)
    now = T0 + 8 * DAY + timedelta(hours=5)
    assert [m.kind for m in misses([*HISTORY, failed], now=now, deadline=timedelta(hours=2))] == [
        "late"
    ]
    rerun = RunFacts(failed.interval, now - timedelta(hours=1), now - timedelta(minutes=30), True)
    assert misses([*HISTORY, failed, rerun], now=now, deadline=timedelta(hours=2)) == []


def test_a_run_longer_than_max_duration_is_a_miss() -> None:
    stuck = RunFacts(Interval(T0 + 7 * DAY, T0 + 8 * DAY), T0 + 8 * DAY, None, False)
    now = T0 + 8 * DAY + timedelta(hours=3)
    found = misses([*HISTORY, stuck], now=now, max_duration=timedelta(hours=2))
    assert [m.kind for m in found] == ["too_long"]
    assert "running for 3h 00m" in found[0].reason


def test_old_intervals_are_history_not_news() -> None:
    assert misses(HISTORY[:6], now=T0 + 30 * DAY, deadline=timedelta(hours=1))[0].interval.end >= (
        T0 + 27 * DAY
    )
