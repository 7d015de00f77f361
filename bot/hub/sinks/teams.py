"""The Microsoft Teams sink: an Adaptive Card POSTed to a channel's incoming webhook (the legacy
Office 365 connector, `https://<tenant>.webhook.office.com/webhookb2/...`) or to a Power
Automate "Workflows" URL (`https://prod-NN.<region>.logic.azure.com:443/workflows/<id>/triggers/
manual/paths/invoke?api-version=...&sig=<secret>`). Both URLs are their own secret (in the path
or the `sig` query value): a detail shows the origin only and never the path or the query.

How Teams answers (MicrosoftDocs/msteams-docs issues #400, #1810, #4145, #7425, #9698):

- Workflows: 202 Accepted with an empty body once the flow is queued (the card is posted later,
  so a bad card fails inside the flow run, not in the answer); 401 for a wrong `sig`.
- The connector: 200 with the body `1` (a count of messages) when it delivered. It also answers
  200 when Teams behind it failed, with a text such as "Webhook message delivery failed with
  error: Microsoft Teams endpoint returned HTTP error 429 with ContextId ..." (413: the message
  is over Teams' 28 KB limit; 400: a bad card or a removed channel). Microsoft's rule: only a
  number means delivered. So a wrapped status is classified as if it were the answer's own
  (429 retried, 413 permanent), except a wrapped 400, which is the channel's (removed, connector
  disabled): retried slowly; any other 200 without a number is retried. A
  malformed payload gets a real 400 "Bad payload received by generic incoming webhook.".
- More than four requests a second are throttled, with no Retry-After: we wait 15 s.

`teams_message` builds the card from outside text (DAG ids, error messages) safely.
"""

from __future__ import annotations

import json
import re
import time
import unicodedata
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Literal

from yarl import URL

from bot.core.http import USER_AGENT
from bot.hub.sinks.base import (
    MISCONFIGURED_RETRY_S,
    OneShotClient,
    Outcome,
    Reply,
    classify,
    clean,
    public_url,
    scrubbed,
    url_secrets,
)

__all__ = ["MAX_MESSAGE_BYTES", "TeamsClient", "escape_markdown", "message_size", "teams_message"]

#: Teams refuses a message over 28 KB; the builder keeps a card's JSON well under it.
MAX_MESSAGE_BYTES = 28 * 1024
CARD_BUDGET_BYTES = 20 * 1024
MAX_TITLE, MAX_TEXT, MAX_FACT_VALUE, MAX_FACT_TITLE, MAX_FACTS = 200, 2000, 500, 100, 10
MAX_LINKS, MAX_LINK_TITLE, MAX_LINK_URL = 6, 100, 2000
THROTTLE_WAIT_S = 15.0
SCHEMA = "http://adaptivecards.io/schemas/adaptive-card.json"
CARD_TYPE = "application/vnd.microsoft.card.adaptive"
Style = Literal["attention", "good", "warning", "default"]
_WRAPPED = re.compile(r"returned HTTP error (\d{3})\b", re.IGNORECASE)
_TOO_LARGE = re.compile(r"message is too large", re.IGNORECASE)
_COUNT = re.compile(r"[0-9]+")
_CONNECTOR_PATHS = ("/webhookb2/", "/webhook/")
# Path segments that name the API, not the hook: not worth hiding (and common words).
_PUBLIC_SEGMENT = re.compile(
    r"webhook(b2)?|incomingwebhook|workflows|triggers|manual|paths|invoke|powerautomate"
    r"|automations|direct",
    re.IGNORECASE,
)
_INLINE = re.compile(r"([\\`*_\[\]()#<>~|])")
_LINE_START = re.compile(r"^([ \t]*)([-+=]|[0-9]+\.)", re.MULTILINE)


def _path_secrets(url: str) -> list[str]:
    """The URL's path (raw and decoded) and its identifying segments, split at "@" too."""
    try:
        parsed = URL(url)
    except (ValueError, TypeError):
        return [url]
    found = [parsed.raw_path, parsed.path] if parsed.path not in ("", "/") else []
    for segment in parsed.path.split("/"):
        for part in {segment, *segment.split("@")}:
            if len(part) >= 6 and not _PUBLIC_SEGMENT.fullmatch(part):
                found.append(part)
    return found


