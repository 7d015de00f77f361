"""The notification hub: each event (an incident's life, an SLA miss, a backfill approved or
ended) routed once (`bot/hub/rules/routing.py`) and owed, in the transaction that made the event,
to the sinks beyond Slack (`sink_deliveries`, sent by bot/hub/service/sender.py) and to the
Slack channels and DMs subscribed to it (outbox rows, sent by the Slack sender). What the bot
owes is a row before anything is sent."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from bot.config import BotConfig
from bot.core.after_commit import log_after_commit
from bot.core.model import DagRef
from bot.core.tables import utcnow
from bot.hub.messages import documents as hub_messages
from bot.hub.rules.routing import Decision, HubEvent, Subscription, covers, route
from bot.hub.store import deliveries
from bot.hub.store import subscriptions as subscription_store
from bot.slack.store import outbox

logger = logging.getLogger(__name__)
Upstream = Callable[[DagRef], frozenset[DagRef]]


def _no_lineage(_: DagRef) -> frozenset[DagRef]:
    return frozenset()


class Hub:
    def __init__(
        self,
        config: BotConfig,
        *,
        upstream: Upstream = _no_lineage,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.config = config
        self.upstream = upstream
        """The DAGs upstream of a DAG (the lineage index's), for `--downstream` subscriptions."""
        self.clock = clock

    # --- what was routed before ------------------------------------------------------------

    async def subscriptions(self, session: AsyncSession) -> list[Subscription]:
        """Every active subscription, as routing reads them."""
        return await subscription_store.active(session)

    async def sinks_told(self, session: AsyncSession, incident_id: str, key: str) -> list[str]:
        """The sinks already owed a step of the incident (deliveries whose key starts `key`)."""
        return await deliveries.sinks_told(session, incident_id, key)

    # --- SLA misses and backfills ---------------------------------------------------------

    async def sla_missed(
        self,
        session: AsyncSession,
        event: HubEvent,
        *,
        reached: Iterable[str],
        late: Mapping[str, Any],
        reports_late: Mapping[str, Any] | None,
    ) -> int:
        """An SLA miss (`event.miss_id`): its sinks, and each subscribed channel not told
        already gets the owners' notice (`late`), or the reports' (`reports_late`) when it
        subscribed to reports only."""
        subscriptions = await subscription_store.active(session)
        decision = route(
            event, self.config, now=self.clock(), subscriptions=subscriptions, reached=reached
        )
        owed = await self.owe_sinks(session, decision, event, f"sla:{event.miss_id}")
        for channel in decision.channels:
            wants = _events_of(subscriptions, decision, channel)
            payload = late if "sla" in wants or reports_late is None else reports_late
            await outbox.enqueue(session, channel=channel, payload=payload)
            owed += 1
        self.log(session, event, decision, owed)
        return owed

    async def backfill(
        self,
        session: AsyncSession,
        event: HubEvent,
        *,
        reached: Iterable[str],
        payload_for: Callable[[Sequence[DagRef]], dict[str, Any]],
    ) -> int:
        """A backfill approved or ended (`event.backfill_request_id`): its sinks, and each
        subscribed channel not told already gets the notice teams get, naming the DAGs of the
        backfill its subscriptions match (`payload_for`)."""
        subscriptions = await subscription_store.active(session)
        decision = route(
            event, self.config, now=self.clock(), subscriptions=subscriptions, reached=reached
        )
        key = f"backfill:{event.backfill_request_id}:{event.kind.removeprefix('backfill.')}"
        owed = await self.owe_sinks(session, decision, event, key)
        for channel in decision.channels:
            mine = [
                s for s in subscriptions if s.channel == channel and s.id in decision.subscriptions
            ]
            dags = [d for d in event.dags if any(covers(s, d, self.upstream_of(d)) for s in mine)]
            await outbox.enqueue(
                session,
                channel=channel,
                payload=payload_for(dags or event.dags),
                request_id=event.backfill_request_id,
            )
            owed += 1
        self.log(session, event, decision, owed)
        return owed

    # --- shared -----------------------------------------------------------------------------

    def upstream_of(self, dag: DagRef) -> frozenset[DagRef]:
        try:
            return self.upstream(dag)
        except Exception:  # the lineage must not keep an alert from its sinks
            logger.exception("the DAGs upstream of %s could not be read", dag.dag_id)
            return frozenset()

    async def owe_sinks(
        self,
        session: AsyncSession,
        decision: Decision,
        event: HubEvent,
        key: str,
        *,
        incident_id: str | None = None,
    ) -> int:
        owed = 0
        for target in decision.sinks:
            new = await deliveries.enqueue(
                session,
                sink=target.sink.name,
                kind=target.sink.kind,
                event_key=key[:128],
                body=hub_messages.body_for(target.sink, event),
                incident_id=incident_id,
                held_until=target.held_until,
            )
            if not new and target.held_until is None:
                # routed again as more became known (the impact: now urgent): a notice held
                # for quiet hours goes now
                new = await deliveries.release(session, target.sink.name, key[:128])
            owed += new
        return owed

    def log(self, session: AsyncSession, event: HubEvent, decision: Decision, owed: int) -> None:
        if not owed:
            return
        held = [t.sink.name for t in decision.sinks if t.held_until is not None]
        log_after_commit(
            session, logger, "%s of %s routed to sinks %s%s and channels %s",
            event.kind, event.dag.dag_id, [t.sink.name for t in decision.sinks],
            f" (held for quiet hours: {held})" if held else "", list(decision.channels),
            dag_id=event.dag.dag_id, namespace=event.dag.namespace,
        )  # fmt: skip


def _events_of(subscriptions: Sequence[Subscription], decision: Decision, channel: str) -> set[str]:
    found: set[str] = set()
    for s in subscriptions:
        if s.channel == channel and s.id in decision.subscriptions:
            found |= s.events
    return found
