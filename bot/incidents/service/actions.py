"""The alert's buttons, each in one transaction with what it owes Slack: **Approve backfill**
(plan and start the backfill of the outage at once, in the alert's thread), **Review plan**
(the plan, for a modal), **Backfill downstream** (a root that recovered on its own: rerun what
read its bad data), **Acknowledge**, **Snooze** and **Unsnooze**; and the older **Backfill**
(a preview in the thread, then the usual approval).

A click counts only from the alert's channel (from anywhere else it is answered as if the
incident did not exist). Snooze and Unsnooze follow the rules of Approve, or `watch.snooze`;
Acknowledge is open to anyone in the channel. Each is audited, and so is each refusal."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta
from functools import partial
from typing import Literal

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.backfill.messages.options_form import Choices
from bot.backfill.rules.outcomes import Outcome as BackfillOutcome
from bot.backfill.rules.states import OPEN, RequestState
from bot.backfill.service import requests
from bot.backfill.service.backfills import BackfillService
from bot.clients.marquez import MarquezError
from bot.core.audit import Refused, add_audit, add_refusal
from bot.core.model import DagRef
from bot.core.tables import utcnow
from bot.incidents.messages import alerts as watch_messages
from bot.incidents.messages import answers
from bot.incidents.rules.lifecycle import IncidentState, outage_range
from bot.incidents.rules.outcomes import (
    Acknowledged,
    AlreadyAcknowledged,
    AlreadyResolved,
    BackfillUnderWay,
    Gone,
    NoInterval,
    NoPlan,
    NotRecovered,
    NotSnoozed,
    Outcome,
    Snoozed,
    SnoozeDenied,
    Unsnoozed,
)
from bot.incidents.rules.proposal import without_root
from bot.incidents.service.alerts import AlertOutbox, column_scope
from bot.incidents.store import incidents as store
from bot.incidents.store.models import Incident
from bot.lineage.rules.errors import PlanningError
from bot.lineage.rules.planner import Plan
from bot.ownership.rules import also_approving
from bot.ownership.service import may_snooze
from bot.slack.rules.commands import PlanCommand

Verb = Literal["approve", "downstream", "review", "backfill", "acknowledge", "snooze", "unsnooze"]


class IncidentActions:
    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        alerts: AlertOutbox,
        backfills: BackfillService,
        *,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.sessions = sessions
        self.alerts = alerts
        self.backfills = backfills
        self.clock = clock

    # --- who is on it ---------------------------------------------------------------------

    async def acknowledge(
        self, incident_id: str, *, user: str, channel: str | None = None
    ) -> Acknowledged | AlreadyAcknowledged | Gone:
        """**Acknowledge**: the alert says who is on it. Anyone in the alert's channel may."""
        async with self.sessions.begin() as session:
            incident = await self._get(
                session, incident_id, user=user, channel=channel, verb="acknowledge", lock=True
            )
            if not isinstance(incident, Incident):
                return incident
            if incident.acknowledged_by == user:
                return AlreadyAcknowledged()
            incident.acknowledged_by, incident.acknowledged_at = user, self.clock()
            incident.updated_at = self.clock()
            await session.flush()
            await self._audit(session, incident, user=user, action="incident.acknowledged")
            await self.alerts.hub.incident(session, incident, "failure.acknowledged")
            await self.alerts.alert(session, incident)
            await self.alerts.reply(session, incident, watch_messages.acknowledged(user))
        return Acknowledged()

    async def snooze(
        self, incident_id: str, *, user: str, hours: int, channel: str | None = None
    ) -> Snoozed | AlreadyResolved | SnoozeDenied | Gone:
        """**Snooze 1 h / 24 h**: repeats of the failure stop alerting for that long. Whoever
        may approve its backfill may (or, with `watch.snooze: anyone_in_channel`, anyone)."""
        allowed = await self._may_snooze(incident_id, user=user, channel=channel, verb="snooze")
        if allowed is not None:
            return allowed
        async with self.sessions.begin() as session:
            incident = await store.get(session, incident_id, lock=True)
            if incident is None:
                return Gone(meanwhile=True)
            if incident.state != IncidentState.OPEN:
                return AlreadyResolved()
            incident.snoozed_until = self.clock() + timedelta(hours=hours)
            incident.snoozed_by = user
            incident.updated_at = self.clock()
            await session.flush()
            until = incident.snoozed_until.isoformat()
            await self._audit(
                session, incident, user=user, action="incident.snoozed", hours=hours, until=until
            )
            await self.alerts.alert(session, incident)
            await self.alerts.reply(session, incident, watch_messages.snoozed(user, hours))
        return Snoozed(hours)

    async def unsnooze(
        self, incident_id: str, *, user: str, channel: str | None = None
    ) -> Unsnoozed | NotSnoozed | SnoozeDenied | Gone:
        """**Unsnooze**: new failures alert again. The same people as Snooze may."""
        allowed = await self._may_snooze(incident_id, user=user, channel=channel, verb="unsnooze")
        if allowed is not None:
            return allowed
        async with self.sessions.begin() as session:
            incident = await store.get(session, incident_id, lock=True)
            if incident is None:
                return Gone(meanwhile=True)
            if not self.alerts.snoozed(incident):
                return NotSnoozed()
            incident.snoozed_until, incident.snoozed_by = None, None
            incident.updated_at = self.clock()
            await session.flush()
            await self._audit(session, incident, user=user, action="incident.unsnoozed")
            await self.alerts.alert(session, incident)
            await self.alerts.reply(session, incident, watch_messages.unsnoozed(user))
        return Unsnoozed()

    async def _may_snooze(
        self,
        incident_id: str,
        *,
        user: str,
        channel: str | None,
        verb: Literal["snooze", "unsnooze"],
    ) -> SnoozeDenied | Gone | None:
        """None if `user` may (un)snooze the incident from `channel`; else the audited refusal
        (naming who may). Under `approve: all_owners` the owners of the DAGs downstream that
        the alert names may, as they may approve."""
        incident = await self._load(incident_id, user=user, channel=channel, verb=verb)
        if not isinstance(incident, Incident):
            return incident
        config = self.backfills.config
        root = DagRef(incident.namespace, incident.dag_id)
        also = also_approving(config, root, store.impact_of(incident).downstream_owners)
        denial = await may_snooze(config, self.backfills.groups, root, user=user, also=also)
        if denial is None:
            return None
        refused = SnoozeDenied(denial, unsnooze=verb == "unsnooze")
        reason = answers.reason(refused)
        async with self.sessions.begin() as session:
            await add_refusal(
                session,
                actor=user,
                action=f"incident.{verb}.refused",
                refused=Refused.NOT_ALLOWED,
                reason=reason,
                given_id=incident_id,
                channel=channel,
                detail={"incident_id": incident.id, "dag_id": incident.dag_id},
            )
        return refused

    # --- backfills ------------------------------------------------------------------------

    async def approve(
        self, incident_id: str, *, user: str, channel: str | None = None
    ) -> Outcome | BackfillOutcome:
        """**Approve backfill**: the DAG and everything downstream over the outage's failed
        range, started at once when this click is all the approval it needs."""
        return await self._start(incident_id, user=user, channel=channel, downstream=False)

    async def downstream(
        self, incident_id: str, *, user: str, channel: str | None = None
    ) -> Outcome | BackfillOutcome:
        """**Backfill downstream**: the root was rerun outside the bot and succeeded; the DAGs
        downstream still hold what they computed from its bad data."""
        return await self._start(incident_id, user=user, channel=channel, downstream=True)

    async def _start(
        self, incident_id: str, *, user: str, channel: str | None, downstream: bool
    ) -> Outcome | BackfillOutcome:
        verb: Verb = "downstream" if downstream else "approve"
        incident = await self._load(incident_id, user=user, channel=channel, verb=verb)
        if not isinstance(incident, Incident):
            return incident
        if downstream and incident.state != IncidentState.RESOLVED:
            return NotRecovered()
        if not downstream and incident.state != IncidentState.OPEN:
            return AlreadyResolved()
        under_way = await self._request_under_way(incident)
        if isinstance(under_way, BackfillUnderWay):
            return under_way
        if under_way is not None:  # a preview from the older Backfill button: approve it
            return await self.backfills.approve(under_way, user=user)
        command = self._command(incident)
        if not isinstance(command, PlanCommand):
            return command
        change = partial(without_root, why=_RECOVERED_NOTE) if downstream else None
        return await self.backfills.start_now(
            command,
            user=user,
            channel=incident.channel or user,
            thread_ts=incident.alert_ts,
            incident_id=incident.id,
            change=change,
            linked=partial(self._link, incident_id, user=user, announce=False),
        )

    async def review(
        self, incident_id: str, *, user: str, channel: str | None = None
    ) -> Plan | Gone | NoInterval | NoPlan:
        """**Review plan**: the plan Approve backfill would run (nothing is recorded)."""
        incident = await self._load(incident_id, user=user, channel=channel, verb="review")
        if not isinstance(incident, Incident):
            return incident
        command = self._command(incident)
        if not isinstance(command, PlanCommand):
            return command
        try:
            plan = await self.backfills.make_plan(command)
        except (PlanningError, MarquezError) as exc:
            return NoPlan(str(exc), planning=True)
        except Exception as exc:  # Marquez down or confused: say so, not a stack trace
            return NoPlan(str(exc), planning=False)
        if incident.state == IncidentState.RESOLVED:
            return without_root(plan, why=_RECOVERED_NOTE)
        return plan

    async def backfill(
        self,
        incident_id: str,
        *,
        user: str,
        channel: str | None = None,
        choices: Choices | None = None,
    ) -> Outcome | BackfillOutcome:
        """The older **Backfill** button, and **Review plan**'s submission with the options
        chosen in its modal (`choices`): the plan preview in the alert's thread, then the
        usual approval."""
        incident = await self._load(incident_id, user=user, channel=channel, verb="backfill")
        if not isinstance(incident, Incident):
            return incident
        command = self._command(incident)
        if not isinstance(command, PlanCommand):
            return command
        change = None
        if choices is not None:
            command = replace(command, options=choices.options, at=choices.at, now=choices.now)
            if incident.state == IncidentState.RESOLVED:  # what Review plan showed
                change = partial(without_root, why=_RECOVERED_NOTE)
        return await self.backfills.preview(
            command,
            user=user,
            channel=incident.channel or user,
            thread_ts=incident.alert_ts,
            incident_id=incident.id,
            change=change,
            linked=partial(self._link, incident_id, user=user, announce=True),
        )

    async def _link(
        self,
        incident_id: str,
        session: AsyncSession,
        request_id: str,
        *,
        user: str,
        announce: bool,
    ) -> None:
        """The alert follows its backfill from now on: its buttons, its state, its thread (in
        the caller's transaction, the one that records the request)."""
        incident = await store.get(session, incident_id, lock=True)
        if incident is None:
            return
        incident.backfill_request_id = request_id
        incident.updated_at = self.clock()
        await session.flush()
        await self.alerts.alert(session, incident)
        if announce:
            await self.alerts.reply(
                session, incident, watch_messages.backfill_asked(user, request_id)
            )

    async def _load(
        self, incident_id: str, *, user: str, channel: str | None, verb: Verb
    ) -> Incident | Gone:
        async with self.sessions.begin() as session:
            return await self._get(session, incident_id, user=user, channel=channel, verb=verb)

    async def _get(
        self,
        session: AsyncSession,
        incident_id: str,
        *,
        user: str,
        channel: str | None,
        verb: Verb,
        lock: bool = False,
    ) -> Incident | Gone:
        """The incident, if the click came from its alert's channel (`channel`; None: a caller
        that checked); else the answer an unknown incident gets, audited in `session` as
        `incident.<verb>.refused` with the id as given and whether it exists elsewhere."""
        incident = await store.get(session, incident_id, lock=lock)
        if incident is not None and (channel is None or incident.channel == channel):
            return incident
        await add_refusal(
            session,
            actor=user,
            action=f"incident.{verb}.refused",
            refused=Refused.WRONG_CHANNEL if incident else Refused.UNKNOWN_ID,
            reason=f"its alert is in {incident.channel}" if incident else answers.reason(Gone()),
            given_id=incident_id,
            channel=channel,
            detail={"incident_id": incident.id} if incident else None,
        )
        return Gone()

    async def _audit(
        self, session: AsyncSession, incident: Incident, *, user: str, action: str, **detail: object
    ) -> None:
        """An audit row for a click on the alert (the incident's id is in its detail)."""
        await add_audit(
            session,
            actor=user,
            action=action,
            detail={"incident_id": incident.id, "dag_id": incident.dag_id, **detail},
            at=self.clock(),
        )

    async def _request_under_way(self, incident: Incident) -> str | BackfillUnderWay | None:
        """The incident's backfill if it is still open: a preview's id (to approve), or the
        answer that one is approved or running already."""
        if incident.backfill_request_id is None:
            return None
        async with self.sessions() as session:
            request = await requests.get(session, incident.backfill_request_id)
        if request is None:
            return None
        if request.state not in OPEN:
            return None
        if request.state == RequestState.PREVIEWED:
            return request.id
        return BackfillUnderWay(request.id, request.state)

    def _command(self, incident: Incident) -> PlanCommand | NoInterval:
        days = outage_range(store.runs_of(incident))
        if days is None:
            return NoInterval(incident.dag_id)
        return PlanCommand(
            dag=incident.dag_id, range_text=days, namespace=incident.namespace,
            exclude=column_scope(incident),
        )  # fmt: skip


_RECOVERED_NOTE = "recovered on its own (rerun outside the bot): only what is downstream reruns"
