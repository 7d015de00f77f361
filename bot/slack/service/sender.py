"""Delivers the outbox to Slack: in order per channel, pacing on Retry-After, threading replies
under a request's status message once its ts is known (or in the thread the request lives in),
and editing in place the one message that rows sharing an edit key make.

Each message is claimed (a lease on `next_attempt_at`) before it is sent, so two senders on one
database never both send it. Delivery is at-least-once: Slack has no idempotency key, so a crash
between a successful post and recording it would repost that one message when its lease ends.
"""

from __future__ import annotations

import asyncio
import logging
import random
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.core.after_commit import after_commit, wake_on_commit
from bot.core.metrics import Metrics, PostedKind
from bot.core.tables import utcnow
from bot.core.worker import Worker
from bot.slack.messages.common import not_a_member
from bot.slack.store import outbox
from bot.slack.store.models import OutboxMessage, OutboxRole, OutboxState
from bot.slack.store.parents import Parents

logger = logging.getLogger(__name__)

CHANNEL_ERRORS = frozenset({"channel_not_found", "not_in_channel", "is_archived"})
TRANSIENT_ERRORS = frozenset(
    {"ratelimited", "internal_error", "fatal_error", "service_unavailable", "request_timeout"}
)


class Pace:
    """A token bucket kept on our side, so the bot stays under Slack's limits instead of
    bouncing off them: `burst` calls at once, then `per_second`."""

    def __init__(self, burst: float, per_second: float) -> None:
        self.burst, self.per_second = burst, per_second
        self._tokens: dict[str, float] = {}
        self._at: dict[str, float] = {}

    async def take(self, key: str) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        tokens = min(
            self.burst,
            self._tokens.get(key, self.burst) + (now - self._at.get(key, now)) * self.per_second,
        )
        if tokens < 1:
            await asyncio.sleep((1 - tokens) / self.per_second)
            now, tokens = loop.time(), 1.0
        self._tokens[key], self._at[key] = tokens - 1, now


# chat.postMessage: "1 per second per channel, short bursts allowed"; chat.update is Tier 3
# ("50+ per minute"). A little under both, so clock drift never tips us over.
POST_PACE = (3.0, 0.9)
UPDATE_PACE = (20.0, 45 / 60)


MERGED_BLOCKS = 50  # Slack's limit of blocks per message


def merged(batch: list[OutboxMessage]) -> dict[str, Any]:
    """One payload for consecutive thread replies: their blocks in order, the first's text."""
    if len(batch) == 1:
        return dict(batch[0].payload)
    blocks = [b for row in batch for b in row.payload.get("blocks") or []]
    return {**batch[0].payload, "blocks": blocks}


# Arguments that place a new message; an edit of a posted one takes only its content.
_PLACEMENT = frozenset({"channel", "ts", "thread_ts", "reply_broadcast"})


@dataclass(frozen=True)
class _Outcome:
    kind: str  # "sent" | "retry" | "wait" (for another row, not an attempt) | "failed"
    ts: str | None = None
    delay_s: float = 0.0
    error: str = ""
    new_post: bool = False  # sent as a new message (chat.postMessage), not an edit
    channel: str | None = None
    """Where Slack says it posted: a DM posted to by user id (U…) is its D… conversation,
    which is what edits and the clicks on it name."""


