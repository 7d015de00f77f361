from __future__ import annotations

import itertools
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest

from bot.core.model import DateRange, Interval
from bot.lineage.rules.schedule import (
    CronSchedule,
    HistorySchedule,
    ScheduleError,
    Unscheduled,
    intervals_for,
    schedule_from_runs,
)


def at(day: int, month: int = 6, hour: int = 0) -> datetime:
    return datetime(2021, month, day, hour, tzinfo=UTC)


def run(start: datetime, end: datetime | None) -> dict[str, Any]:
    return {
        "nominalStartTime": start.isoformat().replace("+00:00", "Z"),
        "nominalEndTime": end.isoformat().replace("+00:00", "Z") if end else None,
        "state": "COMPLETED",
    }


JUNE_4_TO_6 = DateRange(date(2021, 6, 4), date(2021, 6, 6)).as_interval()


def test_weekly_cron_maps_three_days_to_the_weeks_that_contain_them() -> None:
    weeks = CronSchedule("0 0 * * 0").intervals(JUNE_4_TO_6)
    assert weeks == [Interval(at(30, 5), at(6)), Interval(at(6), at(13))]


def test_airflow_presets_and_touching_boundaries() -> None:
    days = CronSchedule("@daily").intervals(Interval(at(4), at(5)))
    assert days == [Interval(at(4), at(5))], "an interval that only touches is not rerun"


def test_history_of_weekly_runs_extrapolates_outside_what_it_saw() -> None:
    runs = [run(at(d, m), at(d, m) + timedelta(days=7)) for d, m in ((23, 5), (30, 5), (6, 6))]
    schedule = schedule_from_runs(runs)
    assert isinstance(schedule, HistorySchedule)
    assert schedule.periodic.period == timedelta(days=7)
    assert schedule.intervals(JUNE_4_TO_6) == [Interval(at(30, 5), at(6)), Interval(at(6), at(13))]
    later = Interval(at(1, 8), at(2, 8))
    assert schedule.intervals(later) == [Interval(at(1, 8), at(8, 8))]


def test_history_with_gaps_and_point_nominal_times() -> None:
    # Daily runs with a missing day, nominal end equal to start (as Marquez's own sample has).
    runs = [run(at(d, 6, 22), at(d, 6, 22)) for d in (1, 2, 4, 5)]
    schedule = schedule_from_runs(runs)
    assert schedule.intervals(Interval(at(3), at(4))) == [
        Interval(at(2, 6, 22), at(3, 6, 22)),
        Interval(at(3, 6, 22), at(4, 6, 22)),
    ]


def test_runs_without_nominal_times_give_no_schedule() -> None:
    schedule = schedule_from_runs([{"nominalStartTime": None}, {"state": "FAILED"}])
    assert isinstance(schedule, Unscheduled)
    assert schedule.intervals(JUNE_4_TO_6) == [JUNE_4_TO_6]


def test_single_run_uses_its_length_as_period() -> None:
    schedule = schedule_from_runs([run(at(1), at(2))])
    assert schedule.intervals(Interval(at(3, 6, 12), at(4, 6, 12))) == [
        Interval(at(3), at(4)),
        Interval(at(4), at(5)),
    ]


def test_changed_windows_are_merged_and_results_deduplicated() -> None:
    weekly = CronSchedule("@weekly")
    result = intervals_for(
        weekly, [Interval(at(4), at(5)), Interval(at(5), at(6)), Interval(at(6), at(7))]
    )
    assert result == [Interval(at(30, 5), at(6)), Interval(at(6), at(13))]


def test_minutely_schedules_over_long_windows_are_refused() -> None:
    with pytest.raises(ScheduleError, match="narrow the range"):
        CronSchedule("* * * * *").intervals(Interval(at(1), at(30)))


def test_monthly_history_uses_the_recorded_months_not_a_31_day_period() -> None:
    months = [datetime(2021, m, 1, tzinfo=UTC) for m in range(1, 7)]
    runs = [run(a, b) for a, b in itertools.pairwise(months)]
    schedule = schedule_from_runs(runs)
    february = Interval(datetime(2021, 2, 10, tzinfo=UTC), datetime(2021, 2, 11, tzinfo=UTC))
    assert schedule.intervals(february) == [Interval(months[1], months[2])]


def test_recorded_gaps_are_filled_by_the_period() -> None:
    runs = [run(at(d), at(d + 1)) for d in (1, 2, 4, 5)]  # the run of June 3 never happened
    assert schedule_from_runs(runs).intervals(Interval(at(2, 6, 12), at(4, 6, 12))) == [
        Interval(at(2), at(3)),
        Interval(at(3), at(4)),
        Interval(at(4), at(5)),
    ]
