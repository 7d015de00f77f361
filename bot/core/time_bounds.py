"""The span of time the bot accepts from outside (event times, nominal intervals, the dates
of `/backfill`), and date arithmetic that cannot overflow.

The bot adds days, weeks and schedule periods to times it was sent (an outage's grouping
slack, the next intervals of a schedule, an SLA deadline). Python's datetime ends in year
9999, so a time near it makes those additions raise OverflowError; a time outside this span
is refused where it comes in, naming the field, and the arithmetic below saturates instead of
raising for anything already stored.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

EARLIEST_DAY, LATEST_DAY = date(1970, 1, 1), date(2999, 12, 31)
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
END = datetime(3000, 1, 1, tzinfo=UTC)
"""Times must lie in [EARLIEST, END): runs and their intervals are after the epoch and
centuries before datetime's end, so any later arithmetic on them has room."""


def in_bounds(moment: datetime) -> bool:
    return EARLIEST <= moment < END


def described() -> str:
    return f"between {EARLIEST_DAY.isoformat()} and {LATEST_DAY.isoformat()}"


def plus(moment: datetime, delta: timedelta) -> datetime:
    """`moment + delta`, saturating at datetime's ends instead of raising OverflowError."""
    try:
        return moment + delta
    except OverflowError:
        return (datetime.max if delta > timedelta(0) else datetime.min).replace(
            tzinfo=moment.tzinfo
        )
