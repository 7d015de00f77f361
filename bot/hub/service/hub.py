"""The notification hub: each event (an incident's life, an SLA miss, a backfill approved or
ended) routed once (`bot/hub/rules.py`) and owed, in the transaction that made the event,
to the sinks beyond Slack (`sink_deliveries`, sent by bot/hub/service/sender.py) and to the
Slack channels and DMs subscribed to it (outbox rows, sent by the Slack sender). What the bot
owes is a row before anything is sent."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from bot.config import BotConfig
from bot.core.after_commit import after_commit, log_after_commit
from bot.core.model import DagRef
from bot.core.tables import utcnow
from bot.hub.messages import documents as hub_messages
from bot.hub.rules import Decision, HubEvent, HubKind, Subscription, covers, route, severity_of
from bot.hub.store import deliveries
from bot.hub.store import subscriptions as subscription_store
from bot.incidents.messages import alerts as watch_messages
from bot.incidents.messages.subscribers import FailureNotice, NoticeState, failure_notice
from bot.incidents.store import incidents as store
from bot.incidents.store.models import Incident
from bot.slack.store import outbox
from bot.slack.store.models import OutboxMessage

logger = logging.getLogger(__name__)
SUBSCRIBED = "sub:"  # the edit keys of a subscribed channel's one message about an outage
ESCALATED = "esc:"  # … and of an escalation's post
_STATES: dict[str, NoticeState] = {
    "failure.opened": "failed",
    "failure.acknowledged": "acknowledged",
    "failure.resolved": "resolved",
    "failure.escalated": "escalated",
}
Upstream = Callable[[DagRef], frozenset[DagRef]]


def _no_lineage(_: DagRef) -> frozenset[DagRef]:
    return frozenset()


class Hub:
    def __init__(
        self,
        config: BotConfig,
        *,
        wake_sender: Callable[[], None] = lambda: None,
        wake_slack: Callable[[], None] = lambda: None,
        upstream: Upstream = _no_lineage,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.config = config
        self.wake_sender, self.wake_slack = wake_sender, wake_slack
        self.upstream = upstream
        """The DAGs upstream of a DAG (the lineage index's), for `--downstream` subscriptions."""
        self.clock = clock

    # --- incidents ------------------------------------------------------------------------

    async def incident(self, session: AsyncSession, incident: Incident, kind: HubKind) -> int:
        """Route this step of `incident` (a root incident: failures that joined one upstream
        are part of its outage) and owe it; returns how many sinks and channels are owed it."""
        if incident.root_id is not None:
            return 0
        event = self.incident_event(incident, kind)
        outage = _stamp(incident)
        # One row per sink and step, ever: the outage's opening is keyed by when the bot
        # alerted it (a repeat failure is the same opening; a reopened outage a new one).
        step = kind.removeprefix("failure.")
        moment = outage if kind == "failure.opened" else event.at.isoformat()
        key = f"incident:{incident.id}:{step}:{moment}"
        paged = [
            *await deliveries.sinks_told(session, incident.id, f"incident:{incident.id}:opened:"),
            *await deliveries.sinks_told(
                session, incident.id, f"incident:{incident.id}:escalated:"
            ),
        ]
        subscriptions = await subscription_store.active(session)
        decision = route(
            event,
            self.config,
            now=self.clock(),
            subscriptions=subscriptions,
            paged=list(dict.fromkeys(paged)),
            # an escalation is posted where its policy says, the alert's channel included
            reached=[incident.channel] if incident.channel and kind != "failure.escalated" else [],
        )
        owed = await self._sinks(session, decision, event, key, incident_id=incident.id)
        # (edit key, channel): one message per channel and outage, posted by the outage's
        # opening (or its escalation), edited as it is acknowledged and resolved
        told = await self._told(session, incident.id, outage)
        prefix = ESCALATED if kind == "failure.escalated" else SUBSCRIBED
        posts = {_edit_key(prefix, c, outage): c for c in decision.channels}
        if kind in ("failure.opened", "failure.escalated"):
            targets = {**posts, **{k: c for k, c in told.items() if k.startswith(prefix)}}
        else:
            targets = told
        for edit_key, channel in targets.items():
            sub = _first(subscriptions, decision, channel)
            notice = FailureNotice(
                dag_id=incident.dag_id,
                intervals=event.intervals,
                state=_STATES[kind],
                alert_channel=incident.channel,
                failures=incident.failures,
                error=incident.error_message if kind in ("failure.opened", "failure.escalated")
                else None,
                acknowledged_by=incident.acknowledged_by,
                reports=event.reports,
                subscription=sub.id if sub is not None else None,
                pattern=sub.pattern if sub is not None else "",
                waited=_waited(event.at - alerted_at(incident)),
            )  # fmt: skip
            await outbox.enqueue(
                session,
                channel=channel,
                payload=failure_notice(notice),
                incident_id=incident.id,
                edit_key=edit_key,
            )
            owed += 1
        if targets:
            after_commit(session, self.wake_slack)
        self._log(session, event, decision, owed)
        return owed

    def incident_event(self, incident: Incident, kind: HubKind) -> HubEvent:
        dag = DagRef(incident.namespace, incident.dag_id)
        moment = {
            "failure.opened": incident.failed_at or incident.opened_at,
            "failure.acknowledged": incident.acknowledged_at,
            "failure.resolved": incident.resolved_at,
            "failure.escalated": incident.escalated_at,
        }.get(kind) or incident.updated_at
        impact = store.impact_of(incident)
        runs = [(r.start, r.end) for r in store.runs_of(incident)]
        reports = tuple(dict.fromkeys(r.name for r in impact.reports))
        return HubEvent(
            kind=kind,
            dag=dag,
            at=moment,
            intervals=watch_messages.outage_words(runs),
            owners=self.owners(dag, impact.root_owners),
            severity=severity_of(downstream=len(impact.downstream), reports=len(reports)),
            upstream=self.upstream_of(dag),
            reports=reports,
            incident_id=incident.id,
            error=incident.error_message,
            failures=incident.failures,
            acknowledged_by=incident.acknowledged_by,
            backfill_request_id=incident.backfill_request_id,
        )

    async def _told(self, session: AsyncSession, incident_id: str, outage: str) -> dict[str, str]:
        """(edit key → channel) of the messages subscribers and the escalation's channel were
        posted about this outage (each is edited as it goes on)."""
        rows = await session.execute(
            select(OutboxMessage.edit_key, OutboxMessage.channel)
            .where(
                OutboxMessage.incident_id == incident_id,
                OutboxMessage.edit_key.startswith(SUBSCRIBED)
                | OutboxMessage.edit_key.startswith(ESCALATED),
            )
            .order_by(OutboxMessage.id)
        )
        told: dict[str, str] = {}
        for edit_key, channel in rows.all():
            if edit_key is not None and edit_key.endswith(":" + _tag(outage)):
                told.setdefault(edit_key, channel)
        return told

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
        owed = await self._sinks(session, decision, event, f"sla:{event.miss_id}")
        for channel in decision.channels:
            wants = _events_of(subscriptions, decision, channel)
            payload = late if "sla" in wants or reports_late is None else reports_late
            await outbox.enqueue(session, channel=channel, payload=payload)
            owed += 1
        if decision.channels:
            after_commit(session, self.wake_slack)
        self._log(session, event, decision, owed)
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
        owed = await self._sinks(session, decision, event, key)
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
        if decision.channels:
            after_commit(session, self.wake_slack)
        self._log(session, event, decision, owed)
        return owed

    # --- shared -----------------------------------------------------------------------------

    def owners(self, dag: DagRef, lineage: Iterable[str] = ()) -> tuple[str, ...]:
        """BOT_CONFIG's owners, then the lineage's (an ownership facet)."""
        named = [o.removeprefix("team:") for o in lineage]
        return tuple(dict.fromkeys([*self.config.owners_of(dag), *named]))

    def upstream_of(self, dag: DagRef) -> frozenset[DagRef]:
        try:
            return self.upstream(dag)
        except Exception:  # the lineage must not keep an alert from its sinks
            logger.exception("the DAGs upstream of %s could not be read", dag.dag_id)
            return frozenset()

    async def _sinks(
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
        if owed:
            after_commit(session, self.wake_sender)
        return owed

    def _log(self, session: AsyncSession, event: HubEvent, decision: Decision, owed: int) -> None:
        if not owed:
            return
        held = [t.sink.name for t in decision.sinks if t.held_until is not None]
        log_after_commit(
            session, logger, "%s of %s routed to sinks %s%s and channels %s",
            event.kind, event.dag.dag_id, [t.sink.name for t in decision.sinks],
            f" (held for quiet hours: {held})" if held else "", list(decision.channels),
            dag_id=event.dag.dag_id, namespace=event.dag.namespace,
        )  # fmt: skip


def alerted_at(incident: Incident) -> datetime:
    """Since when people could see the outage: when the bot alerted (or re-alerted) it."""
    return incident.alerted_at or incident.opened_at


def _stamp(incident: Incident) -> str:
    """The outage, in sinks' keys: when it was alerted (outages open before revision 0011: the
    failure's time, as they were keyed then)."""
    if incident.alerted_at is None:
        return (incident.failed_at or incident.opened_at).isoformat()
    return incident.alerted_at.isoformat()


def _edit_key(prefix: str, channel: str, outage: str) -> str:
    """One Slack message per channel and outage, in the column's 64 characters (a channel id
    too long for it is hashed)."""
    tag = _tag(outage)
    if len(channel) > 40:
        channel = hashlib.sha256(channel.encode()).hexdigest()[:24]
    return f"{prefix}{channel}:{tag}"


def _tag(outage: str) -> str:
    return str(int(datetime.fromisoformat(outage).timestamp()))


def _first(
    subscriptions: Sequence[Subscription], decision: Decision, channel: str
) -> Subscription | None:
    return next(
        (s for s in subscriptions if s.channel == channel and s.id in decision.subscriptions),
        None,
    )


def _events_of(subscriptions: Sequence[Subscription], decision: Decision, channel: str) -> set[str]:
    found: set[str] = set()
    for s in subscriptions:
        if s.channel == channel and s.id in decision.subscriptions:
            found |= s.events
    return found


def _waited(elapsed: timedelta) -> str:
    minutes = max(0, int(elapsed.total_seconds() // 60))
    if minutes < 120:
        return f"{minutes} minutes"
    return f"{minutes // 60} hours {minutes % 60} minutes"