class OutboxSender:
    """One sender per process, `run_forever()` in the background; an enqueued row wakes it once
    its transaction commits (`bot.slack.store.outbox.OWED`)."""

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        client: AsyncWebClient,
        *,
        parents: Parents,
        max_attempts: int = 12,
        poll_s: float = 1.0,
        lease_s: float = 45.0,
        post_pace: tuple[float, float] | None = POST_PACE,
        update_pace: tuple[float, float] | None = UPDATE_PACE,
        metrics: Metrics,
    ) -> None:
        self.sessions = sessions
        self.parents = parents
        self.metrics = metrics
        self.client = client
        self.max_attempts = max_attempts
        self.poll_s = poll_s
        self.lease_s = lease_s
        self._worker = Worker("outbox", self.deliver_due, every_s=poll_s)
        wake_on_commit(sessions, outbox.OWED, self.wake)  # a row written wakes the sender
        self._pass = asyncio.Lock()  # one delivery pass at a time, or a message could go twice
        self._post_pace = Pace(*post_pace) if post_pace else None
        self._update_pace = Pace(*update_pace) if update_pace else None

    def wake(self) -> None:
        self._worker.wake()

    async def run_forever(self) -> None:
        """Deliver until `stop()`: the pass under way finishes first."""
        await self._worker.run_forever()

    def stop(self) -> None:
        self._worker.stop()

    async def drain(self, *, timeout_s: float = 30.0) -> None:
        """Deliver until nothing is pending (waiting out Retry-After), or raise TimeoutError."""
        async with asyncio.timeout(timeout_s):
            while True:
                await self.deliver_due()
                async with self.sessions() as session:
                    if await outbox.pending_count(session) == 0:
                        return
                await asyncio.sleep(0.05)

    async def deliver_due(self) -> int:
        """One pass over due messages; returns how many were delivered."""
        async with self._pass:
            return await self._deliver_due()

    async def _deliver_due(self) -> int:
        async with self.sessions() as session:
            rows = await outbox.due(session, now=utcnow())
        held: set[str] = set()  # channels whose earlier message must go first
        taken: set[int] = set()  # merged into an earlier post, or superseded
        delivered = 0
        for index, row in enumerate(rows):
            if row.channel in held or row.id in taken:
                continue
            async with self.sessions.begin() as session:
                # Another sender (another process on this database) may have taken it.
                if not await outbox.claim(session, row, lease_s=self.lease_s):
                    held.add(row.channel)
                    continue
                batch = [row, *await self._followers(session, rows[index + 1 :], row)]
            taken.update(r.id for r in batch)
            if row.role == OutboxRole.STATUS_UPDATE or row.edit_key is not None:
                async with self.sessions.begin() as session:
                    if await outbox.superseded(session, row):
                        # Only the newest content of a message matters; a later row sends it.
                        await outbox.mark_sent(session, row, ts=None)
                        continue
            outcome = await self._send(row, merged(batch))
            async with self.sessions.begin() as session:
                for item in batch:
                    await self._record(session, item, outcome)
                if outcome.new_post:  # one Slack message, however many rows it carried
                    self.metrics.notice_posted(session, posted_kind(row))
            if outcome.kind == "sent":
                delivered += len(batch)
                _log_posted(row, outcome.ts)
            elif outcome.kind == "retry":
                held.add(row.channel)
        return delivered

    async def _followers(
        self, session: AsyncSession, later: list[OutboxMessage], first: OutboxMessage
    ) -> list[OutboxMessage]:
        """Due replies that can go with `first` in one post (within Slack's block limit): the
        next replies of the same thread. Stops at anything else for the channel but edits of
        the thread's parent, since the channel must keep its order. A keyed row is a message
        of its own that later rows edit: it is never merged."""
        if first.role != OutboxRole.THREAD or first.edit_key is not None:
            return []
        found: list[OutboxMessage] = []
        blocks = len(first.payload.get("blocks") or [])
        for row in later:
            if row.channel != first.channel:
                continue
            same_request = (row.request_id, row.incident_id) == (
                first.request_id,
                first.incident_id,
            )
            if same_request and row.role == OutboxRole.STATUS_UPDATE:
                continue  # an edit of the parent does not change the thread's order
            if row.role != OutboxRole.THREAD or not same_request or row.edit_key is not None:
                break
            blocks += len(row.payload.get("blocks") or [])
            if blocks > MERGED_BLOCKS:
                break
            if not await outbox.claim(session, row, lease_s=self.lease_s):
                break
            found.append(row)
        return found

    async def _pace_update(self) -> None:
        if self._update_pace:
            await self._update_pace.take("chat.update")

    async def _pace_post(self, channel: str) -> None:
        if self._post_pace:
            await self._post_pace.take(channel)

    async def _record(self, session: AsyncSession, row: OutboxMessage, outcome: _Outcome) -> None:
        if outcome.kind == "sent":
            await outbox.mark_sent(session, row, ts=outcome.ts, channel=outcome.channel)
            await self.parents.record(session, row, ts=outcome.ts, at=utcnow())
        elif outcome.kind == "wait":
            at = utcnow() + timedelta(seconds=outcome.delay_s)
            await outbox.wait(session, row, at=at, reason=outcome.error)
        elif outcome.kind == "retry" and row.attempts + 1 < self.max_attempts:
            at = utcnow() + timedelta(seconds=outcome.delay_s)
            await outbox.retry_later(session, row, at=at, error=outcome.error)
        else:
            logger.error("giving up on outbox message %s: %s", row.id, outcome.error)
            await outbox.mark_failed(session, row, error=outcome.error)
            after_commit(session, self.metrics.outbox_failed.inc)
            closed = outcome.error.split(" ")[0] in CHANNEL_ERRORS
            if row.role == OutboxRole.STATUS and row.request_id and closed:
                await self._tell_requester(session, row)

    async def _tell_requester(self, session: AsyncSession, row: OutboxMessage) -> None:
        """The bot cannot post where the request was made: say so in the requester's DM."""
        assert row.request_id is not None
        asker = await self.parents.requests.asker(session, row.request_id)
        if asker is None or asker[0] == row.channel:
            return
        requester, root_dag = asker
        payload = not_a_member(row.request_id, root_dag, row.channel)
        await outbox.enqueue(session, channel=requester, payload=payload)

    async def _thread_parent(self, row: OutboxMessage) -> tuple[str | None, bool]:
        """(ts, ready): the status message's ts, or whether to wait for it to be posted."""
        async with self.sessions() as session:
            ts = await self.parents.parent_ts(session, row)
            state = await outbox.parent_post_state(session, row)
        if state == OutboxState.PENDING:
            return None, False  # a (new) status message is on its way: it is the parent
        # Without any status message, a reply stands on its own.
        return ts, True

    async def _send(self, row: OutboxMessage, payload: dict[str, Any]) -> _Outcome:
        try:
            if row.edit_key is not None:
                return await self._send_keyed(row, payload)
            return await self._deliver(row, payload)
        except SlackApiError as exc:
            return self._classify(exc, row)
        except (aiohttp.ClientError, TimeoutError) as exc:
            return _Outcome(
                "retry", delay_s=self._backoff(row), error=f"{type(exc).__name__}: {exc}"
            )
        except Exception as exc:  # counted like any failure, so it cannot hold the channel
            logger.exception("sending outbox message %s failed", row.id)
            return _Outcome(
                "retry", delay_s=self._backoff(row), error=f"{type(exc).__name__}: {exc}"[:400]
            )

    async def _send_keyed(self, row: OutboxMessage, payload: dict[str, Any]) -> _Outcome:
        """A row of an edit key: the first posts the key's message, later ones edit it (once
        it is posted: while an earlier row of the key is pending, this one waits)."""
        async with self.sessions() as session:
            posted = await outbox.key_message(session, row)
            waiting = posted is None and await outbox.first_post_pending(session, row)
        if waiting:
            return _Outcome("wait", delay_s=1.0, error=outbox.WAITING_FOR_FIRST_POST)
        if posted is None:  # this row is the first (or every earlier one gave up)
            return await self._deliver(row, payload)
        channel, ts = posted
        content = {k: v for k, v in payload.items() if k not in _PLACEMENT}
        await self._pace_update()
        await self.client.chat_update(channel=channel, ts=ts, **content)
        return _Outcome("sent", ts=ts)

    async def _deliver(self, row: OutboxMessage, payload: dict[str, Any]) -> _Outcome:
        """Send one row as its role and method say (SlackApiError and network errors pass up)."""
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
            ts, ready = await self._thread_parent(row)
            if not ready:
                return _Outcome("wait", delay_s=1.0, error=outbox.WAITING_FOR_PARENT)
            if row.role == OutboxRole.STATUS_UPDATE:
                if ts is None:
                    return _Outcome("failed", error="the status message was never posted")
                await self._pace_update()
                await self.client.chat_update(channel=row.channel, ts=ts, **args)
                return _Outcome("sent", ts=ts)
            if thread or ts:
                args["thread_ts"] = thread or ts
        if row.method == "chat.update":  # a plain update names its ts in the payload
            await self._pace_update()
            await self.client.chat_update(channel=row.channel, **args)
            return _Outcome("sent", ts=args.get("ts"))
        if row.method == "chat.postEphemeral":
            reply = await self.client.chat_postEphemeral(
                channel=row.channel, user=row.user or "", **args
            )
            return _Outcome("sent", ts=reply.get("message_ts"))
        await self._pace_post(row.channel)
        reply = await self.client.chat_postMessage(channel=row.channel, **args)
        channel = reply.get("channel")
        return _Outcome(
            "sent",
            ts=reply.get("ts"),
            new_post=True,
            channel=channel if isinstance(channel, str) and channel else None,
        )

    def _classify(self, exc: SlackApiError, row: OutboxMessage) -> _Outcome:
        response = exc.response
        error = str(response.get("error", "")) if response is not None else str(exc)
        if response is not None and response.status_code == 429:
            retry_after = float(
                response.headers.get("Retry-After", response.headers.get("retry-after", 1))
            )
            return _Outcome("retry", delay_s=max(retry_after, 1.0), error="ratelimited")
        if error in TRANSIENT_ERRORS:
            return _Outcome("retry", delay_s=self._backoff(row), error=error)
        detail = response.get("response_metadata") if response is not None else None
        return _Outcome("failed", error=f"{error} {detail or ''}".strip())

    @staticmethod
    def _backoff(row: OutboxMessage) -> float:
        return float(min(60.0, 2**row.attempts) * (0.5 + random.random() / 2))


