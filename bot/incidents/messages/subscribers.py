"""What a channel or DM subscribed with `/backfill subscribe` sees of a failure (one message,
edited as the outage is acknowledged and resolved), and what an escalation posts in the next
target's channel (templates/incidents/subscriber_notice.json.j2). SLA misses and backfills reach
subscribers as the notices their owners get (bot/sla/messages.py,
bot/backfill/messages/notices.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal

from bot.slack.messages.render import NAME, clip, render

_ERROR = 600  # characters of the error a notice quotes (the alert has the rest)
_REPORTS = 10

NoticeState = Literal["failed", "acknowledged", "resolved", "escalated"]


@dataclass(frozen=True)
class FailureNotice:
    dag_id: str
    intervals: str
    state: NoticeState
    alert_channel: str | None
    """Where the owning team's alert is (None: no team channel has it)."""
    failures: int = 1
    error: str | None = None
    acknowledged_by: str | None = None
    reports: Sequence[str] = ()
    subscription: str | None = None
    """The id of the subscription that brought it (none for an escalation)."""
    pattern: str = ""
    waited: str = ""
    """How long nobody acknowledged it (an escalation), in words."""
    data: bool = False
    """A data incident: its runs completed with bad data (`error` says what)."""


def failure_notice(notice: FailureNotice) -> dict[str, Any]:
    return render(
        "incidents/subscriber_notice.json.j2",
        {
            "dag_id": clip(notice.dag_id, NAME),
            "intervals": clip(notice.intervals, 120),
            "state": notice.state,
            "alert_channel": notice.alert_channel or "",
            "failures": notice.failures,
            "error": clip(notice.error, _ERROR) if notice.error else "",
            "acknowledged_by": notice.acknowledged_by or "",
            "reports": [clip(r, 80) for r in notice.reports[:_REPORTS]],
            "more_reports": max(0, len(notice.reports) - _REPORTS),
            "subscription": notice.subscription or "",
            "pattern": clip(notice.pattern, 120),
            "waited": clip(notice.waited, 40),
            "data": notice.data,
        },
    )


def waited_words(elapsed: timedelta) -> str:
    """How long an outage went unacknowledged, as the escalation notice says it."""
    minutes = max(0, int(elapsed.total_seconds() // 60))
    if minutes < 120:
        return f"{minutes} minutes"
    return f"{minutes // 60} hours {minutes % 60} minutes"
