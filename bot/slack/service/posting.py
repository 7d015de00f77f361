"""The Slack calls behind one outbox row: where it goes (a channel, a thread, an edit of a posted
message), the pace the bot keeps under Slack's limits, and the metadata that names the row, so
that a post whose answer was lost (a kill, a timeout, an edge error after Slack acted) is found
in the channel's history and adopted instead of posted twice."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.slack.store import outbox
from bot.slack.store.models import OutboxMessage, OutboxRole, OutboxState
from bot.slack.store.parents import Parents

logger = logging.getLogger(__name__)

METADATA_EVENT = "backfill_bot_outbox"
"""The `metadata.event_type` of every post the sender makes; `event_payload.outbox_ids` names
the rows it carries (a comma-separated string: Slack's payload values are scalars)."""
# How far back a lost post is looked for: rows are posted soon after they are owed, but a
# clock between this host and Slack's may be off by some seconds.
LOOKBACK = timedelta(minutes=5)
LOOKUP_PAGES = 3  # of 200 messages: a lost post is sought among the channel's latest 600
UNREADABLE = frozenset({"channel_not_found", "not_in_channel", "thread_not_found"})

# chat.postMessage: "1 per second per channel, short bursts allowed"; chat.update is Tier 3
# ("50+ per minute"). A little under both, so clock drift never tips us over.
POST_PACE = (3.0, 0.9)
UPDATE_PACE = (20.0, 45 / 60)
# Arguments that place a new message; an edit of a posted one takes only its content.
_PLACEMENT = frozenset({"channel", "ts", "thread_ts", "reply_broadcast"})


class Pace:
    """A token bucket kept on our side, so the bot stays under Slack's limits instead of
    bouncing off them: `burst` calls at once, then `per_second`. A caller reserves its token
    before it sleeps, so callers sharing a key (lanes sharing chat.update's) queue fairly."""

    def __init__(self, burst: float, per_second: float) -> None:
        self.burst, self.per_second = burst, per_second
        self._tokens: dict[str, float] = {}
        self._at: dict[str, float] = {}

    async def take(self, key: str) -> None:
        now = asyncio.get_running_loop().time()
        refilled = self._tokens.get(key, self.burst) + (
            (now - self._at.get(key, now)) * self.per_second
        )
        tokens = min(self.burst, refilled) - 1
        self._tokens[key], self._at[key] = tokens, now
        if tokens < 0:
            await asyncio.sleep(-tokens / self.per_second)


@dataclass(frozen=True)
class Posted:
    """Where Slack put (or already had) a row's message."""

    ts: str | None
    new_post: bool = False  # a new message (chat.postMessage), not an edit
    channel: str | None = None
    """Where Slack says it posted: a DM posted to by user id (U…) is its D… conversation,
    which is what edits and the clicks on it name."""
    adopted: frozenset[int] | None = None
    """Found in the channel, posted by an earlier attempt: the rows that message carries (the
    batch may have grown since; the others are still owed)."""


@dataclass(frozen=True)
class Wait:
    """Not sent: the row waits for another (its thread's parent, its key's first post)."""

    reason: str


@dataclass(frozen=True)
class Unpostable:
    """Never to be sent: what it belongs to was never posted."""

    reason: str


Sent = Posted | Wait | Unpostable


def metadata(rows: list[OutboxMessage]) -> dict[str, Any]:
    ids = ",".join(str(row.id) for row in rows)
    return {"event_type": METADATA_EVENT, "event_payload": {"outbox_ids": ids}}


def carried_ids(message: dict[str, Any]) -> set[int]:
    """The outbox rows a message from Slack's history carries (none if it is not the bot's)."""
    found = message.get("metadata")
    if not isinstance(found, dict) or found.get("event_type") != METADATA_EVENT:
        return set()
    payload = found.get("event_payload")
    ids = payload.get("outbox_ids") if isinstance(payload, dict) else None
    if not isinstance(ids, str):
        return set()
    return {int(part) for part in ids.split(",") if part.isdigit()}


class Poster:
    """Sends one (possibly merged) row as its role and method say. SlackApiError and network
    errors pass up: the sender judges them."""

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        client: AsyncWebClient,
        parents: Parents,
        *,
        post_pace: tuple[float, float] | None,
        update_pace: tuple[float, float] | None,
    ) -> None:
        self.sessions = sessions
        self.client = client
        self.parents = parents
        self._post_pace = Pace(*post_pace) if post_pace else None
        self._update_pace = Pace(*update_pace) if update_pace else None
        self._bot_user: str | None = None
        self._lookups_refused = False

    async def send(
        self, batch: list[OutboxMessage], payload: dict[str, Any], *, in_doubt: bool
    ) -> Sent:
        row = batch[0]
        if row.edit_key is not None:
            return await self._send_keyed(batch, payload, in_doubt=in_doubt)
        return await self._deliver(batch, payload, in_doubt=in_doubt)

    async def _send_keyed(
        self, batch: list[OutboxMessage], payload: dict[str, Any], *, in_doubt: bool
    ) -> Sent:
        """A row of an edit key: the first posts the key's message, later ones edit it (once
        it is posted: while an earlier row of the key is pending, this one waits)."""
        row = batch[0]
        async with self.sessions() as session:
            posted = await outbox.key_message(session, row)
            waiting = posted is None and await outbox.first_post_pending(session, row)
        if waiting:
            return Wait(outbox.WAITING_FOR_FIRST_POST)
        if posted is None:  # this row is the first (or every earlier one gave up)
            return await self._deliver(batch, payload, in_doubt=in_doubt)
        channel, ts = posted
        await self._update(channel, ts, payload)
        return Posted(ts)

    async def _update(self, channel: str, ts: str, payload: dict[str, Any]) -> None:
        content = {k: v for k, v in payload.items() if k not in _PLACEMENT}
        if self._update_pace:
            await self._update_pace.take("chat.update")
        await self.client.chat_update(channel=channel, ts=ts, **content)

    async def _deliver(
        self, batch: list[OutboxMessage], payload: dict[str, Any], *, in_doubt: bool
    ) -> Sent:
        row = batch[0]
        args: dict[str, Any] = dict(payload)
        thread = None
        if row.role in (OutboxRole.STATUS, OutboxRole.THREAD):
            async with self.sessions() as session:
                # A request that lives in a thread posts its status message there, and its
                # replies too: Slack threads are one level deep, so not under that reply.
                thread = await self.parents.request_thread(session, row)
        if row.role == OutboxRole.STATUS and thread:
            args["thread_ts"] = thread
        if row.role in (OutboxRole.THREAD, OutboxRole.STATUS_UPDATE):
            async with self.sessions() as session:
                ts = await self.parents.parent_ts(session, row)
                state = await outbox.parent_post_state(session, row)
            if state == OutboxState.PENDING:
                return Wait(outbox.WAITING_FOR_PARENT)  # its (new) parent is on its way
            if state == OutboxState.FAILED:
                # Posted loose in the channel it would read as a message of its own.
                return Unpostable("its thread's parent message was never posted")
            if row.role == OutboxRole.STATUS_UPDATE:
                if ts is None:
                    return Unpostable("the status message was never posted")
                await self._update(row.channel, ts, args)
                return Posted(ts)
            if thread or ts:  # without any parent ever owed, a reply stands on its own
                args["thread_ts"] = thread or ts
        if row.method == "chat.update":  # a plain update names its ts in the payload
            await self._update(row.channel, str(args.pop("ts", "")), args)
            return Posted(payload.get("ts"))
        if row.method == "chat.postEphemeral":
            # Ephemeral messages are in no history: one whose answer was lost may show twice.
            reply = await self.client.chat_postEphemeral(
                channel=row.channel, user=row.user or "", **args
            )
            return Posted(reply.get("message_ts"))
        if in_doubt:
            found = await self.find_posted(batch, row.channel, args.get("thread_ts"))
            if found is not None:
                return found
        if self._post_pace:
            await self._post_pace.take(row.channel)
        args["metadata"] = metadata(batch)
        reply = await self.client.chat_postMessage(channel=row.channel, **args)
        channel = reply.get("channel")
        return Posted(
            reply.get("ts"),
            new_post=True,
            channel=channel if isinstance(channel, str) and channel else None,
        )

    async def find_posted(
        self, batch: list[OutboxMessage], channel: str, thread: str | None
    ) -> Posted | None:
        """The message an earlier attempt at this batch posted, if Slack has it: the bot's own
        message whose metadata names the batch's first row, since the row was owed."""
        if channel[:1] not in "CGD" or self._lookups_refused:
            return None  # a DM by user id has no history to read until it is opened
        oldest = f"{(batch[0].created_at - LOOKBACK).timestamp():.6f}"
        me = await self._me()
        cursor: str | None = None
        for _ in range(LOOKUP_PAGES):
            args: dict[str, Any] = {
                "channel": channel, "oldest": oldest, "limit": 200, "include_all_metadata": True,
            }  # fmt: skip
            if cursor:
                args["cursor"] = cursor
            try:
                if thread:
                    page = await self.client.conversations_replies(ts=thread, **args)
                else:
                    page = await self.client.conversations_history(**args)
            except SlackApiError as exc:
                error = _error(exc)
                if error in UNREADABLE:
                    # Not there to be found (a channel Slack makes on the first post, a public
                    # channel the bot posts to with chat:write.public but is not in): the post
                    # is tried, and gets its own answer.
                    return None
                if error != "missing_scope":
                    raise  # Slack's edge again: this attempt fails as a post would
                # Installed before the history scopes were asked for: post again rather than
                # never; a reinstall from manifest.yml grants them (doctor says so).
                logger.warning(
                    "cannot read %s's history to look for a lost post (missing scope %s): "
                    "posting again; reinstall the app from manifest.yml",
                    channel, exc.response.get("needed"),
                )  # fmt: skip
                self._lookups_refused = True
                return None
            for message in page.get("messages") or []:
                carried = carried_ids(message)
                if message.get("user") == me and batch[0].id in carried:
                    return Posted(str(message["ts"]), adopted=frozenset(carried))
            cursor = (page.get("response_metadata") or {}).get("next_cursor")
            if not cursor:
                return None
        return None

    async def _me(self) -> str | None:
        if self._bot_user is None:
            self._bot_user = str((await self.client.auth_test()).get("user_id") or "")
        return self._bot_user or None


def _error(exc: SlackApiError) -> str:
    response = getattr(exc, "response", None)
    data = getattr(response, "data", None)
    return str(data.get("error") or "") if isinstance(data, dict) else ""
