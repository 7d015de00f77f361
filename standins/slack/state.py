"""The in-memory workspace behind the Slack stand-in: channels, messages, threads, views, users.

This module records facts and renders them in the Web API's shapes; HTTP, validation and rate
limits live in `server`, `api` and `limits`. Time comes from two places on purpose: message `ts`
values follow the wall clock (Slack's are Unix times), while trigger and response_url expiry use
the injectable monotonic clock so tests can step past Slack's 3-second and 30-minute windows.
"""

from __future__ import annotations

import secrets
import string
import time
from collections.abc import Callable
from typing import Any

from standins.slack.faults import BadDay, FaultPlan
from standins.slack.feed import ChangeFeed
from standins.slack.metadata import metadata_json
from standins.slack.records import (
    ApiCall,
    Channel,
    Ephemeral,
    JsonDict,
    Message,
    ResponseUrl,
    ResponseUrlPost,
    SlackError,
    Trigger,
    User,
    View,
    button_action,
    find_button,
    new_hash,
    with_block_ids,
)

__all__ = [
    "BOT_USER_ID",
    "DEFAULT_SCOPES",
    "ApiCall",
    "Channel",
    "Ephemeral",
    "JsonDict",
    "Message",
    "ResponseUrl",
    "ResponseUrlPost",
    "SlackError",
    "SlackState",
    "Trigger",
    "User",
    "View",
    "button_action",
    "find_button",
    "with_block_ids",
]

TRIGGER_TTL = 3.0  # seconds a trigger_id may be exchanged for a view
RESPONSE_URL_TTL = 30 * 60.0
RESPONSE_URL_USES = 5
MAX_VIEW_STACK = 3  # a root modal plus two pushed views
BOT_USER_ID = "U0BOT00001"
# The bot token's scopes when a test grants nothing else: the bot scopes of manifest.yml, with
# channels:read and groups:read for `backfill-bot doctor`'s look at team channels and the history
# scopes the sender reads its own posts back with (conversations.history and .replies).
DEFAULT_SCOPES = frozenset(
    {"commands", "chat:write", "chat:write.public", "usergroups:read", "users:read"}
    | {"channels:read", "groups:read", "channels:history", "groups:history", "im:history"}
)
_ALNUM = string.ascii_uppercase + string.digits


