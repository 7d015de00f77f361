"""What the Slack stand-in's page does as a member (`POST /ui/api/…`): slash commands, clicks,
modals and the Home tab, through the same `SlackStandIn` methods the tests use, and the demo's
control panel (`DemoControls`). Each answers `{"ok": …}` with a sentence for the person; a
malformed request is a 400 that says what is wrong."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from datetime import date
from typing import Any, Protocol

import aiohttp
from aiohttp import web

from standins.slack.socket_mode import BotReply
from standins.slack.state import JsonDict, SlackState

__all__ = [
    "ACTIONS",
    "DEMO_ACTIONS",
    "STANDIN_KEY",
    "DemoControls",
    "Workspace",
    "acting",
    "standin_of",
]

_MAX_HOURS = 10**6  # larger integers are refused before float() could overflow


class DemoControls(Protocol):
    """The demo's control panel behind `/ui/api/demo`: each answer is a sentence for the page;
    a ValueError's message is shown to the person as the reason nothing happened."""

    async def describe(self) -> JsonDict: ...

    async def fail(self, start: date, end: date) -> str: ...

    async def recover(self) -> str: ...

    async def advance(self, hours: float) -> str: ...


class Workspace(Protocol):
    """What the page acts through: the stand-in (`standins.slack.server.SlackStandIn`), as a
    member of its workspace would, so the bot gets exactly what Slack would send."""

    state: SlackState
    commands: set[str]
    page_user: str
    page_channel: str
    demo: DemoControls | None

    @property
    def connected(self) -> bool: ...

    def dm_of(self, user_id: str) -> str: ...

    async def send_event(self, event: JsonDict) -> BotReply: ...

    async def slash_command(
        self,
        text: str,
        *,
        command: str = ...,
        user_id: str = ...,
        channel_id: str = ...,
        team_id: str = ...,
    ) -> BotReply: ...

    async def click(
        self,
        *,
        channel_id: str,
        message_ts: str,
        action_id: str,
        user_id: str,
        value: str | None = None,
    ) -> BotReply: ...

    async def click_in_view(
        self, *, view_id: str, action_id: str, user_id: str, value: str | None = None
    ) -> BotReply: ...

    async def submit_view(
        self, *, view_id: str, user_id: str, values: dict[str, Any] | None = None
    ) -> BotReply: ...


STANDIN_KEY: web.AppKey[Workspace] = web.AppKey("page_standin")


def standin_of(request: web.Request) -> Workspace:
    return request.app[STANDIN_KEY]


class BadRequest(Exception):
    """A malformed page request: 400 with this text."""


# -- acting as a member ---------------------------------------------------------------------------

Handler = Callable[[Workspace, JsonDict, str], Awaitable[JsonDict]]


def acting(handler: Handler, *, member: bool) -> Callable[[web.Request], Awaitable[web.Response]]:
    """A POST from the page: a JSON object, acting as a member of the workspace (`member`)."""

    async def handle(request: web.Request) -> web.Response:
        standin = standin_of(request)
        try:
            body = await request.json(loads=json.loads)
        except (ValueError, RecursionError):
            return web.json_response({"ok": False, "error": "the body is not JSON"}, status=400)
        try:
            if not isinstance(body, dict):
                raise BadRequest("the body is not a JSON object")
            user = _text(body, "user", limit=64) if member else ""
            if member and user not in standin.state.users:
                raise BadRequest(f"no member {user} in this workspace")
            return web.json_response(await handler(standin, body, user))
        except BadRequest as exc:
            return web.json_response({"ok": False, "error": str(exc)}, status=400)

    return handle


def _text(body: JsonDict, name: str, *, limit: int = 4000, required: bool = True) -> str:
    value = body.get(name)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value) or len(value) > limit:
        raise BadRequest(f"`{name}` must be a string of at most {limit} characters")
    return value


def _answered(reply: BotReply, what: str) -> JsonDict:
    """How Slack shows the bot's answer to a person: nothing when it acked in time."""
    if reply.status == 200:
        return {"ok": True}
    # 0: no answer at all (the stand-in says which: a timeout or an unreachable app)
    error = (reply.body or "operation_timeout") if reply.status == 0 else "dispatch_failed"
    return {"ok": False, "error": f'{what} failed with the error "{error}"'}


async def _command(standin: Workspace, body: JsonDict, user: str) -> JsonDict:
    channel, line = _text(body, "channel", limit=64), _text(body, "text").strip()
    command, _, text = line.partition(" ")
    if not command.startswith("/"):
        return {"ok": False, "error": "Only slash commands reach the app here: try /backfill help"}
    if command not in standin.commands:
        return {
            "ok": False,
            "error": f"{command} is not a valid command. In Slack, all messages that start "
            'with the "/" character are interpreted as commands.',
        }
    if channel not in standin.state.channels:
        raise BadRequest(f"no channel {channel}")
    if not standin.connected:
        return {"ok": False, "error": "No app is connected: start the bot (backfill-bot demo)"}
    reply = await standin.slash_command(
        text.strip(), command=command, user_id=user, channel_id=channel
    )
    return _answered(reply, command)


