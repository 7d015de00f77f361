"""What an incident's life owes beyond its own alert: the hub's sinks (PagerDuty, e-mail,
webhooks, Teams) and the channels and DMs subscribed to its DAG, each told once per step
(opened, acknowledged, resolved, escalated) in the transaction that made the step. The routing
itself is the hub's (`bot.hub.service.hub`); what a subscriber sees is
`bot.incidents.messages.subscribers`."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from bot.core.model import DagRef
from bot.hub.rules.routing import Decision, HubEvent, HubKind, Subscription, route, severity_of
from bot.hub.service.hub import Hub
from bot.incidents.messages import alerts as watch_messages
from bot.incidents.messages.subscribers import (
    FailureNotice,
    NoticeState,
    failure_notice,
    waited_words,
)
from bot.incidents.rules.data import problems_from
from bot.incidents.rules.lifecycle import IncidentKind
from bot.incidents.store import incidents as store
from bot.incidents.store.models import Incident
from bot.ownership.rules import owners
from bot.quality.messages import findings_summary
from bot.slack.store import outbox
from bot.slack.store.models import OutboxMessage

SUBSCRIBED = "sub:"  # the edit keys of a subscribed channel's one message about an outage
ESCALATED = "esc:"  # … and of an escalation's post
_STATES: dict[str, NoticeState] = {
    "failure.opened": "failed",
    "failure.acknowledged": "acknowledged",
    "failure.resolved": "resolved",
    "failure.escalated": "escalated",
}


class IncidentHub:
    """An incident's steps, routed by the hub."""

    def __init__(self, hub: Hub) -> None:
        self.hub = hub

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
            *await self.hub.sinks_told(session, incident.id, f"incident:{incident.id}:opened:"),
            *await self.hub.sinks_told(session, incident.id, f"incident:{incident.id}:escalated:"),
        ]
        subscriptions = await self.hub.subscriptions(session)
        decision = route(
            event,
            self.hub.config,
            now=self.hub.clock(),
            subscriptions=subscriptions,
            paged=list(dict.fromkeys(paged)),
            # an escalation is posted where its policy says, the alert's channel included
            reached=[incident.channel] if incident.channel and kind != "failure.escalated" else [],
        )
        owed = await self.hub.owe_sinks(session, decision, event, key, incident_id=incident.id)
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
                error=event.error if kind in ("failure.opened", "failure.escalated")
                else None,
                acknowledged_by=incident.acknowledged_by,
                reports=event.reports,
                subscription=sub.id if sub is not None else None,
                pattern=sub.pattern if sub is not None else "",
                waited=waited_words(event.at - alerted_at(incident)),
                data=incident.kind == IncidentKind.DATA,
            )  # fmt: skip
            await outbox.enqueue(
                session,
                channel=channel,
                payload=failure_notice(notice),
                incident_id=incident.id,
                edit_key=edit_key,
            )
            owed += 1
        self.hub.log(session, event, decision, owed)
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
            owners=owners(self.hub.config, dag, impact.root_owners),
            severity=severity_of(downstream=impact.downstream_count, reports=len(reports)),
            upstream=self.hub.upstream_of(dag),
            reports=reports,
            incident_id=incident.id,
            incident_kind=incident.kind,
            error=incident.error_message
            if incident.kind != IncidentKind.DATA
            else problems_text(incident),
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


def problems_text(incident: Incident) -> str:
    """A data incident's open findings in plain text, one per line."""
    runs = {r.key: (r.start, r.end) for r in store.runs_of(incident)}
    return findings_summary(
        [
            (p.finding, watch_messages.interval_words(*runs.get(p.key, (None, None))))
            for p in problems_from(incident.findings)
            if not p.cleared
        ]
    )


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
