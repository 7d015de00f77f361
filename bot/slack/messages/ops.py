"""The one shape of a notice in the ops channel (templates/slack/ops_notice.json.j2, which escapes
every value: error messages come from outside): an icon, a title, a sentence and facts."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from bot.slack.messages.render import NAME, SENTENCE, clip, render

_FACT = 500
_FACTS = 10  # a context block's elements


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


def ops_notice(icon: str, title: str, text: str, facts: Sequence[str]) -> dict[str, Any]:
    """An ops notice; every value is escaped and clipped, and at most a context block's ten
    facts are shown (the last saying how many more there were)."""
    shown = [clip(fact, _FACT) for fact in facts[:_FACTS]]
    if len(facts) > _FACTS:
        shown[-1] = f"and {len(facts) - _FACTS + 1} more"
    # the title and the sentence share one section: the title takes its room from the sentence
    text = clip(text, SENTENCE - NAME)
    view = {"icon": icon, "title": clip(title, NAME), "text": text, "facts": shown}
    return render("slack/ops_notice.json.j2", view)


def moment(value: datetime) -> str:
    """A time as ops notices show it: the date, the time to the second, and UTC."""
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


_KIND_WORDS = {
    "incident_alert": "an incident's alert",
    "incident_reply": "a reply in an incident's thread",
    "backfill": "a backfill's status message or progress reply",
    "team_notice": "a team's notice of a backfill",
    "notice": "a notice",
}


def undeliverable(channel: str, kind: str, error: str, owed_at: datetime) -> dict[str, Any]:
    """The ops notice for a Slack message the sender gave up on: which, where, and why."""
    return ops_notice(
        ":no_entry:",
        "A Slack message was not delivered",
        f"The bot gave up on {_KIND_WORDS.get(kind, 'a message')} for {channel}: Slack "
        "refused it for good, or it kept failing for a day. The row stays in the outbox table "
        "with the answer.",
        [f"Error: {error}", f"Owed since {moment(owed_at)}"],
    )
