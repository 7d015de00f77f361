"""The reports' estimates (bot/backfill/rules/estimate.py): waves of runs at once along the
plan's DAGs, the writers of what a report reads, and "cannot tell" without run-time history."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bot.backfill.rules.estimate import (
    StepPace,
    correct_by,
    finishes,
    report_estimates,
    round_up,
    typical_run_s,
)

NOW = datetime(2021, 6, 7, 5, 0, tzinfo=UTC)
DAILY_8 = {"days": list(range(7)), "at": "08:00", "timezone": "UTC"}


def test_a_step_runs_in_waves_after_its_upstream() -> None:
    steps = [
        StepPace("a", (), runs_left=3, at_once=2, run_s=600),  # 2 waves: 20 min
        StepPace("b", ("a",), runs_left=1, at_once=4, run_s=1800),  # then 30 min
        StepPace("c", (), runs_left=4, at_once=4, run_s=300),  # alongside: 5 min
    ]
    ends = finishes(steps, NOW)
    assert ends == {
        "a": NOW + timedelta(minutes=20),
        "b": NOW + timedelta(minutes=50),
        "c": NOW + timedelta(minutes=5),
    }
    assert correct_by(ends, ["c"]) == NOW + timedelta(minutes=10)  # rounded up to 10 min
    assert correct_by(ends, ["b"]) == NOW + timedelta(minutes=50)
    assert correct_by(ends, []) == NOW + timedelta(minutes=50)  # writers unknown: all of it


def test_without_history_a_step_and_what_follows_it_cannot_be_told() -> None:
    steps = [
        StepPace("a", (), 3, 1, None),
        StepPace("b", ("a",), 1, 1, 60),
        StepPace("c", (), 1, 1, 60),
    ]
    ends = finishes(steps, NOW)
    assert ends["a"] is None
    assert ends["b"] is None
    assert correct_by(ends, ["c"]) == NOW + timedelta(minutes=10)
    assert correct_by(ends, ["b"]) is None


def test_a_finished_step_adds_no_time() -> None:
    steps = [StepPace("a", (), 0, 1, None), StepPace("b", ("a",), 2, 1, 600)]
    assert finishes(steps, NOW)["b"] == NOW + timedelta(minutes=20)


def test_a_report_is_late_when_it_is_ready_after_it_is_read() -> None:
    steps = [StepPace("a", (), 6, 1, 1800)]  # 3 hours
    entries = [
        {"report": "Weekly KPIs", "team": "bi", "deadline": DAILY_8, "dags": ["a"]},
        {"report": "Unparsed", "deadline": {"at": "nonsense"}},
    ]
    kpis, unparsed = report_estimates(entries, steps, NOW)
    assert kpis.read_at == datetime(2021, 6, 7, 8, 0, tzinfo=UTC)
    assert kpis.ready == datetime(2021, 6, 7, 8, 0, tzinfo=UTC)
    assert not kpis.late
    assert kpis.takes == timedelta(hours=3)
    later = report_estimates(entries, steps, NOW + timedelta(minutes=1))[0]
    assert later.late
    assert unparsed.read_at is None
    assert unparsed.team is None


def test_the_typical_run_is_the_median_of_sane_durations() -> None:
    assert typical_run_s([60, 600, 61, -5]) == 61
    assert typical_run_s([]) is None
    assert round_up(NOW + timedelta(seconds=1)) == NOW + timedelta(minutes=10)
    assert round_up(NOW) == NOW
