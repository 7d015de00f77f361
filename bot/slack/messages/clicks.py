"""What a click is told when Slack gave no way to answer it as usual: a plan that could not be
shown in a window (the click came without a trigger_id, or Slack refused one over 3 seconds
old) is summed up in an ephemeral message instead."""

from __future__ import annotations

from typing import Any

from bot.slack.messages.render import SENTENCE, Mrkdwn, clip_sentence, code, render, sentence

_HINT = 1900  # a context element holds 2000 characters, the icon included


def plan_not_opened(summary: Mrkdwn, *, request_id: str) -> dict[str, Any]:
    """Instead of the plan's modal: its first line (`summary`, mrkdwn as the modal shows it) and
    where to see the rest (`request_id` "" for a plan that is no backfill yet). Post ephemerally."""
    text = sentence("I could not open the plan in a window here. In short: {}", summary)
    if request_id:
        hint = sentence(
            "Type {} for where it stands, or click Show full plan again.",
            code(f"/backfill status {request_id}"),
        )
    else:
        hint = sentence("Click Review plan again to see every step.")
    view = {
        "icon": ":information_source:",
        "text": clip_sentence(text, SENTENCE),
        "hint": clip_sentence(hint, _HINT),
    }
    return render("slack/notice.json.j2", view)
