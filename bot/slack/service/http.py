"""`POST /slack/events`: make sure a request is Slack's, fresh and well formed before bolt runs it.

Bolt parses a body before it verifies its signature, and trusts Slack's shapes while parsing: a
forged request with a JSON body, invalid UTF-8 or a non-numeric timestamp made a 500. Here the
signature is checked on the raw bytes first (401), then the body is parsed and its shape checked
against what bolt and the listeners in handlers/ rely on (400), and a signed request already seen
inside Slack's 5-minute window is dropped (200, empty, so nothing retries it) instead of being run
twice. Bolt verifies the signature again; that second lock is kept.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import re
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, TypeGuard
from urllib.parse import parse_qsl, urlsplit

from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response
from slack_bolt.async_app import AsyncApp
from slack_bolt.context.async_context import AsyncBoltContext
from slack_bolt.request.async_internals import build_async_context
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.request.internals import build_normalized_headers, extract_content_type
from slack_sdk.signature import SignatureVerifier

from bot.slack.rules.ids import ActionId, ViewCallbackId

__all__ = ["WINDOW_S", "ReplayCache", "SlackEvents", "ignored", "parse_body", "problem"]

logger = logging.getLogger(__name__)
WINDOW_S = 5 * 60  # Slack's: a request signed longer ago (or further ahead) than this is refused
EVENT_RETRY_S = 60 * 60  # Slack retries an Events API delivery 3 times, the last after ~5 min
REPLAY_CACHE_SIZE = 10_000  # ~33 requests a second for 5 minutes; far above this bot's traffic
# The SDK hands the timestamp to int() (which takes "+1", " 1", "1_0" and non-ASCII digits, and
# raises on the rest) and compares signatures with hmac.compare_digest (which raises on
# non-ASCII): only what Slack sends gets that far.
_TIMESTAMP = re.compile(r"[0-9]{1,12}")
_SIGNATURE = re.compile(r"v0=[0-9a-f]{64}")
SLASH_FIELDS = ("command", "user_id", "channel_id", "response_url", "trigger_id")
# Read with .get() by bolt (IgnoringSelfEvents, matchers) or handlers/ when present.
OBJECTS = ("event", "view", "message", "container", "channel", "user")
# What the listeners in handlers/ answer: every ActionId (handlers/actions.py registers each)
# and the Home tab (handlers/home.py). Bolt would answer anything else 404, and for some shapes
# raise while composing its "unhandled request" hint.
ANSWERED_ACTIONS = frozenset(ActionId)
ANSWERED_EVENTS = frozenset({"app_home_opened"})
ANSWERED_VIEWS = frozenset({ViewCallbackId.OPTIONS})
"""Modals whose submission a listener answers (handlers/views.py); the others have no Submit."""
# Slack's kinds of payloads look like this; a reason names no other `type` (nor a long one).
_KIND = re.compile(r"[a-z_]{1,40}")
# Ids bolt copies into its context, and from there into its per-request Web API client's
# default parameters (team_id): strings, or null where Slack sends null.
CONTEXT_IDS = (
    ("team", "id"), ("enterprise", "id"), ("user", "team_id"), ("view", "team_id"),
    ("view", "app_installed_team_id"), ("team_id",), ("enterprise_id",), ("api_app_id",),
    ("authorizations", 0, "team_id"), ("authorizations", 0, "enterprise_id"),
    ("authorizations", 0, "user_id"),
)  # fmt: skip
# Where handlers/actions.py finds the channel, message and thread of a click.
CLICK_IDS = (
    ("channel", "id"), ("container", "channel_id"), ("container", "message_ts"),
    ("container", "thread_ts"), ("message", "ts"),
)  # fmt: skip
_ABSENT = object()
# A user id as Slack writes one: what views.publish takes for the Home tab.
_USER_ID = re.compile(r"[UW][A-Z0-9]{1,63}")


def _text(value: object) -> bool:
    return isinstance(value, str) and value != ""


def _user(value: object) -> bool:
    return isinstance(value, dict) and _text(value.get("id"))


def _at(body: Any, path: tuple[str | int, ...]) -> Any:
    """The value at `path` (keys of objects, indexes of lists); _ABSENT if there is none."""
    for key in path:
        listed = isinstance(body, list) and isinstance(key, int) and key < len(body)
        if not (listed or (isinstance(body, dict) and key in body)):
            return _ABSENT
        body = body[key]
    return body


def _not_strings(body: dict[str, Any], paths: tuple[tuple[str | int, ...], ...]) -> str | None:
    """The first of `paths` holding something other than a string or null, named."""
    for path in paths:
        value = _at(body, path)
        if value is not _ABSENT and value is not None and not isinstance(value, str):
            return f"{'.'.join(map(str, path))} is not a string"
    return None


# The database keeps user and channel ids in 64 characters; Slack's are a dozen or two.
ID_MAX = 64


def _long_id(body: dict[str, Any]) -> str | None:
    """The first user or channel id over ID_MAX characters, named; None if there is none."""
    found = [(name, body.get(name)) for name in ("user_id", "channel_id")] + [
        (f"{name}.id", (body.get(name) or {}).get("id")) for name in ("user", "channel")
    ]
    for name, value in found:
        if isinstance(value, str) and len(value) > ID_MAX:
            return f"{name} is longer than {ID_MAX} characters"
    return None


def _listed(value: object) -> TypeGuard[list[dict[str, Any]]]:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def _actions(value: object) -> bool:
    # Bolt matches on actions[0]["action_id"]; handlers read actions[0].get("value").
    return _listed(value) and all(_text(a.get("action_id")) for a in value)


def _event(value: object) -> bool:
    return isinstance(value, dict) and _text(value.get("type"))


def _view(value: object) -> bool:
    # Bolt reads view["callback_id"] to match and view["type"] to tell a workflow step's.
    return isinstance(value, dict) and _text(value.get("callback_id")) and _text(value.get("type"))


def _url(value: object) -> bool:
    # What bolt's respond() can post to; aiohttp raises on spaces and control characters.
    if not (isinstance(value, str) and value.isprintable() and " " not in value):
        return False
    try:
        parts = urlsplit(value)
    except ValueError:  # "http://[…": an IPv6 address left open
        return False
    return parts.scheme in ("https", "http") and bool(parts.hostname)


def _blocks(value: object) -> bool:
    # SLA Acknowledge edits the clicked message's blocks, reading blocks and elements with .get().
    if not isinstance(value, list):
        return False
    for block in value:
        elements = (block.get("elements") or []) if isinstance(block, dict) else None
        if not (isinstance(elements, list) and all(isinstance(e, dict) for e in elements)):
            return False
    return True


# What each kind of payload must carry (Slack's payload references; what bolt's listener
# matchers and its listener arguments read: to_action, to_view, to_options). Kinds no listener
# answers are refused anyway; these name what is missing first.
REQUIRED: dict[str, tuple[tuple[str, Callable[[object], bool]], ...]] = {
    "block_actions": (("user", _user), ("actions", _actions)),
    "view_submission": (("user", _user), ("view", _view)),
    "view_closed": (("user", _user), ("view", _view)),
    "shortcut": (("user", _user), ("callback_id", _text), ("trigger_id", _text)),
    "message_action": (("user", _user), ("callback_id", _text), ("trigger_id", _text)),
    "block_suggestion": (("user", _user), ("action_id", _text)),
    "interactive_message": (("user", _user), ("callback_id", _text), ("actions", _listed)),
    "event_callback": (("event", _event),),
    "url_verification": (("challenge", _text),),
}


def parse_body(text: str, content_type: str | None) -> Any:
    """The body as bolt reads it (JSON when declared or when it starts with "{", else a form whose
    `payload` field holds the JSON), without bolt's slip: it takes any form with "payload"
    anywhere in it (a slash command's text, a channel's name) for an interaction and reads {}.
    Raises ValueError or RecursionError on what is not JSON."""
    if content_type == "application/json" or text.startswith("{"):
        return json.loads(text)
    form = dict(parse_qsl(text, keep_blank_values=True))
    return json.loads(form["payload"]) if "payload" in form else form


def problem(body: Any) -> str | None:
    """Why bolt or the listeners in handlers/ could not handle this body; None if they can."""
    if not isinstance(body, dict):
        return "the payload is not a JSON object"
    if "command" in body:  # bolt dispatches anything with a `command` as a slash command
        missing = [name for name in SLASH_FIELDS if not _text(body.get(name))]
        return f"slash command without {', '.join(missing)}" if missing else _long_id(body)
    kind = body.get("type")
    if kind is None and body.get("ssl_check") == "1":
        return None  # Slack checking the certificate of the Request URL; bolt answers it
    if not isinstance(kind, str) or not kind:
        return "payload without type"
    if not _KIND.fullmatch(kind):
        return "a payload of a type Slack does not send"
    reason = _shape(body)
    if reason is not None:
        return f"{kind}: {reason}"
    for name, valid in REQUIRED.get(kind, ()):
        if not valid(body.get(name)):
            return f"{kind} without {name}"
    reason = _click_shape(body) if kind == "block_actions" else None
    if kind == "event_callback" and body["event"]["type"] == "app_home_opened":
        user = body["event"].get("user")  # handlers/home.py publishes the tab to this id
        if not (isinstance(user, str) and _USER_ID.fullmatch(user)):
            reason = "app_home_opened without a user id"
    if reason is not None:
        return f"{kind}: {reason}"
    return _unanswered(body, kind) or _long_id(body)


def _shape(body: dict[str, Any]) -> str | None:
    """What bolt would read from any payload and could not, named; None if nothing."""
    for name in OBJECTS:
        if body.get(name) is not None and not isinstance(body[name], dict):
            return f"{name} is not an object"
    if "event" in body and not isinstance(body["event"], dict):  # bolt: body.get("event", {})
        return "event is not an object"
    if "bot_access_token" in body or "bot_access_token" in body.get("event", {}):
        # Bolt would make it the token of every Web API call; this bot has no workflow functions.
        return "a workflow function's token"
    for name in ("response_url", "trigger_id"):  # bolt's respond() and views.open take strings
        if name in body and not _text(body[name]):
            return f"{name} is not a string"
    if "response_url" in body and not _url(body["response_url"]):
        return "response_url is not a URL"
    urls = body.get("response_urls")  # bolt reads response_urls[0].get("response_url")
    if urls is not None and not (
        isinstance(urls, list)
        and all(isinstance(u, dict) and _url(u.get("response_url")) for u in urls)
    ):
        return "response_urls is not a list of objects with a URL"
    authorizations = body.get("authorizations")  # bolt reads authorizations[0] with .get()
    if authorizations is not None and not (
        isinstance(authorizations, list) and all(isinstance(a, dict) for a in authorizations)
    ):
        return "authorizations is not a list of objects"
    for name in ("team", "enterprise"):  # bolt takes an id or an object with an id
        if body.get(name) is not None and not isinstance(body[name], str | dict):
            return f"{name} is neither an id nor an object"
    return _not_strings(body, CONTEXT_IDS)


def _click_shape(body: dict[str, Any]) -> str | None:
    """What handlers/actions.py reads from a click and could not use, named; None if nothing."""
    value = body["actions"][0].get("value")
    if value is not None and not isinstance(value, str):
        return "actions[0].value is not a string"
    message = body.get("message") or {}
    if "blocks" in message and not _blocks(message["blocks"]):
        return "message.blocks is not a list of blocks"
    return _not_strings(body, CLICK_IDS)


def _unanswered(body: dict[str, Any], kind: str) -> str | None:
    """Why no listener in handlers/ answers this well-formed payload; None if one does."""
    if kind == "block_actions":
        if body["actions"][0]["action_id"] not in ANSWERED_ACTIONS:
            return "block_actions: no listener for this action_id"
        # Slack sends a trigger_id with every click, and a response_url with every click on a
        # message: a click with neither is not Slack's. With one, handlers/_replies.py answers
        # what the other would have carried through the Web API.
        if "response_url" not in body and "trigger_id" not in body:
            return "block_actions without response_url or trigger_id"
        return None
    if kind == "view_submission":
        if body["view"]["callback_id"] not in ANSWERED_VIEWS:
            return "view_submission: no listener for this callback_id"
        return None
    if kind in ("event_callback", "url_verification", "app_rate_limited"):
        return None  # answered by bolt, or acknowledged unheard (see ignored())
    return f"{kind}: no listener for it"


def ignored(body: dict[str, Any]) -> bool:
    """Whether this well-formed payload is acknowledged (200) without bolt: Slack saying the app
    is rate limited, or an event no listener handles (Slack retries an event answered otherwise,
    and turns off the events of an app that fails most of them)."""
    event = body.get("event") if body.get("type") == "event_callback" else None
    kind = event.get("type") if isinstance(event, dict) else None
    return body.get("type") == "app_rate_limited" or kind not in (None, *ANSWERED_EVENTS)


class _BytesVerifier(SignatureVerifier):
    """The SDK's verifier (window, constant-time comparison) over the raw bytes: the SDK decodes
    a body as UTF-8 before hashing it, which raises on bytes that are not UTF-8."""

    def generate_signature(self, *, timestamp: str, body: str | bytes) -> str | None:
        raw = body if isinstance(body, bytes) else body.encode()
        base = b"v0:" + timestamp.encode() + b":" + raw
        return "v0=" + hmac.new(self.signing_secret.encode(), base, hashlib.sha256).hexdigest()


class ReplayCache:
    """The signatures of requests let through, each until its timestamp leaves the window.

    A signature covers the timestamp and the body, so a signature seen again is the same request
    sent again: a capture replayed, or a duplicate. Slack's own Events API retries (with
    X-Slack-Retry-Num) carry a new timestamp and signature and are not caught here. Bounded: past
    `size` entries the oldest go first, so only a flood of validly signed requests could evict
    one early."""

    def __init__(self, size: int = REPLAY_CACHE_SIZE) -> None:
        self.size = size
        self._until: OrderedDict[str, float] = OrderedDict()

    def __len__(self) -> int:
        return len(self._until)

    def first_time(self, signature: str, timestamp: int, now: float, ttl_s: int = WINDOW_S) -> bool:
        """True, and remembered for `ttl_s` after `timestamp`, unless `signature` (or any other
        key) was let through and is still remembered."""
        until = self._until
        # Arrival order is nearly expiry order (timestamps are within the window of `now`).
        while until and next(iter(until.values())) < now:
            until.popitem(last=False)
        if until.get(signature, -1.0) >= now:
            return False
        while len(until) >= self.size:
            until.popitem(last=False)
        until[signature] = float(timestamp + ttl_s)
        until.move_to_end(signature)
        return True


def _single(request: web.Request, name: str) -> str | None:
    # Bolt reads the last of repeated headers and aiohttp's .get() the first: accept one only.
    values = request.headers.getall(name, [])
    return values[0] if len(values) == 1 else None


def _refuse(request: web.Request, status: int, reason: str) -> web.Response:
    # INFO, not WARNING: anyone on the internet can make these. Never the body or the headers.
    logger.info("refused a request to %s from %s: %s", request.path, request.remote, reason)
    return web.Response(status=status, text=reason)


class SlackEvents:
    """The aiohttp handler of Slack's Request URL: checks, then hands the request to bolt."""

    def __init__(self, bolt: AsyncApp, signing_secret: str, replays: ReplayCache | None = None):
        self.bolt = bolt
        self.verifier = _BytesVerifier(signing_secret)
        self.replays = replays if replays is not None else ReplayCache()

    async def handle(self, request: web.Request) -> web.Response:
        raw = await request.read()  # past client_max_size aiohttp answers 413 itself
        timestamp = _single(request, "X-Slack-Request-Timestamp")
        signature = _single(request, "X-Slack-Signature")
        if timestamp is None or not _TIMESTAMP.fullmatch(timestamp):
            return _refuse(request, 401, "missing or invalid X-Slack-Request-Timestamp")
        if signature is None or not _SIGNATURE.fullmatch(signature):
            return _refuse(request, 401, "missing or invalid X-Slack-Signature")
        if not self.verifier.is_valid(raw, timestamp, signature):
            return _refuse(request, 401, "invalid signature or stale timestamp")
        # Signed from here on: Slack, or someone holding the signing secret.
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            return _refuse(request, 400, "the body is not UTF-8")
        # Every value of every header, so the content type read here is the one bolt reads.
        headers: dict[str, str | Sequence[str]] = {
            k: request.headers.getall(k) for k in request.headers
        }
        content_type = extract_content_type(build_normalized_headers(headers))
        try:
            body = parse_body(text, content_type)
        except (ValueError, RecursionError):
            return _refuse(request, 400, "the body is not JSON or a Slack form")
        reason = problem(body)
        if reason is not None:
            return _refuse(request, 400, reason)
        if ignored(body):
            what = str((body.get("event") or {}).get("type") or body["type"])[:40]
            logger.info("acknowledged a Slack %r no listener handles", what)
            return web.Response(status=200)
        try:
            bolt_request = AsyncBoltRequest(body=text, query=request.query_string, headers=headers)
            if bolt_request.body != body:  # bolt's "payload" slip (see parse_body)
                bolt_request.body = body
                bolt_request.context = build_async_context(AsyncBoltContext({}), body)
        except Exception:  # bolt's parsing raises whatever an odd shape makes it raise
            return _refuse(request, 400, "a payload bolt cannot read")
        if not self.replays.first_time(signature, int(timestamp), self.verifier.clock.now()):
            kind = str(body.get("command") or body.get("type"))[:40]
            logger.warning(
                "dropped a replayed Slack request (%r, timestamp %s, from %s)",
                kind, timestamp, request.remote,
            )  # fmt: skip
            return web.Response(status=200)
        event_id = body.get("event_id") if body.get("type") == "event_callback" else None
        if isinstance(event_id, str) and 0 < len(event_id) <= 64:
            # Slack retries an event it thinks was not acknowledged (X-Slack-Retry-Num: new
            # timestamp, new signature, same event_id) for up to an hour: handle it once.
            key, now = f"event:{event_id}", self.verifier.clock.now()
            if not self.replays.first_time(key, int(now), now, ttl_s=EVENT_RETRY_S):
                logger.info("dropped a retry of Slack event %s", event_id)
                return web.Response(status=200)
        return await to_aiohttp_response(await self.bolt.async_dispatch(bolt_request))
