"""Delivers the outbox to Slack: in order within a channel, channels independently of each other
(a lane each, a bounded number at once, so one slow or hung call delays only its own channel),
pacing on Retry-After, threading replies under their parent once its ts is known, and editing in
place the one message that rows sharing an edit key make.

Nothing lost: only Slack's own final errors end a message (`bot.slack.rules.delivery`); every
other failure is tried again until it lands, and one given up on is counted and told to the ops
channel. Nothing doubled: a row is claimed for a short lease that covers its send; every post
names its rows in Slack message metadata, and a row that may have reached Slack already (its
sender died, or the answer was lost) is first looked for in the channel and adopted if found.
"""

from __future__ import annotations

import asyncio
import logging
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
from bot.slack.messages.ops import undeliverable
from bot.slack.rules.delivery import CHANNEL_ERRORS, Attempt, Verdict, VerdictKind, judge
from bot.slack.service.posting import POST_PACE, UPDATE_PACE, Posted, Poster, Sent, Wait
from bot.slack.store import outbox
from bot.slack.store.models import OutboxMessage, OutboxRole
from bot.slack.store.parents import Parents

__all__ = ["MERGED_BLOCKS", "POST_PACE", "UPDATE_PACE", "OutboxSender", "merged", "posted_kind"]

logger = logging.getLogger(__name__)

MERGED_BLOCKS = 50  # Slack's limit of blocks per message
LANES = 8  # channels delivered at once


def merged(batch: list[OutboxMessage]) -> dict[str, Any]:
    """One payload for consecutive thread replies: their blocks in order, the first's text."""
    if len(batch) == 1:
        return dict(batch[0].payload)
    blocks = [b for row in batch for b in row.payload.get("blocks") or []]
    return {**batch[0].payload, "blocks": blocks}


