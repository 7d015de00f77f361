"""Notices for the ops channel about the sinks beyond Slack: failing, refusing a notice,
recovered (in the ops notice's one shape: `bot.slack.messages.ops`)."""

from __future__ import annotations

from typing import Any

from bot.slack.messages.ops import ops_notice
from bot.slack.messages.render import clip, plural

_SINK = 80  # a sink's name as BOT_CONFIG spells it (at most 63 characters there)


def sink_failing(sink: str, kind: str, error: str, *, queued: int) -> dict[str, Any]:
    """The ops notice posted once when a sink beyond Slack keeps failing."""
    sink = clip(sink, _SINK)
    return ops_notice(
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
    return ops_notice(
        ":no_entry:",
        f"Sink {sink} refused a notice",
        f"The {kind} sink {sink} refused a notice as invalid, so that one is not sent again; "
        "the others still are. The row stays in sink_deliveries with the answer.",
        [f"Error: {error}"],
    )


def sink_recovered(sink: str, kind: str) -> dict[str, Any]:
    """The ops notice posted once when a failing sink takes deliveries again."""
    sink = clip(sink, _SINK)
    return ops_notice(
        ":white_check_mark:",
        f"Sink {sink} recovered",
        f"The {kind} sink {sink} takes deliveries again; what waited for it is being sent.",
        [],
    )
