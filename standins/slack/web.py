"""The Slack stand-in's browser page: `/` and its JSON API under `/ui/api/`.

The page (plain HTML, CSS and JavaScript in `standins/slack/static/`, nothing loaded from outside)
shows the workspace as a member sees it and acts as that member: it types slash commands,
clicks buttons and submits modals through the same `SlackStandIn` methods the tests use, so the
bot receives exactly what Slack would send. Live updates are server-sent events from the
workspace's change feed. The demo adds a control panel through `DemoControls`.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import logging
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import Any

from aiohttp import web

from standins.slack.emoji import EMOJI
from standins.slack.state import JsonDict, Message, SlackState
from standins.slack.web_actions import (
    ACTIONS,
    DEMO_ACTIONS,
    STANDIN_KEY,
    DemoControls,
    Workspace,
    acting,
    standin_of,
)

__all__ = ["DemoControls", "add_page_routes"]

logger = logging.getLogger(__name__)
_STATIC_TYPES = {".js": "text/javascript", ".css": "text/css", ".html": "text/html"}
# The page's own pages and scripts only; everything else (images, fonts) it must not need.
_CSP = (
    "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; "
    "frame-ancestors 'none'"
)
_LOOPBACK_NAMES = {"localhost", "127.0.0.1", "::1"}


Handler_ = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def _same_origin_only(request: web.Request, handler: Handler_) -> web.StreamResponse:
    """The page acts as any member: only the page itself may use its API. A Host that is a DNS
    name other than localhost is refused (DNS rebinding: another site's name pointed at this
    machine), and so is a POST from another origin or one that is not JSON (a form or a
    text/plain request any site can make without asking)."""
    if request.path != "/" and not request.path.startswith("/ui/"):
        return await handler(request)
    host = request.url.host or ""
    if host not in _LOOPBACK_NAMES and not _is_ip(host):
        raise web.HTTPForbidden(text="use the stand-in by its address or localhost")
    if request.method == "POST":
        origin = request.headers.get("Origin")
        if origin is not None and origin != f"{request.scheme}://{request.host}":
            raise web.HTTPForbidden(text="cross-origin requests are refused")
        if request.content_type != "application/json":
            return web.json_response(
                {"ok": False, "error": "send JSON (Content-Type: application/json)"}, status=415
            )
    return await handler(request)


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


def add_page_routes(app: web.Application, standin: Workspace) -> None:
    app[STANDIN_KEY] = standin
    app.middlewares.append(_same_origin_only)
    app.router.add_get("/", _index)
    app.router.add_get("/ui/api/workspace", _workspace)
    app.router.add_get("/ui/api/history", _history)
    app.router.add_get("/ui/api/replies", _replies)
    app.router.add_get("/ui/api/home", _home)
    app.router.add_get("/ui/api/modals", _modals)
    app.router.add_get("/ui/api/emoji", _emoji)
    app.router.add_get("/ui/api/stream", _stream)
    app.router.add_get("/ui/api/demo", _demo)
    for name, handler in ACTIONS.items():
        app.router.add_post(f"/ui/api/{name}", acting(handler, member=True))
    for name, handler in DEMO_ACTIONS.items():
        app.router.add_post(f"/ui/api/demo/{name}", acting(handler, member=False))
    app.router.add_get("/ui/{file}", _static)


# -- the page's files -----------------------------------------------------------------------------


def _web_files() -> dict[str, bytes]:
    """The page's files, read once: only these names are served (no path is ever joined)."""
    folder = resources.files("standins.slack") / "static"
    return {
        item.name: item.read_bytes()
        for item in folder.iterdir()
        if item.is_file() and item.name[item.name.rfind(".") :] in _STATIC_TYPES
    }


_FILES = _web_files()


def _file_response(name: str) -> web.Response:
    body = _FILES.get(name)
    if body is None:
        raise web.HTTPNotFound(text="no such file")
    kind = _STATIC_TYPES[name[name.rfind(".") :]]
    headers = {"Cache-Control": "no-cache", "Content-Security-Policy": _CSP}
    return web.Response(body=body, content_type=kind, charset="utf-8", headers=headers)


async def _index(_: web.Request) -> web.Response:
    return _file_response("index.html")


async def _static(request: web.Request) -> web.Response:
    return _file_response(request.match_info["file"])


# -- reading the workspace ------------------------------------------------------------------------


def is_dm(channel_id: str) -> bool:
    """A DM between the bot and a person: a D… id, or a person's id the bot posted to."""
    return channel_id[:1] in {"D", "U", "W"}


