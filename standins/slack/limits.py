"""What Slack accepts: method arguments, Block Kit and view limits, and rate-limit tiers.

Problems are reported the way Slack's Web API reports them in `response_metadata.messages`:
`"[ERROR] must be less than 3001 characters [json-pointer:/blocks/0/text/text]"`. Our own table
of limits runs first because it can name the exact place that broke; slack_sdk's block and view
models then catch whatever the table does not describe (required fields, element shapes).
"""

from __future__ import annotations

import base64
import json
import math
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from types import MappingProxyType
from typing import Any

from slack_sdk.errors import SlackObjectFormationError
from slack_sdk.models.blocks import Block
from slack_sdk.models.views import View

from standins.slack.state import JsonDict, Message, SlackError

__all__ = [
    "MAX_MESSAGE_BLOCKS",
    "MAX_MESSAGE_TEXT",
    "MAX_VIEW_BLOCKS",
    "METHOD_RATES",
    "POST_MESSAGE_RATE",
    "Args",
    "Rate",
    "RateLimiter",
    "block_problems",
    "message_content",
    "page",
    "view_payload",
    "view_problems",
]

MAX_MESSAGE_BLOCKS = 50
MAX_VIEW_BLOCKS = 100
MAX_MESSAGE_TEXT = 40_000  # characters of a message's top-level `text` before msg_too_long

BLOCK_TYPES = frozenset(
    {"actions", "context", "divider", "file", "header", "image", "input", "markdown"}
    | {"rich_text", "section", "table", "video"}
)
# What slack_sdk raises when a payload's shape surprises its models (e.g. a string where an
# object belongs): for the stand-in that is the caller's malformed block, never a server error.
_MODEL_ERRORS = (SlackObjectFormationError, AttributeError, TypeError, KeyError, ValueError)


def _too_long(pointer: str, limit: int) -> str:
    return f"[ERROR] must be less than {limit + 1} characters [json-pointer:{pointer}]"


def _too_many(pointer: str, limit: int) -> str:
    return f"[ERROR] no more than {limit} items allowed [json-pointer:{pointer}]"


def _error(text: str, pointer: str) -> str:
    return f"[ERROR] {text} [json-pointer:{pointer}]"


