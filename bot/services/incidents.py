"""Incidents from stored run events: a failed DAG run (tasks roll up to their DAG) opens an
incident and owes its alert; a failure downstream of an open incident joins it; a repeat edits
the alert; a later success of the same DAG and interval resolves it.

Events are handled in the order they were stored, each in one transaction with what it owes
Slack (outbox rows) and its `processed_at`, so a crash loses nothing and repeats nothing. The
impact (downstream DAGs, reports, owners) is read from Marquez once, when an incident opens.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import quote

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot import messages, messages_watch
from bot.clients.marquez import MarquezError
from bot.config import BotConfig
from bot.domain.commands import PlanCommand
from bot.domain.lineage import LineageCycleError
from bot.domain.model import DagRef
from bot.render import impact_view
from bot.services.backfills import BackfillService, PlannerFactory, Reply
from bot.services.catalog import AmbiguousDag, TaskNotDag, UnknownDag
from bot.store import outbox
from bot.store.models import OutboxRole, utcnow
from bot.store.watch_models import Incident, IncidentState, RunEvent

logger = logging.getLogger(__name__)

FAILED = frozenset({"FAIL", "ABORT"})
BATCH = 500
MAX_TRIES = 3
GROUP_SLACK = timedelta(days=7)  # a weekly DAG downstream reads the failed day in its week
GROUP_RECENT = timedelta(days=1)
_NO_IMPACT: dict[str, list[Any]] = {"downstream": [], "datasets": [], "reports": []}
PENDING_IMPACT: dict[str, Any] = {"pending": True, **_NO_IMPACT}
"""What an incident's impact is while the lineage index works it out."""


@dataclass
class _Batch:
    """What one processing pass grouped under each root, for one thread reply per root."""

    grouped: dict[str, list[str]] = field(default_factory=dict)


def interval_text(incident: Incident) -> str:
    return messages_watch.interval_words(incident.interval_start, incident.interval_end)


