"""Data incidents: a COMPLETE run whose data is wrong (0 rows, an unusual count, a failed
assertion, a lost column, a dropped table others read) opens an incident like a failure's —
the same grouping under an open incident upstream, outages over next intervals, owners,
impact, proposal, buttons, sinks and routing — and a later run of the interval that shows the
data put right resolves it. The checks are `bot/quality`; the incident rules
`bot/incidents/rules/data.py`; this module runs them in the watcher's transaction.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Protocol

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.config import BotConfig
from bot.core.after_commit import log_after_commit
from bot.core.model import DagRef
from bot.events.store.models import RunEvent
from bot.incidents.messages import alerts as watch_messages
from bot.incidents.rules.data import (
    cleared,
    problems_from,
    problems_json,
    put_right,
    with_findings,
)
from bot.incidents.rules.lifecycle import (
    EventFacts,
    EventKind,
    IncidentKind,
    IncidentState,
    kind_of,
    with_failure,
)
from bot.incidents.service.alerts import AlertOutbox, outage_words
from bot.incidents.store import incidents as store
from bot.incidents.store.models import Incident
from bot.lineage.rules.impact import ImpactSnapshot
from bot.quality.rules.checks import Finding
from bot.quality.service.checks import Checked, QualityChecks, Read, RunData

logger = logging.getLogger(__name__)

DATA = IncidentKind.DATA


class Watcher(Protocol):
    """What the data path shares with the failure path of the watcher."""

    alerts: AlertOutbox

    async def impact_of(self, dag_id: str, namespace: str) -> ImpactSnapshot: ...

    async def root_for(self, session: AsyncSession, event: EventFacts) -> Incident | None: ...

    async def join_count(self, session: AsyncSession, root: Incident) -> None: ...

    async def resolve_failure(self, session: AsyncSession, event: EventFacts) -> None: ...

    def follow(self, incident_id: str, impact: asyncio.Future[ImpactSnapshot]) -> None: ...

    async def set_downstream(self, incident_id: str, impact: ImpactSnapshot) -> None: ...


def run_data(row: RunEvent, event: EventFacts) -> RunData:
    return RunData(
        run_id=row.run_id,
        event_time=row.event_time,
        dag=DagRef(row.dag_namespace, row.dag_id),
        interval_key=event.interval_key,
        interval_start=event.nominal_start,
        data=row.data,
        job=row.job_name,
    )


class DataIncidents:
    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        config: BotConfig,
        quality: QualityChecks,
        watcher: Watcher,
        *,
        clock: Callable[[], datetime],
    ) -> None:
        self.sessions = sessions
        self.config = config
        self.quality = quality
        self.watcher = watcher
        self.alerts = watcher.alerts
        self.clock = clock

    async def observed(
        self, row_id: int, event: EventFacts, run: RunData, joined: set[str]
    ) -> None:
        """Handle an event that carries data facts (a COMPLETE, or a START dropping or
        truncating a dataset): what it resolves as a success, what it puts right in a data
        incident of its interval, and what it finds wrong."""
        read: Read = {}  # who reads what it dropped or changed: the index is asked once
        async with self.sessions() as session:  # a look first: does it open an alert?
            preview = await self.quality.check(session, run, record=False, read=read)
            fresh = bool(preview.findings) and await self._opens(session, event)
        task = None
        impact: ImpactSnapshot | None = None
        if fresh:  # as for a failure: the alert waits for its impact only briefly
            task = asyncio.ensure_future(self.watcher.impact_of(event.dag_id, event.dag_namespace))
            done, _ = await asyncio.wait({task}, timeout=self.config.watch.impact_wait_s)
            impact = task.result() if done else None
        opened: Incident | None = None
        try:
            async with self.sessions.begin() as session:
                if not await store.claim(session, row_id, now=self.clock()):
                    return
                if kind_of(event.event_type) == EventKind.SUCCESS:
                    await self.watcher.resolve_failure(session, event)
                checked = await self.quality.check(session, run, record=True, read=read)
                await self._put_right(session, event, checked)
                if checked.findings:
                    opened = await self._found(session, event, checked.findings, impact, joined)
        finally:
            if task is not None and (opened is None or impact is not None):
                task.cancel()
        if opened is None:
            return
        if impact is not None:
            await self.watcher.set_downstream(opened.id, impact)
        elif task is not None:
            self.watcher.follow(opened.id, task)
        else:  # found under the transaction only: work it out now, without holding rows up
            future = asyncio.ensure_future(self.watcher.impact_of(opened.dag_id, opened.namespace))
            self.watcher.follow(opened.id, future)

    async def failed_checks(
        self, session: AsyncSession, incident: Incident, event: EventFacts, run: RunData | None
    ) -> None:
        """A failed run's failed assertions among its failure incident's problems (the DAG's
        success resolves the incident, as any failure's)."""
        if run is None:
            return
        checked = await self.quality.check(session, run, record=True)
        if not checked.findings:
            return
        problems, _ = with_findings(
            problems_from(incident.findings), event.interval_key, checked.findings,
            at=event.event_time,
        )  # fmt: skip
        incident.findings = problems_json(problems)
        await session.flush()

    async def _opens(self, session: AsyncSession, event: EventFacts) -> bool:
        """Whether findings for this event would open a new alert (nothing to join)."""
        if await store.of_run(session, event, DATA) or await store.outage_of(session, event, DATA):
            return False
        return await self.watcher.root_for(session, event) is None

    async def _found(
        self,
        session: AsyncSession,
        event: EventFacts,
        findings: Sequence[Finding],
        impact: ImpactSnapshot | None,
        joined: set[str],
    ) -> Incident | None:
        """Record `findings` in the interval's data incident (or the outage it continues),
        else under an open incident upstream, else in a new incident; returns a new root
        incident whose impact is still to be recorded."""
        now = self.clock()
        existing = await store.of_run(session, event, DATA) or await store.outage_of(
            session, event, DATA
        )
        if existing is not None:
            await self._repeat(session, existing, event, findings)
            if existing.root_id is not None:
                root = await store.get(session, existing.root_id, lock=True)
                if root is not None and root.state == IncidentState.OPEN:
                    await self.watcher.join_count(session, root)
                    joined.add(root.id)
            return None
        root = await self.watcher.root_for(session, event)
        incident = store.opened(
            event,
            None if root is not None else impact or ImpactSnapshot.pending(),
            now=now,
            root_id=root.id if root is not None else None,
            kind=DATA,
        )
        problems, _ = with_findings((), event.interval_key, findings, at=event.event_time)
        incident.findings = problems_json(problems)
        incident.failed_at = event.event_time
        session.add(incident)
        await session.flush()
        if root is not None:
            _log(session, incident, f"opened under incident {root.id}")
            await self.watcher.join_count(session, root)
            joined.add(root.id)
            return None
        await self.alerts.alert(session, incident, new=True, gather=True)
        await self.alerts.hub.incident(session, incident, "failure.opened")
        _log(session, incident, "opened")
        return incident

    async def _repeat(
        self,
        session: AsyncSession,
        incident: Incident,
        event: EventFacts,
        findings: Sequence[Finding],
    ) -> None:
        now = self.clock()
        problems, new = with_findings(
            problems_from(incident.findings), event.interval_key, findings, at=event.event_time
        )
        reopens = incident.state == IncidentState.RESOLVED
        incident.findings = problems_json(problems)
        if reopens or (new and event.dag_run_id is None) or incident.dag_run_id != event.dag_run_id:
            incident.failures += 1  # another bad run (not another output of the same one)
        runs = with_failure(store.runs_of(incident), event)
        store.set_runs(incident, cleared(problems, runs))
        incident.dag_run_id = event.dag_run_id or incident.dag_run_id
        incident.failed_at = max(incident.failed_at or event.event_time, event.event_time)
        store.move(incident, IncidentState.OPEN, now=now)
        incident.updated_at = now
        await session.flush()
        if reopens:
            incident.acknowledged_by, incident.acknowledged_at = None, None
            incident.escalated_at, incident.alerted_at = None, now
            await session.flush()
            _log(session, incident, "reopened")
            await self.alerts.hub.incident(session, incident, "failure.opened")
        if incident.root_id is None and not self.alerts.snoozed(incident):
            await self.alerts.alert(session, incident, gather=True)
            if reopens:
                await self.alerts.reply(session, incident, watch_messages.bad_data_again())

    async def _put_right(self, session: AsyncSession, event: EventFacts, checked: Checked) -> None:
        """Clear what this run shows put right in the interval's open data incident; the last
        interval put right resolves it (unless this run found its interval wrong again)."""
        incident = await store.of_run(session, event, DATA)
        if incident is None or incident.state != IncidentState.OPEN:
            return
        before = problems_from(incident.findings)
        after = put_right(
            before, event.interval_key, at=event.event_time,
            outputs=checked.facts.outputs, assertions=checked.facts.assertions,
            found=checked.findings,
        )  # fmt: skip
        if after == before:
            return
        now = self.clock()
        incident.findings = problems_json(after)
        runs = cleared(after, store.runs_of(incident))
        store.set_runs(incident, runs)
        incident.updated_at = now
        if not all(r.succeeded for r in runs) or checked.findings:
            await session.flush()
            if incident.root_id is None and not self.alerts.snoozed(incident):
                await self.alerts.alert(session, incident, gather=True)
            return
        store.move(incident, IncidentState.RESOLVED, now=now)
        await session.flush()
        _log(session, incident, "resolved")
        await self.alerts.hub.incident(session, incident, "failure.resolved")
        if incident.root_id is None:
            await self.alerts.alert(session, incident, gather=True)
            if await self.alerts.backfill_told_it(session, incident):
                return
            reply = watch_messages.data_resolved(
                event.dag_id, outage_words(incident), incident.backfill_request_id
            )
            await self.alerts.reply(session, incident, reply)


def _log(session: AsyncSession, incident: Incident, what: str) -> None:
    log_after_commit(
        session, logger, "data incident %s of %s (%s) %s",
        incident.id, incident.dag_id, outage_words(incident), what,
        incident_id=incident.id, dag_id=incident.dag_id, namespace=incident.namespace,
        root_id=incident.root_id, state=str(incident.state), kind="data",
    )  # fmt: skip
