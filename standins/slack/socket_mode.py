"""Slack's side of Socket Mode for the Slack stand-in: `apps.connections.open`, the WebSocket
link, and the envelopes Slack sends a connected app instead of POSTing to its Request URL.

What it copies from Slack (docs.slack.dev "Using Socket Mode", slack_sdk's socket_mode clients):
- apps.connections.open takes an app-level token (`xapp-…`) in the Authorization header only
  (a bot or user token: `not_allowed_token_type`) and answers a `…/link/?ticket=…&app_id=…` URL
  whose ticket opens one connection;
- on connect, `hello` (num_connections, debug_info, connection_info.app_id); up to 10
  connections at once, each envelope goes to one of them;
- an envelope `{envelope_id, type, payload, accepts_response_payload}` (events_api ones also
  carry retry_attempt and retry_reason) is acknowledged with `{envelope_id, payload?}` within
  3 s; the ack's payload is what an HTTP app answers in its response body;
- an events_api envelope left unacknowledged (or due while no connection is open) is sent again
  with retry_attempt + 1 and retry_reason "timeout", at most 3 times; slash commands and
  interactions are not retried: the person sees `operation_timeout` (or `dispatch_failed` when
  no connection is open);
- connections are refreshed: `disconnect` with reason `warning` (about 10 s ahead), then
  `refresh_requested`; `link_disabled` when Socket Mode is turned off, `too_many_websockets`
  past the 10th connection.
What Slack leaves undocumented and the stand-in chooses: an unknown or used ticket fails the
WebSocket handshake with 403; each attempt of a retried envelope has its own envelope_id (the
event_id inside stays the same, as in the Events API).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
import string
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, TypeVar

from aiohttp import WSCloseCode, WSMsgType, web

from standins.slack.limits import TIER_3, RateLimiter
from standins.slack.state import ApiCall, JsonDict, SlackState

__all__ = [
    "APP_TOKEN",
    "BotReply",
    "Connection",
    "Envelope",
    "SocketModeServer",
    "event_callback",
]

logger = logging.getLogger(__name__)
T = TypeVar("T")
APP_TOKEN = "xapp-1-A0STANDIN1-1000000000001-standin"
OPEN_METHOD = "apps.connections.open"
MAX_CONNECTIONS = 10
EVENT_RETRIES = 3
BUILD_NUMBER = 1
# Tokens that are not app-level: Slack names the type, not the token, as the problem.
_OTHER_TOKEN_TYPES = ("xoxb-", "xoxp-", "xoxa-", "xoxe")
_ALNUM = string.ascii_uppercase + string.digits
EnvelopeType = Literal["events_api", "slash_commands", "interactive"]
Outcome = Literal["sent", "acked", "ack_lost", "timeout", "closed", "no_connection"]


@dataclass(frozen=True)
class BotReply:
    """The bot's answer to something the stand-in sent: the HTTP response, or the payload of a
    Socket Mode ack as JSON (status 200). Status 0: no answer in time (`body` says why)."""

    status: int
    body: str
    json: Any | None


@dataclass
class Connection:
    """One WebSocket the app opened."""

    id: int
    ws: web.WebSocketResponse
    debug_reconnects: bool
    ready: bool = False  # hello sent: envelopes may follow
    leaving: bool = False  # told to go (refresh_requested, link_disabled): nothing more is sent
    pending: dict[str, asyncio.Future[tuple[Outcome, JsonDict | None]]] = field(
        default_factory=dict
    )

    @property
    def host(self) -> str:
        return f"applink-standin-{self.id}"

    @property
    def open(self) -> bool:
        return not self.ws.closed


@dataclass
class Envelope:
    """One delivery attempt, as sent and as answered (`ack`: the app's message, as received)."""

    envelope_id: str
    type: EnvelopeType
    payload: JsonDict
    retry_attempt: int
    connection: int | None  # None: no connection was open
    outcome: Outcome = "sent"
    ack: JsonDict | None = None


def event_callback(state: SlackState, event: JsonDict) -> JsonDict:
    """The Events API wrapper Slack delivers `event` in, over HTTP and Socket Mode alike."""
    now = time.time()
    return {
        "token": state.verification_token,
        "team_id": state.team_id,
        "api_app_id": state.app_id,
        "event": {"event_ts": f"{now:.6f}", **event},
        "type": "event_callback",
        "event_id": "Ev" + "".join(secrets.choice(_ALNUM) for _ in range(10)),
        "event_time": int(now),
        "authorizations": [
            {
                "enterprise_id": None,
                "team_id": state.team_id,
                "user_id": state.bot_user_id,
                "is_bot": True,
                "is_enterprise_install": False,
            }
        ],
        "is_ext_shared_channel": False,
        "event_context": "4-" + secrets.token_urlsafe(24),
    }


class SocketModeServer:
    """Socket Mode for the stand-in's one app. `enabled` is the app's "Enable Socket Mode"
    switch: while on, the stand-in delivers here instead of to the Request URL."""

    def __init__(
        self,
        state: SlackState,
        limiter: RateLimiter,
        *,
        app_token: str,
        enabled: bool,
        ack_timeout: float | None,
        redelivery_s: float,
    ) -> None:
        self.state, self.limiter = state, limiter
        self.app_token, self.enabled = app_token, enabled
        self.ack_timeout = ack_timeout  # Slack waits 3 s for an ack
        self.redelivery_s = redelivery_s  # after a missed ack, before the next attempt
        self.connections: list[Connection] = []  # every connection opened, oldest first
        self.envelopes: list[Envelope] = []  # every delivery attempt, oldest first
        self.protocol_errors: list[str] = []  # what the app sent that is no ack
        self._tickets: set[str] = set()
        self._acks_to_lose = 0
        self._changed = asyncio.Condition()

    # -- apps.connections.open ----------------------------------------------------------------

    async def connections_open(self, request: web.Request) -> web.Response:
        status, headers, body = 200, {}, self._open(request)
        if body.get("error") == "ratelimited":
            status, headers = 429, {"Retry-After": str(body.pop("retry_after"))}
        self.state.calls.append(ApiCall(OPEN_METHOD, request.method, status, body.get("error")))
        return web.json_response(body, status=status, headers=headers)

    def _open(self, request: web.Request) -> JsonDict:
        if request.method != "POST":
            return {"ok": False, "error": "insecure_request"}
        # Only the header counts: Slack refuses an app token sent as a parameter.
        header = request.headers.get("Authorization", "")
        token = header[7:].strip() if header.startswith("Bearer ") else ""
        if not token:
            return {"ok": False, "error": "not_authed"}
        if token.startswith(_OTHER_TOKEN_TYPES):
            return {"ok": False, "error": "not_allowed_token_type"}
        if token != self.app_token:
            return {"ok": False, "error": "invalid_auth"}
        retry_after = self.limiter.acquire((OPEN_METHOD, ""), TIER_3)  # its reference: Tier 3
        if retry_after is not None:
            return {"ok": False, "error": "ratelimited", "retry_after": retry_after}
        ticket = str(uuid.uuid4())
        self._tickets.add(ticket)
        query = {"ticket": ticket, "app_id": self.state.app_id}
        url = request.url.with_scheme("ws").with_path("/link/").with_query(query)
        return {"ok": True, "url": str(url)}

    # -- the WebSocket ------------------------------------------------------------------------

    async def link(self, request: web.Request) -> web.StreamResponse:
        """GET /link/?ticket=…: the app's connection, for as long as it stays open."""
        ws = web.WebSocketResponse()  # answers the client's pings, as Slack's servers do
        if not ws.can_prepare(request).ok:
            return web.Response(status=400, text="a WebSocket handshake is expected")
        ticket = request.query.get("ticket", "")
        if ticket not in self._tickets or request.query.get("app_id") != self.state.app_id:
            return web.Response(status=403, text="invalid_ticket")
        self._tickets.discard(ticket)  # a ticket opens one connection
        await ws.prepare(request)
        live = len(self.open_connections())
        conn = Connection(len(self.connections) + 1, ws, "debug_reconnects" in request.query)
        self.connections.append(conn)
        if live >= MAX_CONNECTIONS:
            await self._disconnect(conn, "too_many_websockets")
            await ws.close()
            return ws
        await ws.send_json(self._hello(conn, live + 1))
        conn.ready = True
        await self._notify()
        try:
            async for message in ws:
                if message.type == WSMsgType.TEXT:
                    self._receive(conn, message.data)
                else:
                    self.protocol_errors.append(f"connection {conn.id}: {message.type.name}")
        finally:
            conn.ready = False
            for future in conn.pending.values():
                if not future.done():
                    future.set_result(("closed", None))
            await self._notify()
        return ws

    def _hello(self, conn: Connection, count: int) -> JsonDict:
        started = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
        return {
            "type": "hello",
            "num_connections": count,
            "debug_info": {
                "host": conn.host,
                "started": started,
                "build_number": BUILD_NUMBER,
                # seconds until Slack refreshes the connection (shorter with debug_reconnects)
                "approximate_connection_time": 360 if conn.debug_reconnects else 3600,
            },
            "connection_info": {"app_id": self.state.app_id},
        }

    def _receive(self, conn: Connection, data: str) -> None:
        try:
            ack = json.loads(data)
        except ValueError:
            ack = None
        if (
            not isinstance(ack, dict)
            or not isinstance(ack.get("envelope_id"), str)
            or not isinstance(ack.get("payload", {}), dict)
        ):
            self.protocol_errors.append(f"connection {conn.id}: not an ack: {data[:200]}")
            return
        future = conn.pending.pop(ack["envelope_id"], None)
        if future is None or future.done():
            self.protocol_errors.append(
                f"connection {conn.id}: ack of no envelope waiting for one on it: {data[:200]}"
            )
            return
        if self._acks_to_lose:
            self._acks_to_lose -= 1
            future.set_result(("ack_lost", ack))
            return
        future.set_result(("acked", ack))

    async def _disconnect(self, conn: Connection, reason: str) -> None:
        if conn.open:
            message = {"type": "disconnect", "reason": reason, "debug_info": {"host": conn.host}}
            await conn.ws.send_json(message)

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def _wait(self, check: Callable[[], T | None], timeout_s: float) -> T:
        """What `check` returns once it is truthy; TimeoutError if it is not in `timeout_s`."""
        async with self._changed:
            found = await asyncio.wait_for(self._changed.wait_for(check), timeout_s)
        if found is None:  # wait_for only returns a truthy value; this narrows the type
            raise TimeoutError
        return found

    # -- what tests and the stand-in do -------------------------------------------------------

    def open_connections(self) -> list[Connection]:
        return [c for c in self.connections if c.open]

    def _route(self) -> Connection | None:
        usable = [c for c in self.connections if c.ready and not c.leaving and c.open]
        return usable[-1] if usable else None

    async def wait_connected(self, timeout_s: float = 10.0) -> Connection:
        """The connection envelopes go to, once the app has one (TimeoutError if it never has)."""
        return await self._wait(self._route, timeout_s)

    def lose_acks(self, count: int = 1) -> None:
        """The next `count` acks are lost on their way, as over a broken network: the envelopes
        they answer count as unacknowledged (at once: Slack would only wait out its 3 s)."""
        self._acks_to_lose += count

    async def deliver(self, kind: EnvelopeType, payload: JsonDict) -> BotReply:
        """Send `payload` to the app as Slack does, retrying events; the app's answer."""
        retries = EVENT_RETRIES if kind == "events_api" else 0
        reply = await self._attempt(kind, payload, 0)
        for attempt in range(1, retries + 1):
            if reply.status == 200:
                break
            await asyncio.sleep(self.redelivery_s)
            reply = await self._attempt(kind, payload, attempt)
        return reply

    async def _attempt(self, kind: EnvelopeType, payload: JsonDict, attempt: int) -> BotReply:
        conn = self._route()
        envelope = Envelope(
            str(uuid.uuid4()), kind, payload, attempt, None if conn is None else conn.id
        )
        self.envelopes.append(envelope)
        if conn is None:
            envelope.outcome = "no_connection"
            return BotReply(0, "dispatch_failed", None)
        message: JsonDict = {"envelope_id": envelope.envelope_id, "payload": payload, "type": kind}
        message["accepts_response_payload"] = kind != "events_api"
        if kind == "events_api":
            message.update(retry_attempt=attempt, retry_reason="timeout" if attempt else "")
        answered = asyncio.get_running_loop().create_future()
        conn.pending[envelope.envelope_id] = answered
        try:
            await conn.ws.send_json(message)
            envelope.outcome, envelope.ack = await asyncio.wait_for(answered, self.ack_timeout)
        except TimeoutError:
            envelope.outcome = "timeout"
        except ConnectionError:  # the connection closed while the envelope was being sent
            envelope.outcome = "closed"
        finally:
            conn.pending.pop(envelope.envelope_id, None)
        if envelope.outcome != "acked":
            return BotReply(0, "operation_timeout", None)
        body = (envelope.ack or {}).get("payload") if message["accepts_response_payload"] else None
        return BotReply(200, json.dumps(body), body) if body else BotReply(200, "", None)

    async def refresh(
        self, *, warning_s: float | None = None, timeout_s: float = 10.0
    ) -> Connection:
        """Refresh the app's connections as Slack does every few hours: with `warning_s`, first
        `disconnect` reason `warning` and, that long later, on each connection still open,
        `refresh_requested`. Returns the first connection the app opens after that (TimeoutError
        if none comes in `timeout_s`); the old ones still open are closed then."""
        old, known = self.open_connections(), len(self.connections)
        if warning_s is not None:
            for conn in old:
                await self._disconnect(conn, "warning")
            with contextlib.suppress(TimeoutError):  # an app may move on the warning already
                await self._wait(lambda: all(not c.open for c in old), warning_s)
        for conn in old:
            conn.leaving = True
            await self._disconnect(conn, "refresh_requested")
        try:
            return await self._wait(
                lambda: next((c for c in self.connections[known:] if c.ready and c.open), None),
                timeout_s,
            )
        finally:  # Slack closes them whether or not the app moved
            for conn in old:
                await conn.ws.close()

    async def disable(self) -> None:
        """Turn Socket Mode off, as in the app's settings: `link_disabled` on each connection,
        which Slack then closes; deliveries go to the Request URL again."""
        self.enabled = False
        for conn in self.open_connections():
            conn.leaving = True
            await self._disconnect(conn, "link_disabled")
            await conn.ws.close()

    async def close(self) -> None:
        """Close every connection (the stand-in is stopping)."""
        for conn in self.open_connections():
            conn.leaving = True
            await conn.ws.close(code=WSCloseCode.GOING_AWAY)