async def _click(standin: Workspace, body: JsonDict, user: str) -> JsonDict:
    channel, ts = _text(body, "channel", limit=64), _text(body, "ts", limit=32)
    action_id = _text(body, "action_id", limit=255)
    value = _text(body, "value", limit=2000, required=False) or None
    if not standin.connected:
        return {"ok": False, "error": "No app is connected to answer this button"}
    try:
        reply = await standin.click(
            channel_id=channel, message_ts=ts, action_id=action_id, user_id=user, value=value
        )
    except LookupError:
        return {"ok": False, "error": "This button is no longer there"}
    return _answered(reply, "The app")


async def _view_click(standin: Workspace, body: JsonDict, user: str) -> JsonDict:
    view_id, action_id = _text(body, "view_id", limit=64), _text(body, "action_id", limit=255)
    value = _text(body, "value", limit=2000, required=False) or None
    if not standin.connected:
        return {"ok": False, "error": "No app is connected to answer this button"}
    try:
        reply = await standin.click_in_view(
            view_id=view_id, action_id=action_id, user_id=user, value=value
        )
    except LookupError:
        return {"ok": False, "error": "This view or button is no longer there"}
    return _answered(reply, "The app")


async def _view_submit(standin: Workspace, body: JsonDict, user: str) -> JsonDict:
    view_id, values = _text(body, "view_id", limit=64), body.get("values") or {}
    if not isinstance(values, dict):
        raise BadRequest("`values` must be an object")
    if not standin.connected:
        return {"ok": False, "error": "No app is connected to receive this form"}
    try:
        reply = await standin.submit_view(view_id=view_id, user_id=user, values=values)
    except LookupError:
        return {"ok": False, "error": "This view is no longer open"}
    return _answered(reply, "The app")


async def _view_close(standin: Workspace, body: JsonDict, user: str) -> JsonDict:
    view_id = _text(body, "view_id", limit=64)
    view = standin.state.views.get(view_id)
    if view is None or view.closed or view.user != user:
        return {"ok": False, "error": "This view is no longer open"}
    standin.state.close_view(view, whole_stack=True)
    return {"ok": True}


async def _home_opened(standin: Workspace, body: JsonDict, user: str) -> JsonDict:
    if not standin.connected:
        return {"ok": True}  # nothing to tell: the page shows that no Home tab is published
    event = {"type": "app_home_opened", "user": user, "channel": standin.dm_of(user)}
    return _answered(await standin.send_event({**event, "tab": "home"}), "The app")


# -- the demo's control panel ---------------------------------------------------------------------


# -- the demo's control panel ---------------------------------------------------------------------


def _date(body: JsonDict, name: str) -> date:
    try:
        return date.fromisoformat(_text(body, name, limit=10))
    except ValueError:
        raise BadRequest(f"`{name}` must be a date, YYYY-MM-DD") from None


async def _demo_action(
    standin: Workspace, run: Callable[[DemoControls], Awaitable[str]]
) -> JsonDict:
    if standin.demo is None:
        return {"ok": False, "error": "no demo is running"}
    try:
        message = await run(standin.demo)
    except ValueError as exc:  # refused: nothing was done
        return {"ok": False, "error": str(exc)}
    except (RuntimeError, OSError, aiohttp.ClientError) as exc:  # the bot did not take it
        standin.state.feed.publish("demo")
        return {"ok": False, "error": f"The bot did not take the demo's events: {exc}"}
    standin.state.feed.publish("demo")
    return {"ok": True, "message": message}


async def _demo_fail(standin: Workspace, body: JsonDict, _: str) -> JsonDict:
    start, end = _date(body, "start"), _date(body, "end")
    return await _demo_action(standin, lambda demo: demo.fail(start, end))


async def _demo_recover(standin: Workspace, body: JsonDict, _: str) -> JsonDict:
    return await _demo_action(standin, lambda demo: demo.recover())


async def _demo_clock(standin: Workspace, body: JsonDict, _: str) -> JsonDict:
    hours = body.get("hours")
    if not isinstance(hours, int | float) or isinstance(hours, bool):
        raise BadRequest("`hours` must be a number")
    if isinstance(hours, int) and not -_MAX_HOURS < hours < _MAX_HOURS:
        raise BadRequest("`hours` is out of range")
    return await _demo_action(standin, lambda demo: demo.advance(float(hours)))


ACTIONS: dict[str, Handler] = {
    "command": _command,
    "click": _click,
    "view_click": _view_click,
    "view_submit": _view_submit,
    "view_close": _view_close,
    "home_opened": _home_opened,
}
DEMO_ACTIONS: dict[str, Handler] = {
    "fail": _demo_fail,
    "recover": _demo_recover,
    "clock": _demo_clock,
}