def _error_reason(reply: Reply) -> str:
    """Logic Apps' `{"error": {"code": ..., "message": ...}}` as one line; else the usual."""
    try:
        data = json.loads(reply.body)
    except ValueError:
        return reply.reason()
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict):
        parts = [error.get("code"), error.get("message")]
        text = ": ".join(p.strip() for p in parts if isinstance(p, str) and p.strip())
        if text:
            return clean(text)
    return reply.reason()


class TeamsClient(OneShotClient):
    """POSTs each card to a Teams incoming webhook or Workflows URL; one attempt per `send`."""

    def __init__(self, url: str, *, timeout_s: float = 10.0) -> None:
        super().__init__(timeout_s=timeout_s)
        self._url = url
        self._label = public_url(url)
        self._secrets = [*url_secrets(url), *_path_secrets(url)]
        try:
            path = URL(url).path.lower()
        except (ValueError, TypeError):
            path = ""
        self._connector = path.startswith(_CONNECTOR_PATHS)

    @property
    def label(self) -> str:
        """The URL as logs may show it (its origin)."""
        return self._label

    async def send(self, body: dict[str, Any], *, delivery_id: str) -> Outcome:
        """POST the message `body` once and classify the answer. Teams has no place for
        `delivery_id` (and no deduplication): it is not sent."""
        try:
            data = json.dumps(
                body, separators=(",", ":"), ensure_ascii=False, allow_nan=False
            ).encode()
        except (TypeError, ValueError) as exc:
            return Outcome.fail(f"{self._label}: message is not JSON ({type(exc).__name__})")
        # Without a charset the connector reads the body as UTF-16, halving the size limit.
        headers = {"Content-Type": "application/json; charset=utf-8", "User-Agent": USER_AGENT}
        reply = await self._post(self._url, data, headers, label=self._label, secrets=self._secrets)
        if not isinstance(reply, Outcome):
            reply = self._classify(reply)
        return scrubbed(reply, self._secrets)

    def _classify(self, reply: Reply) -> Outcome:
        now = time.time()
        text, status = reply.body.decode("utf-8", errors="replace").strip(), reply.status
        if 200 <= status < 300:
            wrapped = _WRAPPED.search(text)
            inner = int(wrapped.group(1)) if wrapped else 413 if _TOO_LARGE.search(text) else None
            if inner is not None and not 200 <= inner < 300:
                seen = classify(
                    Reply(inner, reply.headers, reply.body),
                    label=self._label,
                    reason=clean(text),
                    now=now,
                    retry_default=THROTTLE_WAIT_S,
                )
                head = f"{self._label} answered HTTP {status} (Teams: HTTP {inner})"
                if inner == 400:
                    # Behind the connector a 400 is the channel (removed, connector disabled),
                    # not this card (a bad card is refused up front): retried slowly.
                    seen = Outcome.retry(seen.detail, MISCONFIGURED_RETRY_S)
                return replace(seen, detail=f"{head}: {clean(text)}")
            if self._connector and not _COUNT.fullmatch(text):
                reason = clean(text) or "an empty body"
                return Outcome.retry(
                    f"{self._label} answered HTTP {status} without a count: {reason}"
                )
            return classify(reply, label=self._label, now=now)
        return classify(
            replace(reply, status=413) if _TOO_LARGE.search(text) else reply,
            label=self._label,
            reason=_error_reason(reply),
            now=now,
            retry_default=THROTTLE_WAIT_S,
        )


# --- the card ------------------------------------------------------------------------------


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + "…"


def _plain(text: str, *, lines: bool) -> str:
    """`text` without control or format characters; newlines kept when `lines`, else one line."""
    if not lines:
        return clean(text, limit=len(text) + 1)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    kept = "".join(
        ch if ch == "\n" else " " if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp") else ch
        for ch in text
    )
    return "\n".join(" ".join(line.split()) for line in kept.split("\n")).strip("\n")


