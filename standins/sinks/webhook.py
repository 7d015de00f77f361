"""A receiver for the webhook sink, behaving as a careful one should (tests and the demo).

`POST /hooks/{name}` checks the signature with `bot.hub.sinks.webhook.verify` before reading the
body (401 on a missing, bad or stale one), then parses the JSON (400 if it is not) and records
the delivery. `deliveries` keeps every accepted request, repeats included; `documents()` is
what a receiver deduplicating on `X-Backfill-Bot-Delivery` would process: each id once, first
copy kept. `attempts` logs every request with the status it got, faults included.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from bot.hub.sinks.webhook import DELIVERY_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER, verify
from standins.http_server import start_app

__all__ = ["Attempt", "Received", "WebhookReceiver", "running_webhook_receiver"]


@dataclass(frozen=True)
class Received:
    """One accepted delivery."""

    name: str
    delivery_id: str
    timestamp: int
    document: Any
    headers: dict[str, str]


@dataclass(frozen=True)
class Attempt:
    """One request, accepted or not: the hook, its delivery id (if any) and our answer."""

    name: str
    delivery_id: str | None
    status: int


class WebhookReceiver:
    """The receiver's state; `url` is its base, `url_for(name)` a hook's address."""

    def __init__(
        self, secret: str, *, clock: Callable[[], float] = time.time, tolerance_s: float = 300
    ) -> None:
        self.url = ""
        self.deliveries: list[Received] = []
        self.attempts: list[Attempt] = []
        self._secret = secret
        self._clock = clock
        self._tolerance_s = tolerance_s
        self._faults: deque[tuple[int, int | None]] = deque()

    def url_for(self, name: str) -> str:
        return f"{self.url}/hooks/{name}"

    def fail_next(self, status: int, times: int = 1, retry_after: int | None = None) -> None:
        """Answer the next `times` requests with `status` (and Retry-After), unprocessed."""
        self._faults.extend((status, retry_after) for _ in range(times))

    def recover(self) -> None:
        """Drop the faults still queued: the next request is processed."""
        self._faults.clear()

    def documents(self, name: str | None = None) -> list[Any]:
        """The documents once per delivery id (first copy), optionally of one hook only."""
        seen: set[str] = set()
        kept = []
        for received in self.deliveries:
            if (name is None or received.name == name) and received.delivery_id not in seen:
                seen.add(received.delivery_id)
                kept.append(received.document)
        return kept

    async def _hook(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        delivery_id = request.headers.get(DELIVERY_HEADER)
        response = await self._answer(request, name, delivery_id)
        self.attempts.append(Attempt(name, delivery_id, response.status))
        return response

    async def _answer(
        self, request: web.Request, name: str, delivery_id: str | None
    ) -> web.Response:
        if self._faults:
            status, retry_after = self._faults.popleft()
            headers = {"Retry-After": str(retry_after)} if retry_after is not None else None
            return web.json_response(
                {"ok": False, "error": f"injected fault {status}"}, status=status, headers=headers
            )
        body = await request.read()
        timestamp = request.headers.get(TIMESTAMP_HEADER, "")
        signature = request.headers.get(SIGNATURE_HEADER, "")
        now = self._clock()
        if not verify(
            self._secret, timestamp, body, signature, now=now, tolerance_s=self._tolerance_s
        ):
            return web.json_response({"ok": False, "error": "invalid signature"}, status=401)
        if not delivery_id:
            return web.json_response({"ok": False, "error": "no delivery id"}, status=400)
        try:
            document = json.loads(body)
        except ValueError:
            return web.json_response({"ok": False, "error": "body is not JSON"}, status=400)
        duplicate = any(r.delivery_id == delivery_id for r in self.deliveries)
        headers = dict(request.headers.items())
        self.deliveries.append(Received(name, delivery_id, int(timestamp), document, headers))
        return web.json_response({"ok": True, "duplicate": duplicate})


@contextlib.asynccontextmanager
async def running_webhook_receiver(
    secret: str,
    *,
    clock: Callable[[], float] = time.time,
    tolerance_s: float = 300,
    host: str = "127.0.0.1",
    port: int = 0,
) -> AsyncIterator[WebhookReceiver]:
    """Start a receiver sharing `secret`, yield it, and stop it on the way out."""
    receiver = WebhookReceiver(secret, clock=clock, tolerance_s=tolerance_s)
    app = web.Application()
    app.router.add_post("/hooks/{name}", receiver._hook)
    receiver.url, runner = await start_app(app, host, port)
    try:
        yield receiver
    finally:
        await runner.cleanup()
