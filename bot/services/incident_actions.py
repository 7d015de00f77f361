"""The alert's buttons: Snooze, and Backfill (the plan preview for the failed DAG and
interval, then the usual approval), each in one transaction with what it owes Slack."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot import messages
from bot.domain.commands import PlanCommand
from bot.domain.incidents import IncidentState, backfill_range
from bot.messages import watch as watch_messages
from bot.services.backfills import BackfillService, Reply
from bot.services.incident_alerts import AlertOutbox
from bot.store import incidents as store
from bot.store.models import utcnow


class IncidentActions:
    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        alerts: AlertOutbox,
        backfills: BackfillService,
        *,
        wake_sender: Callable[[], None] = lambda: None,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.sessions = sessions
        self.alerts = alerts
        self.backfills = backfills
        self.wake_sender = wake_sender
        self.clock = clock

    async def snooze(self, incident_id: str, *, user: str, hours: int) -> Reply:
        async with self.sessions.begin() as session:
            incident = await store.get(session, incident_id, lock=True)
            if incident is None:
                return Reply(messages.action_result("This incident no longer exists."))
            if incident.state != IncidentState.OPEN:
                return Reply(messages.action_result("This incident is resolved already."))
            incident.snoozed_until = self.clock() + timedelta(hours=hours)
            incident.updated_at = self.clock()
            await session.flush()
            await self.alerts.alert(session, incident)
            await self.alerts.reply(session, incident, watch_messages.snoozed(user, hours))
        self.wake_sender()
        return Reply(messages.action_result(f"Snoozed for {hours} h."), changed=True)

    async def backfill(self, incident_id: str, *, user: str) -> Reply:
        """The alert's Backfill button: the plan preview for the failed DAG and interval, in
        the alert's channel (then the usual approval), linked to the incident."""
        async with self.sessions() as session:
            incident = await store.get(session, incident_id)
        if incident is None:
            return Reply(messages.action_result("This incident no longer exists."))
        if incident.interval_start is None:
            return Reply(
                messages.refusal(
                    "The failed run reported no interval, so the range to backfill is unknown.",
                    hint=f"Type /backfill {incident.dag_id} START..END with the days to redo.",
                )
            )
        command = PlanCommand(
            dag=incident.dag_id,
            range_text=backfill_range(incident.interval_start, incident.interval_end),
            namespace=incident.namespace,
        )
        reply = await self.backfills.preview(command, user=user, channel=incident.channel or user)
        if reply.request_id is not None:
            await self.link_backfill(incident_id, reply.request_id, user=user)
        return reply

    async def link_backfill(self, incident_id: str, request_id: str, *, user: str) -> None:
        async with self.sessions.begin() as session:
            incident = await store.get(session, incident_id, lock=True)
            if incident is None:
                return
            incident.backfill_request_id = request_id
            incident.updated_at = self.clock()
            await session.flush()
            await self.alerts.alert(session, incident)
            await self.alerts.reply(
                session, incident, watch_messages.backfill_asked(user, request_id)
            )
        self.wake_sender()
