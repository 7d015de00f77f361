"""What every message module shares: mrkdwn escaping, truncation measured in escaped characters,
and `render`, the one way a template and its view model become a payload Slack accepts.

Slack makes exactly one thing in mrkdwn live: a `<…>` sequence (`<@U…>`, `<#C…>`,
`<!subteam^S…>`, `<!channel>`, `<!here>`, `<url|label>`). So every value from outside the bot
(DAG ids, namespaces, job and dataset names, report names, error messages, owners, Airflow run
and task ids, what people type) has its `&`, `<`, `>` escaped wherever it is placed: `|mrkdwn`
for running text, `|code` inside a backtick code span or a ``` block (where a backtick of the
value must not end the span). Only what the bot builds itself is live: `user_mention`,
`channel_mention` and `mention` (for ids from Slack and BOT_CONFIG) and `link` (for URLs the bot
made), each returning `Mrkdwn`, text that is mrkdwn already, which templates place with
`|trusted` (anything else reaching it is escaped and logged). A sentence the services write is
escaped as a whole (`|sentence`) unless it is `Mrkdwn`, which `sentence()` composes with every
value escaped. A ``` in running text is shown as ˋˋˋ, so an error quoting code cannot open a
block over the bot's own lines.

`render` checks every payload after the fact: a `<…>` the bot would never build (a broadcast,
a link without a label, a mention carrying a label) is logged as a bug and shown escaped, so a
template that forgot to escape still pings nobody.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, time
from typing import Any
from urllib.parse import quote

from bot.core.model import Interval
from bot.core.templates import environment
from bot.slack.messages.limits import BUTTON_URL, check_message, check_view
from bot.slack.rules.ids import ActionId, BlockId, OptionBlock, ViewCallbackId

logger = logging.getLogger(__name__)

_ESCAPES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
# What the bot builds from ids Slack or BOT_CONFIG gave it: users, channels, user groups.
# Slack's ids are a letter and a few more capitals and digits (9 to 11 today; longer ones are
# allowed for, a kilobyte of them is not an id).
_MENTION = re.compile(r"<(?:@[UW][A-Z0-9]{1,39}|#[CG][A-Z0-9]{1,39}|!subteam\^S[A-Z0-9]{1,39})>")
_USER_ID = re.compile(r"[UW][A-Z0-9]{1,39}")
_CHANNEL_ID = re.compile(r"[CG][A-Z0-9]{1,39}")
# Every `<…>` Slack would make live, and the ones the bot builds: its mentions and links with
# a label (`link`). Anything else in a rendered payload is a template's mistake.
_LIVE = re.compile(r"<([^<>]*)>")
_BUILT = re.compile(
    r"@[UW][A-Z0-9]{1,39}|#[CG][A-Z0-9]{1,39}|!subteam\^S[A-Z0-9]{1,39}"
    r"|https?://[^\s<>|]+\|[^<>|]+"
)
# A URL's characters Slack and browsers take as they are; the rest is percent-encoded, `%`
# kept so that a URL encoded already stays as it is. `|` would end a link's URL in mrkdwn.
_URL_SAFE = ":/?#[]@!$&'()*+,;=%~-._"
_WEB_URL = re.compile(r"https?://[^\s/?#<>|\"`]+(?:[/?#].*)?", re.IGNORECASE | re.DOTALL)
# Slack mrkdwn has no escape for a backtick: inside a code span one would end it, so a value's
# backtick is shown as the modifier letter grave accent, one character for one (clip's budgets
# hold).
_CODE_TICK = "\u02cb"
# What clip_mrkdwn never cuts: a `<…>` sequence, an entity.
_MRKDWN_TOKEN = re.compile(r"<[^<>]*>|&(?:amp|lt|gt);|.", re.DOTALL)

NAME = 150  # a DAG id or namespace in a line
LIST = 300  # upstream DAGs, owners, excluded DAGs
SENTENCE = 2900  # a caller's sentence, one section with room for the icon
LINK_URL = 1000  # a link's URL inside a line of mrkdwn (buttons may carry BUTTON_URL)

# Views with these types are surfaces (views.open / views.publish), anything else a message.
_VIEW_TYPES = ("modal", "home")


class Mrkdwn(str):
    """Text that is mrkdwn already: every outside value in it escaped, its `<…>` built by the
    bot. Templates place it as it is (`|sentence`, `|trusted`); any other string is escaped."""

    __slots__ = ()


def escape_mrkdwn(text: str) -> str:
    """Escape `&`, `<`, `>` so Slack shows the text as typed (no mentions, links or entities).
    A ``` (an error message quoting code) is shown as three modifier grave accents: it would
    open a code block that runs over the bot's own lines after it."""
    escaped = "".join(_ESCAPES.get(char, char) for char in text)
    return escaped.replace("```", _CODE_TICK * 3)


