"""The notification hub beyond Slack: an incident's life (opened, acknowledged, resolved) owed
to the sinks its routing picks, in the transaction that changed the incident, so what the bot
owes a sink is a row before anything is sent (bot/clients/sink_sender.py sends it)."""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy.ext.asyncio import AsyncSession

from bot.config import BotConfig
from bot.domain.model import DagRef
from bot.domain.routing import HubEvent, HubKind, route
from bot.messages import hub as hub_messages
from bot.messages import watch as watch_messages
from bot.store import deliveries
from bot.store import incidents as store
from bot.store.after_commit import after_commit
from bot.store.watch_models import Incident


class Hub:
    def __init__(self, config: BotConfig, *, wake_sender: Callable[[], None] = lambda: None):
        self.config = config
        self.wake_sender = wake_sender

    async def incident(self, session: AsyncSession, incident: Incident, kind: HubKind) -> int:
        """Owe each routed sink this step of `incident` (a root incident: failures that joined
        one upstream are part of its outage); returns how many sinks are owed it."""
        if incident.root_id is not None or not self.config.sinks:
            return 0
        dag = DagRef(incident.namespace, incident.dag_id)
        moment = {
            "failure.opened": incident.failed_at or incident.opened_at,
            "failure.acknowledged": incident.acknowledged_at,
            "failure.resolved": incident.resolved_at,
        }[kind] or incident.updated_at
        runs = [(r.start, r.end) for r in store.runs_of(incident)]
        event = HubEvent(
            kind=kind,
            incident_id=incident.id,
            dag=dag,
            intervals=watch_messages.outage_words(runs),
            at=moment,
            error=incident.error_message,
            failures=incident.failures,
            acknowledged_by=incident.acknowledged_by,
            backfill_request_id=incident.backfill_request_id,
            owners=self._owners(incident, dag),
        )
        # One row per sink and step, ever: a reopened outage is a new step (its own time).
        key = f"incident:{incident.id}:{kind.removeprefix('failure.')}:{moment.isoformat()}"
        paged = await deliveries.sinks_told(
            session, incident.id, "incident:" + incident.id + ":opened:"
        )
        owed = 0
        for sink in route(event, self.config, paged=paged):
            owed += await deliveries.enqueue(
                session,
                sink=sink.name,
                kind=sink.kind,
                event_key=key[:128],
                body=hub_messages.body_for(sink, event),
                incident_id=incident.id,
            )
        if owed:
            after_commit(session, self.wake_sender)
        return owed

    def _owners(self, incident: Incident, dag: DagRef) -> tuple[str, ...]:
        """BOT_CONFIG's owners, then the lineage's (an ownership facet), as the alert names them
        (an impact still being worked out names none yet)."""
        lineage = [o.removeprefix("team:") for o in store.impact_of(incident).root_owners]
        return tuple(dict.fromkeys([*self.config.owners_of(dag), *lineage]))
