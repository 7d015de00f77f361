"""What every message module shares: mrkdwn escaping, truncation measured in escaped characters,
and `render`, the one way a template and its view model become a payload Slack accepts.

Values from outside the bot (DAG ids, namespaces, error messages, report names, what people
type) are escaped where the template places them: `|mrkdwn` for running text, `|code` inside a
backtick code span or a ``` block, where a backtick of the value must not end the span. Only
sentences the bot writes itself keep their `<@U…>`, `<#C…>`, `<!subteam^S…>` (`|mrkdwn_mentions`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from bot.render import environment
from bot.slack_ids import ActionId, BlockId, ViewCallbackId
from bot.slack_limits import check_message, check_view

_ESCAPES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
# What a caller's sentence may keep unescaped: user, channel and user-group mentions, no links.
_MENTION = re.compile(r"<(?:@[UW][A-Z0-9]+|#C[A-Z0-9]+|!subteam\^[A-Z0-9]+)>")
_USER_ID = re.compile(r"[UW][A-Z0-9]+")
# Slack mrkdwn has no escape for a backtick: inside a code span one would end it, so a value's
# backtick is shown as the modifier letter grave accent, one character for one (clip's budgets
# hold).
_CODE_TICK = "\u02cb"

NAME = 150  # a DAG id or namespace in a line
LIST = 300  # upstream DAGs, owners, excluded DAGs
SENTENCE = 2900  # a caller's sentence, one section with room for the icon

# Views with these types are surfaces (views.open / views.publish), anything else a message.
_VIEW_TYPES = ("modal", "home")


def escape_mrkdwn(text: str) -> str:
    """Escape `&`, `<`, `>` so Slack shows the text as typed (no mentions, links or entities)."""
    return "".join(_ESCAPES.get(char, char) for char in text)


def escape_code(text: str) -> str:
    """`escape_mrkdwn` for a value inside a code span or block: its backticks cannot end it."""
    return escape_mrkdwn(text).replace("`", _CODE_TICK)


def escape_keeping_mentions(text: str) -> str:
    """Escape a sentence written by the bot, keeping its `<@U…>`, `<#C…>`, `<!subteam^S…>`."""
    parts: list[str] = []
    last = 0
    for match in _MENTION.finditer(text):
        parts += [escape_mrkdwn(text[last : match.start()]), match.group()]
        last = match.end()
    return "".join([*parts, escape_mrkdwn(text[last:])])


def mention(text: str) -> str:
    """A mention the bot built (`<@U…>`, `<!subteam^S…>`, `<#C…>`) kept live; anything else
    escaped, so it shows as typed and notifies nobody."""
    return text if _MENTION.fullmatch(text) else escape_mrkdwn(text)


def user_mention(user: str) -> str:
    """`<@U…>` for a Slack user id; anything that is not one is shown escaped."""
    return f"<@{user}>" if _USER_ID.fullmatch(user) else escape_mrkdwn(f"<@{user}>")


def clip(text: str, limit: int) -> str:
    """`text`, cut with "…" so that it is at most `limit` characters once escaped."""
    if len(escape_mrkdwn(text)) <= limit:
        return text
    kept: list[str] = []
    size = 1  # the ellipsis
    for char in text:
        size += len(_ESCAPES.get(char, char))
        if size > limit:
            break
        kept.append(char)
    return "".join(kept) + "…"


def join_clipped(names: Sequence[str], limit: int, *, sep: str = ", ") -> str:
    """`a, b, c`, or `a, b and 5 more` when the whole list is too long once escaped."""
    full = sep.join(names)
    if len(escape_mrkdwn(full)) <= limit:
        return full
    budget = limit - len(" and 99999 more")
    shown: list[str] = []
    for name in names:
        if len(escape_mrkdwn(sep.join([*shown, name]))) > budget:
            break
        shown.append(name)
    if not shown:
        shown = [clip(names[0], budget)]
    return f"{sep.join(shown)} and {len(names) - len(shown)} more"


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def pack(lines: Sequence[str], *, limit: int, sections: int) -> tuple[list[str], int]:
    """Join lines into at most `sections` texts of at most `limit` characters each.

    Returns the texts and how many lines did not fit.
    """
    packed: list[str] = []
    current: list[str] = []
    size = 0
    for index, line in enumerate(lines):
        extra = len(line) + (1 if current else 0)
        if current and size + extra > limit:
            packed.append("\n".join(current))
            if len(packed) == sections:
                return packed, len(lines) - index
            current, size, extra = [], 0, len(line)
        current.append(line)
        size += extra
    if current:
        packed.append("\n".join(current))
    return packed, 0


_env = environment()
_env.filters["mrkdwn"] = escape_mrkdwn
_env.filters["mrkdwn_mentions"] = escape_keeping_mentions
_env.filters["code"] = escape_code


def macros(template: str) -> Any:
    """The macros of `template`, for lines Python measures before packing them."""
    return _env.get_template(template).module


def render(template: str, view: Mapping[str, Any]) -> dict[str, Any]:
    """Render a Block Kit template with its view model and check the payload against Slack's
    limits: a modal or Home view with `check_view`, anything else as a message."""
    text = _env.get_template(template).render(
        **view, ActionId=ActionId, BlockId=BlockId, ViewCallbackId=ViewCallbackId
    )
    payload = json.loads(text)
    if not isinstance(payload, dict):
        raise TypeError(f"{template} must render a JSON object")
    if payload.get("type") in _VIEW_TYPES:
        check_view(payload)
    else:
        check_message(payload)
    return payload
