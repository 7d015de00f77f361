"""One sentence from the bot and an optional hint (templates/common/notice.json.j2): refusals,
acknowledgements, and why a click changed nothing. The sentences are the bot's own, so their
mentions stay live; everything else in them is escaped."""

from __future__ import annotations

from typing import Any

from bot.messages._render import SENTENCE, clip, render


def _notice(icon: str, text: str, hint: str | None = None) -> dict[str, Any]:
    view = {
        "icon": icon,
        "text": clip(text, SENTENCE),
        "hint": clip(hint, SENTENCE) if hint else "",
    }
    return render("common/notice.json.j2", view)


def refusal(reason: str, *, hint: str | None = None) -> dict[str, Any]:
    """Why the bot will not do what was asked, and (in `hint`) how to fix it. Post ephemerally."""
    return _notice(":no_entry:", reason, hint)


def action_result(text: str) -> dict[str, Any]:
    """Why a click changed nothing ("Already approved by <@U…>"). Post ephemerally."""
    return _notice(":information_source:", text)


def acknowledgement(text: str) -> dict[str, Any]:
    """The immediate answer to a slash command, before the slow work."""
    return _notice(":hourglass_flowing_sand:", text)
