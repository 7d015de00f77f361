"""What an incident owes Slack, as outbox rows in the caller's transaction: its alert (posted
once in the owning team's channel, then edited in place) and replies in the alert's thread.
Who is told comes from BOT_CONFIG's teams and the impact snapshot; the words come from
`bot/incidents/messages/alerts.py`."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol

from sqlalchemy.ext.asyncio import AsyncSession

from bot.backfill.rules.states import RequestState
from bot.backfill.service import requests
from bot.config import BotConfig
from bot.core.metrics import Metrics
from bot.core.model import DagRef
from bot.incidents.messages import alerts as watch_messages
from bot.incidents.rules.data import problems_from, unaffected_dags
from bot.incidents.rules.lifecycle import IncidentKind, IncidentState, outage_range, snoozed
from bot.incidents.rules.links import AirflowUi, Links
from bot.incidents.rules.proposal import Proposal, propose
from bot.incidents.service.notify import IncidentHub
from bot.incidents.store import incidents as store
from bot.incidents.store.models import Incident
from bot.lineage.rules.impact import ImpactSnapshot
from bot.lineage.rules.planner import Plan
from bot.lineage.service.history import run_durations
from bot.lineage.service.planning import PlanRequest
from bot.ownership.rules import owners, owning_teams
from bot.quality.messages import finding_line
from bot.slack.messages.render import Mrkdwn
from bot.slack.store import outbox
from bot.slack.store.models import OutboxRole

logger = logging.getLogger(__name__)
_ESTIMATED_DAGS = 50  # DAGs whose run history an alert's estimate reads at most


class EndedBackfill(Protocol):
    """What the alert reads of a backfill that ended (the backfill's stored request)."""

    @property
    def id(self) -> str: ...

    @property
    def state(self) -> str: ...

    @property
    def incident_id(self) -> str | None: ...


class AlertOutbox:
    def __init__(
        self,
        config: BotConfig,
        *,
        marquez_web_url: str,
        clock: Callable[[], datetime],
        airflow_ui: AirflowUi | None = None,
        metrics: Metrics,
        hub: IncidentHub,
        proposals: Callable[[PlanRequest], Plan | None],
    ) -> None:
        self.config = config
        # the plan Approve backfill would make now (same index, same schedules), if it can say
        self.proposals = proposals
        self.clock = clock
        self.metrics = metrics
        self.links = Links(config, marquez_web_url=marquez_web_url, airflow_ui=airflow_ui)
        # the incident's life, owed to sinks beyond Slack and subscribed channels
        self.hub = hub

    def snoozed(self, incident: Incident) -> bool:
        return snoozed(incident.snoozed_until, now=self.clock())

    async def alert(
        self, session: AsyncSession, incident: Incident, *, new: bool = False, gather: bool = False
    ) -> None:
        """Post the alert (`new`) or edit it to what the incident is now.

        With `gather` (a change the watcher saw, not a click), the post or edit waits
        `watch.group_wait_s` and what changes meanwhile goes into it: three failed days arriving
        together are one post, not a post and two edits. A click's edit goes at once."""
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
            snoozed_by=incident.snoozed_by,
            marquez_url=self.links.marquez_job(_ref(incident)),
            failed_at=incident.failed_at,
            try_number=incident.try_number,
            airflow_url=self._airflow_run_link(incident),
            log_url=self._airflow_log_link(incident),
            acknowledged_by=incident.acknowledged_by,
            acknowledged_at=incident.acknowledged_at,
            proposal=await self._proposal(session, incident, impact),
            backfill_state=await requests.state_of(session, incident.backfill_request_id),
            recovered=incident.state == IncidentState.RESOLVED
            and incident.backfill_request_id is None,
            problems=problem_lines(incident),
            data=incident.kind == IncidentKind.DATA,
        )
        payload = watch_messages.alert(view)
        gather_s = self.config.watch.group_wait_s if gather else 0.0
        if not new:
            if await store.last_alert_payload(session, incident.id) == payload:
                return  # nothing the reader sees changed: an edit would be a wasted Slack call
            if gather_s and await outbox.absorb(session, incident_id=incident.id, payload=payload):
                return
        await outbox.enqueue(
            session,
            channel=channel,
            payload=payload,
            method="chat.postMessage" if new else "chat.update",
            role=OutboxRole.STATUS if new else OutboxRole.STATUS_UPDATE,
            incident_id=incident.id,
            gather_s=gather_s,
        )
        if new:
            self.metrics.notice_owed(session, "incident_alert")

    async def backfill_told_it(self, session: AsyncSession, incident: Incident) -> bool:
        """Whether the incident's backfill succeeded (its summary, in the alert's thread, said
        so: a "resolved" reply would repeat it)."""
        state = await requests.state_of(session, incident.backfill_request_id)
        return state == RequestState.SUCCEEDED

    async def backfill_ended(self, session: AsyncSession, request: EndedBackfill) -> None:
        """Redraw the alert a backfill started from when it ended: a failure or a cancel shows
        how it ended and points at Retry. A success usually waits for the reruns' COMPLETE
        events, which resolve the alert and redraw it; but the root DAG's events arrive as soon
        as its own runs succeed, so an alert they already resolved is redrawn now, or it would
        show the backfill running for good."""
        if request.incident_id is None:
            return
        incident = await store.get(session, request.incident_id, lock=True)
        if incident is None or incident.backfill_request_id != request.id:
            return
        if request.state != RequestState.SUCCEEDED or incident.resolved_at is not None:
            await self.alert(session, incident)

    async def reply(
        self,
        session: AsyncSession,
        incident: Incident,
        payload: dict[str, Any],
        *,
        edit_key: str | None = None,
    ) -> None:
        """A reply in the alert's thread (it waits for the alert's ts like a status reply).
        Replies with the same `edit_key` are one reply, posted once and then edited in place."""
        if incident.channel is None:
            return
        await outbox.enqueue(
            session,
            channel=incident.channel,
            payload=payload,
            role=OutboxRole.THREAD,
            incident_id=incident.id,
            edit_key=edit_key,
        )

    def impact(self, incident: Incident) -> ImpactSnapshot:
        """The stored impact, naming BOT_CONFIG's owners when the lineage named nobody."""
        configured = owners(self.config, _ref(incident))
        return store.impact_of(incident).with_root_owners(configured)

    def channel_for(self, incident: Incident, impact: ImpactSnapshot) -> str | None:
        """The first owning team's channel (BOT_CONFIG's owners, then the lineage's), else
        `watch.alert_channel`."""
        for team in owning_teams(self.config, _ref(incident), impact.root_owners):
            if team.channel:
                return team.channel
        return self.config.watch.alert_channel

    def mentions(self, incident: Incident, impact: ImpactSnapshot) -> tuple[str, ...]:
        """Mentions of the affected teams other than the owners (who get the alert anyway)."""
        configured = set(owners(self.config, _ref(incident)))
        found: list[str] = []
        for name in impact.teams:
            team = self.config.team(name)
            if team is None or name in configured:
                continue
            found += [f"<!subteam^{g}>" for g in team.user_groups] or [
                f"<@{m}>" for m in team.members
            ]
        return tuple(dict.fromkeys(found))

    async def _proposal(
        self, session: AsyncSession, incident: Incident, impact: ImpactSnapshot
    ) -> Proposal | None:
        """What Approve backfill (or Backfill downstream) reruns and about how long it takes:
        the DAGs and runs of the plan the click makes, from the same index and schedules;
        where that plan cannot be made here (the index still loading, a DAG it does not know
        yet), each DAG once per failed interval, marked as an estimate. Timed from run
        history."""
        if incident.backfill_request_id is not None or impact.is_pending:
            return None
        days = outage_range(store.runs_of(incident))
        plan = (
            self.proposals(
                PlanRequest(
                    incident.dag_id, days, incident.namespace, exclude=column_scope(incident)
                )
            )
            if days is not None
            else None
        )
        root = _ref(incident)
        open_ = incident.state == IncidentState.OPEN
        if plan is not None:
            # Backfill downstream (a root that recovered) reruns the plan without its root.
            runs = {
                step.dag: len(step.intervals)
                for step in plan.steps
                if open_ or step.dag != plan.root
            }
        else:
            intervals = max(1, len(store.runs_of(incident)))
            dags = [DagRef(d.namespace, d.dag_id) for d in impact.downstream[:_ESTIMATED_DAGS]]
            runs = dict.fromkeys(([root] if open_ else []) + dags, intervals)
        if not runs:
            return None
        history = await run_durations(session, list(runs)[:_ESTIMATED_DAGS])
        return propose(
            {dag.dag_id: count for dag, count in runs.items()},
            history,
            parallel_runs=self.config.execution.airflow.max_active_runs,
            planned=plan is not None,
        )

    def _airflow_run_link(self, incident: Incident) -> str | None:
        return self.links.airflow_run(
            _ref(incident), incident.airflow_run_id, logical_date=_last_start(incident)
        )

    def _airflow_log_link(self, incident: Incident) -> str | None:
        return self.links.airflow_log(
            _ref(incident),
            incident.airflow_run_id,
            incident.airflow_task_id,
            incident.try_number,
            logical_date=_last_start(incident),
        )


