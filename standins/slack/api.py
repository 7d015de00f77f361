"""The Slack stand-in's Web API: argument parsing, one function per method, rate limiting, and
the bad days of `standins.slack.faults`. The server and the user-side behaviour live in
`standins.slack.server`; `response_url` posts in `standins.slack.response_urls`."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from aiohttp import web

from standins.slack.conversations import (
    METHOD_SCOPES,
    accepted_scopes,
    conversations_info,
    ensure_postable,
    ensure_readable,
    require_scope,
    visible,
)
from standins.slack.faults import Fault, misbehave
from standins.slack.limits import (
    METHOD_RATES,
    POST_MESSAGE_RATE,
    TIER_3,
    Args,
    Rate,
    RateLimiter,
    message_content,
    page,
    view_payload,
)
from standins.slack.metadata import message_metadata
from standins.slack.state import (
    ApiCall,
    Channel,
    Ephemeral,
    JsonDict,
    Message,
    SlackError,
    SlackState,
)

logger = logging.getLogger(__name__)
# An unknown public channel id (C…) is taken for a channel the bot is not in (it posts there
# with chat:write.public), and a user id (U…/W…) opens the bot's DM with that user; private
# channels (G…) and other DMs (D…) need the bot to be a member first (`state.add_channel`),
# as in Slack.
_OPEN_TO_BOT = re.compile(r"^[CUW][A-Z0-9]{2,}$")
# Tiers of methods only this module serves (limits.METHOD_RATES holds the others).
_MORE_RATES: Mapping[str, Rate] = {"conversations.info": TIER_3}


class StandInLike(Protocol):
    """What the Web API needs of a running stand-in."""

    state: SlackState
    bot_token: str
    limiter: RateLimiter


STANDIN: web.AppKey[StandInLike] = web.AppKey("slack_standin", StandInLike)


# -- arguments --------------------------------------------------------------------------------


async def _read_args(request: web.Request) -> tuple[dict[str, Any], str | None]:
    args: dict[str, Any] = dict(request.query)
    header = request.headers.get("Authorization", "")
    token = header[7:].strip() if header.startswith("Bearer ") else None
    from_body = False
    if request.method == "POST" and request.body_exists:
        if request.content_type == "application/json":
            try:
                body = json.loads(await request.read())
            except ValueError:
                raise SlackError("invalid_json") from None
            if not isinstance(body, dict):
                raise SlackError("invalid_json")
            args.update(body)
            from_body = True  # Slack ignores a token inside a JSON body: header only
        elif request.content_type in ("application/x-www-form-urlencoded", "multipart/form-data"):
            form = await request.post()
            args.update({k: v for k, v in form.items() if isinstance(v, str)})
        else:
            raise SlackError("invalid_post_type")
    raw_token = args.pop("token", None)
    if token is None and not from_body and isinstance(raw_token, str):
        token = raw_token
    return args, token


def _channel(state: SlackState, args: Args, *, create: bool) -> Channel:
    """The `channel` argument: an id, or a known channel's name; a new public channel or a
    user's DM when posting."""
    wanted = args.get("channel")
    if wanted is None:
        raise SlackError("channel_not_found")
    found = state.channels.get(wanted)
    if found is None and wanted.startswith("D"):
        # the D… id Slack gave for the bot's DM with a user (kept under the user's id here)
        found = next(
            (state.channels[u + wanted[1:]] for u in "UW" if u + wanted[1:] in state.channels),
            None,
        )
    if found is None:
        by_name = [c for c in state.channels.values() if c.name == wanted.lstrip("#")]
        found = by_name[0] if by_name else None
    if found is None and create and _OPEN_TO_BOT.match(wanted):
        is_dm = not wanted.startswith("C")
        found = state.add_channel(wanted, private=is_dm, member=is_dm)
    if found is None or not visible(found):
        raise SlackError("channel_not_found")
    return found


def _listing(state: SlackState, a: Args, page: list[Message], cursor: str | None) -> JsonDict:
    # Whole metadata only with include_all_metadata, else its event_type (standins.slack.metadata)
    shown = [state.message_json(m, all_metadata=a.flag("include_all_metadata")) for m in page]
    body: JsonDict = {"messages": shown, "has_more": bool(cursor)}
    if cursor:
        body["response_metadata"] = {"next_cursor": cursor}
    return body


# -- Web API methods --------------------------------------------------------------------------


