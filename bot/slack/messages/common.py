"""One sentence from the bot and an optional hint (templates/slack/notice.json.j2): refusals,
acknowledgements, and why a click changed nothing. A sentence often carries a DAG id, an
exception's message or what someone typed, so a plain `str` is shown exactly as written:
escaped as a whole, no mention or link in it live. A sentence that should mention someone is
composed as `Mrkdwn` (`messages.sentence("… approved by {}", user_mention(user))`), where every
value is escaped and only the mentions built by the bot stay live."""

from __future__ import annotations

from typing import Any

from bot.slack.messages.render import (
    SENTENCE,
    channel_mention,
    clip_sentence,
    code,
    render,
    sentence,
)

_HINT = 1900  # a context element holds 2000 characters, the icon included


def _notice(icon: str, text: str, hint: str | None = None) -> dict[str, Any]:
    view = {
        "icon": icon,
        "text": clip_sentence(text, SENTENCE),
        "hint": clip_sentence(hint, _HINT) if hint else "",
    }
    return render("slack/notice.json.j2", view)


def refusal(reason: str, *, hint: str | None = None) -> dict[str, Any]:
    """Why the bot will not do what was asked, and (in `hint`) how to fix it. Post ephemerally."""
    return _notice(":no_entry:", reason, hint)


def action_result(text: str) -> dict[str, Any]:
    """Why a click changed nothing ("Already approved by <@U…>"). Post ephemerally."""
    return _notice(":information_source:", text)


def acknowledgement(text: str) -> dict[str, Any]:
    """The immediate answer to a slash command, before the slow work."""
    return _notice(":hourglass_flowing_sand:", text)


def not_a_member(request_id: str, root_dag: str, channel: str) -> dict[str, Any]:
    """Told to a requester in their DM: the bot could not post their backfill where they asked."""
    return action_result(
        sentence(
            "I could not post backfill {} ({}) in {}: I am not a member there. Invite me with "
            "`/invite @backfill-bot`, or run the command in a public channel.",
            request_id,
            code(root_dag),
            channel_mention(channel),
        )
    )
