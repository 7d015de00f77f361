"""Incidents from stored run events: a failed DAG run (tasks roll up to their DAG) opens an
incident and owes its alert; a failure downstream of an open incident joins it; a repeat edits
the alert; a later success of the same DAG and interval resolves it. The rules are
`bot/incidents/rules/lifecycle.py`; the SQL is `bot/incidents/store/incidents.py`; this module runs
them.

Events are handled in the order they were stored, each in one transaction with what it owes
Slack (outbox rows) and its `processed_at`, so a crash loses nothing and repeats nothing. The
impact (downstream DAGs, reports, owners) is worked out once, when an incident opens.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.clients.marquez import MarquezError
from bot.config import BotConfig
from bot.core.after_commit import log_after_commit, wake_on_commit
from bot.core.metrics import Metrics
from bot.core.tables import utcnow
from bot.core.worker import Worker
from bot.events import messages as ops_messages
from bot.events.store import run_events, set_aside
from bot.events.store.models import RunEvent
from bot.incidents.messages import alerts as watch_messages
from bot.incidents.rules.lifecycle import (
    EventFacts,
    EventKind,
    IncidentState,
    explains,
    kind_of,
    on_failure,
    on_success,
    with_failure,
)
from bot.incidents.service.alerts import AlertOutbox, outage_words
from bot.incidents.service.data import DataIncidents, run_data
from bot.incidents.service.escalation import Escalations
from bot.incidents.store import incidents as store
from bot.incidents.store.models import Incident
from bot.lineage.rules.errors import PlanningError
from bot.lineage.rules.impact import ImpactSnapshot, ImpactStatus
from bot.lineage.service.planning import PlannerFactory
from bot.quality.service.checks import QualityChecks, RunData
from bot.slack.store import outbox

logger = logging.getLogger(__name__)

BATCH = 500
MAX_TRIES = 3
GROUPED_REPLY = "grouped"  # the edit key of an alert's one "failures downstream joined" reply
DOWNSTREAM_ROWS = 2_000  # incident_downstream rows per transaction


@dataclass
class _Batch:
    """The roots that failures joined in one processing pass: each root's grouped reply is
    brought up to date once per pass."""

    joined: set[str] = field(default_factory=set)
    set_aside: list[ops_messages.SetAside] = field(default_factory=list)
    """Rows set aside in this pass, told in one ops notice."""


class IncidentService:
    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        config: BotConfig,
        planners: PlannerFactory,
        *,
        alerts: AlertOutbox,
        metrics: Metrics,
        quality: QualityChecks | None = None,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        """`alerts`: what an incident owes Slack and the hub (its alert, replies, notices);
        `quality`: the data-quality checks of COMPLETE runs (default: without the lineage
        index, every dataset counts as read by others)."""
        self.sessions = sessions
        self.metrics = metrics
        self.config = config
        self.planners = planners
        self.clock = clock
        self.alerts = alerts
        self.escalations = Escalations(sessions, config, self.alerts.hub, clock=clock)
        self.quality = quality or QualityChecks(config)
        self.data = DataIncidents(sessions, config, self.quality, self, clock=clock)
        self._worker = Worker("incidents", self.process, every_s=5.0, again_while_busy=True)
        wake_on_commit(sessions, run_events.OWED, self.wake)  # a new run event wakes the watcher
        self._pending: dict[str, asyncio.Task[None]] = {}
        """Impacts being worked out for alerts already posted, by incident id."""
        self._recovered = False

    def wake(self) -> None:
        self._worker.wake()

    def stop(self) -> None:
        """End `run_forever` after the row under way; impacts still being worked out are
        dropped (the next start works them out again)."""
        self._worker.stop()
        for task in self._pending.values():
            task.cancel()

    async def settled(self) -> None:
        """Wait for the impacts being worked out (tests and benchmarks)."""
        while self._pending:
            await asyncio.wait(list(self._pending.values()))

    async def run_forever(self, *, idle_s: float = 5.0) -> None:
        self._worker.every_s = idle_s
        await self._worker.run_forever()
        pending = list(self._pending.values())
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    # --- processing -----------------------------------------------------------------------

    async def process(self) -> int:
        """Handle stored events not handled yet, oldest first; returns how many were looked at.

        Each row is claimed inside the transaction that acts on it, so two bot processes never
        handle one row twice. A row whose handling keeps failing is set aside after a few
        tries rather than holding up every later one.
        """
        if not self._recovered:
            await self._recover_pending()
        async with self.sessions() as session:
            rows = await store.unhandled(session, limit=BATCH)
        batch = _Batch()
        for row in rows:
            if self._worker.stopping:
                break
            try:
                await self._handle(row, batch)
            except Exception as exc:
                logger.exception("handling run event %s failed", row.id)
                await self._failed(row.id, exc, batch)
        await self._grouped_replies(batch)
        await self._tell_set_aside(batch)
        return len(rows)

    async def _failed(self, row_id: int, exc: Exception, batch: _Batch) -> None:
        """Count the failed try in the row; after MAX_TRIES the row is set aside, so it no
        longer holds up every later one, and is told in the ops channel with this pass's."""
        reason = f"{type(exc).__name__}: {exc}"
        self.metrics.run_event_failures.inc()
        try:
            async with self.sessions.begin() as session:
                row = await set_aside.record_failure(
                    session, row_id, reason, now=self.clock(), max_tries=MAX_TRIES
                )
        except Exception:  # the database itself: the next pass tries the row again
            logger.exception("recording the failure of run event %s failed", row_id)
            return
        if row is not None:
            logger.error("run event %s set aside after %d tries: %s", row_id, MAX_TRIES, reason)
            batch.set_aside.append(
                ops_messages.SetAside(
                    row.id, row.event_type, row.dag_id, row.event_time, row.failure or reason
                )
            )

    async def _tell_set_aside(self, batch: _Batch) -> None:
        """One ops notice for the rows this pass set aside (none without watch.ops_channel:
        they are logged, counted in /metrics and listed by `backfill-bot events list`)."""
        channel = self.config.watch.ops_channel
        if not batch.set_aside or channel is None:
            return
        payload = ops_messages.set_aside(batch.set_aside, tries=MAX_TRIES)
        async with self.sessions.begin() as session:
            await outbox.enqueue(session, channel=channel, payload=payload)
            self.metrics.notice_owed(session, "ops_notice")

    async def _handle(self, row: RunEvent, batch: _Batch) -> None:
        event = store.event_facts(row)
        kind = kind_of(event.event_type)
        run = run_data(row, event)
        checks = run if self.quality.has_data(run) else None
        if kind == EventKind.FAILURE:
            await self._failure(row.id, event, batch, checks)
        elif checks is not None:  # a COMPLETE's data, or a DROP / TRUNCATE on START
            await self.data.observed(row.id, event, checks, batch.joined)
        elif kind == EventKind.SUCCESS:
            await self._success(row.id, event)
        else:
            async with self.sessions.begin() as session:
                await store.claim(session, row.id, now=self.clock())

    async def root_for(self, session: AsyncSession, event: EventFacts) -> Incident | None:
        """The open incident upstream of this DAG whose failure explains this one, locked."""
        now = self.clock()
        for incident in await store.open_roots_above(session, event.dag_namespace, event.dag_id):
            if explains(store.facts(incident), event, now=now):
                return await store.get(session, incident.id, lock=True)
        return None

    async def _failure(
        self, row_id: int, event: EventFacts, batch: _Batch, checks: RunData | None = None
    ) -> None:
        """A failed run: its incident (new, repeated, or joined under one upstream), with the
        data-quality assertions it failed (dbt's tests FAIL their run) among its problems."""
        async with self.sessions.begin() as session:
            # this interval's incident, else the outage it continues (one incident and one
            # alert for consecutive failed intervals), else an open incident upstream
            existing = await store.of_run(session, event) or await store.outage_of(session, event)
            root = None if existing is not None else await self.root_for(session, event)
            if existing is not None or root is not None:
                if not await store.claim(session, row_id, now=self.clock()):
                    return
                if existing is not None:
                    await self.data.failed_checks(session, existing, event, checks)
                    await self._repeat(session, existing, event, batch)
                elif root is not None:
                    joined = store.opened(event, None, now=self.clock(), root_id=root.id)
                    session.add(joined)
                    await session.flush()
                    await self.data.failed_checks(session, joined, event, checks)
                    _log(session, joined, f"opened under incident {root.id}")
                    await self.join_count(session, root)
                    batch.joined.add(root.id)
                return
        # The impact comes from the lineage index (Marquez for a DAG it has not seen): the
        # alert waits for it only briefly, then goes out and has the impact edited in.
        task = asyncio.ensure_future(self.impact_of(event.dag_id, event.dag_namespace))
        done, _ = await asyncio.wait({task}, timeout=self.config.watch.impact_wait_s)
        impact = task.result() if done else ImpactSnapshot.pending()
        try:
            async with self.sessions.begin() as session:
                if not await store.claim(session, row_id, now=self.clock()):
                    task.cancel()
                    return
                incident = store.opened(event, impact, now=self.clock())
                session.add(incident)
                await session.flush()
                await self.data.failed_checks(session, incident, event, checks)
                await self.alerts.alert(session, incident, new=True, gather=True)
                await self.alerts.hub.incident(session, incident, "failure.opened")
                _log(session, incident, "opened")
        except IntegrityError:  # another process opened it first: this is a repeat
            task.cancel()
            async with self.sessions.begin() as session:
                existing = await store.of_run(session, event)
                if existing is not None and await store.claim(session, row_id, now=self.clock()):
                    await self.data.failed_checks(session, existing, event, checks)
                    await self._repeat(session, existing, event, batch)
            return
        if not done:
            # its impact when it is known, without holding up the rows after this one
            self.follow(incident.id, task)
        else:
            await self.set_downstream(incident.id, impact)

    async def set_downstream(self, incident_id: str, impact: ImpactSnapshot) -> None:
        """Record every DAG downstream of an impact just worked out, after the alert's own
        transaction and in transactions of `DOWNSTREAM_ROWS`: 100,000 rows take most of a
        second, which neither the alert nor the senders' writes between them (SQLite has one
        writer) should wait for. Until they are in, a failure downstream alerts on its own,
        as while an impact is still being worked out."""
        rows = store.downstream_rows(incident_id, impact)
        if rows is None:
            return
        async with self.sessions.begin() as session:
            await store.clear_downstream(session, incident_id)
        for at in range(0, len(rows), DOWNSTREAM_ROWS):
            async with self.sessions.begin() as session:
                await store.add_downstream(session, rows[at : at + DOWNSTREAM_ROWS])

    async def _repeat(
        self, session: AsyncSession, incident: Incident, event: EventFacts, batch: _Batch
    ) -> None:
        outcome = on_failure(store.facts(incident), event)
        if outcome.ignored:
            return
        now = self.clock()
        if outcome.counts:
            incident.failures += 1
        if outcome.takes_error:
            incident.error_message = event.error_message
            incident.error_job = event.job_name
        store.set_airflow(incident, outcome.airflow)
        incident.dag_run_id = event.dag_run_id or incident.dag_run_id
        incident.failed_at = max(incident.failed_at or event.event_time, event.event_time)
        store.set_runs(incident, with_failure(store.runs_of(incident), event))
        store.move(incident, IncidentState.OPEN, now=now)
        incident.updated_at = now
        await session.flush()
        if outcome.reopens:
            # A new outage needs its own acknowledgement (and PagerDuty pages it anew); it may
            # escalate again.
            incident.acknowledged_by, incident.acknowledged_at = None, None
            incident.escalated_at, incident.alerted_at = None, now
            await session.flush()
            _log(session, incident, "reopened")
            await self.alerts.hub.incident(session, incident, "failure.opened")
        if incident.root_id is not None:
            root = await store.get(session, incident.root_id, lock=True)
            if root is not None and root.state == IncidentState.OPEN:
                await self.join_count(session, root)
                batch.joined.add(root.id)
            return
        if not self.alerts.snoozed(incident):
            await self.alerts.alert(session, incident, gather=True)
            if outcome.reopens:
                await self.alerts.reply(session, incident, watch_messages.failed_again())

    async def join_count(self, session: AsyncSession, root: Incident) -> None:
        root.grouped += 1  # the row is locked (FOR UPDATE) until this transaction ends
        root.updated_at = self.clock()
        await session.flush()
        if not self.alerts.snoozed(root):
            await self.alerts.alert(session, root, gather=True)

    async def _grouped_replies(self, batch: _Batch) -> None:
        """ONE reply per root in its alert's thread, edited in place as more failures join
        (a storm of them is one notification, not one per pass): all that joined so far."""
        for root_id in sorted(batch.joined):
            async with self.sessions.begin() as session:
                root = await store.get(session, root_id, lock=True)
                if root is None or self.alerts.snoozed(root):
                    continue
                # Written before the count is read, so this transaction holds the root (its
                # row lock on PostgreSQL, the write lock on SQLite) until its reply is owed:
                # replies are owed in the order of the counts they say, and the newest row,
                # the one the sender keeps, says the most.
                root.updated_at = self.clock()
                await session.flush()
                await session.refresh(root)
                # Only DAGs downstream in the root's impact can join it: load them all, so
                # the reply's "and N more" counts every one.
                most = max(50, store.impact_of(root).downstream_count)
                dags = await store.grouped_dags(session, root.id, limit=most)
                reply = watch_messages.grouped(root.grouped, dags)
                await self.alerts.reply(session, root, reply, edit_key=GROUPED_REPLY)

    async def _success(self, row_id: int, event: EventFacts) -> None:
        async with self.sessions.begin() as session:
            if await store.claim(session, row_id, now=self.clock()):
                await self.resolve_failure(session, event)

    async def resolve_failure(self, session: AsyncSession, event: EventFacts) -> None:
        """The DAG's success for an interval of a failure incident: that interval cleared, the
        last one resolves it (in the caller's transaction, which claimed the event)."""
        incident = await store.of_run(session, event)
        if incident is None:
            return
        outcome = on_success(store.facts(incident), event)
        if not outcome.counts:
            return
        store.set_runs(incident, outcome.runs)
        incident.updated_at = self.clock()
        if not outcome.resolves:  # more intervals of the outage still to succeed
            await session.flush()
            if incident.root_id is None and not self.alerts.snoozed(incident):
                await self.alerts.alert(session, incident, gather=True)
            return
        store.move(incident, IncidentState.RESOLVED, now=self.clock())
        await session.flush()
        _log(session, incident, "resolved")
        await self.alerts.hub.incident(session, incident, "failure.resolved")
        if incident.root_id is None:
            await self.alerts.alert(session, incident, gather=True)
            if await self.alerts.backfill_told_it(session, incident):
                return  # its backfill's summary in the thread said so already
            interval = outage_words(incident)
            await self.alerts.reply(
                session,
                incident,
                watch_messages.resolved(event.dag_id, interval, incident.backfill_request_id),
            )

    # --- impacts --------------------------------------------------------------------------

    async def impact_of(self, dag_id: str, namespace: str) -> ImpactSnapshot:
        try:
            async with self.planners() as planner:
                impact = await planner.impact(dag_id, namespace)
        except (PlanningError, MarquezError) as exc:  # unknown DAG, Marquez down, a cycle
            logger.warning("no impact for %s: %s", dag_id, exc)
            return ImpactSnapshot.unavailable(str(exc))
        except Exception as exc:  # the alert goes out all the same, saying so
            logger.exception("working out the impact of %s failed", dag_id)
            return ImpactSnapshot.unavailable(f"impact unavailable ({type(exc).__name__})")
        return impact.snapshot()

    def follow(self, incident_id: str, impact: asyncio.Future[ImpactSnapshot]) -> None:
        task = asyncio.create_task(self._impact_known(incident_id, impact))
        self._pending[incident_id] = task
        task.add_done_callback(lambda _: self._pending.pop(incident_id, None))

    async def _recover_pending(self) -> None:
        """Once per process: alerts a previous process posted without their impact (it
        stopped first) get it worked out now."""
        self._recovered = True
        async with self.sessions() as session:
            roots = await store.open_roots(session)
        for incident in roots:
            if store.impact_of(incident).is_pending and incident.id not in self._pending:
                future = asyncio.ensure_future(self.impact_of(incident.dag_id, incident.namespace))
                self.follow(incident.id, future)

    async def refresh_unavailable(self) -> int:
        """Marquez answers again: open alerts whose impact it could not give ("Downstream:
        unknown") get it worked out and edited in now; returns how many."""
        async with self.sessions() as session:
            roots = await store.open_roots(session)
        asked = 0
        for incident in roots:
            impact = store.impact_of(incident)
            if impact.status == ImpactStatus.UNAVAILABLE and incident.id not in self._pending:
                future = asyncio.ensure_future(self.impact_of(incident.dag_id, incident.namespace))
                self.follow(incident.id, future)
                asked += 1
        if asked:
            logger.info("Marquez answers again: asking the impact of %d alert(s) again", asked)
        return asked

    async def _impact_known(self, incident_id: str, task: asyncio.Future[ImpactSnapshot]) -> None:
        """Edit the impact into an alert posted without it, and tell the affected teams in its
        thread (mentions added by an edit notify nobody)."""
        try:
            impact = await task
        except Exception as exc:  # a pending alert must not stay pending
            logger.exception("working out the impact of incident %s failed", incident_id)
            impact = ImpactSnapshot.unavailable(f"impact unavailable ({type(exc).__name__})")
        async with self.sessions.begin() as session:
            incident = await store.get(session, incident_id, lock=True)
            if incident is None:
                return
            incident.impact = impact.to_json()
            incident.updated_at = self.clock()
            await session.flush()
            await self.alerts.alert(session, incident, gather=True)
            if incident.state == IncidentState.OPEN and incident.acknowledged_at is None:
                # Its severity and reports are known now: routes by severity, reports and
                # subscriptions to reports get it (what was owed already is not owed twice).
                await self.alerts.hub.incident(session, incident, "failure.opened")
            mentions = self.alerts.mentions(incident, impact)
            if mentions and not self.alerts.snoozed(incident):
                reply = watch_messages.impact_known(impact.downstream_count, mentions)
                await self.alerts.reply(session, incident, reply)
        await self.set_downstream(incident_id, impact)


def _log(session: AsyncSession, incident: Incident, what: str) -> None:
    """The INFO line of an incident's change, once it is committed."""
    log_after_commit(
        session, logger, "incident %s of %s (%s) %s",
        incident.id, incident.dag_id, outage_words(incident), what,
        incident_id=incident.id, dag_id=incident.dag_id, namespace=incident.namespace,
        root_id=incident.root_id, state=str(incident.state),
    )  # fmt: skip
