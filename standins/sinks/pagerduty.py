"""A PagerDuty Events API v2 stand-in: `POST /v2/enqueue`, validated as PagerDuty does.

Shared by the tests and the demo. Answers follow PagerDuty's documentation: 202
`{"status": "success", "message": "Event processed", "dedup_key": ...}` (a trigger without a
dedup_key gets a generated one), or 400 `{"status": "invalid event", "message": "Event object
is invalid", "errors": [...]}` listing every problem. The routing-key and "missing or blank"
wordings are PagerDuty's; the others are modelled on them.

Alerts follow PagerDuty's rules: a trigger opens an alert per (routing_key, dedup_key); a
trigger on an open one is a duplicate (counted, status kept); a trigger on a resolved one opens
a new alert; acknowledge and resolve of an unknown or resolved alert are accepted and change
nothing. `fail_next` injects faults answered before any processing.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from aiohttp import web

from standins.http_server import start_app

__all__ = ["Alert", "PagerDutyStandin", "running_pagerduty_standin"]

ACTIONS = ("trigger", "acknowledge", "resolve")
SEVERITIES = ("critical", "error", "warning", "info")
_FAULT_BODIES: dict[int, dict[str, Any]] = {
    400: {"status": "invalid event", "message": "Event object is invalid", "errors": ["fault"]},
    429: {
        "status": "throttle event",
        "message": "Requests for this service are arriving too quickly. Please retry later.",
    },
}


@dataclass
class Alert:
    """One alert: its key, status, the trigger that opened it, and what happened since."""

    routing_key: str
    dedup_key: str
    summary: str
    severity: str
    status: str = "triggered"  # triggered, acknowledged, resolved
    duplicates: int = 0  # triggers folded into this alert while it was open
    log: list[str] = field(default_factory=lambda: ["trigger"])


@dataclass(frozen=True)
class _Fault:
    status: int
    retry_after: int | None


def validate(event: Any) -> list[str]:
    """PagerDuty's complaints about `event` (empty when it is valid)."""
    if not isinstance(event, dict):
        return ["Event object must be a JSON object"]
    errors: list[str] = []
    key = event.get("routing_key")
    if not isinstance(key, str) or not key.strip():
        errors.append("'routing_key' is missing or blank")
    elif len(key) != 32:
        errors.append("Length of 'routing_key' is incorrect (should be 32 characters)")
    action = event.get("event_action")
    if not isinstance(action, str) or not action.strip():
        errors.append("'event_action' is missing or blank")
    elif action not in ACTIONS:
        errors.append(f"'event_action' is invalid (must be one of: {', '.join(ACTIONS)})")
    dedup = event.get("dedup_key")
    if dedup is not None and not isinstance(dedup, str):
        errors.append("'dedup_key' must be a string")
    elif isinstance(dedup, str) and len(dedup) > 255:
        errors.append("'dedup_key' is too long (must be at most 255 characters)")
    elif action in ("acknowledge", "resolve") and not (dedup and dedup.strip()):
        errors.append("'dedup_key' is missing or blank")
    if action == "trigger":
        errors += _payload_errors(event.get("payload"))
    return errors


def _payload_errors(payload: Any) -> list[str]:
    if not isinstance(payload, dict):
        return ["'payload' is missing or blank"]
    errors = [
        f"'payload.{name}' is missing or blank"
        for name in ("summary", "source", "severity")
        if not isinstance(payload.get(name), str) or not payload[name].strip()
    ]
    summary, severity = payload.get("summary"), payload.get("severity")
    if isinstance(summary, str) and len(summary) > 1024:
        errors.append("'payload.summary' is too long (must be at most 1024 characters)")
    if isinstance(severity, str) and severity.strip() and severity not in SEVERITIES:
        errors.append(f"'payload.severity' is invalid (must be one of: {', '.join(SEVERITIES)})")
    stamp = payload.get("timestamp")
    if stamp is not None and not _is_iso8601(stamp):
        errors.append("'payload.timestamp' is invalid (must be an ISO 8601 timestamp)")
    details = payload.get("custom_details")
    if details is not None and not isinstance(details, dict | str):
        errors.append("'payload.custom_details' must be an object")
    return errors


def _is_iso8601(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


class PagerDutyStandin:
    """The stand-in's state: accepted `events`, open and past `alerts`, queued faults."""

    def __init__(self) -> None:
        self.url = ""
        self.events: list[dict[str, Any]] = []
        self.alerts: dict[tuple[str, str], Alert] = {}
        self.past_alerts: list[Alert] = []  # resolved alerts replaced by a new trigger
        self.requests = 0
        self._faults: deque[_Fault] = deque()

    @property
    def enqueue_url(self) -> str:
        return f"{self.url}/v2/enqueue"

    def fail_next(self, status: int, times: int = 1, retry_after: int | None = None) -> None:
        """Answer the next `times` requests with `status` (and Retry-After) before processing."""
        self._faults.extend(_Fault(status, retry_after) for _ in range(times))

    def recover(self) -> None:
        """Drop the faults still queued: the next request is processed."""
        self._faults.clear()

    def apply(self, event: dict[str, Any]) -> str:
        """Record a valid `event` and update its alert; returns its dedup_key."""
        key: str = event.get("dedup_key") or uuid.uuid4().hex
        self.events.append(event)
        slot = (event["routing_key"], key)
        alert, action = self.alerts.get(slot), event["event_action"]
        if action == "trigger":
            if alert is not None and alert.status != "resolved":
                alert.duplicates += 1
                alert.log.append("trigger (duplicate)")
            else:
                if alert is not None:
                    self.past_alerts.append(alert)
                payload = event["payload"]
                self.alerts[slot] = Alert(slot[0], key, payload["summary"], payload["severity"])
        elif alert is not None and alert.status != "resolved":
            alert.status = "resolved" if action == "resolve" else "acknowledged"
            alert.log.append(action)
        return key

    async def _enqueue(self, request: web.Request) -> web.Response:
        self.requests += 1
        if self._faults:
            fault = self._faults.popleft()
            headers = {"Retry-After": str(fault.retry_after)} if fault.retry_after else None
            if fault.status in _FAULT_BODIES:
                return web.json_response(
                    _FAULT_BODIES[fault.status], status=fault.status, headers=headers
                )
            return web.Response(status=fault.status, text="Internal error", headers=headers)
        try:
            event = json.loads(await request.read())
        except ValueError:
            return _invalid(["Event object is not valid JSON"])
        errors = validate(event)
        if errors:
            return _invalid(errors)
        key = self.apply(event)
        body = {"status": "success", "message": "Event processed", "dedup_key": key}
        return web.json_response(body, status=202)


def _invalid(errors: list[str]) -> web.Response:
    body = {"status": "invalid event", "message": "Event object is invalid", "errors": errors}
    return web.json_response(body, status=400)


@contextlib.asynccontextmanager
async def running_pagerduty_standin(
    *, host: str = "127.0.0.1", port: int = 0
) -> AsyncIterator[PagerDutyStandin]:
    """Start a stand-in, yield it (`.url` is the base; post to `.enqueue_url`), stop it."""
    standin = PagerDutyStandin()
    app = web.Application()
    app.router.add_post("/v2/enqueue", standin._enqueue)
    standin.url, runner = await start_app(app, host, port)
    try:
        yield standin
    finally:
        await runner.cleanup()