def _last_start(incident: Incident) -> datetime | None:
    """The logical date of the outage's newest failed run (Airflow 2's grid lists up to it)."""
    starts = [r.start for r in store.runs_of(incident) if r.start is not None]
    return max(starts) if starts else None


def problem_lines(incident: Incident) -> tuple[tuple[Mrkdwn, bool], ...]:
    """An incident's data findings (a data incident's, or the assertions a failed run failed)
    as the alert says them, each with whether it was put right."""
    if not incident.findings:
        return ()
    runs = {r.key: (r.start, r.end) for r in store.runs_of(incident)}
    return tuple(
        (finding_line(p.finding, watch_messages.interval_words(*runs.get(p.key, (None, None)))),
         p.cleared)
        for p in problems_from(incident.findings)
    )  # fmt: skip


def column_scope(incident: Incident) -> tuple[str, ...]:
    """The DAGs downstream a backfill of this incident need not rerun: for a data incident of
    lost or retyped columns only, those whose column lineage reads none of them
    (`unaffected_dags`); the rest of the plan is what reads them."""
    if incident.kind != IncidentKind.DATA or not incident.findings:
        return ()
    downstream = (d.dag_id for d in store.impact_of(incident).downstream)
    return unaffected_dags(problems_from(incident.findings), downstream)


def outage_words(incident: Incident) -> str:
    """The incident's failed intervals in words."""
    return watch_messages.outage_words([(r.start, r.end) for r in store.runs_of(incident)])


def _ref(incident: Incident) -> DagRef:
    return DagRef(incident.namespace, incident.dag_id)
