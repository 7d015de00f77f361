"""The Slack stand-in's records: what the workspace stores (users, channels, messages, views,
triggers, response_urls) and the Block Kit helpers Slack applies to what it stores. The
workspace that holds them is `state.SlackState`."""

from __future__ import annotations

import secrets
import string
import time
from dataclasses import dataclass, field
from typing import Any

JsonDict = dict[str, Any]
_ALNUM = string.ascii_uppercase + string.digits


class SlackError(Exception):
    """A Web API failure: `{"ok": false, "error": code}` plus optional metadata messages and
    top-level fields (missing_scope's `needed` and `provided`)."""

    def __init__(
        self, code: str, messages: list[str] | None = None, fields: JsonDict | None = None
    ) -> None:
        super().__init__(code)
        self.code, self.messages, self.fields = code, messages or [], fields or {}


@dataclass
class ApiCall:
    """One Web API request as the stand-in answered it (429s included). `fault` names what a bad
    day (`standins.slack.faults`) did to it; `status` is 0 when no HTTP answer was sent."""

    method: str
    http_verb: str
    status: int
    error: str | None
    fault: str | None = None


@dataclass
class User:
    id: str
    name: str
    real_name: str
    team_id: str
    is_bot: bool = False
    title: str = ""  # the profile's title; the demo names each person's team there

    def to_json(self) -> JsonDict:
        profile = {"real_name": self.real_name, "display_name": self.name, "team": self.team_id}
        profile["title"] = self.title
        return {
            "id": self.id,
            "team_id": self.team_id,
            "name": self.name,
            "real_name": self.real_name,
            "deleted": False,
            "is_bot": self.is_bot,
            "is_admin": False,
            "tz": "UTC",
            "profile": profile,
        }


@dataclass
class Message:
    """A stored message; `bot_id` is None for messages a person wrote."""

    channel: str
    ts: str
    user: str
    text: str
    blocks: list[JsonDict]
    bot_id: str | None = None
    thread_ts: str | None = None  # set on replies (and on parents when rendered)
    subtype: str | None = None
    edited: JsonDict | None = None
    attachments: list[Any] | None = None
    metadata: JsonDict | None = None  # {"event_type": ..., "event_payload": {...}} (`metadata`)


@dataclass
class Channel:
    """A conversation. `is_member` says whether the bot is in it: a private channel the bot is
    not in is invisible to it, a public one takes its posts only with chat:write.public."""

    id: str
    name: str
    messages: list[Message] = field(default_factory=list)  # top level, ts order
    threads: dict[str, list[Message]] = field(default_factory=dict)  # parent ts -> replies
    is_private: bool = False
    is_member: bool = True
    is_archived: bool = False
    created: int = field(default_factory=lambda: int(time.time()))


@dataclass
class Ephemeral:
    """A message only `user` sees: chat.postEphemeral, a response_url post, or an ack body."""

    channel: str
    user: str
    text: str
    blocks: list[JsonDict]
    source: str  # "chat.postEphemeral" | "response_url" | "ack"
    thread_ts: str | None = None
    ts: str = ""  # when it was shown (set by SlackState.add_ephemeral), to place it in the channel


@dataclass
class ResponseUrlPost:
    url: str
    body: Any  # the JSON as received (None if it was not JSON)
    status: int  # what the stand-in answered
    answer: str


@dataclass
class ResponseUrl:
    token: str
    channel: str
    user: str
    issued_at: float
    original: tuple[str, str] | None  # (channel, ts) of the message a click came from
    uses: int = 0


@dataclass
class Trigger:
    id: str
    user: str
    issued_at: float
    view_id: str | None = None  # set when the interaction came from a modal (views.push)
    exchanged: bool = False


@dataclass
class View:
    id: str
    user: str  # the user the view was opened for (the trigger's user)
    payload: JsonDict
    hash: str
    root_view_id: str
    previous_view_id: str | None = None
    closed: bool = False
    values: JsonDict = field(default_factory=dict)  # state.values of the last submission
    errors: JsonDict | None = None  # from a response_action "errors"

    @property
    def type(self) -> str:
        return str(self.payload.get("type"))

    @property
    def external_id(self) -> str:
        return str(self.payload.get("external_id", ""))


def new_hash() -> str:
    return f"{int(time.time())}.{secrets.token_hex(4)}"


def with_block_ids(blocks: list[JsonDict]) -> list[JsonDict]:
    """Copies of `blocks`, each with a block_id: Slack fills in a random one where none is set."""
    return [
        {**b, "block_id": b.get("block_id") or "".join(secrets.choice(_ALNUM) for _ in range(5))}
        for b in blocks
    ]


def find_button(blocks: list[JsonDict], action_id: str, value: str | None) -> tuple[str, JsonDict]:
    """(block_id, button) for `action_id`; `value` picks among same-named buttons, if given."""
    found = []
    for block in blocks:
        if block.get("type") == "actions":
            elements = block.get("elements", [])
        else:
            elements = [block.get("accessory")] if block.get("type") == "section" else []
        found += [
            (str(block.get("block_id")), e)
            for e in elements
            if isinstance(e, dict) and e.get("type") == "button" and e.get("action_id") == action_id
        ]
    if not found:
        raise LookupError(f"no button with action_id {action_id!r}")
    return next((f for f in found if value is not None and f[1].get("value") == value), found[0])


def button_action(block_id: str, button: JsonDict, value: str | None) -> JsonDict:
    action: JsonDict = {"type": "button", "action_id": button["action_id"], "block_id": block_id}
    action["text"] = button.get("text")
    value = value if value is not None else button.get("value")
    if value is not None:  # a given value that matches no button is sent as is: a forged click
        action["value"] = value
    if "style" in button:
        action["style"] = button["style"]
    action["action_ts"] = f"{time.time():.6f}"
    return action