def escape_markdown(text: str) -> str:
    """`text` shown as itself in a TextBlock: each Markdown-significant character escaped with
    a backslash (CommonMark escapes any ASCII punctuation), and list, heading and quote
    markers at a line's start too."""
    text = _INLINE.sub(r"\\\1", text)
    return _LINE_START.sub(lambda m: f"{m.group(1)}{m.group(2)[:-1]}\\{m.group(2)[-1]}", text)


def _link(title: str, url: str) -> dict[str, str] | None:
    url = url.strip()
    if len(url) > MAX_LINK_URL or any(ch.isspace() or ord(ch) < 32 for ch in url):
        return None
    try:
        parsed = URL(url)
    except (ValueError, TypeError):
        return None
    if parsed.scheme.lower() not in ("http", "https") or not parsed.host:
        return None
    name = _cut(_plain(title, lines=False), MAX_LINK_TITLE) or "Open"
    return {"type": "Action.OpenUrl", "title": name, "url": url}


def _card(
    title: str,
    text: str,
    facts: Sequence[tuple[str, str]],
    actions: list[dict[str, str]],
    style: Style,
    scale: float,
) -> dict[str, Any]:
    def cap(limit: int) -> int:
        return max(int(limit * scale), 8)

    heading: dict[str, Any] = {
        "type": "TextBlock",
        "text": escape_markdown(_cut(_plain(title, lines=False), cap(MAX_TITLE))),
        "weight": "Bolder",
        "size": "Medium",
        "wrap": True,
    }
    if style != "default":
        heading["color"] = style
    body: list[dict[str, Any]] = [heading]
    shown = _cut(_plain(text, lines=True), cap(MAX_TEXT))
    if shown:
        body.append({"type": "TextBlock", "text": escape_markdown(shown), "wrap": True})
    rows = [
        {
            "title": escape_markdown(_cut(_plain(name, lines=False), cap(MAX_FACT_TITLE))),
            "value": escape_markdown(_cut(_plain(value, lines=False), cap(MAX_FACT_VALUE))),
        }
        for name, value in facts[:MAX_FACTS]
    ]
    if rows:
        body.append({"type": "FactSet", "facts": rows})
    content: dict[str, Any] = {"$schema": SCHEMA, "type": "AdaptiveCard", "version": "1.4"}
    content |= {"body": body, "actions": actions}
    attachment = {"contentType": CARD_TYPE, "contentUrl": None, "content": content}
    return {"type": "message", "attachments": [attachment]}


def teams_message(
    *,
    title: str,
    text: str,
    facts: Sequence[tuple[str, str]] = (),
    links: Sequence[tuple[str, str]] = (),
    style: Style = "default",
) -> dict[str, Any]:
    """A Teams message carrying one Adaptive Card (1.4): a bold title coloured by `style`, the
    `text`, `facts` as (name, value) rows, and `links` as (title, url) buttons.

    Outside text is shown as text: control characters dropped, Markdown escaped, cut with "…"
    (title 200 characters, text 2000, fact values 500, at most 10 facts). Links other than
    absolute http(s) URLs are dropped (at most 6 kept). Should the card's JSON still pass 20 KiB
    (long non-ASCII or escaped text), the limits shrink until it fits under Teams' 28 KB.
    """
    if style not in ("attention", "good", "warning", "default"):
        raise ValueError(f"unknown style {style!r}")
    if not _plain(title, lines=False):
        raise ValueError("a Teams message needs a title")
    actions = [a for a in (_link(name, url) for name, url in links) if a][:MAX_LINKS]
    scale = 1.0
    while True:
        message = _card(title, text, facts, actions, style, scale)
        if message_size(message) <= CARD_BUDGET_BYTES:
            return message
        if scale > 0.01:
            scale /= 2
        elif actions:
            actions = actions[:-1]
        else:
            return message


def message_size(message: dict[str, Any]) -> int:
    """Bytes of `message` as `TeamsClient.send` posts it (compact UTF-8 JSON)."""
    return len(json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode())
