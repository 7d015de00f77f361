"""Off-peak windows: when a backfill may run (`execution.windows` in BOT_CONFIG), and the
start time someone gives with `--at`.

A window is days of the week and a local start and end time in a named time zone; an end at or
before the start runs past midnight into the next day (`mon-fri 20:00-06:00` is open Friday
20:00 to Saturday 06:00, closed Saturday 20:00). Times are wall-clock times in that zone, so a
window opens at 20:00 Berlin time in winter and in summer; a start time that does not exist on
a daylight-saving day (02:30 on the spring-forward night) is read as the moment after the gap.
Every function takes the clock as an argument.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

DAY_NAMES = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_CLOCK = re.compile(r"([01]?\d|2[0-3]):([0-5]\d)")
MAX_AHEAD = timedelta(days=31)
"""How far ahead `--at` may schedule a backfill."""


class WindowError(ValueError):
    """A window or a start time cannot be read; the message says what to write instead."""


def parse_days(text: str) -> frozenset[int]:
    """`mon-fri`, `sat,sun`, `mon-wed,fri`, `daily` → weekday numbers (Monday 0)."""
    cleaned = text.strip().lower()
    if cleaned in ("daily", "every day", "all", "*"):
        return frozenset(range(7))
    found: set[int] = set()
    for part in cleaned.split(","):
        first, _, last = part.strip().partition("-")
        if first not in DAY_NAMES or (last and last not in DAY_NAMES):
            raise WindowError(
                f"days {text!r}: use three-letter day names with ranges and commas, "
                "e.g. mon-fri or sat,sun or daily"
            )
        start = DAY_NAMES.index(first)
        end = DAY_NAMES.index(last) if last else start
        day = start
        while True:  # a range may wrap the week: fri-mon
            found.add(day)
            if day == end:
                break
            day = (day + 1) % 7
    return frozenset(found)


def parse_clock(text: str) -> time:
    match = _CLOCK.fullmatch(text.strip())
    if not match:
        raise WindowError(f"time {text!r}: use 24-hour HH:MM, e.g. 20:00")
    return time(int(match.group(1)), int(match.group(2)))


def zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name.strip())
    except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: a folder, e.g. "Europe"
        raise WindowError(
            f"time zone {name!r} is not an IANA zone name (e.g. Europe/Berlin, UTC)"
        ) from None


def _at(day: date, clock: time, tz: ZoneInfo) -> datetime:
    """The UTC moment of a local wall-clock time. A time that does not exist (the hour the
    clocks spring forward) is read as the first minute after the gap; a time that happens
    twice (they fall back) as its first occurrence."""
    local = datetime.combine(day, clock)
    for minutes in range(0, 24 * 60):
        candidate = (local + timedelta(minutes=minutes)).replace(tzinfo=tz)
        moment = candidate.astimezone(UTC)
        if moment.astimezone(tz).replace(tzinfo=None) == candidate.replace(tzinfo=None):
            return moment
    return local.replace(tzinfo=tz).astimezone(UTC)  # no zone has a day-long gap


@dataclass(frozen=True)
class Window:
    days: frozenset[int]
    start: time
    end: time
    tz: str = "UTC"

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.tz)

    def openings(self, around: datetime) -> list[tuple[datetime, datetime]]:
        """The window's openings (UTC start, end) from the day before `around` to 8 days after."""
        local_day = around.astimezone(self.zone).date()
        spans = []
        for offset in range(-1, 9):
            day = local_day + timedelta(days=offset)
            if day.weekday() not in self.days:
                continue
            end_day = day if self.end > self.start else day + timedelta(days=1)
            spans.append((_at(day, self.start, self.zone), _at(end_day, self.end, self.zone)))
        return spans

    def is_open(self, now: datetime) -> bool:
        return any(start <= now < end for start, end in self.openings(now))

    def next_open(self, now: datetime) -> datetime:
        """`now` if open, else when it opens next."""
        if self.is_open(now):
            return now
        return min(start for start, _ in self.openings(now) if start > now)

    def closes(self, now: datetime) -> datetime | None:
        """When the opening `now` is in ends (None: closed now)."""
        ends = [end for start, end in self.openings(now) if start <= now < end]
        return max(ends) if ends else None

    def described(self) -> str:
        days = _days_text(self.days)
        return f"{days} {self.start:%H:%M}–{self.end:%H:%M} {self.tz}"

    def to_json(self) -> dict[str, Any]:
        return {"days": sorted(self.days), "start": f"{self.start:%H:%M}",
                "end": f"{self.end:%H:%M}", "timezone": self.tz}  # fmt: skip

    @classmethod
    def from_json(cls, data: object) -> Window | None:
        """A window as a request stores it (None: none, or unreadable)."""
        if not isinstance(data, Mapping):
            return None
        try:
            days = frozenset(int(d) for d in data["days"] if 0 <= int(d) <= 6)
            name = str(data["timezone"]).strip()
            zone(name)
            start, end = parse_clock(str(data["start"])), parse_clock(str(data["end"]))
        except (KeyError, TypeError, ValueError):
            return None
        if not days or start == end:
            return None  # never open: no window to keep to
        return cls(days, start, end, name)