class IncidentService:
    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        config: BotConfig,
        planners: PlannerFactory,
        *,
        marquez_web_url: str,
        backfills: BackfillService | None = None,
        wake_sender: Callable[[], None] = lambda: None,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.sessions = sessions
        self.config = config
        self.planners = planners
        self.marquez_web_url = marquez_web_url.rstrip("/")
        self.backfills = backfills
        self.wake_sender = wake_sender
        self.clock = clock
        self._wakeup = asyncio.Event()
        self._tries: dict[int, int] = {}
        self._stopping = False
        self._pending: dict[str, asyncio.Task[None]] = {}
        """Impacts being worked out for alerts already posted, by incident id."""
        self._recovered = False

    def wake(self) -> None:
        self._wakeup.set()

    def stop(self) -> None:
        """End `run_forever` after the row under way; impacts still being worked out are
        dropped (the next start works them out again)."""
        self._stopping = True
        self._wakeup.set()
        for task in self._pending.values():
            task.cancel()

    async def settled(self) -> None:
        """Wait for the impacts being worked out (tests and benchmarks)."""
        while self._pending:
            await asyncio.wait(list(self._pending.values()))

    async def run_forever(self, *, idle_s: float = 5.0) -> None:
        while not self._stopping:
            try:
                while not self._stopping and await self.process():
                    pass
            except Exception:
                logger.exception("incident pass failed; retrying")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wakeup.wait(), idle_s)
            self._wakeup.clear()
        pending = list(self._pending.values())
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    # --- processing -----------------------------------------------------------------------

    async def process(self) -> int:
        """Handle stored events not handled yet, oldest first; returns how many were looked at.

        Each row is claimed inside the transaction that acts on it (a conditional UPDATE of its
        `processed_at`), so two bot processes never handle one row twice. A row whose handling
        keeps failing is set aside after a few tries rather than holding up every later one.
        """
        if not self._recovered:
            await self._recover_pending()
        async with self.sessions() as session:
            rows = list(
                await session.scalars(
                    select(RunEvent)
                    .where(RunEvent.processed_at.is_(None))
                    .order_by(RunEvent.id)
                    .limit(BATCH)
                )
            )
        batch = _Batch()
        for row in rows:
            if self._stopping:
                break
            try:
                if row.event_type in FAILED:
                    await self._failure(row, batch)
                elif row.event_type == "COMPLETE":
                    await self._success(row)
                else:
                    async with self.sessions.begin() as session:
                        await self._claim(session, row)
            except Exception:
                tries = self._tries[row.id] = self._tries.get(row.id, 0) + 1
                logger.exception("handling run event %s failed (try %d)", row.id, tries)
                if tries >= MAX_TRIES:
                    async with self.sessions.begin() as session:
                        await self._claim(session, row)
        await self._grouped_replies(batch)
        if rows:
            self.wake_sender()
        return len(rows)

    async def _claim(self, session: AsyncSession, row: RunEvent) -> bool:
        """Take the row for this transaction; False if another worker handled it already."""
        result = await session.execute(
            update(RunEvent)
            .where(RunEvent.id == row.id, RunEvent.processed_at.is_(None))
            .values(processed_at=self.clock())
            .execution_options(synchronize_session=False)
        )
        return bool(getattr(result, "rowcount", 0))

    async def _find(self, session: AsyncSession, row: RunEvent) -> Incident | None:
        return await session.scalar(
            select(Incident)
            .where(
                Incident.namespace == row.dag_namespace,
                Incident.dag_id == row.dag_id,
                Incident.interval_key == _key(row),
            )
            .with_for_update()
        )

    async def _root_for(self, session: AsyncSession, row: RunEvent) -> Incident | None:
        """The open incident upstream of this DAG whose failure explains this one: this DAG is
        downstream of it and the intervals meet (a week's slack for weekly readers), or, for a
        run without an interval, the root failed within the last day."""
        candidates = await session.scalars(
            select(Incident)
            .where(Incident.state == IncidentState.OPEN, Incident.root_id.is_(None))
            .order_by(Incident.opened_at)
        )
        for incident in candidates:
            downstream = incident.impact.get("downstream", [])
            below = any(
                d["dag_id"] == row.dag_id and d["namespace"] == row.dag_namespace
                for d in downstream
            )
            if below and self._explains(incident, row):
                return await session.scalar(
                    select(Incident).where(Incident.id == incident.id).with_for_update()
                )
        return None

    def _explains(self, root: Incident, row: RunEvent) -> bool:
        if root.interval_start is not None and row.nominal_start is not None:
            end = (root.interval_end or root.interval_start) + GROUP_SLACK
            row_end = row.nominal_end or row.nominal_start
            if row_end <= row.nominal_start:  # one logical date: a point, not an empty range
                row_end = row.nominal_start + timedelta(microseconds=1)
            return row.nominal_start < end and row_end > root.interval_start
        return self.clock() - root.opened_at < GROUP_RECENT

    async def _failure(self, row: RunEvent, batch: _Batch) -> None:
        async with self.sessions.begin() as session:
            existing = await self._find(session, row)
            root = None if existing is not None else await self._root_for(session, row)
            if existing is not None or root is not None:
                if not await self._claim(session, row):
                    return
                if existing is not None:
                    await self._repeat(session, existing, row, batch)
                else:
                    assert root is not None
                    await self._join(session, root, row)
                    batch.grouped.setdefault(root.id, []).append(row.dag_id)
                return
        # The impact comes from the lineage index (Marquez for a DAG it has not seen): the
        # alert waits for it only briefly, then goes out and has the impact edited in.
        task = asyncio.ensure_future(self._impact(row.dag_id, row.dag_namespace))
        done, _ = await asyncio.wait({task}, timeout=self.config.watch.impact_wait_s)
        impact = task.result() if done else dict(PENDING_IMPACT)
        try:
            async with self.sessions.begin() as session:
                if not await self._claim(session, row):
                    task.cancel()
                    return
                incident = _new_incident(row, impact)
                session.add(incident)
                await session.flush()
                await self._owe_alert(session, incident, new=True)
        except IntegrityError:  # another process opened it first: this is a repeat
            task.cancel()
            async with self.sessions.begin() as session:
                existing = await self._find(session, row)
                if existing is not None and await self._claim(session, row):
                    await self._repeat(session, existing, row, batch)
            return
        if not done:
            self.wake_sender()  # the alert now; its impact when it is known, without holding
            self._follow(incident.id, task)  # up the rows after this one

    def _follow(self, incident_id: str, impact: asyncio.Future[dict[str, Any]]) -> None:
        task = asyncio.create_task(self._impact_known(incident_id, impact))
        self._pending[incident_id] = task
        task.add_done_callback(lambda _: self._pending.pop(incident_id, None))

    async def _recover_pending(self) -> None:
        """Once per process: alerts a previous process posted without their impact (it
        stopped first) get it worked out now."""
        self._recovered = True
        async with self.sessions() as session:
            open_ = await session.scalars(
                select(Incident).where(
                    Incident.state == IncidentState.OPEN, Incident.root_id.is_(None)
                )
            )
            waiting = [i for i in open_ if i.impact.get("pending") and i.id not in self._pending]
        for incident in waiting:
            future = asyncio.ensure_future(self._impact(incident.dag_id, incident.namespace))
            self._follow(incident.id, future)

    async def _impact_known(self, incident_id: str, task: asyncio.Future[dict[str, Any]]) -> None:
        """Edit the impact into an alert posted without it, and tell the affected teams in its
        thread (mentions added by an edit notify nobody)."""
        try:
            impact = await task
        except Exception as exc:  # a pending alert must not stay pending
            logger.exception("working out the impact of incident %s failed", incident_id)
            impact = {"error": f"impact unavailable ({type(exc).__name__})", **_NO_IMPACT}
        async with self.sessions.begin() as session:
            incident = await session.scalar(
                select(Incident).where(Incident.id == incident_id).with_for_update()
            )
            if incident is None:
                return
            incident.impact = impact
            incident.updated_at = self.clock()
            await session.flush()
            await self._owe_alert(session, incident)
            mentions = self._mentions(incident)
            if mentions and not self._snoozed(incident):
                downstream = len(impact.get("downstream", []))
                await self._owe_reply(
                    session,
                    incident,
                    f"Impact worked out: {messages.plural(downstream, 'downstream DAG')}. "
                    f"Affects {' '.join(mentions)}",
                )
        self.wake_sender()

    async def _impact(self, dag_id: str, namespace: str) -> dict[str, Any]:
        try:
            async with self.planners() as planner:
                impact = await planner.impact(dag_id, namespace)
        except (UnknownDag, AmbiguousDag, TaskNotDag, MarquezError, LineageCycleError) as exc:
            logger.warning("no impact for %s: %s", dag_id, exc)
            return {"error": str(exc)[:300], **_NO_IMPACT}
        except Exception as exc:  # the alert goes out all the same, saying so
            logger.exception("working out the impact of %s failed", dag_id)
            return {"error": f"impact unavailable ({type(exc).__name__})", **_NO_IMPACT}
        return impact_view(impact)

    async def _repeat(
        self, session: AsyncSession, incident: Incident, row: RunEvent, batch: _Batch
    ) -> None:
        reopened = incident.state == IncidentState.RESOLVED
        if reopened and incident.failed_at and row.event_time <= incident.failed_at:
            return  # an old failure arriving late (a restart's backlog) does not reopen it
        same_run = row.dag_run_id is not None and row.dag_run_id == incident.dag_run_id
        if reopened or (
            not same_run if row.dag_run_id is not None else is_dag_level(row)
        ):  # a task's FAIL and its DAG's FAIL for one DAG run are one failure
            incident.failures += 1
        if row.error_message and (
            not same_run
            or incident.error_message is None
            or (incident.error_job == incident.dag_id and not is_dag_level(row))
        ):  # in one DAG run the first real error is the cause; the DAG's summary comes last
            incident.error_message = row.error_message
            incident.error_job = row.job_name
        incident.dag_run_id = row.dag_run_id or incident.dag_run_id
        incident.failed_at = max(incident.failed_at or row.event_time, row.event_time)
        incident.state = IncidentState.OPEN
        incident.resolved_at = None
        incident.updated_at = self.clock()
        await session.flush()
        if incident.root_id is not None:
            root = await session.scalar(
                select(Incident).where(Incident.id == incident.root_id).with_for_update()
            )
            if root is not None and root.state == IncidentState.OPEN:
                await self._join_count(session, root)
                batch.grouped.setdefault(root.id, []).append(row.dag_id)
            return
        if not self._snoozed(incident):
            await self._owe_alert(session, incident)
            if reopened:
                await self._owe_reply(session, incident, "It failed again after it had resolved.")

    async def _join(self, session: AsyncSession, root: Incident, row: RunEvent) -> None:
        child = _new_incident(row, {})
        child.root_id = root.id
        session.add(child)
        await session.flush()
        await self._join_count(session, root)

    async def _join_count(self, session: AsyncSession, root: Incident) -> None:
        root.grouped += 1  # the row is locked (FOR UPDATE) until this transaction ends
        root.updated_at = self.clock()
        await session.flush()
        if not self._snoozed(root):
            await self._owe_alert(session, root)

    async def _grouped_replies(self, batch: _Batch) -> None:
        for root_id, dags in batch.grouped.items():
            async with self.sessions.begin() as session:
                root = await session.get(Incident, root_id)
                if root is None or self._snoozed(root):
                    continue
                names = sorted(set(dags))
                text = (
                    f"{len(dags)} failure(s) downstream joined this incident: "
                    + ", ".join(f"`{n}`" for n in names[:20])
                    + (f" and {len(names) - 20} more" if len(names) > 20 else "")
                )
                await self._owe_reply(session, root, text)

    async def _success(self, row: RunEvent) -> None:
        async with self.sessions.begin() as session:
            incident = await self._find(session, row)
            if not await self._claim(session, row):
                return
            if (
                incident is None
                or incident.state != IncidentState.OPEN
                or not is_dag_level(row)  # one task of the DAG run, not the run
                or (incident.failed_at is not None and row.event_time <= incident.failed_at)
            ):
                return
            incident.state = IncidentState.RESOLVED
            incident.resolved_at = self.clock()
            incident.updated_at = incident.resolved_at
            await session.flush()
            if incident.root_id is None:
                await self._owe_alert(session, incident)
                by = (
                    f" (backfill {incident.backfill_request_id})"
                    if incident.backfill_request_id
                    else ""
                )
                await self._owe_reply(
                    session,
                    incident,
                    f"Resolved: `{row.dag_id}` succeeded for {interval_text(incident)}{by}.",
                )

    # --- Slack ----------------------------------------------------------------------------

    def _snoozed(self, incident: Incident) -> bool:
        return incident.snoozed_until is not None and incident.snoozed_until > self.clock()

    async def _owe_alert(
        self, session: AsyncSession, incident: Incident, *, new: bool = False
    ) -> None:
        channel = incident.channel or self._channel_for(incident)
        if channel is None:
            logger.warning("no channel for the incident of %s: not alerted", incident.dag_id)
            return
        incident.channel = channel
        payload = messages_watch.alert(await self._view(session, incident))
        await outbox.enqueue(
            session,
            channel=channel,
            payload=payload,
            method="chat.postMessage" if new else "chat.update",
            role=OutboxRole.STATUS if new else OutboxRole.STATUS_UPDATE,
            incident_id=incident.id,
        )

    async def _owe_reply(self, session: AsyncSession, incident: Incident, text: str) -> None:
        if incident.channel is None:
            return
        await outbox.enqueue(
            session,
            channel=incident.channel,
            payload=messages_watch.reply(text),
            role=OutboxRole.THREAD,
            incident_id=incident.id,
        )

    def _channel_for(self, incident: Incident) -> str | None:
        teams = list(self.config.owners_of(_ref(incident)))
        teams += [
            t.removeprefix("team:") for t in incident.impact.get("root_owners", "").split(", ")
        ]
        for name in teams:
            team = self.config.team(name)
            if team is not None and team.channel:
                return team.channel
        return self.config.watch.alert_channel

    def _mentions(self, incident: Incident) -> tuple[str, ...]:
        owners = set(self.config.owners_of(_ref(incident)))
        found: list[str] = []
        for name in incident.impact.get("teams", []):
            team = self.config.team(name)
            if team is None or name in owners:
                continue
            found += [f"<!subteam^{g}>" for g in team.user_groups] or [
                f"<@{m}>" for m in team.members
            ]
        return tuple(dict.fromkeys(found))

    async def _view(self, session: AsyncSession, incident: Incident) -> messages_watch.AlertView:
        grouped = list(
            await session.scalars(
                select(Incident.dag_id)
                .where(Incident.root_id == incident.id)
                .group_by(Incident.dag_id)
                .order_by(Incident.dag_id)
                .limit(50)
            )
        )
        return messages_watch.AlertView(
            incident_id=incident.id,
            namespace=incident.namespace,
            dag_id=incident.dag_id,
            interval=interval_text(incident),
            open=incident.state == IncidentState.OPEN,
            failures=incident.failures,
            error=incident.error_message,
            error_job=incident.error_job,
            impact=self._with_owners(incident),
            mentions=self._mentions(incident),
            grouped=incident.grouped,
            grouped_dags=list(dict.fromkeys(grouped)),
            backfill=incident.backfill_request_id,
            snoozed_until=incident.snoozed_until,
            snoozed_by=None,
            marquez_url=self._marquez_link(incident),
        )

    def _with_owners(self, incident: Incident) -> dict[str, Any]:
        """The impact, naming BOT_CONFIG's owners when Marquez could not say (a DAG it does
        not know yet, or Marquez down when the incident opened)."""
        impact = incident.impact
        known = impact.get("root_owners")
        if known and known != "unknown":
            return impact
        owners = self.config.owners_of(_ref(incident))
        return {**impact, "root_owners": ", ".join(owners)} if owners else impact

    def _marquez_link(self, incident: Incident) -> str:
        return (
            f"{self.marquez_web_url}/lineage/job/{quote(incident.namespace, safe='')}/"
            f"{quote(incident.dag_id, safe='')}"
        )

    # --- buttons --------------------------------------------------------------------------

    async def snooze(self, incident_id: str, *, user: str, hours: int) -> Reply:
        async with self.sessions.begin() as session:
            incident = await session.get(Incident, incident_id)
            if incident is None:
                return Reply(messages.action_result("This incident no longer exists."))
            if incident.state != IncidentState.OPEN:
                return Reply(messages.action_result("This incident is resolved already."))
            incident.snoozed_until = self.clock() + timedelta(hours=hours)
            incident.updated_at = self.clock()
            await session.flush()
            await self._owe_alert(session, incident)
            await self._owe_reply(
                session, incident, f"<@{user}> snoozed this incident for {hours} h."
            )
        self.wake_sender()
        return Reply(messages.action_result(f"Snoozed for {hours} h."), changed=True)

    async def backfill(self, incident_id: str, *, user: str) -> Reply:
        """The alert's Backfill button: the plan preview for the failed DAG and interval, in
        the alert's channel (then the usual approval), linked to the incident."""
        async with self.sessions() as session:
            incident = await session.get(Incident, incident_id)
        if incident is None or self.backfills is None:
            return Reply(messages.action_result("This incident no longer exists."))
        if incident.interval_start is None:
            return Reply(
                messages.refusal(
                    "The failed run reported no interval, so the range to backfill is unknown.",
                    hint=f"Type /backfill {incident.dag_id} START..END with the days to redo.",
                )
            )
        command = PlanCommand(
            dag=incident.dag_id, range_text=backfill_range(incident), namespace=incident.namespace
        )
        reply = await self.backfills.preview(command, user=user, channel=incident.channel or user)
        if reply.request_id is not None:
            await self.link_backfill(incident_id, reply.request_id, user=user)
        return reply

    async def link_backfill(self, incident_id: str, request_id: str, *, user: str) -> None:
        async with self.sessions.begin() as session:
            incident = await session.get(Incident, incident_id)
            if incident is None:
                return
            incident.backfill_request_id = request_id
            incident.updated_at = self.clock()
            await session.flush()
            await self._owe_alert(session, incident)
            await self._owe_reply(
                session,
                incident,
                f"<@{user}> asked for backfill `{request_id}`; its plan is in the channel.",
            )
        self.wake_sender()