def _auth_test(s: StandInLike, a: Args) -> JsonDict:
    st = s.state
    return {
        "url": f"https://{st.team_domain}.slack.com/",
        "team": st.team_name,
        "user": st.users[st.bot_user_id].name,
        "team_id": st.team_id,
        "user_id": st.bot_user_id,
        "bot_id": st.bot_id,
        "is_enterprise_install": False,
    }


def _post_message(s: StandInLike, a: Args) -> JsonDict:
    a.require("channel")
    channel = _channel(s.state, a, create=True)
    ensure_postable(s.state, channel)
    text, blocks = message_content(a.raw)
    attachments = a.structured("attachments") if a.get("attachments") else None
    metadata = message_metadata(a.raw.get("metadata"))
    message = s.state.post(
        channel.id,
        text=text,
        blocks=blocks,
        thread_ts=a.get("thread_ts"),
        broadcast=a.flag("reply_broadcast"),
        attachments=attachments if isinstance(attachments, list) else None,
        metadata=metadata,
    )
    return {
        "channel": _dm_id(channel.id),
        "ts": message.ts,
        "message": s.state.message_json(message),
    }


def _dm_id(channel: str) -> str:
    """The id Slack answers with: a DM opened by user id is the conversation D…, not U…."""
    return "D" + channel[1:] if channel.startswith(("U", "W")) else channel


def _update(s: StandInLike, a: Args) -> JsonDict:
    # Slack: "For direct messages, ensure that this value is a DM ID (starts with D) instead
    # of a User ID (starts with either U or W)."
    if a.require("channel").startswith(("U", "W")):
        raise SlackError("channel_not_found")
    channel = _channel(s.state, a, create=False)
    try:
        message = s.state.find_message(channel.id, a.require("ts"))
    except LookupError:
        raise SlackError("message_not_found") from None
    if message.bot_id != s.state.bot_id:
        raise SlackError("cant_update_message")  # a bot may only edit its own messages
    text, blocks = message_content(a.raw)
    metadata = message_metadata(a.raw.get("metadata"), removable=True)
    if metadata is not None:  # absent: kept; {}: removed (Slack's chat.update)
        message.metadata = metadata or None
    s.state.update(message, text=text if "text" in a.raw else None, blocks=blocks)
    json_message = s.state.message_json(message)
    return {
        "channel": _dm_id(channel.id),
        "ts": message.ts,
        "text": message.text,
        "message": json_message,
    }


def _post_ephemeral(s: StandInLike, a: Args) -> JsonDict:
    a.require("channel")
    channel = _channel(s.state, a, create=True)
    ensure_postable(s.state, channel)
    user = a.require("user")
    if user not in s.state.users:
        raise SlackError("user_not_found")
    text, blocks = message_content(a.raw)
    shown = s.state.add_ephemeral(
        Ephemeral(channel.id, user, text, blocks or [], "chat.postEphemeral", a.get("thread_ts"))
    )
    return {"message_ts": shown.ts}


def _views_open(s: StandInLike, a: Args) -> JsonDict:
    trigger_id, payload = a.require("trigger_id"), view_payload(a, ("modal",))
    trigger = s.state.exchange_trigger(trigger_id)
    return {"view": s.state.view_json(s.state.open_view(trigger.user, payload))}


def _views_push(s: StandInLike, a: Args) -> JsonDict:
    trigger_id, payload = a.require("trigger_id"), view_payload(a, ("modal",))
    trigger = s.state.exchange_trigger(trigger_id)
    return {"view": s.state.view_json(s.state.push_view(trigger.view_id, trigger.user, payload))}


def _views_update(s: StandInLike, a: Args) -> JsonDict:
    view_id, external_id = a.get("view_id"), a.get("external_id")
    if view_id is None and external_id is None:
        raise SlackError("invalid_arguments", ["[ERROR] view_id or external_id is required"])
    view = s.state.find_view(view_id, external_id)
    payload = view_payload(a, (view.type,))
    return {"view": s.state.view_json(s.state.update_view(view, payload, a.get("hash")))}


def _views_publish(s: StandInLike, a: Args) -> JsonDict:
    user = a.require("user_id")
    payload = view_payload(a, ("home",))
    if user not in s.state.users:
        raise SlackError("user_not_found")
    return {"view": s.state.view_json(s.state.publish_home(user, payload, a.get("hash")))}


def _history(s: StandInLike, a: Args) -> JsonDict:
    channel = _channel(s.state, a, create=False)
    ensure_readable(s.state, channel)
    limit = a.number("limit", 100, 999)
    found, cursor = page(a, channel.messages, limit, newest_first=True)
    return {**_listing(s.state, a, found, cursor), "pin_count": 0}


