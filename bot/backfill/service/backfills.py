"""The backfill use cases behind `/backfill` and its buttons: preview, approve, cancel, status.

Every decision reloads the request from the database; buttons carry only its id. State changes
are checked transitions (a replay or double click changes nothing and says why), written with
their audit row and the Slack messages they owe in one transaction, before anything is sent.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Any, Literal, TypeVar

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.backfill.messages import answers
from bot.backfill.messages.backfill import plan_preview
from bot.backfill.rules.options import with_option_notes
from bot.backfill.rules.outcomes import (
    AlreadyApproved,
    ApprovalRecorded,
    Approved,
    Blocked,
    Busy,
    Cancelled,
    Denied,
    DryRun,
    Lookup,
    Outcome,
    Previewed,
    SecondPersonAsked,
    StartedFromAlert,
    Unchanged,
    Unplannable,
)
from bot.backfill.rules.states import OPEN, RequestState
from bot.backfill.run.base import Executor
from bot.backfill.service import owed
from bot.backfill.service.control import BackfillControl
from bot.backfill.service.lookup import RequestLookup
from bot.backfill.service.notices import TeamNotices
from bot.backfill.service.planned import PlanChecks
from bot.backfill.service.revise import PlanRevisions
from bot.backfill.store import execution, guards, repository
from bot.backfill.store.models import BackfillRequest
from bot.clients.marquez import MarquezError, MarquezUnavailable
from bot.config import BotConfig
from bot.core.audit import add_audit
from bot.core.model import DagRef
from bot.core.tables import utcnow
from bot.core.windows import WindowError
from bot.lineage.rules.errors import PlanningError
from bot.lineage.rules.planner import Plan, plan_from_json
from bot.lineage.service.planning import PlannerFactory
from bot.ownership.rules import also_approving
from bot.ownership.service import GroupDirectory, may_approve, still_to_approve
from bot.slack.rules.commands import PlanCommand
from bot.slack.store import outbox
from bot.slack.store.models import OutboxRole

logger = logging.getLogger(__name__)

PlanChange = Callable[[Plan], Plan]
Linked = Callable[[AsyncSession, str], Awaitable[None]]
"""Records a new request where it was asked from (an incident's link to it), given the
transaction that records the request and the request's id."""
Refusal = TypeVar("Refusal", bound=Outcome)


APPROVE_REFUSED = "approval.refused"
CANCEL_REFUSED = "cancel.refused"
PAUSE_REFUSED = "pause.refused"
CHANGE_REFUSED = "options.refused"


class _Busy(Exception):
    """Rolls the approval back: another backfill reruns some of the same intervals."""

    def __init__(self, busy: Busy) -> None:
        super().__init__(busy.dag_id)
        self.busy = busy


class BackfillService:
    def __init__(
        self,
        *,
        sessions: async_sessionmaker[AsyncSession],
        config: BotConfig,
        planners: PlannerFactory,
        executor: Executor,
        groups: GroupDirectory,
        notices: TeamNotices,
    ) -> None:
        self.sessions = sessions
        self.config = config
        self.planners = planners
        self.executor = executor
        self.groups = groups
        self.notices = notices
        self.checks = PlanChecks(sessions, config, planners, executor)
        self.lookup = RequestLookup(sessions, self.notices, config)
        self.control = BackfillControl(self)
        self.revisions = PlanRevisions(self, self.checks)

    async def _refuse(self, user: str, action: str, outcome: Refusal, **detail: Any) -> Refusal:
        """Audit a refusal (its sentence as the reason) and return it."""
        reason = answers.reason(outcome)
        async with self.sessions.begin() as session:
            await add_audit(session, actor=user, action=action, detail={"reason": reason, **detail})
        return outcome

    async def audit_refusal(self, user: str, reason: str, text: str) -> None:
        """Record a command refused before any planning (malformed text)."""
        async with self.sessions.begin() as session:
            await add_audit(
                session,
                actor=user,
                action="command.refused",
                detail={"reason": reason, "text": text},
            )

    async def make_plan(self, command: PlanCommand) -> Plan:
        """The plan a command asks for (raises PlanningError or a Marquez error)."""
        return await self.checks.make_plan(command)

    async def preview(
        self,
        command: PlanCommand,
        *,
        user: str,
        channel: str,
        thread_ts: str | None = None,
        incident_id: str | None = None,
        change: PlanChange | None = None,
        linked: Linked | None = None,
    ) -> Previewed | DryRun | Unplannable | Busy:
        """Plan the backfill; post the preview with Approve/Cancel (or show a dry run). From an
        alert, the request lives in the alert's thread (`thread_ts`) and names its incident;
        `change` adjusts the plan (Backfill downstream drops the root); `linked` records the
        request where it was asked from, in the transaction that records the request."""
        try:
            start_at = self.checks.start_at(command, utcnow())
        except WindowError as exc:
            return await self._refuse(user, "command.refused", Unplannable("options", str(exc)))
        if command.options.priority == "high":
            refused = await self._high_priority_refused(command, user)
            if refused is not None:
                return refused
        plan = await self._planned(command, user=user, change=change)
        if not isinstance(plan, Plan):
            return plan
        options = await self.checks.options(command, plan)
        if command.dry_run:
            async with self.sessions.begin() as session:
                await add_audit(
                    session,
                    actor=user,
                    action="request.dry_run",
                    detail={**plan.to_json(), "options": options},
                )
            return DryRun(plan, requester=user, options=options)
        awaiting = await self.awaiting(plan, [])
        async with self.sessions.begin() as session:
            row = await repository.create_request(
                session,
                plan=plan.to_json(),
                requester=user,
                channel=channel,
                options=options,
                start_at=start_at,
            )
            row.thread_ts, row.incident_id = thread_ts, incident_id
            await session.flush()
            preview = plan_preview(
                plan,
                request_id=row.id,
                requester=user,
                dry_run=False,
                awaiting=awaiting,
                options=options,
                start_at=start_at,
                now=utcnow(),
            )
            await outbox.enqueue(
                session,
                channel=channel,
                payload=preview,
                role=OutboxRole.STATUS,
                request_id=row.id,
            )
            if linked is not None:
                await linked(session, row.id)
        return Previewed(row.id)

    async def _high_priority_refused(self, command: PlanCommand, user: str) -> Unplannable | None:
        """`--priority high` puts a backfill ahead of everyone's: only someone who may approve
        it may ask for that."""
        root = await self.checks.root_of(command)
        also = await self.checks.downstream_owners(command, root)
        denial = await may_approve(
            self.config, self.groups, root, requester="", user=user, also=also
        )
        if denial is None:
            return None
        why = answers.high_priority_refused(root.dag_id)
        return await self._refuse(user, "command.refused", Unplannable("options", why))

    async def _planned(
        self, command: PlanCommand, *, user: str, change: PlanChange | None = None
    ) -> Plan | Unplannable | Busy:
        """The checked plan of a command, or the audited refusal saying why there is none."""
        try:
            plan = await self.make_plan(command)
            plan = change(plan) if change else plan
        except MarquezUnavailable as exc:
            unavailable = Unplannable("marquez_unavailable", str(exc))
            return await self._refuse(user, "command.refused", unavailable)
        except MarquezError as exc:
            bad = Unplannable("marquez_error", str(exc))
            return await self._refuse(user, "command.refused", bad)
        except PlanningError as exc:  # unknown DAG, bad range, cycle, schedule, plan too big
            failed = Unplannable("planning", str(exc))
            return await self._refuse(user, "command.refused", failed, text=command.dag)
        plan = replace(plan, notes=await self.checks.notes(plan))
        busy = await self.checks.busy(plan.steps)
        if busy:
            return await self._refuse(user, "command.refused", busy, text=command.dag)
        return plan

    async def start_now(
        self,
        command: PlanCommand,
        *,
        user: str,
        channel: str,
        thread_ts: str | None,
        incident_id: str | None,
        change: PlanChange | None = None,
        linked: Linked | None = None,
    ) -> Outcome:
        """**Approve backfill** in an alert. When the clicker's approval is all the plan needs,
        the request is recorded approved at once (no preview to click again), its status
        message goes to the alert's thread and it starts. When it needs more (a second person,
        other owners), the preview goes to the thread with this approval recorded. Someone not
        allowed to approve is refused before anything is planned or posted. What the click
        decides (the request, its approval, the messages owed, and `linked`: the alert's link
        to it) commits in one transaction, so a crash leaves all of it or none."""
        root = await self.checks.root_of(command)
        also = await self.checks.downstream_owners(command, root)
        denial = await may_approve(
            self.config, self.groups, root, requester="", user=user, also=also
        )
        if denial is not None:
            refused = Denied(denial, "approve")
            return await self._refuse(user, APPROVE_REFUSED, refused, text=command.dag)
        plan = await self._planned(command, user=user, change=change)
        if not isinstance(plan, Plan):
            return plan
        second = await may_approve(
            self.config, self.groups, root, requester=user, user=user, also=also
        )
        options = await self.checks.options(command, plan)
        blocked = with_option_notes(plan, options).blocked
        if blocked or second is not None or await self.awaiting(plan, [user]):
            previewed = await self.preview(
                command,
                user=user,
                channel=channel,
                change=change,
                thread_ts=thread_ts,
                incident_id=incident_id,
                linked=linked,
            )
            if not isinstance(previewed, Previewed) or blocked:
                return previewed
            if second is not None:  # the clicker asked; someone else approves in the thread
                return SecondPersonAsked(previewed.request_id, second)
            return await self.approve(previewed.request_id, user=user)
        try:
            async with self.sessions.begin() as session:
                await execution.lock_dags(session, [s.dag.dag_id for s in plan.steps])
                busy = await self.checks.busy(plan.steps, session=session)
                if busy:
                    raise _Busy(busy)
                row = await repository.create_request(
                    session, plan=plan.to_json(), requester=user, channel=channel, options=options
                )
                row.thread_ts, row.incident_id = thread_ts, incident_id
                await session.flush()
                approved = await repository.transition_request(
                    session,
                    row.id,
                    expected={RequestState.PREVIEWED},
                    to=RequestState.APPROVED,
                    actor=user,
                    detail={"from": "alert"},
                )
                await owed.approval_messages(session, approved)
                await self.notices.approved(session, approved)
                if linked is not None:
                    await linked(session, row.id)
        except _Busy as exc:
            return await self._refuse(user, APPROVE_REFUSED, exc.busy, text=command.dag)
        try:
            await self.hand_off(row.id)
        except Exception:  # recorded as approved; the resume loop hands it off again
            logger.exception("hand-off of %s failed; it will be retried", row.id)
        return StartedFromAlert(row.id, dags=len(plan.steps), runs=plan.run_count)

    async def _load(self, request_id: str) -> BackfillRequest | None:
        async with self.sessions() as session:
            try:
                return await repository.get_request(session, request_id)
            except repository.RequestNotFound:
                return None

    async def approve(self, request_id: str, *, user: str, channel: str | None = None) -> Outcome:
        """Record the approval, post the status message, and hand over to the executor.
        `channel`: where the click came from (None: a caller that checked already)."""
        request = await self.lookup.find(
            request_id, user=user, channel=channel, action=APPROVE_REFUSED
        )
        if not isinstance(request, BackfillRequest):
            return request
        if request.state != RequestState.PREVIEWED:
            return _unchanged(request)
        plan = with_option_notes(plan_from_json(request.plan), request.options)
        refused = await self.check_clicker(request, user, verb="approve", plan=plan)
        if refused is not None:
            return refused
        if plan.blocked:
            return Blocked(request.id)
        awaiting = await self.awaiting(plan, [*request.approvers, user])
        if awaiting:
            return await self._approve_in_part(request, plan, user, awaiting)
        try:
            async with self.sessions.begin() as session:
                # Two overlapping approvals at once: the second waits here, then sees the first.
                await execution.lock_dags(session, [s.dag.dag_id for s in plan.steps])
                approved = await repository.transition_request(
                    session,
                    request.id,
                    expected={RequestState.PREVIEWED},
                    to=RequestState.APPROVED,
                    actor=user,
                )
                busy = await self.checks.busy(plan.steps, exclude=request.id, session=session)
                if busy:
                    raise _Busy(busy)
                await owed.approval_messages(session, approved)
                await self.notices.approved(session, approved)
        except _Busy as exc:
            return await self._refuse(user, APPROVE_REFUSED, exc.busy, request_id=request.id)
        except repository.InvalidTransition:
            fresh = await self._load(request_id)
            return _unchanged(fresh or request)
        try:
            await self.hand_off(request.id)
        except Exception:  # recorded as approved; the resume loop hands it off again
            logger.exception("hand-off of %s failed; it will be retried", request.id)
        return Approved(request.id)

    async def awaiting(self, plan: Plan, approvers: Sequence[str]) -> tuple[str, ...]:
        """Teams whose approval the plan still needs (an `approve: all_owners` rule)."""
        owners = [name for step in plan.steps for name in step.owners]
        return await still_to_approve(self.config, self.groups, plan.root, owners, approvers)

    async def _approve_in_part(
        self, request: BackfillRequest, plan: Plan, user: str, awaiting: tuple[str, ...]
    ) -> ApprovalRecorded | AlreadyApproved | Unchanged:
        """Record one approval of several that an `approve: all_owners` rule asks for, and
        redraw the preview naming the teams still to approve."""
        if user in request.approvers:
            return AlreadyApproved(request.id, awaiting)
        try:
            async with self.sessions.begin() as session:
                recorded = await repository.add_approval(session, request.id, actor=user)
                preview = plan_preview(
                    plan,
                    request_id=request.id,
                    requester=request.requester,
                    dry_run=False,
                    awaiting=awaiting,
                    options=request.options,
                    start_at=request.start_at,
                    now=utcnow(),
                )
                await outbox.enqueue(
                    session,
                    channel=recorded.status_channel or recorded.channel or "",
                    payload=preview,
                    method="chat.update",
                    role=OutboxRole.STATUS_UPDATE,
                    request_id=request.id,
                )
        except repository.InvalidTransition:
            fresh = await self._load(request.id)
            return _unchanged(fresh or request)
        return ApprovalRecorded(request.id, awaiting)

    async def hand_off(self, request_id: str) -> bool:
        """Give an approved request to the executor, exactly once: the request is held in
        `approved` (a cancel waits, or wins first), the executor records its work and the
        hand-off is audited, all in one transaction."""
        async with self.sessions.begin() as session:
            if not await guards.hold(session, request_id, state=RequestState.APPROVED):
                return False
            if await guards.was_handed_off(session, request_id):
                return False
            request = await repository.get_request(session, request_id)
            await self.executor.start(session, request)
            await add_audit(
                session,
                actor="system",
                action=guards.HANDED_OFF,
                request_id=request_id,
                detail={"executor": self.executor.name},
            )
        return True

    async def resume(self) -> int:
        """Hand off approved requests whose hand-off was never recorded (after a restart or
        a failed hand-off); runs at start-up and then periodically."""
        async with self.sessions() as session:
            waiting = await repository.list_requests(
                session, state=RequestState.APPROVED, limit=500
            )
            ids = [r.id for r in waiting]
        resumed = 0
        for request_id in ids:
            if await self.hand_off(request_id):
                resumed += 1
        return resumed

    async def cancel(
        self, request_id: str, *, user: str, channel: str | None = None, command: bool = False
    ) -> Cancelled | Unchanged | Denied | Lookup:
        """Cancel an open request. `channel`: where the click (or with `command`, the
        `/backfill cancel`) came from; None: a caller that checked already."""
        request = await self.lookup.find(
            request_id, user=user, channel=channel, action=CANCEL_REFUSED, command=command
        )
        if not isinstance(request, BackfillRequest):
            return request
        if request.state not in OPEN:
            return _unchanged(request)
        if user != request.requester:  # requesters may always withdraw their own request
            refused = await self.check_clicker(request, user, verb="cancel")
            if refused is not None:
                return refused
        try:
            async with self.sessions.begin() as session:
                cancelled = await repository.transition_request(
                    session,
                    request.id,
                    expected={RequestState(request.state)},
                    to=RequestState.CANCELLED,
                    actor=user,
                )
                if request.state != RequestState.PREVIEWED:
                    await self.executor.cancel(session, cancelled)
                if request.state in (RequestState.APPROVED, RequestState.SCHEDULED):
                    await self.notices.ended(session, cancelled)  # a running one: the runner
                await owed.status_update(session, cancelled)
        except repository.InvalidTransition:
            fresh = await self._load(request.id)
            return _unchanged(fresh or request)
        return Cancelled(request.id)

    async def check_clicker(
        self,
        request: BackfillRequest,
        user: str,
        *,
        verb: Literal["approve", "cancel", "pause", "resume", "change"],
        plan: Plan | None = None,
    ) -> Denied | None:
        """None if `user` may approve (or cancel) the request; else the audited refusal. Under
        an `approve: all_owners` rule the owners of the plan's other DAGs may approve too."""
        root = DagRef(request.root_namespace, request.root_dag)
        planned = [name for step in plan.steps for name in step.owners] if plan else []
        also = also_approving(self.config, root, planned)
        denial = await may_approve(
            self.config, self.groups, root, requester=request.requester, user=user, also=also
        )
        if denial is None:
            return None
        refused = Denied(denial, verb, request_id=request.id)
        refusals = {"approve": APPROVE_REFUSED, "cancel": CANCEL_REFUSED, "change": CHANGE_REFUSED}
        action = refusals.get(verb, PAUSE_REFUSED)
        reason = answers.reason(refused)
        async with self.sessions.begin() as session:
            await add_audit(
                session, actor=user, action=action, request_id=request.id, detail={"reason": reason}
            )
        return refused


def _unchanged(request: BackfillRequest) -> Unchanged:
    """What a click on a request past the state it expects changed: nothing."""
    by = request.approvers[-1] if request.approvers else None
    return Unchanged(request.id, request.state, by=by)
