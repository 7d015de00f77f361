from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from bot.core.model import DateRange, Interval
from bot.lineage.rules.ranges import RangeError, parse_range


def test_inclusive_range_and_its_time_span() -> None:
    parsed = parse_range("2021-06-04..2021-06-06", max_days=31)
    assert parsed == DateRange(date(2021, 6, 4), date(2021, 6, 6))
    assert parsed.days == 3
    assert parsed.as_interval() == Interval(
        datetime(2021, 6, 4, tzinfo=UTC), datetime(2021, 6, 7, tzinfo=UTC)
    )


def test_single_date_is_one_day() -> None:
    assert parse_range(" 2021-06-04 ", max_days=1).days == 1


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "is not a date range"),
        ("yesterday", "'yesterday' is not an ISO date"),
        ("2021-06-04..", "is not a date range"),
        ("2021-06-04...2021-06-05", "is not a date range"),
        ("2021-13-01..2021-13-02", "'2021-13-01' is not an ISO date"),
        ("2021-06-04..2021-06-31", "'2021-06-31' is not an ISO date"),
        ("2021-06-04 2021-06-05", "is not a date range"),
        ("20210604", "'20210604' is not an ISO date"),
        ("2021-W22-5", "'2021-W22-5' is not an ISO date"),
    ],
)
def test_malformed_ranges_say_how_to_write_one(text: str, fragment: str) -> None:
    with pytest.raises(RangeError, match=r"2021-06-04\.\.2021-06-06|START\.\.END") as error:
        parse_range(text, max_days=31)
    assert fragment in str(error.value)


def test_reversed_range_suggests_the_fix() -> None:
    with pytest.raises(RangeError) as error:
        parse_range("2021-06-06..2021-06-04", max_days=31)
    assert "reversed" in str(error.value)
    assert "Did you mean 2021-06-04..2021-06-06?" in str(error.value)


def test_range_over_the_maximum_names_the_limit() -> None:
    assert parse_range("2021-01-01..2021-01-31", max_days=31).days == 31
    with pytest.raises(RangeError) as error:
        parse_range("2021-01-01..2021-02-01", max_days=31)
    assert "spans 32 days; the maximum is 31" in str(error.value)
    assert "max_range_days" in str(error.value)


def test_dates_far_outside_any_schedule_are_refused() -> None:
    with pytest.raises(RangeError, match="between 1970-01-01 and 2999-12-31"):
        parse_range("9999-12-31", max_days=31)
