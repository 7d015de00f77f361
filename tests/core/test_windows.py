"""Off-peak windows (`execution.windows`) and `--at` start times, through the public functions of
bot/core/windows.py and the config that builds them (`WindowRule`, `BotConfig.window_for`)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.config import parse_config
from bot.config.base import ConfigError
from bot.core.model import DagRef
from bot.core.windows import (
    MAX_AHEAD,
    Window,
    WindowError,
    parse_at,
    parse_clock,
    parse_days,
    zone,
)

BERLIN = "Europe/Berlin"
MON, TUE, WED, THU, FRI, SAT, SUN = range(7)


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)  # type: ignore[misc]


def window(days: str, start: str, end: str, tz: str = "UTC") -> Window:
    return Window(parse_days(days), parse_clock(start), parse_clock(end), tz)


# --- days, clock times, zones ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "days"),
    [
        ("mon-fri", {MON, TUE, WED, THU, FRI}),
        ("sat,sun", {SAT, SUN}),
        ("mon-wed,fri", {MON, TUE, WED, FRI}),
        ("fri-mon", {FRI, SAT, SUN, MON}),  # wraps the week
        ("sun-tue", {SUN, MON, TUE}),
        ("sat-sun", {SAT, SUN}),
        ("wed-wed", {WED}),
        ("thu", {THU}),
        ("daily", set(range(7))),
        ("every day", set(range(7))),
        ("all", set(range(7))),
        ("*", set(range(7))),
        ("  Mon-FRI ", {MON, TUE, WED, THU, FRI}),
        (" sat , sun ", {SAT, SUN}),
        ("mon,mon,tue", {MON, TUE}),
    ],
)
def test_days_are_read_with_ranges_commas_and_week_wrapping(text: str, days: set[int]) -> None:
    assert parse_days(text) == frozenset(days)


@pytest.mark.parametrize(
    "text", ["", " ", "monday", "mon-funday", "mon,,fri", "1-5", "weekdays", "mon-tue-wed", "-fri"]
)
def test_unreadable_days_say_what_to_write(text: str) -> None:
    with pytest.raises(WindowError, match=r"e\.g\. mon-fri or sat,sun or daily") as error:
        parse_days(text)
    assert repr(text) in str(error.value)


@pytest.mark.parametrize(
    ("text", "clock"),
    [
        ("20:00", time(20, 0)),
        ("06:00", time(6, 0)),
        ("9:05", time(9, 5)),
        ("00:00", time(0, 0)),
        ("23:59", time(23, 59)),
        ("  07:30 ", time(7, 30)),
    ],
)
def test_clock_times_are_24_hour(text: str, clock: time) -> None:
    assert parse_clock(text) == clock


@pytest.mark.parametrize(
    "text", ["24:00", "20:60", "8pm", "20", "20:0", "", "20:00:00", "-1:00", "20.00", "２０:００"]
)
def test_unreadable_clock_times_say_what_to_write(text: str) -> None:
    with pytest.raises(WindowError, match=r"use 24-hour HH:MM, e\.g\. 20:00"):
        parse_clock(text)


def test_zones_are_iana_names() -> None:
    assert zone(BERLIN) == ZoneInfo(BERLIN)
    assert zone(" UTC ") == ZoneInfo("UTC")


@pytest.mark.parametrize("name", ["Mars/Base", "", "CEST+2", "../etc/passwd", "Europe/"])
def test_unknown_zones_are_refused_with_an_example(name: str) -> None:
    with pytest.raises(
        WindowError, match=r"is not an IANA zone name \(e\.g\. Europe/Berlin, UTC\)"
    ):
        zone(name)


@pytest.mark.parametrize("name", ["Europe", "America/Argentina"])
def test_a_zone_directory_is_refused_as_an_unknown_zone(name: str) -> None:
    with pytest.raises(WindowError, match="IANA"):
        zone(name)


# --- a window across midnight ------------------------------------------------------------------

NIGHTS = window("mon-fri", "20:00", "06:00")
"""Weeknights: open Friday 20:00 to Saturday 06:00, not Saturday or Sunday night."""

# June 2021: Monday 7th, Friday 4th, Saturday 5th, Sunday 6th.


@pytest.mark.parametrize(
    ("moment", "is_open"),
    [
        (utc(2021, 6, 4, 23, 0), True),  # Friday night
        (utc(2021, 6, 5, 3, 0), True),  # early Saturday, still Friday's opening
        (utc(2021, 6, 5, 21, 0), False),  # Saturday night is not a window
        (utc(2021, 6, 6, 21, 0), False),  # nor Sunday night
        (utc(2021, 6, 7, 3, 0), False),  # early Monday: Sunday's night, closed
        (utc(2021, 6, 7, 12, 0), False),  # Monday daytime
        (utc(2021, 6, 7, 20, 0), True),  # opens on the minute
        (utc(2021, 6, 7, 19, 59, 59), False),
        (utc(2021, 6, 8, 5, 59, 59), True),
        (utc(2021, 6, 8, 6, 0), False),  # the end is not part of the window
    ],
)
def test_a_window_past_midnight_belongs_to_the_day_it_starts(
    moment: datetime, is_open: bool
) -> None:
    assert NIGHTS.is_open(moment) is is_open


def test_next_open_is_now_when_open_and_the_next_start_when_closed() -> None:
    friday_night = utc(2021, 6, 4, 23, 0)
    assert NIGHTS.next_open(friday_night) == friday_night
    assert NIGHTS.next_open(utc(2021, 6, 5, 21, 0)) == utc(2021, 6, 7, 20, 0)  # Sat → Mon
    assert NIGHTS.next_open(utc(2021, 6, 7, 3, 0)) == utc(2021, 6, 7, 20, 0)
    assert NIGHTS.next_open(utc(2021, 6, 8, 6, 0)) == utc(2021, 6, 8, 20, 0)
    assert NIGHTS.next_open(utc(2021, 6, 7, 19, 59)) == utc(2021, 6, 7, 20, 0)


def test_closes_is_the_end_of_the_current_opening() -> None:
    assert NIGHTS.closes(utc(2021, 6, 4, 23, 0)) == utc(2021, 6, 5, 6, 0)
    assert NIGHTS.closes(utc(2021, 6, 5, 3, 0)) == utc(2021, 6, 5, 6, 0)
    assert NIGHTS.closes(utc(2021, 6, 7, 20, 0)) == utc(2021, 6, 8, 6, 0)
    assert NIGHTS.closes(utc(2021, 6, 5, 21, 0)) is None
    assert NIGHTS.closes(utc(2021, 6, 8, 6, 0)) is None


def test_a_same_day_window() -> None:
    lunch = window("daily", "12:00", "13:30")
    assert lunch.is_open(utc(2021, 6, 6, 12, 0))
    assert lunch.is_open(utc(2021, 6, 6, 13, 29))
    assert not lunch.is_open(utc(2021, 6, 6, 13, 30))
    assert lunch.next_open(utc(2021, 6, 6, 13, 30)) == utc(2021, 6, 7, 12, 0)
    assert lunch.closes(utc(2021, 6, 6, 12, 15)) == utc(2021, 6, 6, 13, 30)


def test_a_week_wrapping_day_range() -> None:
    long_weekend = window("fri-mon", "09:00", "17:00")
    assert long_weekend.is_open(utc(2021, 6, 4, 10, 0))  # Friday
    assert long_weekend.is_open(utc(2021, 6, 6, 10, 0))  # Sunday
    assert long_weekend.is_open(utc(2021, 6, 7, 10, 0))  # Monday
    assert not long_weekend.is_open(utc(2021, 6, 8, 10, 0))  # Tuesday
    assert not long_weekend.is_open(utc(2021, 6, 10, 10, 0))  # Thursday
    assert long_weekend.next_open(utc(2021, 6, 7, 17, 0)) == utc(2021, 6, 11, 9, 0)  # Mon → Fri


def test_a_window_in_a_zone_keeps_local_weekdays() -> None:
    # Monday 00:30 in Berlin is Sunday 22:30 UTC: a Monday-only window is open then
    mondays = window("mon", "00:00", "06:00", BERLIN)
    assert mondays.is_open(utc(2021, 6, 6, 22, 30))
    assert not mondays.is_open(utc(2021, 6, 7, 22, 30))  # Tuesday 00:30 in Berlin
    assert mondays.next_open(utc(2021, 6, 7, 12, 0)) == utc(2021, 6, 13, 22, 0)


# --- daylight saving ---------------------------------------------------------------------------

BERLIN_NIGHTS = window("daily", "20:00", "06:00", BERLIN)


def test_a_20_00_opening_is_19_00_utc_in_winter_and_18_00_utc_in_summer() -> None:
    # spring forward on Sunday 2021-03-28 (02:00 CET → 03:00 CEST)
    assert BERLIN_NIGHTS.next_open(utc(2021, 3, 27, 12, 0)) == utc(2021, 3, 27, 19, 0)
    assert BERLIN_NIGHTS.next_open(utc(2021, 3, 28, 12, 0)) == utc(2021, 3, 28, 18, 0)
    # fall back on Sunday 2021-10-31 (03:00 CEST → 02:00 CET)
    assert BERLIN_NIGHTS.next_open(utc(2021, 10, 30, 12, 0)) == utc(2021, 10, 30, 18, 0)
    assert BERLIN_NIGHTS.next_open(utc(2021, 10, 31, 12, 0)) == utc(2021, 10, 31, 19, 0)
    assert not BERLIN_NIGHTS.is_open(utc(2021, 3, 28, 17, 59))
    assert BERLIN_NIGHTS.is_open(utc(2021, 3, 28, 18, 0))


def test_the_night_the_clocks_change_is_an_hour_shorter_or_longer() -> None:
    # the night into 2021-03-28: 20:00 CET → 06:00 CEST, 9 hours
    assert BERLIN_NIGHTS.closes(utc(2021, 3, 27, 19, 0)) == utc(2021, 3, 28, 4, 0)
    # the night into 2021-10-31: 20:00 CEST → 06:00 CET, 11 hours
    assert BERLIN_NIGHTS.closes(utc(2021, 10, 30, 18, 0)) == utc(2021, 10, 31, 5, 0)
    assert BERLIN_NIGHTS.is_open(utc(2021, 10, 31, 4, 59))
    assert not BERLIN_NIGHTS.is_open(utc(2021, 10, 31, 5, 0))


def test_a_start_in_the_repeated_hour_opens_once() -> None:
    # 02:30 happens twice on 2021-10-31 in Berlin (00:30 and 01:30 UTC)
    early = window("daily", "02:30", "05:00", BERLIN)
    opened = early.next_open(utc(2021, 10, 30, 23, 0))
    assert opened in (utc(2021, 10, 31, 0, 30), utc(2021, 10, 31, 1, 30))
    assert early.closes(opened) == utc(2021, 10, 31, 4, 0)  # 05:00 CET
    assert early.is_open(utc(2021, 10, 31, 1, 45))


def test_a_start_time_on_an_ordinary_night_is_read_in_local_time() -> None:
    early = window("daily", "02:30", "05:00", BERLIN)
    assert early.next_open(utc(2021, 3, 26, 23, 0)) == utc(2021, 3, 27, 1, 30)  # CET
    assert early.next_open(utc(2021, 3, 28, 23, 0)) == utc(2021, 3, 29, 0, 30)  # CEST


def test_a_start_in_the_spring_forward_gap_opens_at_the_moment_after_the_gap() -> None:
    early = window("daily", "02:30", "05:00", BERLIN)
    assert early.next_open(utc(2021, 3, 27, 23, 0)) == utc(2021, 3, 28, 1, 0)


def test_a_window_starting_in_the_gap_is_closed_before_the_clocks_change() -> None:
    early = window("daily", "02:30", "05:00", BERLIN)
    assert not early.is_open(utc(2021, 3, 28, 0, 45))  # 01:45 CET, before the gap


def test_an_opening_ending_in_the_gap_is_not_empty() -> None:
    # 01:45 CET (00:45 UTC) to 02:15, which does not exist: at least open at 00:50 UTC
    short = window("daily", "01:45", "02:15", BERLIN)
    assert short.is_open(utc(2021, 3, 28, 0, 50))


# --- described, to_json, from_json -------------------------------------------------------------


@pytest.mark.parametrize(
    ("days", "text"),
    [
        ("mon-fri", "mon-fri"),
        ("daily", "daily"),
        ("sat,sun", "sat-sun"),
        ("mon,wed,fri", "mon,wed,fri"),
        ("mon-wed,fri", "mon-wed,fri"),
    ],
)
def test_described_names_days_times_and_zone(days: str, text: str) -> None:
    described = window(days, "20:00", "06:00", BERLIN).described()
    assert described == f"{text} 20:00–06:00 Europe/Berlin"


def test_to_json_is_plain_json() -> None:
    data = window("mon-fri", "20:00", "6:00", BERLIN).to_json()
    assert data == {"days": [0, 1, 2, 3, 4], "start": "20:00", "end": "06:00", "timezone": BERLIN}
    assert json.loads(json.dumps(data)) == data


@pytest.mark.parametrize(
    "w",
    [NIGHTS, BERLIN_NIGHTS, window("fri-mon", "09:00", "17:00", "America/New_York")],
)
def test_from_json_reads_what_to_json_wrote(w: Window) -> None:
    assert Window.from_json(json.loads(json.dumps(w.to_json()))) == w


@pytest.mark.parametrize(
    "data",
    [
        None,
        "mon-fri 20:00-06:00",
        [0, 1],
        {},
        {"days": [0], "start": "20:00", "end": "06:00"},  # no zone
        {"days": [0], "start": "8pm", "end": "06:00", "timezone": "UTC"},
        {"days": [0], "start": "20:00", "end": "06:00", "timezone": "Mars/Base"},
        {"days": 5, "start": "20:00", "end": "06:00", "timezone": "UTC"},
        {"days": ["mon"], "start": "20:00", "end": "06:00", "timezone": "UTC"},
        {"days": [None], "start": "20:00", "end": "06:00", "timezone": "UTC"},
    ],
)
def test_from_json_gives_none_for_unreadable_data(data: Any) -> None:
    assert Window.from_json(data) is None


def test_from_json_drops_days_out_of_range() -> None:
    data = {"days": [0, 9, -1], "start": "20:00", "end": "06:00", "timezone": "UTC"}
    assert Window.from_json(data) == window("mon", "20:00", "06:00")


@pytest.mark.parametrize("days", [[], [7, 8]])
def test_a_stored_window_without_days_is_unreadable(days: list[int]) -> None:
    data = {"days": days, "start": "20:00", "end": "06:00", "timezone": "UTC"}
    assert Window.from_json(data) is None


def test_a_stored_zone_with_spaces_is_usable_or_refused() -> None:
    data = {"days": [0], "start": "20:00", "end": "06:00", "timezone": " Europe/Berlin "}
    stored = Window.from_json(data)
    assert stored is None or stored.is_open(utc(2021, 6, 7, 19, 0))


# --- properties over random windows and moments ------------------------------------------------

# Zones with and without daylight saving (Lord Howe moves by 30 minutes, Chatham has a +12:45
# offset). Window times avoid 01:00-04:59, where those zones' clocks change: windows starting in
# a gap are covered above.
ZONES = st.sampled_from(
    ["UTC", BERLIN, "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata", "Pacific/Chatham"]
)
CLOCKS = st.builds(time, st.sampled_from([0, *range(5, 24)]), st.sampled_from([0, 15, 30, 45, 59]))
DAYS = st.frozensets(st.integers(0, 6), min_size=1)
WINDOWS = st.builds(Window, DAYS, CLOCKS, CLOCKS, ZONES).filter(lambda w: w.start != w.end)
TRANSITIONS = [utc(2021, 3, 28, 1), utc(2021, 10, 31, 1), utc(2021, 3, 14, 7), utc(2021, 4, 3, 15)]
MOMENTS = st.one_of(
    st.datetimes(datetime(2020, 1, 1), datetime(2023, 12, 31), timezones=st.just(UTC)),
    st.builds(
        lambda at, minutes: at + timedelta(minutes=minutes),
        st.sampled_from(TRANSITIONS),
        st.integers(-3 * 24 * 60, 3 * 24 * 60),
    ),
)


def _open_by_wall_clock(w: Window, moment: datetime) -> bool:
    """The window read naively off the local wall clock (fine away from gaps)."""
    local = moment.astimezone(ZoneInfo(w.tz))
    clock, day = local.time().replace(tzinfo=None), local.weekday()
    if w.start < w.end:
        return day in w.days and w.start <= clock < w.end
    return (day in w.days and clock >= w.start) or ((day - 1) % 7 in w.days and clock < w.end)


@settings(max_examples=400, deadline=None)
@given(WINDOWS, MOMENTS)
def test_is_open_agrees_with_the_local_wall_clock(w: Window, moment: datetime) -> None:
    assert w.is_open(moment) is _open_by_wall_clock(w, moment)


@settings(max_examples=400, deadline=None)
@given(WINDOWS, MOMENTS)
def test_next_open_is_the_first_open_moment(w: Window, moment: datetime) -> None:
    opened = w.next_open(moment)
    assert opened >= moment
    assert w.is_open(opened)
    assert opened - moment <= timedelta(days=7, hours=1)
    if opened > moment:
        assert not w.is_open(opened - timedelta(seconds=1))
        assert not w.is_open(moment + (opened - moment) / 2)


@settings(max_examples=400, deadline=None)
@given(WINDOWS, MOMENTS)
def test_closes_is_later_and_closed_then(w: Window, moment: datetime) -> None:
    closes = w.closes(moment)
    if not w.is_open(moment):
        assert closes is None
        return
    assert closes is not None
    assert moment < closes <= moment + timedelta(days=1, hours=1)
    assert w.is_open(closes - timedelta(seconds=1))
    assert not w.is_open(closes)


@settings(max_examples=200, deadline=None)
@given(WINDOWS)
def test_a_window_survives_json_and_its_description_names_its_days(w: Window) -> None:
    assert Window.from_json(json.loads(json.dumps(w.to_json()))) == w
    assert parse_days(w.described().split(" ")[0]) == w.days


# --- --at --------------------------------------------------------------------------------------

NOW = utc(2021, 6, 1, 12, 0)


@pytest.mark.parametrize(
    ("text", "default_tz", "moment"),
    [
        ("2021-06-07 20:00", "UTC", utc(2021, 6, 7, 20, 0)),
        ("2021-06-07T20:00", "UTC", utc(2021, 6, 7, 20, 0)),
        ("2021-06-07 20:00", BERLIN, utc(2021, 6, 7, 18, 0)),
        ("2021-06-07 20:00 Europe/Berlin", "UTC", utc(2021, 6, 7, 18, 0)),
        ("2021-06-07 20:00 America/New_York", BERLIN, utc(2021, 6, 8, 0, 0)),
        ("2021-06-07 20:00 UTC", BERLIN, utc(2021, 6, 7, 20, 0)),
        ("2021-06-07T20:00+02:00", "UTC", utc(2021, 6, 7, 18, 0)),
        ("2021-06-07T20:00+02:00", "America/New_York", utc(2021, 6, 7, 18, 0)),
        ("2021-06-07T20:00Z", BERLIN, utc(2021, 6, 7, 20, 0)),
        ("  2021-06-07   20:00    Europe/Berlin ", "UTC", utc(2021, 6, 7, 18, 0)),
        ("2021-06-02", "UTC", utc(2021, 6, 2, 0, 0)),
        ("2021-06-07 20:00:30", "UTC", utc(2021, 6, 7, 20, 0, 30)),
    ],
)
def test_at_reads_naive_times_offsets_and_zone_names(
    text: str, default_tz: str, moment: datetime
) -> None:
    read = parse_at(text, now=NOW, default_tz=default_tz)
    assert read == moment
    assert read.utcoffset() == timedelta(0)


def test_at_reads_summer_and_winter_times_in_their_own_offset() -> None:
    winter_now = utc(2021, 12, 1, 12, 0)
    assert parse_at("2021-12-07 20:00 Europe/Berlin", now=winter_now) == utc(2021, 12, 7, 19, 0)
    assert parse_at("2021-06-07 20:00 Europe/Berlin", now=NOW) == utc(2021, 6, 7, 18, 0)


@pytest.mark.parametrize("text", ["2021-06-01 11:00", "2021-05-31 20:00", "2021-06-01 12:00"])
def test_at_in_the_past_is_refused(text: str) -> None:
    with pytest.raises(WindowError, match="has passed; give a time in the future"):
        parse_at(text, now=NOW)


def test_at_in_the_past_by_its_zone_is_refused() -> None:
    # 13:30 in Berlin is 11:30 UTC: passed, though 13:30 UTC has not
    with pytest.raises(WindowError, match="2021-06-01 11:30 UTC has passed"):
        parse_at("2021-06-01 13:30 Europe/Berlin", now=NOW)


def test_at_may_be_at_most_31_days_ahead() -> None:
    assert timedelta(days=31) == MAX_AHEAD
    assert parse_at("2021-07-02 12:00", now=NOW) == NOW + MAX_AHEAD
    with pytest.raises(WindowError, match="more than 31 days ahead"):
        parse_at("2021-07-02 12:01", now=NOW)
    with pytest.raises(WindowError, match="more than 31 days ahead"):
        parse_at("2022-06-07 20:00 Europe/Berlin", now=NOW)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "tomorrow",
        "20:00",
        "2021-13-01 20:00",
        "2021-06-31 20:00",
        "2021-06-07 25:00",
        "07.06.2021 20:00",
        "2021-06-07 20:00 CEST",
        "2021-06-07 8pm",
        "next monday Europe/Berlin",
    ],
)
def test_unreadable_at_says_what_to_type(text: str) -> None:
    with pytest.raises(WindowError, match=r'e\.g\. --at "2021-06-07 20:00"'):
        parse_at(text, now=NOW)


def test_at_with_an_unknown_zone_names_the_zone() -> None:
    with pytest.raises(WindowError, match="'Mars/Base' is not an IANA zone name"):
        parse_at("2021-06-07 20:00 Mars/Base", now=NOW)
    with pytest.raises(WindowError, match="'Mars/Base' is not an IANA zone name"):
        parse_at("2021-06-07 20:00", now=NOW, default_tz="Mars/Base")


def test_at_takes_utc_in_any_case() -> None:
    assert parse_at("2021-06-07 20:00 utc", now=NOW, default_tz=BERLIN) == utc(2021, 6, 7, 20, 0)


def test_at_with_a_zone_directory_is_refused_clearly() -> None:
    with pytest.raises(WindowError, match="IANA"):
        parse_at("2021-06-07 20:00 America/Argentina", now=NOW)


def test_at_in_the_spring_forward_gap_is_the_moment_after_it() -> None:
    now = utc(2021, 3, 20, 12, 0)
    assert parse_at("2021-03-28 02:30 Europe/Berlin", now=now) == utc(2021, 3, 28, 1, 0)


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from([NOW, utc(2021, 3, 1), utc(2021, 3, 20), utc(2021, 10, 20), utc(2021, 3, 25)]),
    st.integers(1, 31 * 24 * 60),
    st.sampled_from([BERLIN, "America/New_York", "Asia/Kolkata", "UTC", "Australia/Lord_Howe"]),
)
def test_at_reads_back_a_local_time_it_was_given(now: datetime, minutes: int, tz: str) -> None:
    moment = now + timedelta(minutes=minutes)
    local = moment.astimezone(ZoneInfo(tz))
    # an offset always says which moment it is
    assert parse_at(local.isoformat(), now=now) == moment
    if local.fold == 0:  # the second of a repeated hour cannot be written without an offset
        text = f"{local:%Y-%m-%d %H:%M}"
        assert parse_at(f"{text} {tz}", now=now) == moment
        assert parse_at(text, now=now, default_tz=tz) == moment


# --- the config's windows ----------------------------------------------------------------------

TEAMS: dict[str, Any] = {
    "teams": [{"name": "orders"}, {"name": "analytics"}],
    "ownership": [
        {"pattern": "example.etl_orders*", "team": "orders"},
        {"pattern": "reporting::*", "team": "analytics"},
    ],
}


def config_with(*windows: dict[str, Any], **execution: Any) -> Any:
    return parse_config({**TEAMS, "execution": {"windows": list(windows), **execution}})


def test_a_window_rule_builds_its_window() -> None:
    rule = {"days": "mon-fri", "start": "20:00", "end": "06:00", "timezone": BERLIN}
    config = config_with(rule)
    assert config.execution.windows[0].window() == window("mon-fri", "20:00", "06:00", BERLIN)
    assert config_with({"start": "20:00", "end": "06:00"}).execution.windows[0].window() == window(
        "daily", "20:00", "06:00", "UTC"
    )


def test_window_for_takes_the_first_rule_by_dags_team_or_neither() -> None:
    config = config_with(
        {"dags": "example.etl_orders_7_days", "start": "01:00", "end": "02:00"},
        {"team": "orders", "start": "02:00", "end": "03:00"},
        {"dags": "reporting::*", "team": "orders", "start": "03:00", "end": "04:00"},
        {"team": "analytics", "start": "04:00", "end": "05:00"},
        {"start": "20:00", "end": "06:00"},
        {"team": "analytics", "start": "05:00", "end": "06:00"},
    )

    def start_of(namespace: str, dag_id: str) -> str | None:
        rule = config.window_for(DagRef(namespace, dag_id))
        return rule.start if rule else None

    assert start_of("food_delivery", "example.etl_orders_7_days") == "01:00"  # by pattern
    assert start_of("food_delivery", "example.etl_orders") == "02:00"  # by owning team
    assert start_of("reporting", "weekly_kpis") == "04:00"  # the pattern matches, team does not
    assert start_of("food_delivery", "example.etl_delivery") == "20:00"  # the catch-all


def test_without_a_catch_all_other_dags_have_no_window() -> None:
    config = config_with({"team": "orders", "start": "20:00", "end": "06:00"})
    assert config.window_for(DagRef("food_delivery", "example.etl_orders")) is not None
    assert config.window_for(DagRef("food_delivery", "example.etl_delivery")) is None
    assert parse_config({}).window_for(DagRef("food_delivery", "example.etl_orders")) is None


def test_a_catch_all_first_wins_for_every_dag() -> None:
    config = config_with(
        {"start": "20:00", "end": "06:00"}, {"team": "orders", "start": "01:00", "end": "02:00"}
    )
    rule = config.window_for(DagRef("food_delivery", "example.etl_orders"))
    assert rule is not None
    assert rule.start == "20:00"


@pytest.mark.parametrize(
    ("rule", "expected"),
    [
        ({"days": "weekdays", "start": "20:00", "end": "06:00"}, "execution.windows.0.days"),
        ({"days": "mon-fri", "start": "25:00", "end": "06:00"}, "execution.windows.0.start"),
        ({"start": "20:00", "end": "6pm"}, "use 24-hour HH:MM"),
        ({"start": "20:00", "end": "06:00", "timezone": "Mars/Base"}, "not an IANA zone name"),
        ({"start": "20:00", "end": "20:00"}, "start and end must differ"),
        ({"start": "20:00"}, "execution.windows.0.end"),
        ({"start": "20:00", "end": "06:00", "team": "nobody"}, "refers to team 'nobody'"),
        ({"start": "20:00", "end": "06:00", "hours": 3}, "Extra inputs are not permitted"),
    ],
)
def test_bad_window_rules_are_config_errors(rule: dict[str, Any], expected: str) -> None:
    with pytest.raises(ConfigError, match=expected):
        config_with(rule)


def test_the_default_zone_for_at_is_checked() -> None:
    assert config_with(timezone=BERLIN).execution.timezone == BERLIN
    with pytest.raises(ConfigError, match=r"execution\.timezone.*not an IANA zone name"):
        config_with(timezone="Berlin")


def test_a_zone_directory_in_the_config_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="IANA"):
        config_with({"start": "20:00", "end": "06:00", "timezone": "Europe"})


def test_start_and_end_are_compared_as_times() -> None:
    with pytest.raises(ConfigError, match="start and end must differ"):
        config_with({"start": "9:00", "end": "09:00"})


def test_a_quoted_zone_with_spaces_is_refused_or_works() -> None:
    try:
        config = config_with({"start": "20:00", "end": "06:00", "timezone": " Europe/Berlin"})
    except ConfigError:
        return
    assert config.execution.windows[0].window().is_open(utc(2021, 6, 7, 19, 0))


@pytest.mark.parametrize(
    "text",
    ["9999-12-31 23:59 America/New_York", "0001-01-01 00:00 Asia/Tokyo", "9999-12-31T23:59-05:00"],
)
def test_an_at_past_the_calendars_ends_is_refused_not_crashed(text: str) -> None:
    with pytest.raises(WindowError):
        parse_at(text, now=NOW)