def escape_code(text: str) -> str:
    """`escape_mrkdwn` for a value inside a code span or block: its backticks cannot end it."""
    return escape_mrkdwn(text).replace("`", _CODE_TICK)


def code(text: str, limit: int = NAME) -> Mrkdwn:
    """`text` in a code span, clipped to `limit` and escaped (its backticks cannot end it)."""
    return Mrkdwn(f"`{escape_code(clip(text, limit))}`")


def as_mrkdwn(text: str) -> Mrkdwn:
    """`text` as mrkdwn: `Mrkdwn` as it is, anything else escaped as a whole."""
    return text if isinstance(text, Mrkdwn) else Mrkdwn(escape_mrkdwn(text))


def sentence(template: str, *values: str | int, **named: str | int) -> Mrkdwn:
    """`template.format(...)` as mrkdwn: the template is the bot's and escaped as text, every
    value escaped too unless it is `Mrkdwn` (`user_mention`, `code`, …), which stays live.

        sentence("Backfill {} of {} was approved by {}.", rid, code(dag), user_mention(user))
    """

    def safe(value: str | int) -> Mrkdwn:
        return as_mrkdwn(value if isinstance(value, str) else str(value))

    return Mrkdwn(
        escape_mrkdwn(template).format(
            *(safe(v) for v in values), **{k: safe(v) for k, v in named.items()}
        )
    )


def mention(text: str) -> Mrkdwn:
    """A mention the bot built (`<@U…>`, `<!subteam^S…>`, `<#C…>`) kept live; anything else
    escaped, so it shows as typed and notifies nobody."""
    return Mrkdwn(text if _MENTION.fullmatch(text) else escape_mrkdwn(text))


def user_mention(user: str) -> Mrkdwn:
    """`<@U…>` for a Slack user id; anything that is not one is shown escaped."""
    if _USER_ID.fullmatch(user):
        return Mrkdwn(f"<@{user}>")
    return Mrkdwn(escape_mrkdwn(f"<@{clip(user, 40)}>"))


def channel_mention(channel: str) -> Mrkdwn:
    """`<#C…>` for a Slack channel id; anything else (a DM, a name) shown escaped."""
    if _CHANNEL_ID.fullmatch(channel):
        return Mrkdwn(f"<#{channel}>")
    return Mrkdwn(escape_mrkdwn(f"#{clip(channel, 40)}"))


def web_url(url: str | None, limit: int = BUTTON_URL) -> str:
    """`url` as Slack may carry it (an http(s) URL, its odd characters percent-encoded, at most
    `limit` characters), or "" when it cannot: a link left out, never the message."""
    if not url or not _WEB_URL.fullmatch(url):
        return ""
    encoded = quote(url, safe=_URL_SAFE)
    return encoded if len(encoded) <= limit else ""


def link(url: str | None, label: str) -> Mrkdwn:
    """`<url|label>` for a URL the bot built, or "" when Slack could not carry it (too long,
    not http(s)). The URL is percent-encoded where mrkdwn would misread it (`|`, spaces) and
    its `&` escaped as Slack asks; the label escaped."""
    target = web_url(url, LINK_URL)
    if not target:
        return Mrkdwn("")
    shown = escape_mrkdwn(label).replace("|", "¦")
    return Mrkdwn(f"<{escape_mrkdwn(target)}|{shown}>")


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


def clip_mrkdwn(text: str, limit: int) -> Mrkdwn:
    """Mrkdwn cut with "…" to at most `limit` characters, never inside a `<…>` sequence (which
    would leave half a link) or an entity."""
    if len(text) <= limit:
        return Mrkdwn(text)
    kept: list[str] = []
    size = 1
    for token in _MRKDWN_TOKEN.findall(text):
        size += len(token)
        if size > limit:
            break
        kept.append(token)
    return Mrkdwn("".join(kept) + "…")


