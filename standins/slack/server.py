"""A Slack stand-in: the Web API methods the bot calls, response_urls, and a user who acts.

Shared by the tests and the local demo. It answers like Slack (HTTP 200 with `ok`/`error`, 429
with Retry-After when rate limited), keeps what the bot posted in `SlackState`, and can act as a
person towards the bot: slash commands, button clicks, view submissions and events, sent as
Slack sends them: to the bot's Request URL (form-encoded or JSON, `X-Slack-Signature` v0), or,
with Socket Mode on, as envelopes over the WebSocket the bot opened (`socket_mode`).
Limits and rate tiers are in `limits`; the workspace model is in `state`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import logging
import re
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypedDict, Unpack
from urllib.parse import urlencode

import aiohttp
from aiohttp import web

from standins.http_server import start_app
from standins.slack.api import STANDIN, api
from standins.slack.faults import BadDay
from standins.slack.limits import Args, RateLimiter, message_content, view_payload
from standins.slack.response_urls import response_url
from standins.slack.socket_mode import APP_TOKEN, BotReply, SocketModeServer, event_callback
from standins.slack.state import (
    Ephemeral,
    JsonDict,
    SlackError,
    SlackState,
    View,
    button_action,
    find_button,
)
from standins.slack.web import add_page_routes
from standins.slack.web_actions import DemoControls

__all__ = [
    "BotReply",
    "SlackStandIn",
    "SlackStandInOptions",
    "SlackState",
    "create_app",
    "running_slack_standin",
    "serve_forever",
    "start_slack_standin",
]

logger = logging.getLogger(__name__)
_CHANNEL_ID = re.compile(r"^[CGD][A-Z0-9]{2,}$")


# -- the stand-in as a running server and as a Slack user -------------------------------------


class SlackStandIn:
    """A running stand-in: its `url`, its `state`, and a Slack user who talks to the bot."""

    def __init__(
        self,
        state: SlackState,
        *,
        bot_token: str,
        signing_secret: str,
        events_url: str | None,
        limiter: RateLimiter,
        ack_timeout: float | None,
        socket: SocketModeServer,
    ) -> None:
        self.url = ""
        self.state = state
        self.bot_token, self.signing_secret = bot_token, signing_secret
        self.app_token = socket.app_token
        self.events_url = events_url
        self.limiter = limiter
        self.ack_timeout = ack_timeout  # Slack gives up on an unanswered request after 3 s
        self.socket = socket  # while socket.enabled, deliveries go over Socket Mode
        self.sent_requests: list[SentRequest] = []  # every request made to the bot, as sent
        # The browser page (web): the slash commands it offers, whom it acts as and where
        # it opens by default, and the demo's control panel when a demo runs.
        self.commands = {"/backfill"}
        self.page_user, self.page_channel = "U0REQUEST1", "C0BACKFILL"
        self.demo: DemoControls | None = None
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    @property
    def connected(self) -> bool:
        """Whether an app would receive what a person does: a Request URL or a live socket."""
        return self.events_url is not None or (
            self.socket.enabled and bool(self.socket.open_connections())
        )

    def dm_of(self, user_id: str) -> str:
        """The id of `user_id`'s DM with the bot (Slack's D… id; one per person)."""
        return "D" + user_id[1:]

    def set_events_url(self, url: str | None) -> None:
        """The bot's Request URL (`.../slack/events`), known once the bot is listening."""
        self.events_url = url

    async def stop(self) -> None:
        self.state.feed.close()  # open pages' live streams end, so the server can stop
        await self.socket.close()
        if self._session is not None:
            await self._session.close()
        if self._runner is not None:
            await self._runner.cleanup()

    def sign(self, body: bytes, timestamp: int | None = None) -> dict[str, str]:
        """Slack's v0 signature headers for `body` (now, unless `timestamp` is given)."""
        ts = str(int(time.time()) if timestamp is None else timestamp)
        base = b"v0:" + ts.encode() + b":" + body
        digest = hmac.new(self.signing_secret.encode(), base, hashlib.sha256).hexdigest()
        return {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": f"v0={digest}"}

    async def send_raw(self, body: bytes, headers: Mapping[str, str]) -> BotReply:
        """POST `body` to the bot unchanged (forged, replayed or stale requests in tests)."""
        if self.events_url is None:
            raise RuntimeError("the bot's Request URL is unknown: call set_events_url() first")
        if self._session is None:
            self._session = aiohttp.ClientSession()
        sent = {"Content-Type": "application/x-www-form-urlencoded", **headers}
        self.sent_requests.append(SentRequest(body, dict(headers)))
        timeout = aiohttp.ClientTimeout(total=self.ack_timeout)
        try:
            async with self._session.post(
                self.events_url, data=body, headers=sent, timeout=timeout
            ) as response:
                text = await response.text()
                is_json = response.content_type == "application/json"
                status = response.status
        except TimeoutError:
            return BotReply(0, "operation_timeout", None)
        except aiohttp.ClientError:  # the app is not listening: Slack's dispatch_failed
            return BotReply(0, "dispatch_failed", None)
        parsed = None
        if is_json and text.strip():
            with contextlib.suppress(ValueError):
                parsed = json.loads(text)
        return BotReply(status, text, parsed)

    async def _send_form(self, form: Mapping[str, str]) -> BotReply:
        body = urlencode(form).encode()
        return await self.send_raw(body, self.sign(body))

    async def _send_payload(self, payload: JsonDict) -> BotReply:
        if self.socket.enabled:
            return await self.socket.deliver("interactive", payload)
        return await self._send_form({"payload": json.dumps(payload)})

    async def send_event(self, event: JsonDict) -> BotReply:
        """Deliver an Events API event (e.g. `{"type": "app_home_opened", …}`) in its
        event_callback wrapper; over Socket Mode, retried while unacknowledged."""
        body = event_callback(self.state, event)
        if self.socket.enabled:
            return await self.socket.deliver("events_api", body)
        raw = json.dumps(body).encode()
        return await self.send_raw(raw, {"Content-Type": "application/json", **self.sign(raw)})

    async def slash_command(
        self,
        text: str,
        *,
        command: str = "/backfill",
        user_id: str = "U0REQUEST1",
        channel_id: str = "C0BACKFILL",
        team_id: str = "T0TEAM0001",
    ) -> BotReply:
        """Type `command text` as `user_id`; a body in the bot's ack is shown as Slack shows it."""
        st = self.state
        user = st.acting_user(user_id)
        form = {
            "token": st.verification_token,
            "team_id": team_id,
            "team_domain": st.team_domain,
            "channel_id": channel_id,
            "channel_name": st.channel_name(channel_id),
            "user_id": user_id,
            "user_name": user.name,
            "command": command,
            "text": text,
            "api_app_id": st.app_id,
            "is_enterprise_install": "false",
            "response_url": st.issue_response_url(self.url, channel_id, user_id),
            "trigger_id": st.issue_trigger(user_id),
        }
        if self.socket.enabled:
            reply = await self.socket.deliver("slash_commands", form)
        else:
            reply = await self._send_form(form)
        self._show_ack(reply, channel_id, user_id)
        return reply

    def _show_ack(self, reply: BotReply, channel: str, user: str) -> None:
        # Slack shows a slash command's synchronous answer to the user who typed it (or to the
        # channel with response_type in_channel): this is how Bolt's ack(text=...) reaches people.
        if reply.status != 200 or not reply.body.strip():
            return
        body = reply.json if isinstance(reply.json, dict) else {"text": reply.body}
        try:
            text, blocks = message_content(body)
        except SlackError as exc:
            logger.warning("Slack would not show the bot's ack body: %s %s", exc.code, exc.messages)
            return
        if body.get("response_type") == "in_channel":
            self.state.post(channel, text=text, blocks=blocks)
        else:
            self.state.add_ephemeral(Ephemeral(channel, user, text, blocks or [], "ack"))

    async def click(
        self,
        *,
        channel_id: str,
        message_ts: str,
        action_id: str,
        user_id: str,
        value: str | None = None,
    ) -> BotReply:
        """Click a button of a stored message (LookupError if there is no such button)."""
        st = self.state
        message = st.find_message(channel_id, message_ts)
        block_id, button = find_button(message.blocks, action_id, value)
        container: JsonDict = {"type": "message", "message_ts": message_ts}
        container.update(channel_id=channel_id, is_ephemeral=False)
        if message.thread_ts is not None:
            container["thread_ts"] = message.thread_ts
        payload = st.interaction("block_actions", user_id, st.issue_trigger(user_id))
        payload.update(
            container=container,
            channel={"id": channel_id, "name": st.channel_name(channel_id)},
            message=st.message_json(message),
            state={"values": {}},
            response_url=st.issue_response_url(
                self.url, channel_id, user_id, (channel_id, message_ts)
            ),
            actions=[button_action(block_id, button, value)],
        )
        return await self._send_payload(payload)

    def _open_view(self, view_id: str) -> View:
        view = self.state.views.get(view_id) or next(
            (v for v in self.state.home.values() if v.id == view_id), None
        )
        if view is None or view.closed:
            raise LookupError(f"no open view {view_id}")
        return view

    async def click_in_view(
        self, *, view_id: str, action_id: str, user_id: str, value: str | None = None
    ) -> BotReply:
        """Click a button in an open modal or home tab (no response_url: Slack sends none)."""
        st = self.state
        view = self._open_view(view_id)
        block_id, button = find_button(view.payload.get("blocks", []), action_id, value)
        payload = st.interaction(
            "block_actions", user_id, st.issue_trigger(user_id, view_id=view.id)
        )
        payload.update(
            container={"type": "view", "view_id": view.id},
            view=st.view_json(view),
            actions=[button_action(block_id, button, value)],
        )
        return await self._send_payload(payload)

    async def submit_view(
        self, *, view_id: str, user_id: str, values: dict[str, Any] | None = None
    ) -> BotReply:
        """Press Submit; `values` is `state.values` ({block_id: {action_id: {type, value}}})."""
        st = self.state
        view = self._open_view(view_id)
        view.values = dict(values or {})
        payload = st.interaction(
            "view_submission", user_id, st.issue_trigger(user_id, view_id=view.id)
        )
        payload.update(view=st.view_json(view), response_urls=[])
        reply = await self._send_payload(payload)
        if reply.status == 200:
            self._apply_response_action(view, reply.json if isinstance(reply.json, dict) else {})
        return reply

    def _apply_response_action(self, view: View, body: JsonDict) -> None:
        action = body.get("response_action")
        if action == "errors":
            view.errors = body.get("errors")
            self.state.feed.publish("view", user=view.user)
            return
        if action in ("update", "push"):
            try:
                payload = view_payload(Args(body), ("modal",))
            except SlackError as exc:  # Slack leaves the modal open and shows an error
                logger.warning("Slack would reject response_action %s: %s", action, exc.messages)
                return
            if action == "update":
                self.state.update_view(view, payload, None)
            else:
                self.state.push_view(view.id, view.user, payload)
            return
        self.state.close_view(view, whole_stack=action == "clear")


@dataclass(frozen=True)
class SentRequest:
    """A request the stand-in made to the bot: the exact bytes and headers (for replays)."""

    body: bytes
    headers: dict[str, str]


def create_app(standin: SlackStandIn) -> web.Application:
    """The aiohttp application: `/api/<method>`, `/response_url/<token>`, Socket Mode's
    `/link/` WebSocket, and the browser page at `/` (`web`)."""
    app = web.Application()
    app[STANDIN] = standin
    # Before the generic route: this method takes an app-level token, not the bot's.
    app.router.add_route("*", "/api/apps.connections.open", standin.socket.connections_open)
    app.router.add_get("/link/", standin.socket.link)
    app.router.add_route("GET", "/api/{method}", api)
    app.router.add_route("POST", "/api/{method}", api)
    app.router.add_post("/response_url/{token}", response_url)
    add_page_routes(app, standin)
    return app


class SlackStandInOptions(TypedDict, total=False):
    """start_slack_standin's keyword arguments other than host and port."""

    bot_token: str
    signing_secret: str
    events_url: str | None
    rate_limits: bool
    clock: Callable[[], float]
    ack_timeout: float | None
    socket_mode: bool
    app_token: str
    redelivery_s: float
    bad_day: BadDay | None


async def start_slack_standin(
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    bot_token: str = "xoxb-standin",
    signing_secret: str = "standin-signing-secret",
    events_url: str | None = None,
    rate_limits: bool = True,
    clock: Callable[[], float] = time.monotonic,
    ack_timeout: float | None = 3.0,
    socket_mode: bool = False,
    app_token: str = APP_TOKEN,
    redelivery_s: float = 1.0,
    bad_day: BadDay | None = None,
) -> SlackStandIn:
    """Start a stand-in on host:port (0 = an ephemeral port) and return it running.

    `clock` drives rate limits and trigger/response_url expiry; `ack_timeout` is how long the
    simulated user waits for the bot's answer (Slack: 3 s; None waits forever). `socket_mode`
    delivers to the app connected with `app_token` instead of `events_url`; an unacknowledged
    event is sent again `redelivery_s` after its ack was due. `bad_day` makes the Web API
    misbehave from the start (`state.bad_day()` changes it later).
    """
    state, limiter = SlackState(clock), RateLimiter(clock, enabled=rate_limits)
    state.bad_day(bad_day)
    socket = SocketModeServer(
        state,
        limiter,
        app_token=app_token,
        enabled=socket_mode,
        ack_timeout=ack_timeout,
        redelivery_s=redelivery_s,
    )
    standin = SlackStandIn(
        state,
        bot_token=bot_token,
        signing_secret=signing_secret,
        events_url=events_url,
        limiter=limiter,
        ack_timeout=ack_timeout,
        socket=socket,
    )
    standin.url, standin._runner = await start_app(create_app(standin), host, port)
    return standin


@contextlib.asynccontextmanager
async def running_slack_standin(
    *, host: str = "127.0.0.1", port: int = 0, **options: Unpack[SlackStandInOptions]
) -> AsyncIterator[SlackStandIn]:
    """Start a stand-in (same arguments as start_slack_standin), yield it, stop it."""
    standin = await start_slack_standin(host=host, port=port, **options)
    try:
        yield standin
    finally:
        await standin.stop()


async def serve_forever(
    host: str = "127.0.0.1", port: int = 0, **options: Unpack[SlackStandInOptions]
) -> None:
    """Run a stand-in until cancelled, announcing its URL on one stdout line."""
    async with running_slack_standin(host=host, port=port, **options) as standin:
        print(f"Slack stand-in listening on {standin.url}", flush=True)
        await asyncio.Event().wait()
