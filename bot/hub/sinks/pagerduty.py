"""The PagerDuty sink: alert events for the Events API v2 (`POST /v2/enqueue`).

`pagerduty_event` builds an event; `PagerDutyClient.send` posts it once. A trigger opens an
alert keyed by its dedup_key (a second trigger on an open alert is folded into it); acknowledge
and resolve act on the alert with that key, and are accepted but change nothing when it is
unknown or already resolved. PagerDuty answers 202 when it queued the event, 400 with an
`errors` list when the event is invalid (never worth repeating), 429 when the integration is
sending too fast. The routing key is the integration's secret: it never appears in a detail.

Limits (PagerDuty's documentation): summary at most 1024 characters, dedup_key at most 255,
severity one of critical/error/warning/info, timestamp ISO 8601. Source is cut to 255 too.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Literal

from bot.core.http import USER_AGENT
from bot.hub.sinks.base import OneShotClient, Outcome, Reply, classify, clean, scrubbed

__all__ = [
    "EVENTS_URL",
    "MAX_DEDUP_KEY",
    "MAX_SOURCE",
    "MAX_SUMMARY",
    "PagerDutyClient",
    "pagerduty_event",
]

EVENTS_URL = "https://events.pagerduty.com/v2/enqueue"
MAX_SUMMARY = 1024
MAX_SOURCE = 255
MAX_DEDUP_KEY = 255
#: Wait this long after a 429 without Retry-After (PagerDuty sends none).
THROTTLE_WAIT_S = 30.0
Action = Literal["trigger", "acknowledge", "resolve"]
Severity = Literal["critical", "error", "warning", "info"]


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _iso(value: datetime) -> str:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"naive timestamp {value!r}: pass an aware datetime")
    return value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def pagerduty_event(
    action: Action,
    *,
    routing_key: str,
    dedup_key: str,
    summary: str = "",
    source: str = "",
    severity: Severity = "error",
    timestamp: datetime | None = None,
    component: str | None = None,
    group: str | None = None,
    event_class: str | None = None,
    custom_details: Mapping[str, Any] | None = None,
    links: Sequence[tuple[str, str]] = (),
    client: str = "backfill-bot",
    client_url: str | None = None,
) -> dict[str, Any]:
    """An Events API v2 event. A trigger carries the payload (summary and source cut to their
    limits with "…"; both required), `links` as (href, text) pairs, `client` and `client_url`;
    acknowledge and resolve carry only routing_key, dedup_key and event_action.

    Raises ValueError for an empty or over-long dedup_key, a trigger without summary or source,
    and a naive `timestamp`.
    """
    if action not in ("trigger", "acknowledge", "resolve"):
        raise ValueError(f"unknown event action {action!r}")
    if not dedup_key:
        raise ValueError("dedup_key is empty")
    if len(dedup_key) > MAX_DEDUP_KEY:
        raise ValueError(f"dedup_key is {len(dedup_key)} characters (at most {MAX_DEDUP_KEY})")
    event: dict[str, Any] = {
        "routing_key": routing_key,
        "event_action": action,
        "dedup_key": dedup_key,
    }
    if action != "trigger":
        return event
    if not summary.strip() or not source.strip():
        raise ValueError("a trigger needs a summary and a source")
    if severity not in ("critical", "error", "warning", "info"):
        raise ValueError(f"unknown severity {severity!r}")
    payload: dict[str, Any] = {
        "summary": _cut(summary, MAX_SUMMARY),
        "source": _cut(source, MAX_SOURCE),
        "severity": severity,
    }
    if timestamp is not None:
        payload["timestamp"] = _iso(timestamp)
    optional = {"component": component, "group": group, "class": event_class}
    payload.update({key: value for key, value in optional.items() if value})
    if custom_details is not None:
        payload["custom_details"] = dict(custom_details)
    event["payload"] = payload
    if links:
        event["links"] = [{"href": href, "text": text} for href, text in links]
    event["client"] = client
    if client_url:
        event["client_url"] = client_url
    return event


def _errors(reply: Reply) -> str:
    """PagerDuty's 400 body, `{"message": ..., "errors": [...]}`, as one short line."""
    try:
        data = json.loads(reply.body)
    except ValueError:
        return reply.reason()
    if not isinstance(data, dict):
        return reply.reason()
    errors = data.get("errors")
    if isinstance(errors, list) and errors:
        return clean("; ".join(str(error) for error in errors))
    message = data.get("message")
    return clean(message) if isinstance(message, str) else reply.reason()


class PagerDutyClient(OneShotClient):
    """Sends events to PagerDuty's Events API v2 (or a stand-in at `url`); one attempt each."""

    def __init__(self, url: str = EVENTS_URL, *, timeout_s: float = 10.0) -> None:
        super().__init__(timeout_s=timeout_s)
        self._url = url

    async def send(self, body: dict[str, Any], *, delivery_id: str) -> Outcome:
        """POST the event `body` once. PagerDuty dedupes on the event's dedup_key; it has no
        place for `delivery_id`, which is not sent."""
        routing_key = body.get("routing_key")
        secrets = [routing_key] if isinstance(routing_key, str) else []
        try:
            data = json.dumps(
                body, separators=(",", ":"), ensure_ascii=False, allow_nan=False
            ).encode()
        except (TypeError, ValueError) as exc:
            return Outcome.fail(f"PagerDuty: event is not JSON ({type(exc).__name__})")
        headers = {"Content-Type": "application/json", "User-Agent": USER_AGENT}
        reply = await self._post(self._url, data, headers, label="PagerDuty", secrets=secrets)
        if isinstance(reply, Outcome):
            return scrubbed(reply, secrets)
        if reply.status == 202:
            try:
                answer = json.loads(reply.body)
            except ValueError:
                answer = None
            key = answer.get("dedup_key") if isinstance(answer, dict) else None
            key = key if isinstance(key, str) else body.get("dedup_key")
            return scrubbed(Outcome.ok(f"accepted, dedup_key {clean(str(key))}"), secrets)
        outcome = classify(
            reply,
            label="PagerDuty",
            reason=_errors(reply) if reply.status == 400 else None,
            now=time.time(),
            retry_default=THROTTLE_WAIT_S,
        )
        return scrubbed(outcome, secrets)