def clip_sentence(text: str, limit: int = SENTENCE) -> str:
    """A sentence within `limit` characters as Slack will show it: `Mrkdwn` cut where no link
    or entity breaks, any other text cut before it is escaped (`|sentence`)."""
    return clip_mrkdwn(text, limit) if isinstance(text, Mrkdwn) else clip(text, limit)


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


def _trusted(value: str) -> str:
    """A view value a template places as mrkdwn unescaped (`|trusted`): it must be `Mrkdwn`,
    built by the helpers above. Anything else is a view model's mistake: logged, and escaped."""
    if not value or isinstance(value, Mrkdwn):
        return value
    logger.error("%r reached a template as trusted mrkdwn but is not Mrkdwn", value[:200])
    return escape_mrkdwn(value)


_env = environment()
_env.filters["mrkdwn"] = escape_mrkdwn
_env.filters["code"] = escape_code
_env.filters["sentence"] = as_mrkdwn
_env.filters["trusted"] = _trusted
_env.filters["user_mention"] = user_mention
_env.filters["channel_mention"] = channel_mention


def macros(template: str) -> Any:
    """The macros of `template`, for lines Python measures before packing them."""
    return _env.get_template(template).module


def _defuse_text(text: str, template: str, where: str) -> str:
    def check(match: re.Match[str]) -> str:
        if _BUILT.fullmatch(match.group(1)):
            return match.group()
        logger.error("%s: %s had %r live; shown escaped", template, where, match.group()[:200])
        return escape_mrkdwn(match.group())

    return _LIVE.sub(check, text)


def _defuse(node: Any, template: str, where: str = "") -> Any:
    """Every mrkdwn text of a payload (and its `text`), with each `<…>` the bot never builds
    shown escaped (and logged: a template forgot to escape something)."""
    if isinstance(node, dict):
        found = dict(node)
        for key, value in node.items():
            here = f"{where}.{key}" if where else key
            mrkdwn = not where or node.get("type") == "mrkdwn"
            if key == "text" and isinstance(value, str) and mrkdwn:
                found[key] = _defuse_text(value, template, here)
            else:
                found[key] = _defuse(value, template, here)
        return found
    if isinstance(node, list):
        return [_defuse(value, template, f"{where}[{i}]") for i, value in enumerate(node)]
    return node


def defuse(payload: Mapping[str, Any], where: str) -> dict[str, Any]:
    """`payload` (built without a template, e.g. an edit of a clicked message) with every
    `<…>` the bot never builds shown escaped, as `render` does."""
    defused: dict[str, Any] = _defuse(dict(payload), where)
    return defused


def render(template: str, view: Mapping[str, Any]) -> dict[str, Any]:
    """Render a Block Kit template with its view model, make sure nothing in it is live that
    the bot did not build, and check the payload against Slack's limits: a modal or Home view
    with `check_view`, anything else as a message."""
    text = _env.get_template(template).render(
        **view,
        ActionId=ActionId,
        BlockId=BlockId,
        ViewCallbackId=ViewCallbackId,
        OptionBlock=OptionBlock,
    )
    payload = json.loads(text)
    if not isinstance(payload, dict):
        raise TypeError(f"{template} must render a JSON object")
    payload = defuse(payload, template)
    if payload.get("type") in _VIEW_TYPES:
        check_view(payload)
    else:
        check_message(payload)
    return payload


def _moment(value: datetime) -> str:
    value = value.astimezone(UTC)
    if value.time() == time.min:
        return value.date().isoformat()
    return value.strftime("%Y-%m-%d %H:%M")


def describe_interval(interval: Interval) -> str:
    return f"{_moment(interval.start)} → {_moment(interval.end)}"


def describe_intervals(intervals: tuple[Interval, ...], *, limit: int = 3) -> str:
    """Short human text: every interval when few, else the span and the count."""
    if not intervals:
        return "nothing to rerun"
    if len(intervals) <= limit:
        return ", ".join(describe_interval(i) for i in intervals)
    span = Interval(intervals[0].start, intervals[-1].end)
    return f"{len(intervals)} runs over {describe_interval(span)}"
