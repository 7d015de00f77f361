"""Notices for the ops channel about the watcher itself: Marquez unreachable, Marquez
recovered, run events set aside (templates/watch/notice.json.j2, which escapes every value:
error messages come from outside)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from bot.slack.messages.render import SENTENCE, clip, plural, render

_FACT = 500
_SINK = 80  # a sink's name as BOT_CONFIG spells it (at most 63 characters there)


def unreachable(reason: str, resume_from: datetime) -> dict[str, Any]:
    """The ops notice posted once when Marquez stops answering usefully."""
    return _notice(
        ":warning:",
        "Marquez unreachable",
        "The watcher cannot read Marquez's run events and retries with backoff. It keeps its "
        "place, so no failure is lost: once Marquez answers, it reads on from there.",
        [f"Error: {reason}", f"Resumes from events at {_moment(resume_from)}"],
    )


def recovered(
    down_for: timedelta, since: datetime, read_from: datetime, new: int
) -> dict[str, Any]:
    """The ops notice posted once when Marquez answers again after an outage."""
    return _notice(
        ":white_check_mark:",
        "Marquez recovered",
        f"Marquez answers again after {describe_duration(down_for)} unreachable. No events "
        "were missed: the watcher read on from where it stopped "
        f"({plural(new, 'new run event')} so far).",
        [f"Unreachable since {_moment(since)}", f"Read on from events at {_moment(read_from)}"],
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
        f"#{row.id} {row.event_type} of {row.dag_id} at {_moment(row.event_time)}: {row.failure}"
        for row in rows[:_SET_ASIDE_SHOWN]
    ]
    if len(rows) > _SET_ASIDE_SHOWN:
        facts.append(f"and {len(rows) - _SET_ASIDE_SHOWN} more (backfill-bot events list)")
    return _notice(
        ":warning:",
        "Run events set aside",
        f"The watcher could not handle {plural(len(rows), 'run event')} after {tries} tries. "
        "They are kept and every other event goes on as usual: once the cause is fixed, "
        "`backfill-bot events retry` handles them again.",
        facts,
    )


def describe_duration(value: timedelta) -> str:
    """`45 s`, `12 min`, `3 h 5 min`, `2 d 4 h`: the two largest units that matter."""
    seconds = max(0, int(value.total_seconds()))
    if seconds < 60:
        return f"{seconds} s"
    minutes, hours, days = seconds // 60, seconds // 3600, seconds // 86400
    if hours == 0:
        return f"{minutes} min"
    if days == 0:
        rest = minutes % 60
        return f"{hours} h" + (f" {rest} min" if rest else "")
    rest = hours % 24
    return f"{days} d" + (f" {rest} h" if rest else "")


def _notice(icon: str, title: str, text: str, facts: Sequence[str]) -> dict[str, Any]:
    view = {
        "icon": icon,
        "title": title,
        "text": clip(text, SENTENCE),
        "facts": [clip(fact, _FACT) for fact in facts],
    }
    return render("watch/notice.json.j2", view)


def _moment(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def sink_failing(sink: str, kind: str, error: str, *, queued: int) -> dict[str, Any]:
    """The ops notice posted once when a sink beyond Slack keeps failing."""
    sink = clip(sink, _SINK)
    return _notice(
        ":warning:",
        f"Sink {sink} failing",
        f"The bot cannot deliver to the {kind} sink {sink} and retries with backoff. Nothing "
        f"owed to it is dropped: {plural(queued, 'notice')} wait and go out in order once it "
        "answers.",
        [f"Error: {error}"],
    )


def sink_refused(sink: str, kind: str, error: str) -> dict[str, Any]:
    """The ops notice posted once when a sink refuses what it is sent (it will not retry)."""
    sink = clip(sink, _SINK)
    return _notice(
        ":no_entry:",
        f"Sink {sink} refused a notice",
        f"The {kind} sink {sink} refused a notice as invalid, so that one is not sent again; "
        "the others still are. The row stays in sink_deliveries with the answer.",
        [f"Error: {error}"],
    )


def sink_recovered(sink: str, kind: str) -> dict[str, Any]:
    """The ops notice posted once when a failing sink takes deliveries again."""
    sink = clip(sink, _SINK)
    return _notice(
        ":white_check_mark:",
        f"Sink {sink} recovered",
        f"The {kind} sink {sink} takes deliveries again; what waited for it is being sent.",
        [],
    )
