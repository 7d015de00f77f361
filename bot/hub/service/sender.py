"""Delivers what the bot owes sinks beyond Slack (`sink_deliveries`), like the Slack outbox's
sender: each due row is claimed with a lease (two processes never both send it), sent with
one attempt of the sink's client, then recorded: sent, retried later with backoff (or when the
sink says), or refused for good (a 4xx). Rows of one sink and incident go in order. Nothing is
dropped while a sink is down, and a sink that keeps failing is told once in the ops channel,
and once when it recovers. A row sent but not recorded (a crash, or an answer lost) is sent
again: PagerDuty folds it by dedup_key, webhook receivers dedupe on the delivery id, an
e-mail keeps its Message-ID; a Teams channel may show it twice.

Quiet hours: a held row is not sent on its own. When its time has come, each pass first puts
every held row of a sink whose time has come in ONE new row, the digest
(`bot/hub/messages/digest.py`; one held row is a digest of one, so a held notice always reads
the same), in one transaction that marks them sent into it (`deliveries.form_digest`: two
processes never both digest a row). The digest is then sent like any other row: the same
retries, and a delivery id (`<sink>/digest:<first id>-<last id>`) that stays the same."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from functools import partial

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.config import BotConfig
from bot.config.sinks import EmailSink, PagerDutySink, Sink, TeamsSink
from bot.core.after_commit import after_commit, wake_on_commit
from bot.core.metrics import Metrics
from bot.core.tables import utcnow
from bot.core.worker import Worker
from bot.hub.messages import health as health_messages
from bot.hub.messages.digest import DIGEST_KINDS, MAX_DIGEST_ROWS, digest_body
from bot.hub.sinks.base import Outcome, SinkClient
from bot.hub.sinks.email import EmailClient
from bot.hub.sinks.pagerduty import PagerDutyClient
from bot.hub.sinks.teams import TeamsClient
from bot.hub.sinks.webhook import WebhookClient
from bot.hub.store import deliveries
from bot.hub.store.models import SinkDelivery
from bot.slack.store.outbox import enqueue as owe_slack

logger = logging.getLogger(__name__)
# A claimed row is another process's to take again only after this: longer than any one send
# (an SMTP exchange is about ten steps of up to 20 s each), so a slow send is not sent twice.
LEASE_S = 300.0
REMOVED_SINK_WAIT_S = 900.0


def client_for(sink: Sink) -> SinkClient:
    if isinstance(sink, PagerDutySink):
        return PagerDutyClient(sink.url)
    if isinstance(sink, EmailSink):
        return EmailClient(sink)
    if isinstance(sink, TeamsSink):
        return TeamsClient(sink.url.get_secret_value())
    return WebhookClient(sink.url, sink.secret.get_secret_value())


def _held(row: SinkDelivery) -> bool:
    """A row that goes in a digest, never on its own (PagerDuty's are never held)."""
    return row.held_until is not None and row.kind in DIGEST_KINDS


def backoff(attempts: int, asked_s: float | None, *, base_s: float, max_s: float) -> float:
    """Seconds before the next try: what the sink asked for, else `base_s` doubling per
    attempt up to `max_s`."""
    if asked_s:
        return min(asked_s, 3600.0)
    return min(base_s * float(2 ** min(attempts, 16)), max_s)


class SinkSender:
    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        config: BotConfig,
        *,
        clients: Mapping[str, SinkClient] | None = None,
        metrics: Metrics,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.sessions, self.config = sessions, config
        self.sinks = {sink.name: sink for sink in config.sinks}
        self.clients = dict(clients) if clients is not None else {}
        self.metrics = metrics
        self.clock = clock
        self._worker = Worker("sink-sender", self.deliver_due, every_s=5.0, again_while_busy=True)
        wake_on_commit(sessions, deliveries.OWED, self.wake)  # a row written wakes the sender

    def wake(self) -> None:
        self._worker.wake()

    def stop(self) -> None:
        self._worker.stop()

    async def run_forever(self) -> None:
        try:
            try:
                async with self.sessions.begin() as session:
                    await deliveries.ensure_health(session, list(self.sinks))
            except IntegrityError:  # another process made them at the same moment
                pass
            await self._worker.run_forever()
        finally:
            await self.close()

    async def close(self) -> None:
        for client in self.clients.values():
            await client.close()

    async def drain(self, *, timeout_s: float = 30.0) -> None:
        """Deliver until nothing is due (tests and the demo); rows waiting out a backoff stay."""
        async with asyncio.timeout(timeout_s):
            while await self.deliver_due():
                pass

    def _client(self, sink: Sink) -> SinkClient:
        if sink.name not in self.clients:
            self.clients[sink.name] = client_for(sink)
        return self.clients[sink.name]

    async def deliver_due(self) -> int:
        """One pass: digests of held rows whose time has come, then each due row; returns how
        many rows were attempted and digests formed."""
        formed, singly = await self._form_digests()
        async with self.sessions() as session:
            rows = await deliveries.due(session, now=self.clock())
        attempted = 0
        failing: set[str] = set()  # one hung or failing sink must not hold up the others
        for row in rows:
            if row.sink in failing:
                continue
            if _held(row) and (row.sink, row.kind) not in singly:
                # Goes in a digest: held over since the digests above were formed, or being
                # put in another process's digest right now. The next pass.
                continue
            async with self.sessions.begin() as session:
                if not await deliveries.claim(session, row, lease_s=LEASE_S, now=self.clock()):
                    continue
            attempted += 1
            if not await self._deliver(row):
                failing.add(row.sink)
        return attempted + formed

    async def form_digests(self) -> int:
        """Put the held rows whose time has come in digests (one per sink, of up to
        MAX_DIGEST_ROWS rows), without sending them; returns how many were formed."""
        formed, _ = await self._form_digests()
        return formed

    async def _form_digests(self) -> tuple[int, set[tuple[str, str]]]:
        """The digests formed, and the (sink, kind)s whose held rows go one by one this pass
        because their digest could not be built (a bug must not hold them forever)."""
        now = self.clock()
        async with self.sessions() as session:
            held = await deliveries.held_over(session, now=now, kinds=DIGEST_KINDS)
        groups: dict[tuple[str, str], list[SinkDelivery]] = {}
        for row in held:
            groups.setdefault((row.sink, row.kind), []).append(row)
        formed, singly = 0, set()
        for (sink, kind), rows in groups.items():
            # More than a digest holds: the rest in the next pass (at once: this one returns
            # work done), so that a row following one of its incident in this digest waits
            # for it to be sent (`held_over`).
            chunk = rows[:MAX_DIGEST_ROWS]
            build = partial(digest_body, kind, at=now)
            try:
                async with self.sessions.begin() as session:
                    digest = await deliveries.form_digest(session, chunk, body=build, now=now)
            except deliveries.TakenMeanwhile as taken:
                logger.info("sink %s: held notices taken by another sender (%s)", sink, taken)
                continue
            except Exception:
                logger.exception(
                    "sink %s: no digest of %d held notices; sent one by one", sink, len(chunk)
                )
                singly.add((sink, kind))
                continue
            formed += 1
            logger.info(
                "sink %s: %d held notices in one digest (%s, delivery %d)",
                sink,
                len(chunk),
                digest.event_key,
                digest.id,
            )
        return formed, singly

    async def _deliver(self, row: SinkDelivery) -> bool:
        """Send one claimed row and record what happened; False if the sink failed (retry)."""
        sink = self.sinks.get(row.sink)
        if sink is None:  # removed from BOT_CONFIG: kept, and said, until it comes back
            outcome = Outcome(False, REMOVED_SINK_WAIT_S, f"no sink {row.sink} in BOT_CONFIG")
        else:
            body = dict(row.body)
            if isinstance(sink, PagerDutySink):
                body["routing_key"] = sink.routing_key.get_secret_value()
            try:
                # Stable across retries, restarts and a restored database: receivers dedupe on it.
                delivery_id = f"{row.sink}/{row.event_key}"
                outcome = await self._client(sink).send(body, delivery_id=delivery_id)
            except Exception as exc:  # a bug must not hold up the sink's other rows
                logger.exception("sending delivery %d to %s failed", row.id, row.sink)
                outcome = Outcome(False, 0.0, f"unexpected {type(exc).__name__}")
        now = self.clock()
        kind = sink.kind if sink is not None else row.kind
        async with self.sessions.begin() as session:
            if outcome.delivered:
                await deliveries.mark_sent(session, row.id)
                if await deliveries.delivered(session, row.sink, now=now):
                    await self._ops(session, health_messages.sink_recovered(row.sink, kind))
                self._count(session, row.sink, "delivered")
                logger.info("delivered %s to sink %s (%s)", row.event_key, row.sink, outcome.detail)
                return True
            if outcome.retry_after_s is None:
                # This notice is wrong (a 400), not the sink: kept as failed, told each time,
                # and the sink's other notices go on.
                await deliveries.mark_failed(session, row.id, error=outcome.detail)
                await self._ops(
                    session, health_messages.sink_refused(row.sink, kind, outcome.detail)
                )
                self._count(session, row.sink, "refused")
                logger.warning("sink %s refused %s: %s", row.sink, row.event_key, outcome.detail)
                return True
            hub = self.config.hub
            wait = backoff(
                row.attempts, outcome.retry_after_s, base_s=hub.retry_base_s, max_s=hub.retry_max_s
            )
            at = now + timedelta(seconds=wait)
            await deliveries.retry_later(session, row.id, at=at, error=outcome.detail)
            if await deliveries.failed_attempt(session, row.sink, error=outcome.detail, now=now):
                queued = (await deliveries.pending_by_sink(session)).get(row.sink, 0)
                notice = health_messages.sink_failing(row.sink, kind, outcome.detail, queued=queued)
                await self._ops(session, notice)
            self._count(session, row.sink, "retry")
        logger.warning(
            "sink %s: %s; %s tried again in %.0fs", row.sink, outcome.detail, row.event_key, wait
        )
        return False

    async def _ops(self, session: AsyncSession, payload: dict[str, object]) -> None:
        channel = self.config.watch.ops_channel
        if channel is None:
            logger.warning("%s (no watch.ops_channel to tell)", payload.get("text"))
            return
        await owe_slack(session, channel=channel, payload=payload)
        self.metrics.notice_owed(session, "ops_notice")

    def _count(self, session: AsyncSession, sink: str, outcome: str) -> None:
        after_commit(session, self.metrics.sink_deliveries.labels(sink, outcome).inc)