async def _workspace(request: web.Request) -> web.Response:
    standin = standin_of(request)
    st = standin.state
    users = [
        {"id": u.id, "name": u.name, "real_name": u.real_name, "title": u.title, "is_bot": u.is_bot}
        for u in st.users.values()
    ]
    groups = [
        {"id": gid, "handle": st.usergroup_handles.get(gid, gid), "members": members}
        for gid, members in st.usergroups.items()
    ]
    channels = [
        {
            "id": c.id,
            "name": st.users[c.id].name if c.id in st.users else c.name,
            "is_private": c.is_private,
            "is_dm": is_dm(c.id),
            "dm_user": c.id if c.id in st.users else None,
        }
        for c in st.channels.values()
        if not c.is_archived
    ]
    body = {
        "team": {"id": st.team_id, "name": st.team_name, "domain": st.team_domain},
        "bot": {"user_id": st.bot_user_id, "name": st.users[st.bot_user_id].name},
        "users": users,
        "usergroups": groups,
        "channels": channels,
        "default_user": standin.page_user,
        "default_channel": standin.page_channel,
        "commands": sorted(standin.commands),
        "demo": standin.demo is not None,
    }
    return web.json_response(body)


def _item(st: SlackState, message: Message) -> JsonDict:
    return {"kind": "message", **st.message_json(message)}


def _ephemerals(st: SlackState, channel: str, user: str, thread: str | None) -> list[JsonDict]:
    return [
        {
            "kind": "ephemeral",
            "ts": e.ts,
            "user": st.bot_user_id,
            "text": e.text,
            "blocks": e.blocks,
            **({"thread_ts": e.thread_ts} if e.thread_ts else {}),
        }
        for e in st.ephemerals
        if e.channel == channel and e.user == user and e.thread_ts == thread
    ]


def _query(request: web.Request, name: str) -> str:
    value = request.query.get(name, "")
    if not value or len(value) > 64:
        raise web.HTTPBadRequest(text=f"`{name}` is required")
    return value


async def _history(request: web.Request) -> web.Response:
    st = standin_of(request).state
    channel, user = _query(request, "channel"), _query(request, "user")
    items = [_item(st, m) for m in st.messages(channel)]
    items += _ephemerals(st, channel, user, None)
    items.sort(key=lambda i: float(i["ts"] or 0))
    return web.json_response({"channel": channel, "items": items})


async def _replies(request: web.Request) -> web.Response:
    st = standin_of(request).state
    channel, user, ts = _query(request, "channel"), _query(request, "user"), _query(request, "ts")
    try:
        parent = st.find_message(channel, ts)
    except LookupError:
        raise web.HTTPNotFound(text="no such thread") from None
    items = [_item(st, m) for m in st.thread(channel, parent.ts)]
    items += _ephemerals(st, channel, user, parent.ts)
    items.sort(key=lambda i: float(i["ts"] or 0))
    return web.json_response({"channel": channel, "parent": _item(st, parent), "items": items})


async def _home(request: web.Request) -> web.Response:
    st = standin_of(request).state
    view = st.home.get(_query(request, "user"))
    return web.json_response({"view": None if view is None else _view(st, view)})


def _view(st: SlackState, view: Any) -> JsonDict:
    return {**st.view_json(view), "errors": view.errors}


async def _modals(request: web.Request) -> web.Response:
    st = standin_of(request).state
    user = _query(request, "user")
    stack = st.open_stack(user)
    return web.json_response({"views": [_view(st, v) for v in stack]})


async def _emoji(_: web.Request) -> web.Response:
    return web.json_response(dict(EMOJI), headers={"Cache-Control": "max-age=3600"})


async def _stream(request: web.Request) -> web.StreamResponse:
    """Server-sent events: one `change` per workspace change; the page fetches again."""
    feed = standin_of(request).state.feed
    response = web.StreamResponse(
        headers={
            "Content-Type": "text/event-stream",
            "Cache-Control": "no-cache",
            "X-Accel-Buffering": "no",  # a proxy in front must not hold the stream back
        }
    )
    await response.prepare(request)
    await response.write(b"retry: 1000\n\n")
    try:
        async with contextlib.aclosing(feed.follow()) as changes:
            async for change in changes:
                if change is None:
                    await response.write(b": keep-alive\n\n")
                else:
                    data = json.dumps(change)
                    await response.write(f"event: change\ndata: {data}\n\n".encode())
    except (ConnectionResetError, RuntimeError):  # the page went away mid-write
        pass
    return response


# -- the demo's control panel ---------------------------------------------------------------------


async def _demo(request: web.Request) -> web.Response:
    demo = standin_of(request).demo
    if demo is None:
        raise web.HTTPNotFound(text="no demo is running")
    return web.json_response(await demo.describe())