@dataclass(frozen=True)
class Deadline:
    """A wall-clock time on some days in a zone: when a report is read."""

    days: frozenset[int]
    at: time
    tz: str = "UTC"

    def next_after(self, now: datetime) -> datetime:
        """The first such moment after `now` (UTC), across daylight-saving changes."""
        local_day = now.astimezone(ZoneInfo(self.tz)).date()
        for offset in range(0, 8):
            day = local_day + timedelta(days=offset)
            if day.weekday() in self.days:
                moment = _at(day, self.at, ZoneInfo(self.tz))
                if moment > now:
                    return moment
        raise WindowError("a deadline needs at least one day")  # parse_days never gives none

    def described(self) -> str:
        return f"{self.at:%H:%M} {self.tz} {_days_text(self.days)}"

    def to_json(self) -> dict[str, Any]:
        return {"days": sorted(self.days), "at": f"{self.at:%H:%M}", "timezone": self.tz}

    @classmethod
    def from_json(cls, data: object) -> Deadline | None:
        """A deadline as a request stores it (None: none, or unreadable)."""
        if not isinstance(data, Mapping):
            return None
        try:
            days = frozenset(int(d) for d in data["days"] if 0 <= int(d) <= 6)
            name = str(data["timezone"]).strip()
            zone(name)
            at = parse_clock(str(data["at"]))
        except (KeyError, TypeError, ValueError):
            return None
        return cls(days, at, name) if days else None


def _days_text(days: frozenset[int]) -> str:
    if len(days) == 7:
        return "daily"
    ordered = sorted(days)
    runs: list[list[int]] = []
    for day in ordered:
        if runs and day == runs[-1][-1] + 1:
            runs[-1].append(day)
        else:
            runs.append([day])
    return ",".join(
        DAY_NAMES[r[0]] if len(r) == 1 else f"{DAY_NAMES[r[0]]}-{DAY_NAMES[r[-1]]}" for r in runs
    )


def parse_at(text: str, *, now: datetime, default_tz: str = "UTC") -> datetime:
    """`--at "2021-06-07 20:00"` (in `default_tz`), with an offset (`…T20:00+02:00`) or a zone
    name after it (`2021-06-07 20:00 Europe/Berlin`): the UTC moment, in the future and at most
    `MAX_AHEAD` away."""
    cleaned = " ".join(text.split())
    moment_text, tz_name = cleaned, default_tz
    head, _, tail = cleaned.rpartition(" ")
    if head and ("/" in tail or tail.upper() == "UTC"):
        moment_text, tz_name = head, "UTC" if tail.upper() == "UTC" else tail
    try:
        moment = datetime.fromisoformat(moment_text)
    except ValueError:
        raise WindowError(
            f'--at {text!r}: give a date and time, e.g. --at "2021-06-07 20:00" '
            'or --at "2021-06-07 20:00 Europe/Berlin"'
        ) from None
    tz = zone(tz_name) if moment.tzinfo is None else None
    try:
        if tz is not None:
            moment = _at(moment.date(), moment.time(), tz)
        moment = moment.astimezone(UTC)
    except (OverflowError, ValueError):  # year 1 or 9999 pushed past the calendar's ends
        raise WindowError(f"--at {text!r} is out of range; give a time in the next days") from None
    if moment <= now:
        raise WindowError(
            f"--at {moment:%Y-%m-%d %H:%M} UTC has passed; give a time in the future "
            "(or leave --at out to start on approval)"
        )
    if moment - now > MAX_AHEAD:
        raise WindowError(f"--at is more than {MAX_AHEAD.days} days ahead; ask nearer the time")
    return moment
