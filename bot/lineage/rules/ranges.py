"""Parsing of the user's date range (`START..END`), with errors that name the fix."""

from __future__ import annotations

import re
from datetime import date

from bot.core.model import DateRange
from bot.core.time_bounds import EARLIEST_DAY, LATEST_DAY
from bot.lineage.rules.errors import PlanningError

_RANGE = re.compile(r"^\s*(?P<start>[^.\s]+)\s*(?:\.\.\s*(?P<end>[^.\s]+)\s*)?$")
EXAMPLE = "2021-06-04..2021-06-06"


class RangeError(PlanningError, ValueError):
    """The date range is malformed, reversed or too long; the message says how to fix it."""


_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}$")
EARLIEST, LATEST = EARLIEST_DAY, LATEST_DAY


def _parse_day(text: str, whole: str) -> date:
    try:
        # fromisoformat alone also takes 20210604 and week dates; users mean YYYY-MM-DD.
        if not _DAY.match(text):
            raise ValueError(text)
        day = date.fromisoformat(text)
    except ValueError:
        raise RangeError(
            f"'{whole}' is not a date range: '{text}' is not an ISO date (YYYY-MM-DD). "
            f"Use START..END, e.g. {EXAMPLE}, or a single date."
        ) from None
    if not EARLIEST <= day <= LATEST:
        raise RangeError(
            f"'{text}' is out of range: dates must lie between {EARLIEST} and {LATEST}."
        )
    return day


def parse_range(text: str, *, max_days: int) -> DateRange:
    """Parse `START..END` (inclusive ISO dates) or a single `DATE` (one day)."""
    match = _RANGE.match(text or "")
    if match is None:
        raise RangeError(
            f"'{text}' is not a date range. Use START..END with ISO dates, e.g. {EXAMPLE}, "
            "or a single date for one day."
        )
    start = _parse_day(match["start"], text)
    end = _parse_day(match["end"], text) if match["end"] else start
    if end < start:
        raise RangeError(
            f"The range {text.strip()} is reversed: the start is after the end. "
            f"Did you mean {end.isoformat()}..{start.isoformat()}?"
        )
    result = DateRange(start, end)
    if result.days > max_days:
        raise RangeError(
            f"The range {result} spans {result.days} days; the maximum is {max_days} "
            "(limits.max_range_days in BOT_CONFIG). Split it into smaller backfills."
        )
    return result
