"""SLA misses: the stored run events of each DAG (DAG-level, with nominal times) are the run
history; `bot.sla.rules` decides lateness from it, the DAG's rule and the clock. Each miss is
notified once per DAG, interval and kind: to the owning team (and the rule's `notify` teams),
and to the teams whose reports read what the DAG feeds, which will be late too."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.clients.marquez import MarquezError
from bot.config import BotConfig
from bot.core.audit import Refused, add_audit, add_refusal
from bot.core.metrics import Metrics
from bot.core.model import DagRef, Interval
from bot.core.tables import utcnow
from bot.events.store import run_events
from bot.events.store.models import RunEvent
from bot.hub.rules.routing import HubEvent, severity_of
from bot.hub.service.hub import Hub
from bot.incidents.messages.alerts import interval_words
from bot.incidents.rules.links import Links
from bot.incidents.service import queries
from bot.lineage.rules.errors import PlanningError
from bot.lineage.service.planning import PlannerFactory
from bot.ownership.rules import owners
from bot.sla import messages as sla_messages
from bot.sla import store as sla_misses
from bot.sla.rules import AckOutcome, Miss, NoticeAcknowledged, NoticeUnknown, RunFacts, misses
from bot.sla.store import SlaMiss
from bot.slack.rules.ids import ActionId
from bot.slack.store import outbox

logger = logging.getLogger(__name__)
HISTORY = timedelta(days=30)
TERMINAL = {"COMPLETE": True, "FAIL": False, "ABORT": False}


@dataclass
class _Run:
    interval: Interval
    started_at: datetime | None = None
    finished_at: datetime | None = None
    succeeded: bool = False


def history(events: list[RunEvent]) -> dict[DagRef, list[RunFacts]]:
    """DAG runs from DAG-level events (a task's events describe a part of the run)."""
    runs: dict[tuple[DagRef, str], _Run] = {}
    for event in events:
        if event.job_name != event.dag_id or event.nominal_start is None:
            continue
        interval = Interval(event.nominal_start, event.nominal_end or event.nominal_start)
        key = (DagRef(event.dag_namespace, event.dag_id), event.run_id)
        run = runs.setdefault(key, _Run(interval))
        if event.event_type == "START":
            run.started_at = event.event_time
        elif event.event_type in TERMINAL:
            run.finished_at = event.event_time
            run.succeeded = TERMINAL[event.event_type]
    found: dict[DagRef, list[RunFacts]] = defaultdict(list)
    for (dag, _), run in runs.items():
        found[dag].append(RunFacts(run.interval, run.started_at, run.finished_at, run.succeeded))
    return dict(found)


class SlaService:
    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        config: BotConfig,
        planners: PlannerFactory,
        *,
        clock: Callable[[], datetime] = utcnow,
        links: Links,
        metrics: Metrics,
        hub: Hub,
    ) -> None:
        self.sessions = sessions
        self.metrics = metrics
        self.config = config
        self.planners = planners
        self.clock = clock
        self.links = links
        self.hub = hub  # sinks beyond Slack and subscribed channels

    async def check(self) -> int:
        """Find and notify new misses as of now; returns how many were notified."""
        now = self.clock()
        async with self.sessions() as session:
            events = await run_events.dag_events_since(session, now - HISTORY)
        notified = 0
        for dag, runs in history(events).items():
            try:
                notified += await self._check_dag(dag, runs, now)
            except Exception:  # one bad DAG (or row) must not stop the pass for every other
                logger.exception("SLA check of %s failed; the next pass retries", dag.dag_id)
        return notified

    async def _check_dag(self, dag: DagRef, runs: list[RunFacts], now: datetime) -> int:
        """Notify this DAG's new misses; returns how many were notified."""
        rule = self.config.sla_for(dag)
        found = misses(
            runs,
            now=now,
            deadline=rule.deadline if rule else None,
            max_duration=rule.max_duration if rule else None,
        )
        notified = 0
        for miss in found:
            try:
                if await self._notify(dag, miss, rule.notify if rule else ()):
                    notified += 1
            except Exception:  # one miss that cannot be told must not hide the others
                logger.exception("SLA notice for %s failed; the next pass retries", dag.dag_id)
        return notified

    async def _known(self, dag: DagRef, miss: Miss) -> bool:
        async with self.sessions() as session:
            return await sla_misses.exists(session, dag, miss.interval.start.isoformat())

    async def _reports(self, dag: DagRef) -> tuple[list[tuple[str, str]], int]:
        """(report name, team) of the reports fed by this DAG or anything downstream of it,
        and how many DAGs are downstream."""
        try:
            async with self.planners() as planner:
                impact = await planner.impact(dag.dag_id, dag.namespace)
        except (PlanningError, MarquezError) as exc:  # unknown DAG, Marquez down, a cycle, …
            logger.warning("no impact for the late %s: %s", dag.dag_id, exc)
            return [], 0
        reports = [(hit.report.name, hit.report.team or "") for hit in impact.reports]
        return reports, len(impact.downstream)

    def _channel(self, team_name: str) -> str | None:
        team = self.config.team(team_name)
        return team.channel if team is not None else None

    async def _notify(self, dag: DagRef, miss: Miss, notify: tuple[str, ...]) -> bool:
        if await self._known(dag, miss):
            return False
        reports, downstream = await self._reports(dag)  # network: outside the transaction
        teams = [*owners(self.config, dag), *notify]
        channels = [c for c in (self._channel(t) for t in teams) if c]
        if not channels and self.config.watch.alert_channel:
            channels = [self.config.watch.alert_channel]
        by_team: dict[str, list[str]] = defaultdict(list)
        for name, team in reports:
            channel = self._channel(team)
            if channel:
                by_team[channel].append(name)
        async with self.sessions() as session:
            cause = await queries.cause_of_lateness(
                session,
                dag.namespace,
                dag.dag_id,
                miss.interval.start,
                miss.interval.end,
                now=self.clock(),
            )
        try:
            async with self.sessions.begin() as session:
                row = SlaMiss(
                    namespace=dag.namespace,
                    dag_id=dag.dag_id,
                    interval_key=miss.interval.start.isoformat(),
                    kind=miss.kind,
                    due=miss.due,
                    reason=miss.reason[:500],
                    detected_at=self.clock(),
                )
                session.add(row)
                await session.flush()
                links = sla_messages.NoticeLinks(
                    miss_id=str(row.id),
                    airflow_url=self.links.airflow_dag(dag),
                    marquez_url=self.links.marquez_job(dag) if self.links.marquez_web_url else None,
                )
                late = sla_messages.late_notice(dag.dag_id, miss, cause=cause, links=links)
                for channel in dict.fromkeys(channels):
                    await outbox.enqueue(session, channel=channel, payload=late)
                    self.metrics.notice_owed(session, "sla_notice")
                for channel, names in by_team.items():
                    payload = sla_messages.reports_late(
                        names, dag.dag_id, miss, cause=cause, links=links
                    )
                    await outbox.enqueue(session, channel=channel, payload=payload)
                    self.metrics.notice_owed(session, "sla_notice")
                names = list(dict.fromkeys(name for name, _ in reports))
                event = HubEvent(
                    kind="sla.missed",
                    dag=dag,
                    at=row.detected_at,
                    intervals=interval_words(miss.interval.start, miss.interval.end),
                    owners=tuple(dict.fromkeys(teams)),
                    severity=severity_of(downstream=downstream, reports=len(names)),
                    upstream=self.hub.upstream_of(dag),
                    reports=tuple(names),
                    miss_id=str(row.id),
                    reason=miss.reason,
                )
                await self.hub.sla_missed(
                    session,
                    event,
                    reached=[*channels, *by_team],
                    # a subscriber's copy has no Acknowledge: that is the owners' to click
                    late=sla_messages.late_notice(
                        dag.dag_id, miss, cause=cause, links=replace(links, miss_id="")
                    ),
                    reports_late=sla_messages.reports_late(
                        names, dag.dag_id, miss, cause=cause, links=replace(links, miss_id="")
                    )
                    if names
                    else None,
                )
        except IntegrityError:  # another process notified it first
            return False
        return True

    async def acknowledge(
        self, miss_id: str, *, user: str, channel: str, ts: str, message: dict[str, Any]
    ) -> AckOutcome:
        """**Acknowledge** on an SLA notice: recorded (audited), and the clicked notice edited
        to say who is on it."""
        async with self.sessions.begin() as session:
            row = None
            if miss_id.isdigit() and len(miss_id) < 19:  # an integer column
                row = await session.get(SlaMiss, int(miss_id), with_for_update=True)
            # The click must come from a notice the bot posted for this miss in that channel:
            # a forged click cannot acknowledge another team's miss from elsewhere.
            posted = await outbox.posted_payload(session, channel, ts) if row else None
            if row is None or posted is None or not _names_miss(posted, miss_id):
                refused = Refused.UNKNOWN_ID if row is None else Refused.WRONG_CHANNEL
                await add_refusal(
                    session, actor=user, action="sla.acknowledge.refused", refused=refused,
                    reason="no such SLA notice in this channel", given_id=miss_id, channel=channel,
                )  # fmt: skip
                return NoticeUnknown()
            row.acknowledged_by, row.acknowledged_at = user, self.clock()
            await add_audit(session, actor=user, action="sla.acknowledged", detail={"miss": row.id})
            if channel and ts:
                payload = {**sla_messages.acknowledged(message, user), "ts": ts}
                await outbox.enqueue(
                    session, channel=channel, payload=payload, method="chat.update"
                )
        return NoticeAcknowledged()


def _names_miss(payload: dict[str, Any], miss_id: str) -> bool:
    """Whether a posted notice carries the Acknowledge button of this miss."""
    for block in payload.get("blocks") or []:
        for element in block.get("elements") or [] if isinstance(block, dict) else []:
            if (
                isinstance(element, dict)
                and element.get("action_id") == ActionId.SLA_ACK
                and element.get("value") == miss_id
            ):
                return True
    return False


async def recent_misses(
    session: AsyncSession, since: datetime, *, limit: int = 500
) -> list[SlaMiss]:
    """SLA misses noticed since `since`, newest first (the App Home lists them)."""
    return await sla_misses.noticed_since(session, since, limit=limit)