class _Checker:
    """Walks blocks, collecting one message per broken limit."""

    def __init__(self) -> None:
        self.problems: list[str] = []

    def length(self, value: Any, pointer: str, limit: int) -> None:
        if isinstance(value, str) and len(value) > limit:
            self.problems.append(_too_long(pointer, limit))

    def text(self, obj: Any, pointer: str, limit: int | None, *, plain_only: bool = False) -> None:
        if not isinstance(obj, dict) or not isinstance(obj.get("text"), str):
            self.problems.append(_error("must be a text object", pointer))
            return
        kinds = ("plain_text",) if plain_only else ("plain_text", "mrkdwn")
        if obj.get("type") not in kinds:
            self.problems.append(_error(f"must be one of {', '.join(kinds)}", f"{pointer}/type"))
        if limit is not None:
            self.length(obj["text"], f"{pointer}/text", limit)

    def confirm(self, obj: Any, pointer: str) -> None:
        if not isinstance(obj, dict):
            self.problems.append(_error("must be a confirmation dialog object", pointer))
            return
        for key, limit in (("title", 100), ("text", 300), ("confirm", 30), ("deny", 30)):
            self.text(obj.get(key), f"{pointer}/{key}", limit, plain_only=key != "text")

    def element(self, element: Any, pointer: str, action_ids: set[str]) -> None:
        if not isinstance(element, dict):
            self.problems.append(_error("must be an object", pointer))
            return
        action_id = element.get("action_id")
        if isinstance(action_id, str):
            self.length(action_id, f"{pointer}/action_id", 255)
            if action_id in action_ids:  # Slack: unique among the action_ids of a block
                self.problems.append(_error("duplicate action_id", f"{pointer}/action_id"))
            action_ids.add(action_id)
        if "confirm" in element:
            self.confirm(element["confirm"], f"{pointer}/confirm")
        if element.get("type") == "button":
            self.text(element.get("text"), f"{pointer}/text", 75, plain_only=True)
            self.length(element.get("value"), f"{pointer}/value", 2000)
            self.length(element.get("url"), f"{pointer}/url", 3000)

    def block(self, block: Any, pointer: str, block_ids: set[str]) -> None:
        if not isinstance(block, dict):
            self.problems.append(_error("must be an object", pointer))
            return
        kind = block.get("type")
        if kind not in BLOCK_TYPES:
            self.problems.append(_error(f"unsupported block type: {kind}", f"{pointer}/type"))
            return
        block_id = block.get("block_id")
        if isinstance(block_id, str):
            self.length(block_id, f"{pointer}/block_id", 255)
            if block_id in block_ids:
                self.problems.append(_error("duplicate block_id", f"{pointer}/block_id"))
            block_ids.add(block_id)
        action_ids: set[str] = set()
        if kind == "section":
            self.section(block, pointer, action_ids)
        elif kind == "header":
            self.text(block.get("text"), f"{pointer}/text", 150, plain_only=True)
        elif kind in ("context", "actions"):
            limit = 10 if kind == "context" else 25
            elements = block.get("elements")
            if not isinstance(elements, list) or not elements:
                self.problems.append(_error("missing required field: elements", pointer))
                return
            if len(elements) > limit:
                self.problems.append(_too_many(f"{pointer}/elements", limit))
            if kind == "actions":
                for i, element in enumerate(elements):
                    self.element(element, f"{pointer}/elements/{i}", action_ids)
        elif kind == "input" and "element" in block:
            self.element(block["element"], f"{pointer}/element", action_ids)

    def section(self, block: dict[str, Any], pointer: str, action_ids: set[str]) -> None:
        if "text" not in block and "fields" not in block:
            self.problems.append(_error("must provide either text or fields", pointer))
        if "text" in block:
            self.text(block["text"], f"{pointer}/text", 3000)
        fields = block.get("fields")
        if fields is not None:
            if not isinstance(fields, list):
                self.problems.append(_error("must be an array", f"{pointer}/fields"))
                return
            if len(fields) > 10:
                self.problems.append(_too_many(f"{pointer}/fields", 10))
            for i, item in enumerate(fields):
                self.text(item, f"{pointer}/fields/{i}", 2000)
        if "accessory" in block:
            self.element(block["accessory"], f"{pointer}/accessory", action_ids)


def _sdk_block_problems(blocks: list[Any], pointer: str) -> list[str]:
    problems = []
    for i, raw in enumerate(blocks):
        try:
            with warnings.catch_warnings():  # e.g. slack_sdk's DeprecationWarning for `subtype`
                warnings.simplefilter("ignore")
                parsed = Block.parse(dict(raw))
                if parsed is not None:
                    parsed.to_dict()  # validates the block and, recursively, its elements
        except _MODEL_ERRORS as exc:
            problems.append(_error(str(exc) or type(exc).__name__, f"{pointer}/{i}"))
    return problems


def block_problems(
    blocks: Any, *, pointer: str = "/blocks", limit: int = MAX_MESSAGE_BLOCKS
) -> list[str]:
    """Every limit the `blocks` array breaks, as Slack's `[ERROR] ...` messages (empty: valid)."""
    if not isinstance(blocks, list):
        return [_error("must be an array", pointer)]
    checker = _Checker()
    if len(blocks) > limit:
        checker.problems.append(_too_many(pointer, limit))
    block_ids: set[str] = set()
    for i, block in enumerate(blocks):
        checker.block(block, f"{pointer}/{i}", block_ids)
    return checker.problems or _sdk_block_problems(blocks, pointer)


