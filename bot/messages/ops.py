"""Notices for the ops channel about the watcher itself: Marquez unreachable, Marquez
recovered (templates/watch/notice.json.j2, which escapes every value: error messages come from
outside)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from bot.messages._render import SENTENCE, clip, plural, render

_FACT = 500


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
