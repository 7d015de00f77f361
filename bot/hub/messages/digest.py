"""One digest of the notices a sink held during quiet hours (pure): built from the bodies the
held rows already carry (`bot/hub/messages/documents.py`), in their order, so nothing is
rendered twice and what was escaped stays escaped.

- e-mail: one message; each notice's subject as a heading, then its text (its HTML);
- webhook: a version 1 document of type `digest` whose `events` are the held documents
  (docs/webhooks.md);
- Teams: one Adaptive Card; each notice's title and facts.

A digest takes at most `MAX_DIGEST_ROWS` notices (more go in the next digest). An e-mail
shows the first `MAX_EMAIL_SHOWN` in full and the subjects of the rest; a Teams card shows as
many as fit its size budget and says "and K more". Every notice is counted in the title.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from datetime import UTC, datetime
from html import escape
from typing import Any

from bot.hub.messages.documents import WEBHOOK_VERSION
from bot.hub.sinks.teams import CARD_BUDGET_BYTES, message_size, teams_message

__all__ = ["DIGEST_KINDS", "MAX_DIGEST_ROWS", "digest_body", "digest_title"]

DIGEST_KINDS = frozenset({"email", "webhook", "teams"})
"""The sink kinds whose held notices go in a digest (PagerDuty's are never held)."""
MAX_DIGEST_ROWS = 200
"""Held notices in one digest at most: a webhook document of 200 events stays under ~500 KB."""
MAX_EMAIL_SHOWN = 25
EMAIL_BUDGET_CHARS = 200_000  # of the text part (and of the HTML part) shown in full
_EMAIL_PREFIX = "[backfill-bot] "
_TEXT_FOOTER = "\n\n-- backfill-bot"
_HTML_FOOTER = "<p>&#8212; backfill-bot</p>"
_TEAMS_TEXT = 300  # characters of a notice's text (its error) a Teams digest shows


def digest_title(count: int) -> str:
    return f"{count} notice{'' if count == 1 else 's'} held during quiet hours"


def digest_body(kind: str, bodies: Sequence[dict[str, Any]], *, at: datetime) -> dict[str, Any]:
    """The one body that carries `bodies` (the held rows' bodies, oldest first) to a sink of
    `kind`; `at`: when the digest is formed (the webhook document's `occurred_at`)."""
    if not bodies:
        raise ValueError("a digest needs at least one notice")
    if kind == "email":
        return _email(bodies)
    if kind == "webhook":
        return {
            "version": WEBHOOK_VERSION,
            "type": "digest",
            "occurred_at": at.astimezone(UTC).isoformat().replace("+00:00", "Z"),
            "events": [dict(body) for body in bodies],
        }
    if kind == "teams":
        return _teams(bodies)
    raise ValueError(f"no digest for sink kind {kind!r}")


# --- e-mail -------------------------------------------------------------------------------


def _subject(body: dict[str, Any]) -> str:
    return str(body.get("subject", "")).removeprefix(_EMAIL_PREFIX) or "(no subject)"


def _parts(body: dict[str, Any]) -> tuple[str, str, str]:
    """A held e-mail's subject (without the bot's prefix), text and HTML without their
    headline (the subject says it) and footer; the HTML stays as `email_body` escaped it."""
    subject = _subject(body)
    text = str(body.get("text", "")).removesuffix(_TEXT_FOOTER)
    first, _, rest = text.partition("\n")
    if first == subject:
        text = rest.lstrip("\n")
    html = str(body.get("html", "")).removesuffix(_HTML_FOOTER)
    html = html.removeprefix(f"<p><strong>{escape(subject)}</strong></p>")
    return subject, text, html


def _email(bodies: Sequence[dict[str, Any]]) -> dict[str, Any]:
    title = digest_title(len(bodies))
    texts = [f"{title}, oldest first."]
    htmls = [f"<p><strong>{escape(title)}</strong>, oldest first.</p>"]
    used_text = used_html = shown = 0
    for body in bodies:
        subject, text, html = _parts(body)
        over = (
            used_text + len(text) > EMAIL_BUDGET_CHARS or used_html + len(html) > EMAIL_BUDGET_CHARS
        )
        if shown == MAX_EMAIL_SHOWN or (shown and over):
            break
        shown += 1
        used_text, used_html = used_text + len(text), used_html + len(html)
        texts += ["", f"{shown}. {subject}", "", text]
        htmls.append(f"<hr><h3>{shown}. {escape(subject)}</h3>{html}")
    rest = bodies[shown:]
    if rest:
        more = f"… and {len(rest)} more:"
        texts += ["", more, *(f"- {_subject(body)}" for body in rest)]
        items = "".join(f"<li>{escape(_subject(body))}</li>" for body in rest)
        htmls.append(f"<hr><p>{escape(more)}</p><ul>{items}</ul>")
    texts += ["", "-- backfill-bot"]
    htmls.append(_HTML_FOOTER)
    return {
        "subject": f"{_EMAIL_PREFIX}{title}",
        "text": "\n".join(texts),
        "html": "".join(htmls),
    }


# --- Teams --------------------------------------------------------------------------------


def _cut_escaped(text: str, limit: int) -> str:
    """Markdown-escaped `text` cut to `limit` characters without leaving half an escape."""
    if len(text) <= limit:
        return text
    cut = text[:limit]
    if (len(cut) - len(cut.rstrip("\\"))) % 2:
        cut = cut[:-1]
    return cut + "…"


def _section(body: dict[str, Any]) -> dict[str, Any]:
    """A Container with the held card's title, text (shortened) and facts: its elements are
    reused as they are, already escaped by `teams_message`."""
    try:
        elements = body["attachments"][0]["content"]["body"]
    except (KeyError, IndexError, TypeError):
        elements = []
    items: list[dict[str, Any]] = []
    texts = [e for e in elements if isinstance(e, dict) and e.get("type") == "TextBlock"]
    if texts:
        heading = copy.deepcopy(texts[0])
        heading["size"] = "Default"
        items.append(heading)
        if len(texts) > 1 and texts[1].get("text") != heading.get("text"):
            shown = copy.deepcopy(texts[1])
            shown["text"] = _cut_escaped(str(shown.get("text", "")), _TEAMS_TEXT)
            items.append(shown)
    else:
        items.append({"type": "TextBlock", "text": "(a notice)", "weight": "Bolder", "wrap": True})
    items += [
        copy.deepcopy(e) for e in elements if isinstance(e, dict) and e.get("type") == "FactSet"
    ][:1]
    return {"type": "Container", "separator": True, "spacing": "Medium", "items": items}


def _more(count: int) -> dict[str, Any]:
    text = f"… and {count} more (not shown: the card's size is limited)"
    return {"type": "TextBlock", "text": text, "wrap": True, "separator": True, "isSubtle": True}


def _teams(bodies: Sequence[dict[str, Any]]) -> dict[str, Any]:
    message = teams_message(title=digest_title(len(bodies)), text="Oldest first.")
    card = message["attachments"][0]["content"]["body"]
    for n, body in enumerate(bodies):
        card.append(_section(body))
        left = len(bodies) - n - 1
        if left:
            card.append(_more(left))
        fits = message_size(message) <= CARD_BUDGET_BYTES
        if left:
            card.pop()
        if not fits:
            card.pop()
            card.append(_more(len(bodies) - n))
            break
    return message