def _log_posted(row: OutboxMessage, ts: str | None) -> None:
    """One line when an incident's alert or a backfill's status message is first posted: where
    to find it in Slack. Edits and replies are not logged (a busy backfill makes many)."""
    if row.role != OutboxRole.STATUS or row.method != "chat.postMessage":
        return
    ids = {"channel": row.channel, "ts": ts, "outbox_id": row.id}
    if row.incident_id is not None:
        logger.info(
            "posted the alert of incident %s in %s (ts %s)", row.incident_id, row.channel, ts,
            extra={"incident_id": row.incident_id, **ids},
        )  # fmt: skip
    elif row.request_id is not None:
        logger.info(
            "posted the status message of backfill %s in %s (ts %s)", row.request_id,
            row.channel, ts, extra={"request_id": row.request_id, **ids},
        )  # fmt: skip


def posted_kind(row: OutboxMessage) -> PostedKind:
    """The kind of message an outbox row is, from its role and parent (the outbox keeps no
    kind of its own)."""
    if row.role == OutboxRole.PLAIN:
        # A plain message with a request is a team's notice of a backfill it is part of.
        return "team_notice" if row.request_id is not None else "notice"
    if row.incident_id is not None:
        return "incident_alert" if row.role == OutboxRole.STATUS else "incident_reply"
    # A parented row without an incident is a backfill's, even if the request was since
    # deleted (its request_id is then NULL): incidents are never deleted.
    return "backfill"