class OutboxSender:
    """One sender per process, `run_forever()` in the background; an enqueued row wakes it once
    its transaction commits (`bot.slack.store.outbox.OWED`)."""

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        client: AsyncWebClient,
        *,
        parents: Parents,
        metrics: Metrics,
        poll_s: float = 1.0,
        lease_s: float = 15.0,
        lanes: int = LANES,
        post_pace: tuple[float, float] | None = POST_PACE,
        update_pace: tuple[float, float] | None = UPDATE_PACE,
        ops_channel: str | None = None,
    ) -> None:
        """`lease_s` must outlast one call (the client's timeout) plus its pacing: a sender
        that dies holding a row keeps its channel waiting that long."""
        self.sessions = sessions
        self.parents = parents
        self.metrics = metrics
        self.client = client
        self.poll_s = poll_s
        self.lease_s = lease_s
        self.ops_channel = ops_channel
        self.poster = Poster(
            sessions, client, parents, post_pace=post_pace, update_pace=update_pace
        )
        self._worker = Worker("outbox", self._dispatch, every_s=poll_s)
        wake_on_commit(sessions, outbox.OWED, self.wake)  # a row written wakes the sender
        self._dispatching = asyncio.Lock()  # one look at the due rows at a time
        self._lanes: dict[str, asyncio.Task[int]] = {}
        self._lane_slots = asyncio.Semaphore(lanes)

    def wake(self) -> None:
        self._worker.wake()

    async def run_forever(self) -> None:
        """Deliver until `stop()`: the sends under way finish first."""
        await self._worker.run_forever()
        await self._join()

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
        """One pass over due messages, waiting for every lane; returns how many rows the
        lanes it started delivered."""
        started = await self._start_lanes()
        await self._join()
        return sum(task.result() for task in started if not task.cancelled())

    async def _dispatch(self) -> None:
        """The background loop's pass: start a lane for each channel with due rows that has
        none yet, without waiting for any (a hung call must not keep other channels waiting)."""
        await self._start_lanes()

    async def _join(self) -> None:
        while self._lanes:
            await asyncio.wait(list(self._lanes.values()))

    async def _start_lanes(self) -> list[asyncio.Task[int]]:
        async with self._dispatching:
            async with self.sessions() as session:
                rows = await outbox.due(session, now=utcnow())
            by_channel: dict[str, list[OutboxMessage]] = {}
            for row in rows:
                if row.channel not in self._lanes:
                    by_channel.setdefault(row.channel, []).append(row)
            started = []
            for channel, queued in by_channel.items():
                task = asyncio.create_task(self._lane(channel, queued), name=f"outbox {channel}")
                self._lanes[channel] = task
                started.append(task)
            return started

    async def _lane(self, channel: str, rows: list[OutboxMessage]) -> int:
        try:
            async with self._lane_slots:
                return await self._deliver_channel(rows)
        except Exception:  # a lane that raises must not lose the others: its rows stay due
            logger.exception("delivering to %s failed; tried again on the next pass", channel)
            return 0
        finally:
            del self._lanes[channel]
            self.wake()  # the channel may have more due now

    async def _deliver_channel(self, rows: list[OutboxMessage]) -> int:
        """Deliver one channel's due rows in order; stop at one that must be tried again
        later (the rest of the channel waits for it)."""
        taken: set[int] = set()  # merged into an earlier post, or superseded
        delivered = 0
        for index, row in enumerate(rows):
            if row.id in taken:
                continue
            doubt = row.in_doubt  # as read: the claim below marks it in doubt until recorded
            async with self.sessions.begin() as session:
                # Another sender (another process on this database) may have taken it.
                if not await outbox.claim(session, row, lease_s=self.lease_s):
                    return delivered
                batch = [row, *await self._followers(session, rows[index + 1 :], row)]
            taken.update(r.id for r in batch)
            if row.role == OutboxRole.STATUS_UPDATE or row.edit_key is not None:
                async with self.sessions.begin() as session:
                    if await outbox.superseded(session, row):
                        # Only the newest content of a message matters; a later row sends it.
                        await outbox.mark_sent(session, row, ts=None)
                        continue
            doubt = doubt or any(r.in_doubt for r in batch[1:])
            sent, verdict = await self._send(batch, doubt)
            async with self.sessions.begin() as session:
                delivered += await self._record(session, batch, sent, verdict, doubt)
            if verdict is not None and verdict.kind == VerdictKind.RETRY:
                return delivered
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

    async def _send(
        self, batch: list[OutboxMessage], in_doubt: bool
    ) -> tuple[Sent | None, Verdict | None]:
        """What became of the batch: where it went (or why it waits), or the verdict on a
        failure."""
        row = batch[0]
        age = utcnow() - row.created_at
        try:
            return await self.poster.send(batch, merged(batch), in_doubt=in_doubt), None
        except SlackApiError as exc:
            attempt = _attempt(exc)
        except (aiohttp.ClientError, TimeoutError) as exc:
            attempt = Attempt(None, detail=f"{type(exc).__name__}: {exc}"[:400])
        except Exception as exc:  # counted like any failure, so it cannot hold the channel
            logger.exception("sending outbox message %s failed", row.id)
            attempt = Attempt(None, detail=f"{type(exc).__name__}: {exc}"[:400])
        return None, judge(attempt, attempts=row.attempts, age=age)

    async def _record(
        self,
        session: AsyncSession,
        batch: list[OutboxMessage],
        sent: Sent | None,
        verdict: Verdict | None,
        doubt: bool,
    ) -> int:
        """Record what became of each row of the batch; returns how many were delivered."""
        if isinstance(sent, Posted):
            carried = sent.adopted if sent.adopted is not None else {r.id for r in batch}
            for item in batch:
                if item.id in carried:
                    await outbox.mark_sent(session, item, ts=sent.ts, channel=sent.channel)
                    await self.parents.record(session, item, ts=sent.ts, at=utcnow())
                else:  # not in the message found: still owed, and known not to be posted
                    await outbox.release(session, item)
            if sent.new_post:  # one Slack message, however many rows it carried
                self.metrics.notice_posted(session, posted_kind(batch[0]))
            if sent.adopted is not None:
                after_commit(session, self.metrics.outbox_adopted.inc)
                logger.info("outbox message %s was already in Slack (ts %s)", batch[0].id, sent.ts)
            else:
                _log_posted(batch[0], sent.ts)
            return sum(1 for item in batch if item.id in carried)
        if isinstance(sent, Wait):
            at = utcnow() + timedelta(seconds=1.0)
            for item in batch:
                await outbox.wait(session, item, at=at, reason=sent.reason, in_doubt=doubt)
            return 0
        if sent is not None:  # Unpostable
            verdict = Verdict(VerdictKind.FAILED, sent.reason)
        assert verdict is not None
        for item in batch:
            if verdict.kind == VerdictKind.RETRY:
                at = utcnow() + timedelta(seconds=verdict.delay_s)
                await outbox.retry_later(
                    session, item, at=at, error=verdict.error,
                    in_doubt=doubt or verdict.in_doubt, counted=verdict.counted,
                )  # fmt: skip
            else:
                await self._give_up(session, item, verdict.error)
        if verdict.kind == VerdictKind.RETRY:
            logger.warning(
                "Slack did not take outbox message %s (%s); trying again in %.0f s",
                batch[0].id, verdict.error, verdict.delay_s,
            )  # fmt: skip
        return 0

    async def _give_up(self, session: AsyncSession, row: OutboxMessage, error: str) -> None:
        """Never silently: logged, counted, and told in the ops channel (unless that is where
        it could not go), and a requester whose channel is closed to the bot is told in a DM."""
        logger.error("giving up on outbox message %s to %s: %s", row.id, row.channel, error)
        await outbox.mark_failed(session, row, error=error)
        after_commit(session, self.metrics.outbox_failed.inc)
        if self.ops_channel and row.channel != self.ops_channel:
            payload = undeliverable(row.channel, posted_kind(row), error, row.created_at)
            await outbox.enqueue(session, channel=self.ops_channel, payload=payload)
        closed = error.split(" ")[0] in CHANNEL_ERRORS
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


def _attempt(exc: SlackApiError) -> Attempt:
    """What a SlackApiError says, whatever answered: Slack's JSON, an edge's HTML page (no
    body the SDK can read), or a body the SDK could not parse (then `response` is aiohttp's)."""
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", None) or getattr(response, "status", None)
    data = getattr(response, "data", None)
    error = str(data.get("error") or "") if isinstance(data, dict) else ""
    headers = getattr(response, "headers", None) or {}
    retry_after: float | None = None
    try:
        raw = headers.get("Retry-After") or headers.get("retry-after")
        retry_after = float(raw) if raw is not None else None
    except (TypeError, ValueError):
        retry_after = None
    detail = error or f"HTTP {status}"
    if error and isinstance(data, dict) and data.get("response_metadata"):
        detail = f"{error} {data['response_metadata']}"
    return Attempt(
        int(status) if isinstance(status, int) else None,
        error=error,
        retry_after_s=retry_after,
        detail=detail[:400],
    )


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
