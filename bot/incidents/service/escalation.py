"""Escalation: an open outage nobody acknowledged within its owning team's `escalation.after`
goes to the escalation's sinks and channel, once per outage (a reopened outage may escalate
again). The rule is `escalation_due` (bot/hub/rules/routing.py); the incident row records that it
was escalated in the same transaction that owes the escalation, so a restart neither loses nor
repeats one, and acknowledging the alert in time is all it takes for none to be sent."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.config import BotConfig
from bot.config.hub import Escalation
from bot.core.after_commit import log_after_commit
from bot.core.model import DagRef
from bot.hub.rules.routing import escalation_due
from bot.incidents.rules.lifecycle import IncidentState, snoozed
from bot.incidents.service.notify import IncidentHub, alerted_at
from bot.incidents.store import incidents as store
from bot.incidents.store.models import Incident
from bot.ownership.rules import owners

logger = logging.getLogger(__name__)


class Escalations:
    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        config: BotConfig,
        hub: IncidentHub,
        *,
        clock: Callable[[], datetime],
    ) -> None:
        self.sessions, self.config, self.hub, self.clock = sessions, config, hub, clock

    @property
    def configured(self) -> bool:
        return any(team.escalation is not None for team in self.config.teams)

    def policy(self, incident: Incident) -> Escalation | None:
        """The first owning team's escalation (BOT_CONFIG's owners, then the lineage's)."""
        dag = DagRef(incident.namespace, incident.dag_id)
        for name in owners(self.config, dag, store.impact_of(incident).root_owners):
            team = self.config.team(name)
            if team is not None and team.escalation is not None:
                return team.escalation
        return None

    def _due(self, incident: Incident, now: datetime) -> Escalation | None:
        policy = self.policy(incident)
        if policy is None or incident.state != IncidentState.OPEN or incident.root_id:
            return None
        if incident.alerted_at is None:
            return None  # open before escalation existed (revision 0011): never paged for it
        due = escalation_due(
            policy.after,
            failed_at=alerted_at(incident),
            now=now,
            acknowledged=incident.acknowledged_at is not None,
            escalated=incident.escalated_at is not None,
            snoozed=snoozed(incident.snoozed_until, now=now),
        )
        return policy if due else None

    async def check(self) -> int:
        """Escalate every outage that is due; returns how many were escalated."""
        if not self.configured:
            return 0
        now = self.clock()
        async with self.sessions() as session:
            candidates = [i.id for i in await store.open_roots(session)]
        escalated = 0
        for incident_id in candidates:
            try:
                escalated += await self._escalate(incident_id, now)
            except Exception:  # one bad incident must not keep the others from escalating
                logger.exception(
                    "escalating incident %s failed; the next check retries", incident_id
                )
        return escalated

    async def _escalate(self, incident_id: str, now: datetime) -> int:
        async with self.sessions() as session:  # most are not due: no write lock for them
            found = await store.get(session, incident_id)
            if found is None or self._due(found, now) is None:
                return 0
        async with self.sessions.begin() as session:
            incident = await store.get(session, incident_id, lock=True)
            if incident is None or (policy := self._due(incident, now)) is None:
                return 0  # acknowledged, resolved or escalated meanwhile
            incident.escalated_at = incident.updated_at = now
            await session.flush()
            await self.hub.incident(session, incident, "failure.escalated")
            log_after_commit(
                session, logger, "incident %s of %s escalated: not acknowledged in %s",
                incident.id, incident.dag_id, policy.after,
                incident_id=incident.id, dag_id=incident.dag_id,
            )  # fmt: skip
        return 1