def _replies(s: StandInLike, a: Args) -> JsonDict:
    channel = _channel(s.state, a, create=False)
    ensure_readable(s.state, channel)
    try:
        named = s.state.find_message(channel.id, a.get("ts") or "")
    except LookupError:
        raise SlackError("thread_not_found") from None
    # `ts` may name the parent or any reply; either way the whole thread comes back, parent first.
    parent = s.state.find_message(channel.id, named.thread_ts or named.ts)
    thread = [parent, *s.state.thread(channel.id, parent.ts)]
    found, cursor = page(a, thread, a.number("limit", 1000, 1000), newest_first=False)
    return _listing(s.state, a, found, cursor)


def _users_info(s: StandInLike, a: Args) -> JsonDict:
    user = s.state.users.get(a.get("user") or "")
    if user is None:
        raise SlackError("user_not_found")
    return {"user": user.to_json()}


def _usergroup_members(s: StandInLike, a: Args) -> JsonDict:
    members = s.state.usergroups.get(a.require("usergroup"))
    if members is None:
        raise SlackError("no_such_subteam")
    return {"users": list(members)}


_METHODS: Mapping[str, Callable[[StandInLike, Args], JsonDict]] = {
    "auth.test": _auth_test,
    "chat.postMessage": _post_message,
    "chat.update": _update,
    "chat.postEphemeral": _post_ephemeral,
    "views.open": _views_open,
    "views.push": _views_push,
    "views.update": _views_update,
    "views.publish": _views_publish,
    "conversations.history": _history,
    "conversations.replies": _replies,
    "conversations.info": lambda s, a: conversations_info(s.state, a),
    "users.info": _users_info,
    "usergroups.users.list": _usergroup_members,
}


def _rate_key(method: str, args: Mapping[str, Any]) -> tuple[tuple[str, str], Rate] | None:
    if method == "chat.postMessage":
        return (method, str(args.get("channel", ""))), POST_MESSAGE_RATE
    rate = METHOD_RATES.get(method) or _MORE_RATES.get(method)
    return None if rate is None else ((method, ""), rate)


async def api(request: web.Request) -> web.StreamResponse:
    standin = request.app[STANDIN]
    method, calls = request.match_info["method"], standin.state.calls
    fault = standin.state.faults.next_fault(method)  # fail_every or a bad day (faults)
    if fault is None:
        return await _answer(standin, request, method, None)
    return await misbehave(
        request,
        fault,
        standin.state.faults,
        lambda status, error: calls.append(ApiCall(method, request.method, status, error, fault)),
        lambda: _answer(standin, request, method, fault),
    )


async def _answer(
    standin: StandInLike, request: web.Request, method: str, fault: Fault | None
) -> web.Response:
    """Make the call and answer it as Slack does; `fault` is the bad day's, when its answer is
    to be lost after it was made (faults.DONE_FIRST)."""
    body, authed = await _call(standin, request, method)
    status, headers = 200, {}
    if authed:  # Slack tells an authenticated caller its token's scopes on every answer
        headers["X-OAuth-Scopes"] = ",".join(sorted(standin.state.scopes))
        headers["X-Accepted-OAuth-Scopes"] = accepted_scopes(method)
    if body.get("error") == "ratelimited":
        status = 429
        headers["Retry-After"] = str(body.pop("retry_after"))
    standin.state.calls.append(ApiCall(method, request.method, status, body.get("error"), fault))
    return web.json_response(body, status=status, headers=headers)


async def _call(standin: StandInLike, request: web.Request, method: str) -> tuple[JsonDict, bool]:
    """The answer's body, and whether the caller's token was accepted."""
    try:
        raw, token = await _read_args(request)
    except SlackError as exc:
        return {"ok": False, "error": exc.code}, False
    handler = _METHODS.get(method)
    if handler is None:
        return {"ok": False, "error": "unknown_method", "req_method": method}, False
    if token is None or token != standin.bot_token:
        return {"ok": False, "error": "invalid_auth" if token else "not_authed"}, False
    limited = _rate_key(method, raw)
    retry_after = None if limited is None else standin.limiter.acquire(*limited)
    if retry_after is not None:
        return {"ok": False, "error": "ratelimited", "retry_after": retry_after}, True
    try:
        require_scope(standin.state, METHOD_SCOPES.get(method))
        return {"ok": True, **handler(standin, Args(raw))}, True
    except SlackError as exc:
        failed: JsonDict = {"ok": False, "error": exc.code, **exc.fields}
        if exc.messages:
            failed["response_metadata"] = {"messages": exc.messages}
        return failed, True
