"""What an incident owes Slack, as outbox rows in the caller's transaction: its alert (posted
once in the owning team's channel, then edited in place) and replies in the alert's thread.
Who is told comes from BOT_CONFIG's teams and the impact snapshot; the words come from
`bot/messages/watch.py`."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any
from urllib.parse import quote

from sqlalchemy.ext.asyncio import AsyncSession

from bot.config import BotConfig
from bot.domain.impact import ImpactSnapshot
from bot.domain.incidents import IncidentState, snoozed
from bot.domain.model import DagRef
from bot.messages import watch as watch_messages
from bot.store import incidents as store
from bot.store import outbox
from bot.store.models import OutboxRole
from bot.store.watch_models import Incident

logger = logging.getLogger(__name__)


class AlertOutbox:
    def __init__(
        self, config: BotConfig, *, marquez_web_url: str, clock: Callable[[], datetime]
    ) -> None:
        self.config = config
        self.marquez_web_url = marquez_web_url.rstrip("/")
        self.clock = clock

    def snoozed(self, incident: Incident) -> bool:
        return snoozed(incident.snoozed_until, now=self.clock())

    async def alert(self, session: AsyncSession, incident: Incident, *, new: bool = False) -> None:
        """Post the alert (`new`) or edit it to what the incident is now."""
        impact = self.impact(incident)
        channel = incident.channel or self.channel_for(incident, impact)
        if channel is None:
            logger.warning("no channel for the incident of %s: not alerted", incident.dag_id)
            return
        incident.channel = channel
        view = watch_messages.AlertView(
            incident_id=incident.id,
            namespace=incident.namespace,
            dag_id=incident.dag_id,
            interval=outage_words(incident),
            open=incident.state == IncidentState.OPEN,
            failures=incident.failures,
            error=incident.error_message,
            error_job=incident.error_job,
            impact=impact,
            mentions=self.mentions(incident, impact),
            grouped=incident.grouped,
            grouped_dags=await store.grouped_dags(session, incident.id),
            backfill=incident.backfill_request_id,
            snoozed_until=incident.snoozed_until,
            snoozed_by=None,
            marquez_url=self._marquez_link(incident),
        )
        await outbox.enqueue(
            session,
            channel=channel,
            payload=watch_messages.alert(view),
            method="chat.postMessage" if new else "chat.update",
            role=OutboxRole.STATUS if new else OutboxRole.STATUS_UPDATE,
            incident_id=incident.id,
        )

    async def reply(
        self, session: AsyncSession, incident: Incident, payload: dict[str, Any]
    ) -> None:
        """A reply in the alert's thread (it waits for the alert's ts like a status reply)."""
        if incident.channel is None:
            return
        await outbox.enqueue(
            session,
            channel=incident.channel,
            payload=payload,
            role=OutboxRole.THREAD,
            incident_id=incident.id,
        )

    def impact(self, incident: Incident) -> ImpactSnapshot:
        """The stored impact, naming BOT_CONFIG's owners when the lineage named nobody."""
        return store.impact_of(incident).with_root_owners(self.config.owners_of(_ref(incident)))

    def channel_for(self, incident: Incident, impact: ImpactSnapshot) -> str | None:
        """The first owning team's channel (BOT_CONFIG's owners, then the lineage's), else
        `watch.alert_channel`."""
        teams = [*self.config.owners_of(_ref(incident)), *impact.root_owners]
        for name in teams:
            team = self.config.team(name.removeprefix("team:"))
            if team is not None and team.channel:
                return team.channel
        return self.config.watch.alert_channel

    def mentions(self, incident: Incident, impact: ImpactSnapshot) -> tuple[str, ...]:
        """Mentions of the affected teams other than the owners (who get the alert anyway)."""
        owners = set(self.config.owners_of(_ref(incident)))
        found: list[str] = []
        for name in impact.teams:
            team = self.config.team(name)
            if team is None or name in owners:
                continue
            found += [f"<!subteam^{g}>" for g in team.user_groups] or [
                f"<@{m}>" for m in team.members
            ]
        return tuple(dict.fromkeys(found))

    def _marquez_link(self, incident: Incident) -> str:
        return (
            f"{self.marquez_web_url}/lineage/job/{quote(incident.namespace, safe='')}/"
            f"{quote(incident.dag_id, safe='')}"
        )


def outage_words(incident: Incident) -> str:
    """The incident's failed intervals in words."""
    return watch_messages.outage_words([(r.start, r.end) for r in store.runs_of(incident)])


def _ref(incident: Incident) -> DagRef:
    return DagRef(incident.namespace, incident.dag_id)