def view_problems(view: Any, *, kinds: tuple[str, ...]) -> list[str]:
    """Every limit a view payload breaks (modal or home), with `/view/...` json-pointers."""
    if not isinstance(view, dict):
        return [_error("must be an object", "/view")]
    kind = view.get("type")
    if kind not in kinds:
        return [_error(f"must be one of {', '.join(kinds)}", "/view/type")]
    checker = _Checker()
    if kind == "modal":
        checker.text(view.get("title"), "/view/title", 24, plain_only=True)
        for key in ("submit", "close"):
            if key in view:
                checker.text(view[key], f"/view/{key}", 24, plain_only=True)
        blocks = view.get("blocks")
        has_input = isinstance(blocks, list) and any(
            isinstance(b, dict) and b.get("type") == "input" for b in blocks
        )
        if has_input and "submit" not in view:  # Slack: a modal with inputs needs a submit
            checker.problems.append(_error("missing required field: submit", "/view"))
    checker.length(view.get("private_metadata"), "/view/private_metadata", 3000)
    checker.length(view.get("callback_id"), "/view/callback_id", 255)
    checker.length(view.get("external_id"), "/view/external_id", 255)
    if "blocks" not in view:
        checker.problems.append(_error("missing required field: blocks", "/view"))
    problems = checker.problems + (
        block_problems(view["blocks"], pointer="/view/blocks", limit=MAX_VIEW_BLOCKS)
        if "blocks" in view
        else []
    )
    if problems:
        return problems
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            View(**view).validate_json()
    except _MODEL_ERRORS as exc:
        return [_error(str(exc) or type(exc).__name__, "/view")]
    return []


# -- arguments ---------------------------------------------------------------------------------


class Args:
    """A method's arguments, whether they came as JSON, a form or a query string."""

    def __init__(self, raw: Mapping[str, Any]) -> None:
        self.raw = dict(raw)

    def get(self, name: str) -> str | None:
        value = self.raw.get(name)
        if value is None or value == "":
            return None
        return value if isinstance(value, str) else json.dumps(value)

    def require(self, name: str) -> str:
        value = self.get(name)
        if value is None:
            raise SlackError("invalid_arguments", [f"[ERROR] missing required field: {name}"])
        return value

    def flag(self, name: str) -> bool:
        return self.raw.get(name) in (True, 1, "true", "True", "1")

    def number(self, name: str, default: int, maximum: int) -> int:
        raw = self.raw.get(name)
        if raw in (None, ""):
            return default
        try:
            value = int(raw)
        except (TypeError, ValueError):
            raise SlackError("invalid_arguments", [f"[ERROR] {name} must be a number"]) from None
        return default if value < 1 else min(value, maximum)

    def structured(self, name: str) -> Any:
        """A JSON-valued argument: forms carry it as a JSON string, JSON bodies as JSON."""
        value = self.raw.get(name)
        return json.loads(value) if isinstance(value, str) else value


def message_content(body: Mapping[str, Any]) -> tuple[str, list[JsonDict] | None]:
    """A message's text and blocks, checked against Slack's limits (raises SlackError)."""
    args = Args(body)
    text, blocks = args.get("text") or "", None
    if body.get("blocks") not in (None, ""):
        try:
            blocks = args.structured("blocks")
        except ValueError:
            raise SlackError("invalid_blocks_format") from None
        if not isinstance(blocks, list):
            raise SlackError("invalid_blocks_format")
        problems = block_problems(blocks)
        if problems:
            raise SlackError("invalid_blocks", problems)
    if not text and not blocks and not body.get("attachments"):
        raise SlackError("no_text")
    if len(text) > MAX_MESSAGE_TEXT:
        raise SlackError("msg_too_long")
    return text, blocks