def backfill_range(incident: Incident) -> str:
    """The failed run's days as `/backfill` takes them (inclusive)."""
    assert incident.interval_start is not None
    first = incident.interval_start.date()
    end = incident.interval_end or incident.interval_start
    last = (end - timedelta(microseconds=1)).date() if end > incident.interval_start else first
    return first.isoformat() if last == first else f"{first.isoformat()}..{last.isoformat()}"


def _key(row: RunEvent) -> str:
    # Without a nominal interval, the day of the event stands for it: runs of other days must
    # not merge into one incident, and a success later that day still resolves it.
    if row.nominal_start is not None:
        return row.nominal_start.isoformat()
    return f"day:{row.event_time.date().isoformat()}"


def is_dag_level(row: RunEvent) -> bool:
    """The DAG run's own event, not one of a task or a job under it."""
    return row.job_type == "DAG" or (
        row.job_name == row.dag_id and row.namespace == row.dag_namespace
    )


def _ref(incident: Incident) -> DagRef:
    return DagRef(incident.namespace, incident.dag_id)


def _new_incident(row: RunEvent, impact: dict[str, Any]) -> Incident:
    return Incident(
        namespace=row.dag_namespace,
        dag_id=row.dag_id,
        interval_key=_key(row),
        interval_start=row.nominal_start,
        interval_end=row.nominal_end,
        state=IncidentState.OPEN,
        failures=1,
        grouped=0,
        error_message=row.error_message,
        error_job=row.job_name if row.error_message else None,
        dag_run_id=row.dag_run_id,
        failed_at=row.event_time,
        impact=impact,
        opened_at=utcnow(),
        updated_at=utcnow(),
    )
