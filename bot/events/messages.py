"""Notices for the ops channel about the watcher itself: Marquez unreachable, Marquez
recovered, run events set aside (in the ops notice's one shape: `bot.slack.messages.ops`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from bot.slack.messages.ops import describe_duration, moment, ops_notice
from bot.slack.messages.render import plural


def unreachable(reason: str, resume_from: datetime) -> dict[str, Any]:
    """The ops notice posted once when Marquez stops answering usefully."""
    return ops_notice(
        ":warning:",
        "Marquez unreachable",
        "The watcher cannot read Marquez's run events and retries with backoff. It keeps its "
        "place, so no failure is lost: once Marquez answers, it reads on from there.",
        [f"Error: {reason}", f"Resumes from events at {moment(resume_from)}"],
    )


def recovered(
    down: tuple[datetime, datetime], since: datetime, read_from: datetime, new: int
) -> dict[str, Any]:
    """The ops notice posted once when Marquez answers again after an outage: it was down from
    `since` (the first failed poll) until some moment in `down` (the last failed poll, and the
    poll that found it back)."""
    shortest, longest = down[0] - since, down[1] - since
    low, high = describe_duration(shortest), describe_duration(longest)
    how_long = high if low == high else f"{low} to {high}"
    return ops_notice(
        ":white_check_mark:",
        "Marquez recovered",
        f"Marquez answers again after {how_long} unreachable. No events were missed: the "
        f"watcher read on from where it stopped ({plural(new, 'new run event')} so far).",
        [
            f"Unreachable since {moment(since)}",
            f"Last failed poll at {moment(down[0])}, answered at {moment(down[1])}",
            f"Read on from events at {moment(read_from)}",
        ],
    )


@dataclass(frozen=True)
class SetAside:
    """A run event the watcher could not handle, as the ops notice names it."""

    id: int
    event_type: str
    dag_id: str
    event_time: datetime
    failure: str


_SET_ASIDE_SHOWN = 9  # a context block holds 10 elements: 9 rows and "and N more"


def set_aside(rows: Sequence[SetAside], *, tries: int) -> dict[str, Any]:
    """The ops notice posted once for the run events a pass set aside."""
    facts = [
        f"#{row.id} {row.event_type} of {row.dag_id} at {moment(row.event_time)}: {row.failure}"
        for row in rows[:_SET_ASIDE_SHOWN]
    ]
    if len(rows) > _SET_ASIDE_SHOWN:
        facts.append(f"and {len(rows) - _SET_ASIDE_SHOWN} more (backfill-bot events list)")
    return ops_notice(
        ":warning:",
        "Run events set aside",
        f"The watcher could not handle {plural(len(rows), 'run event')} after {tries} tries. "
        "They are kept and every other event goes on as usual: once the cause is fixed, "
        "`backfill-bot events retry` handles them again.",
        facts,
    )