class SlackState:
    """One workspace. Every public method is safe to call from tests directly (no HTTP)."""

    team_id = "T0TEAM0001"
    team_domain = "standin"
    team_name = "Stand-in Workspace"
    app_id = "A0STANDIN1"
    bot_id = "B0BOT00001"
    bot_user_id = BOT_USER_ID
    verification_token = "standin-verification-token"  # deprecated by Slack, still sent

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.feed = ChangeFeed()  # what changed, for the browser page's live updates
        self.channels: dict[str, Channel] = {}
        self.ephemerals: list[Ephemeral] = []
        self.response_posts: list[ResponseUrlPost] = []
        self.views: dict[str, View] = {}
        self.home: dict[str, View] = {}
        self.users: dict[str, User] = {}
        self.usergroups: dict[str, list[str]] = {}  # S... id -> member user ids
        self.usergroup_handles: dict[str, str] = {}  # S... id -> handle, for mentions
        self.triggers: dict[str, Trigger] = {}
        self.response_urls: dict[str, ResponseUrl] = {}
        self.calls: list[ApiCall] = []
        self.scopes = set(DEFAULT_SCOPES)  # the bot token's; a test may take one away
        self.faults = FaultPlan()  # a bad day at Slack's edge, when a test asks for one
        self._stacks: dict[str, list[str]] = {}  # root view id -> open view ids, bottom first
        self._last_ts = 0
        self.add_user(BOT_USER_ID, "backfill-bot", real_name="Backfill Bot", is_bot=True)
        for user_id, name, real in (
            ("U0REQUEST1", "riley", "Riley Requester"),
            ("U0APPROVE1", "alex", "Alex Approver"),
            ("U0APPROVE2", "sam", "Sam Second"),
            ("U0OUTSIDE1", "jordan", "Jordan Outsider"),
        ):
            self.add_user(user_id, name, real_name=real)
        self.add_channel("C0BACKFILL", "backfill")

    # -- seeding ------------------------------------------------------------------------------

    def fail_every(self, n: int) -> None:
        """Answer every `n`-th chat.* call with a 429 or a 500 (alternately), before doing
        anything: an unreliable Slack, to prove retries deliver each message exactly once."""
        self.faults.fail_every(n)

    def bad_day(self, day: BadDay | None) -> None:
        """Misbehave as `day` says (seeded 429s, 5xx, resets, hangs, lost answers); None stops."""
        self.faults.bad_day(day)

    def add_user(
        self,
        user_id: str,
        name: str,
        *,
        real_name: str | None = None,
        is_bot: bool = False,
        title: str = "",
    ) -> User:
        user = User(user_id, name, real_name or name, self.team_id, is_bot, title)
        self.users[user_id] = user
        self.feed.publish("channel")
        return user

    def add_usergroup(self, group_id: str, members: list[str], *, handle: str = "") -> None:
        for user_id in members:
            self.acting_user(user_id)
        self.usergroups[group_id] = list(members)
        if handle:
            self.usergroup_handles[group_id] = handle

    def add_channel(
        self,
        channel_id: str,
        name: str | None = None,
        *,
        private: bool | None = None,
        member: bool = True,
        archived: bool = False,
    ) -> Channel:
        """The channel `channel_id`, created if new (a G… id is private unless `private` says
        otherwise; the bot is a member unless `member` is false); an existing one is kept."""
        channel = self.channels.get(channel_id)
        if channel is None:
            is_private = channel_id.startswith("G") if private is None else private
            channel = Channel(channel_id, name or channel_id.lower(), is_private=is_private)
            channel.is_member, channel.is_archived = member, archived
            self.channels[channel_id] = channel
            self.feed.publish("channel", channel=channel_id)
        return channel

    # -- reading ------------------------------------------------------------------------------

    def messages(self, channel: str) -> list[Message]:
        """Top-level messages (and thread broadcasts) of `channel`, oldest first."""
        return list(self.channels[channel].messages) if channel in self.channels else []

    def thread(self, channel: str, ts: str) -> list[Message]:
        """The replies under the parent message `ts`, oldest first (the parent not included)."""
        found = self.channels.get(channel)
        return list(found.threads.get(ts, [])) if found else []

    def find_message(self, channel: str, ts: str) -> Message:
        """The message `ts` in `channel`, top level or in a thread; LookupError if absent."""
        found = self.channels.get(channel)
        if found is not None:
            for message in found.messages:
                if message.ts == ts:
                    return message
            for replies in found.threads.values():
                for message in replies:
                    if message.ts == ts:
                        return message
        raise LookupError(f"no message {ts} in channel {channel}")

    def message_json(self, message: Message, *, all_metadata: bool = True) -> JsonDict:
        """The message as the Web API renders it, with thread metadata on parents; its Slack
        `metadata` whole, or only its event_type unless `all_metadata` (standins.slack.metadata)."""
        body: JsonDict = {"type": "message", "user": message.user, "text": message.text}
        body["ts"] = message.ts
        if message.blocks:
            body["blocks"] = message.blocks
        if message.metadata is not None:
            body["metadata"] = metadata_json(message.metadata, all_metadata=all_metadata)
        if message.bot_id is not None:
            body.update(bot_id=message.bot_id, app_id=self.app_id, team=self.team_id)
        for key in ("subtype", "edited", "attachments"):
            if getattr(message, key) is not None:
                body[key] = getattr(message, key)
        replies = self.channels[message.channel].threads.get(message.ts, [])
        if message.thread_ts is not None:
            body["thread_ts"] = message.thread_ts
            body["parent_user_id"] = self.find_message(message.channel, message.thread_ts).user
        elif replies:
            body.update(
                thread_ts=message.ts,
                reply_count=len(replies),
                reply_users=sorted({r.user for r in replies}),
                reply_users_count=len({r.user for r in replies}),
                latest_reply=replies[-1].ts,
            )
        return body

    # -- writing ------------------------------------------------------------------------------

    def next_ts(self) -> str:
        """A Slack `ts` ("1700000000.000100"): wall-clock microseconds, strictly increasing."""
        micros = max(int(time.time() * 1_000_000), self._last_ts + 1)
        self._last_ts = micros
        return f"{micros // 1_000_000}.{micros % 1_000_000:06d}"

    def post(
        self,
        channel: str,
        *,
        text: str = "",
        blocks: list[JsonDict] | None = None,
        user: str = BOT_USER_ID,
        thread_ts: str | None = None,
        broadcast: bool = False,
        attachments: list[Any] | None = None,
        metadata: JsonDict | None = None,
    ) -> Message:
        """Store a message (a bot's unless `user` is a person) and return it."""
        target = self.add_channel(channel)
        parent = None
        if thread_ts is not None:
            # A reply to a reply joins the parent's thread; an unknown thread_ts is ignored and
            # the message lands in the channel, as Slack does.
            try:
                found = self.find_message(channel, thread_ts)
                parent = found.thread_ts or found.ts
            except LookupError:
                parent = None
        message = Message(
            channel=channel,
            ts=self.next_ts(),
            user=user,
            text=text,
            blocks=with_block_ids(blocks or []),
            bot_id=self.bot_id if user == BOT_USER_ID else None,
            thread_ts=parent,
            attachments=attachments,
            metadata=metadata,
        )
        if parent is None:
            target.messages.append(message)
        else:
            target.threads.setdefault(parent, []).append(message)
            if broadcast:
                message.subtype = "thread_broadcast"
                target.messages.append(message)
        self.feed.publish("message", channel=channel, ts=message.ts, thread_ts=parent)
        return message

    def add_ephemeral(self, ephemeral: Ephemeral) -> Ephemeral:
        """Show `ephemeral` to its user now."""
        ephemeral.ts = ephemeral.ts or self.next_ts()
        self.ephemerals.append(ephemeral)
        self.feed.publish(
            "ephemeral",
            channel=ephemeral.channel,
            user=ephemeral.user,
            thread_ts=ephemeral.thread_ts,
        )
        return ephemeral

    def update(self, message: Message, *, text: str | None, blocks: list[JsonDict] | None) -> None:
        if text is not None:
            message.text = text
        if blocks is not None:
            message.blocks = with_block_ids(blocks)
        message.edited = {"user": self.bot_user_id, "ts": self.next_ts()}
        self._message_changed(message)

    def _message_changed(self, message: Message) -> None:
        self.feed.publish(
            "message", channel=message.channel, ts=message.ts, thread_ts=message.thread_ts
        )

    def delete(self, message: Message) -> None:
        channel = self.channels[message.channel]
        if channel.threads.get(message.ts):  # Slack keeps a deleted parent as a tombstone
            message.text, message.blocks, message.subtype = (
                "This message was deleted.",
                [],
                "tombstone",
            )
            self._message_changed(message)
            return
        channel.messages = [m for m in channel.messages if m is not message]
        for parent, replies in channel.threads.items():
            channel.threads[parent] = [m for m in replies if m is not message]
        self._message_changed(message)

    # -- triggers and response_urls -----------------------------------------------------------

    def issue_trigger(self, user: str, *, view_id: str | None = None) -> str:
        digits = "".join(secrets.choice(string.digits) for _ in range(13))
        trigger_id = f"{len(self.triggers) + 1}.{digits}.{secrets.token_hex(16)}"
        self.triggers[trigger_id] = Trigger(trigger_id, user, self.clock(), view_id)
        return trigger_id

    def exchange_trigger(self, trigger_id: str) -> Trigger:
        """Spend a trigger on a view, by Slack's rules: once, and within 3 seconds."""
        trigger = self.triggers.get(trigger_id)
        if trigger is None:
            raise SlackError("invalid_trigger_id")
        if self.clock() - trigger.issued_at > TRIGGER_TTL:
            raise SlackError("expired_trigger_id")
        if trigger.exchanged:
            raise SlackError("exchanged_trigger_id")
        trigger.exchanged = True
        return trigger

    def issue_response_url(
        self, base_url: str, channel: str, user: str, original: tuple[str, str] | None = None
    ) -> str:
        token = secrets.token_urlsafe(18)
        self.response_urls[token] = ResponseUrl(token, channel, user, self.clock(), original)
        return f"{base_url}/response_url/{token}"

    # -- views --------------------------------------------------------------------------------

    def _new_view(self, user: str, payload: JsonDict, root: str | None, prev: str | None) -> View:
        external_id = payload.get("external_id")
        if external_id and any(
            v.external_id == external_id and not v.closed for v in self.views.values()
        ):
            raise SlackError("duplicate_external_id")
        view_id = "V" + "".join(secrets.choice(_ALNUM) for _ in range(10))
        view = View(view_id, user, dict(payload), new_hash(), root or view_id, prev)
        view.payload["blocks"] = with_block_ids(view.payload.get("blocks", []))
        return view

    def open_view(self, user: str, payload: JsonDict) -> View:
        view = self._new_view(user, payload, None, None)
        self.views[view.id] = view
        self._stacks[view.id] = [view.id]
        self.feed.publish("view", user=user)
        return view

    def push_view(self, below_id: str | None, user: str, payload: JsonDict) -> View:
        """Push onto the stack of modal `below_id` (views.push needs a trigger from a modal)."""
        below = self.views.get(below_id or "")
        if below is None or below.closed:
            raise SlackError("not_found")
        stack = self._stacks[below.root_view_id]
        if len(stack) >= MAX_VIEW_STACK:
            raise SlackError("push_limit_reached")
        view = self._new_view(user, payload, below.root_view_id, stack[-1])
        self.views[view.id] = view
        stack.append(view.id)
        self.feed.publish("view", user=user)
        return view

    def open_stack(self, user: str) -> list[View]:
        """`user`'s open modals, bottom first (the last one opened, if several)."""
        stacks = [
            [self.views[v] for v in stack]
            for stack in self._stacks.values()
            if stack and self.views[stack[0]].user == user
        ]
        return stacks[-1] if stacks else []

    def find_view(self, view_id: str | None, external_id: str | None) -> View:
        for view in [*self.views.values(), *self.home.values()]:
            if (view.id == view_id or (external_id and view.external_id == external_id)) and (
                not view.closed
            ):
                return view
        raise SlackError("not_found")

    def update_view(self, view: View, payload: JsonDict, expected_hash: str | None) -> View:
        if expected_hash and expected_hash != view.hash:
            raise SlackError("hash_conflict")
        external_id = view.payload.get("external_id")  # an update without one keeps it
        view.payload = {**payload, "blocks": with_block_ids(payload.get("blocks", []))}
        if external_id and "external_id" not in payload:
            view.payload["external_id"] = external_id
        view.hash, view.errors = new_hash(), None
        self.feed.publish("home" if self.home.get(view.user) is view else "view", user=view.user)
        return view

    def publish_home(self, user: str, payload: JsonDict, expected_hash: str | None) -> View:
        current = self.home.get(user)
        if current is not None:
            return self.update_view(current, payload, expected_hash)
        view = self._new_view(user, payload, None, None)
        self.home[user] = view
        self.feed.publish("home", user=user)
        return view

    def close_view(self, view: View, *, whole_stack: bool = False) -> None:
        """Close `view` (the user submitted or cancelled it); pushed views above it close too."""
        stack = self._stacks.get(view.root_view_id, [])
        cut = 0 if whole_stack or view.id not in stack else stack.index(view.id)
        for view_id in stack[cut:]:
            self.views[view_id].closed = True
        del stack[cut:]
        self.feed.publish("view", user=view.user)

    def view_json(self, view: View) -> JsonDict:
        """The view as views.* methods and interaction payloads render it."""
        payload = view.payload
        return {
            "id": view.id,
            "team_id": self.team_id,
            "type": view.type,
            "blocks": payload.get("blocks", []),
            "private_metadata": payload.get("private_metadata", ""),
            "callback_id": payload.get("callback_id", ""),
            "state": {"values": view.values},
            "hash": view.hash,
            "title": payload.get("title"),
            "clear_on_close": bool(payload.get("clear_on_close", False)),
            "notify_on_close": bool(payload.get("notify_on_close", False)),
            "close": payload.get("close"),
            "submit": payload.get("submit"),
            "previous_view_id": view.previous_view_id,
            "root_view_id": view.root_view_id,
            "app_id": self.app_id,
            "external_id": view.external_id,
            "app_installed_team_id": self.team_id,
            "bot_id": self.bot_id,
        }

    # -- what Slack sends as a user acts ------------------------------------------------------

    def acting_user(self, user_id: str) -> User:
        """Someone who types or clicks is a member: an unknown id joins on first use."""
        return self.users.get(user_id) or self.add_user(user_id, user_id.lower())

    def user_json(self, user_id: str) -> JsonDict:
        name = self.acting_user(user_id).name
        return {"id": user_id, "username": name, "name": name, "team_id": self.team_id}

    def channel_name(self, channel_id: str) -> str:
        if channel_id in self.channels:
            return self.channels[channel_id].name
        return {"D": "directmessage", "G": "privategroup"}.get(channel_id[:1], channel_id.lower())

    def interaction(self, kind: str, user_id: str, trigger_id: str) -> JsonDict:
        """The fields every interaction payload carries."""
        return {
            "type": kind,
            "team": {"id": self.team_id, "domain": self.team_domain},
            "user": self.user_json(user_id),
            "api_app_id": self.app_id,
            "token": self.verification_token,
            "trigger_id": trigger_id,
            "is_enterprise_install": False,
            "enterprise": None,
        }