def view_payload(args: Args, kinds: tuple[str, ...]) -> JsonDict:
    """The `view` argument, checked; `kinds` are the view types the method accepts."""
    if args.raw.get("view") in (None, ""):
        raise SlackError("invalid_arguments", ["[ERROR] missing required field: view"])
    try:
        view = args.structured("view")
    except ValueError:
        raise SlackError("invalid_arguments", ["[ERROR] view must be a JSON object"]) from None
    # Slack reports a broken view as invalid_arguments (not invalid_blocks), naming the limit.
    problems = view_problems(view, kinds=kinds)
    if problems:
        raise SlackError("invalid_arguments", problems)
    return dict(view)


def _ts(args: Args, name: str) -> Decimal | None:
    raw = args.get(name)
    try:
        return None if raw is None else Decimal(raw)
    except InvalidOperation:
        raise SlackError(f"invalid_ts_{name}") from None


def page(
    args: Args, messages: list[Message], limit: int, *, newest_first: bool
) -> tuple[list[Message], str | None]:
    """Filter by oldest/latest (exclusive unless `inclusive`) and cut a cursor page."""
    oldest, latest, inclusive = _ts(args, "oldest"), _ts(args, "latest"), args.flag("inclusive")

    def keep(m: Message) -> bool:
        ts = Decimal(m.ts)
        above = oldest is None or ts > oldest or (inclusive and ts == oldest)
        below = latest is None or ts < latest or (inclusive and ts == latest)
        return above and below

    found = sorted(filter(keep, messages), key=lambda m: Decimal(m.ts), reverse=newest_first)
    cursor = args.get("cursor")
    if cursor is not None:
        try:
            start = Decimal(base64.b64decode(cursor).decode().removeprefix("next_ts:"))
        except (ValueError, InvalidOperation):
            raise SlackError("invalid_cursor") from None
        found = [
            m for m in found if (Decimal(m.ts) <= start if newest_first else Decimal(m.ts) >= start)
        ]
    if len(found) <= limit:
        return found, None
    return found[:limit], base64.b64encode(f"next_ts:{found[limit].ts}".encode()).decode()


# -- rate limits ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rate:
    """A token bucket: `burst` calls at once, refilled at `per_second`."""

    burst: float
    per_second: float


# chat.postMessage: "1 message per second per channel, short bursts allowed" (keyed per channel).
POST_MESSAGE_RATE = Rate(burst=3, per_second=1.0)
TIER_2 = Rate(burst=20, per_second=20 / 60)  # "20+ per minute"
TIER_3 = Rate(burst=50, per_second=50 / 60)  # "50+ per minute", per method per workspace
TIER_4 = Rate(burst=100, per_second=100 / 60)  # "100+ per minute"
METHOD_RATES: Mapping[str, Rate] = MappingProxyType(
    {
        "chat.update": TIER_3,
        "conversations.history": TIER_3,
        "conversations.replies": TIER_3,
        "chat.postEphemeral": TIER_4,
        "users.info": TIER_4,
        "usergroups.users.list": TIER_2,
        "views.open": TIER_4,
        "views.update": TIER_4,
        "views.push": TIER_4,
        "views.publish": TIER_4,
    }
)


class RateLimiter:
    """Token buckets on an injectable clock, so tests can step time instead of sleeping."""

    def __init__(self, clock: Callable[[], float], *, enabled: bool = True) -> None:
        self.clock = clock
        self.enabled = enabled
        self._buckets: dict[tuple[str, str], tuple[float, float]] = {}  # key -> (tokens, at)

    def acquire(self, key: tuple[str, str], rate: Rate) -> int | None:
        """Take one call from `key`'s bucket; None if allowed, else Retry-After in seconds."""
        if not self.enabled:
            return None
        now = self.clock()
        tokens, at = self._buckets.get(key, (rate.burst, now))
        tokens = min(rate.burst, tokens + (now - at) * rate.per_second)
        if tokens >= 1:
            self._buckets[key] = (tokens - 1, now)
            return None
        self._buckets[key] = (tokens, now)
        # Slack sends whole seconds; a client that waits that long finds a token waiting.
        return max(1, math.ceil((1 - tokens) / rate.per_second))
