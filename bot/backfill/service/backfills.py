"""The backfill use cases behind `/backfill` and its buttons: preview, approve, cancel, status.

Every decision reloads the request from the database; buttons carry only its id. State changes
are checked transitions (a replay or double click changes nothing and says why), written with
their audit row and the Slack messages they owe in one transaction, before anything is sent.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import replace
from typing import Any, Literal

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.backfill.messages.backfill import denied, plan_preview, request_status, status_list
from bot.backfill.messages.progress import status_of
from bot.backfill.rules.states import RequestState
from bot.backfill.run.base import Executor
from bot.backfill.service.lookup import RequestLookup
from bot.backfill.service.notices import TeamNotices
from bot.backfill.store import execution, guards, repository
from bot.backfill.store.models import BackfillRequest
from bot.clients.marquez import MarquezError, MarquezUnavailable
from bot.config import BotConfig
from bot.core.audit import add_audit
from bot.core.model import DagRef
from bot.lineage.rules.errors import PlanningError
from bot.lineage.rules.planner import Plan, PlanNote, PlanStep, plan_from_json
from bot.lineage.service.planning import PlanRequest, PlanSource
from bot.ownership.rules import requires_all_owners
from bot.ownership.service import GroupDirectory, may_approve, still_to_approve
from bot.slack.messages.common import action_result, refusal
from bot.slack.messages.render import code, plural, sentence, user_mention
from bot.slack.messages.reply import Reply
from bot.slack.rules.commands import PlanCommand
from bot.slack.store import outbox
from bot.slack.store.models import OutboxRole

logger = logging.getLogger(__name__)

PlannerFactory = Callable[[], AbstractAsyncContextManager[PlanSource]]
PlanChange = Callable[[Plan], Plan]
OPEN_STATES = {RequestState.PREVIEWED, RequestState.APPROVED, RequestState.RUNNING}
ACTIVE_STATES = {RequestState.APPROVED, RequestState.RUNNING}
STATE_WORDS = {
    RequestState.APPROVED: "was already approved",
    RequestState.RUNNING: "is already running",
    RequestState.SUCCEEDED: "has already finished",
    RequestState.FAILED: "has already failed",
    RequestState.CANCELLED: "was cancelled",
    RequestState.REFUSED: "was refused",
}


APPROVE_REFUSED = "approval.refused"
CANCEL_REFUSED = "cancel.refused"


class _Busy(Exception):
    """Rolls the approval back: another backfill reruns some of the same intervals."""


class BackfillService:
    def __init__(
        self,
        *,
        sessions: async_sessionmaker[AsyncSession],
        config: BotConfig,
        planners: PlannerFactory,
        executor: Executor,
        groups: GroupDirectory,
        wake_sender: Callable[[], None],
        notices: TeamNotices | None = None,
    ) -> None:
        self.sessions = sessions
        self.config = config
        self.planners = planners
        self.executor = executor
        self.groups = groups
        self.wake_sender = wake_sender
        self.notices = notices or TeamNotices(config)
        self.lookup = RequestLookup(sessions, self.notices)

    async def _refuse(self, user: str, action: str, reason: str, **detail: Any) -> Reply:
        async with self.sessions.begin() as session:
            await add_audit(session, actor=user, action=action, detail={"reason": reason, **detail})
        return Reply(refusal(reason))

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
        request = PlanRequest(
            command.dag, command.range_text, command.namespace, command.only, command.exclude
        )
        async with self.planners() as planner:
            return await planner.plan(request)

    async def preview(
        self,
        command: PlanCommand,
        *,
        user: str,
        channel: str,
        thread_ts: str | None = None,
        incident_id: str | None = None,
        change: PlanChange | None = None,
    ) -> Reply:
        """Plan the backfill; post the preview with Approve/Cancel (or show a dry run). From an
        alert, the request lives in the alert's thread (`thread_ts`) and names its incident;
        `change` adjusts the plan (Backfill downstream drops the root)."""
        plan = await self._planned(command, user=user, change=change)
        if isinstance(plan, Reply):
            return plan
        if command.dry_run:
            async with self.sessions.begin() as session:
                await add_audit(
                    session, actor=user, action="request.dry_run", detail=plan.to_json()
                )
            return Reply(plan_preview(plan, request_id="", requester=user, dry_run=True))
        options = {"only": command.only, "exclude": list(command.exclude), "dry_run": False}
        awaiting = await self._awaiting(plan, [])
        async with self.sessions.begin() as session:
            row = await repository.create_request(
                session, plan=plan.to_json(), requester=user, channel=channel, options=options
            )
            row.thread_ts, row.incident_id = thread_ts, incident_id
            await session.flush()
            preview = plan_preview(
                plan, request_id=row.id, requester=user, dry_run=False, awaiting=awaiting
            )
            await outbox.enqueue(
                session,
                channel=channel,
                payload=preview,
                role=OutboxRole.STATUS,
                request_id=row.id,
            )
        self.wake_sender()
        return Reply(
            action_result(f"Plan {row.id} posted for approval."),
            changed=True,
            request_id=row.id,
        )

    async def _planned(
        self, command: PlanCommand, *, user: str, change: PlanChange | None = None
    ) -> Plan | Reply:
        """The checked plan of a command, or the audited refusal saying why there is none."""
        try:
            plan = await self.make_plan(command)
            plan = change(plan) if change else plan
        except MarquezUnavailable as exc:
            reason = f"Marquez is unreachable, so no plan can be made right now ({exc})."
            return await self._refuse(user, "command.refused", reason)
        except MarquezError as exc:
            return await self._refuse(user, "command.refused", f"Marquez answered badly: {exc}")
        except PlanningError as exc:  # unknown DAG, bad range, cycle, schedule, plan too big
            return await self._refuse(user, "command.refused", str(exc), text=command.dag)
        plan = replace(plan, notes=await self._check(plan))
        busy = await self._busy(plan.steps)
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
    ) -> Reply:
        """**Approve backfill** in an alert. When the clicker's approval is all the plan needs,
        the request is recorded approved at once (no preview to click again), its status
        message goes to the alert's thread and it starts. When it needs more (a second person,
        other owners), the preview goes to the thread with this approval recorded. Someone not
        allowed to approve is refused before anything is planned or posted."""
        root = await self._root_of(command)
        also = await self._downstream_owners(command, root)
        denial = await may_approve(
            self.config, self.groups, root, requester="", user=user, also=also
        )
        if denial is not None:
            reason = denied(denial, action="approve")
            return await self._refuse(user, APPROVE_REFUSED, reason, text=command.dag)
        plan = await self._planned(command, user=user, change=change)
        if isinstance(plan, Reply):
            return plan
        second = await may_approve(
            self.config, self.groups, root, requester=user, user=user, also=also
        )
        if plan.blocked or second is not None or await self._awaiting(plan, [user]):
            previewed = await self.preview(
                command,
                user=user,
                channel=channel,
                change=change,
                thread_ts=thread_ts,
                incident_id=incident_id,
            )
            if previewed.request_id is None or plan.blocked:
                return previewed
            if second is not None:  # the clicker asked; someone else approves in the thread
                return Reply(
                    action_result(
                        f"{denied(second, action='approve')} The plan "
                        f"({previewed.request_id}) is in the alert's thread for them."
                    ),
                    changed=True,
                    request_id=previewed.request_id,
                )
            approval = await self.approve(previewed.request_id, user=user)
            return replace(approval, request_id=previewed.request_id)
        options = {"only": command.only, "exclude": list(command.exclude), "dry_run": False}
        try:
            async with self.sessions.begin() as session:
                await execution.lock_dags(session, [s.dag.dag_id for s in plan.steps])
                busy = await self._busy(plan.steps, session=session)
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
                await self._owe_approval_messages(session, approved)
                await self.notices.approved(session, approved)
        except _Busy as exc:
            return await self._refuse(user, APPROVE_REFUSED, str(exc), text=command.dag)
        self.wake_sender()
        try:
            await self.hand_off(row.id)
        except Exception:  # recorded as approved; the resume loop hands it off again
            logger.exception("hand-off of %s failed; it will be retried", row.id)
        return Reply(
            action_result(
                f"Approved backfill {row.id}: {plural(len(plan.steps), 'DAG')}, "
                f"{plural(plan.run_count, 'run')}. Progress follows in the alert's thread."
            ),
            changed=True,
            request_id=row.id,
        )

    async def _root_of(self, command: PlanCommand) -> DagRef:
        """The DAG a command names, as far as the planner resolves it (else as typed)."""
        try:
            async with self.planners() as planner:
                return await planner.resolve(command.dag, command.namespace)
        except Exception:  # the plan that follows says why, with the usual refusal
            return DagRef(command.namespace or "", command.dag)

    async def _downstream_owners(self, command: PlanCommand, root: DagRef) -> list[str]:
        """Teams that may approve besides the root's owners: under `approve: all_owners`, the
        owners of the DAGs a backfill of `root` reruns."""
        if not requires_all_owners(self.config, root):
            return []
        try:
            async with self.planners() as planner:
                impact = await planner.impact(root.dag_id, root.namespace)
        except Exception:
            return []
        return [name for owners in impact.owners.values() for name in owners]

    async def _check(self, plan: Plan) -> tuple[PlanNote, ...]:
        """The executor's notes on the plan's DAGs; a failed check is a note, not a refusal."""
        try:
            return await self.executor.check(plan)
        except Exception as exc:
            logger.warning("cannot check the plan with %s: %s", self.executor.name, exc)
            note = f"could not check this DAG with {self.executor.name}: {exc}"
            return (PlanNote(plan.root.dag_id, note[:300], blocking=False),)

    async def _busy(
        self,
        steps: Sequence[PlanStep],
        *,
        exclude: str | None = None,
        session: AsyncSession | None = None,
    ) -> str | None:
        """Why the plan must wait: another backfill already reruns one of its DAG intervals."""
        wanted = [(s.dag.namespace, s.dag.dag_id, s.intervals) for s in steps]
        if session is None:
            async with self.sessions() as own:
                found = await execution.overlapping(own, wanted, exclude=exclude)
        else:
            found = await execution.overlapping(session, wanted, exclude=exclude)
        if not found:
            return None
        first = found[0]
        return (
            f"{first.dag_id} is already being backfilled over some of these intervals by "
            f"backfill {first.request_id} ({first.state}); one backfill per DAG at a time. "
            f"Wait for it to finish or cancel it (`/backfill status {first.request_id}`)."
        )

    async def _load(self, request_id: str) -> BackfillRequest | None:
        async with self.sessions() as session:
            try:
                return await repository.get_request(session, request_id)
            except repository.RequestNotFound:
                return None

    async def approve(self, request_id: str, *, user: str, channel: str | None = None) -> Reply:
        """Record the approval, post the status message, and hand over to the executor.
        `channel`: where the click came from (None: a caller that checked already)."""
        request = await self.lookup.find(
            request_id, user=user, channel=channel, action=APPROVE_REFUSED
        )
        if isinstance(request, Reply):
            return request
        if request.state != RequestState.PREVIEWED:
            return Reply(action_result(self._unchanged(request)))
        plan = plan_from_json(request.plan)
        refused = await self._check_clicker(request, user, verb="approve", plan=plan)
        if refused is not None:
            return refused
        if plan.blocked:
            return Reply(refusal("This plan cannot run as it is; see its preview."))
        awaiting = await self._awaiting(plan, [*request.approvers, user])
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
                busy = await self._busy(plan.steps, exclude=request.id, session=session)
                if busy:
                    raise _Busy(busy)
                await self._owe_approval_messages(session, approved)
                await self.notices.approved(session, approved)
        except _Busy as exc:
            return await self._refuse(user, APPROVE_REFUSED, str(exc), request_id=request.id)
        except repository.InvalidTransition:
            fresh = await self._load(request_id)
            return Reply(action_result(self._unchanged(fresh or request)))
        self.wake_sender()
        try:
            await self.hand_off(request.id)
        except Exception:  # recorded as approved; the resume loop hands it off again
            logger.exception("hand-off of %s failed; it will be retried", request.id)
        return Reply(action_result(f"Approved backfill {request.id}."), changed=True)

    async def _awaiting(self, plan: Plan, approvers: Sequence[str]) -> tuple[str, ...]:
        """Teams whose approval the plan still needs (an `approve: all_owners` rule)."""
        owners = [name for step in plan.steps for name in step.owners]
        return await still_to_approve(self.config, self.groups, plan.root, owners, approvers)

    async def _approve_in_part(
        self, request: BackfillRequest, plan: Plan, user: str, awaiting: tuple[str, ...]
    ) -> Reply:
        """Record one approval of several that an `approve: all_owners` rule asks for, and
        redraw the preview naming the teams still to approve."""
        waiting = ", ".join(awaiting)
        if user in request.approvers:
            return Reply(action_result(f"You approved already; still waiting for {waiting}."))
        try:
            async with self.sessions.begin() as session:
                recorded = await repository.add_approval(session, request.id, actor=user)
                preview = plan_preview(
                    plan,
                    request_id=request.id,
                    requester=request.requester,
                    dry_run=False,
                    awaiting=awaiting,
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
            return Reply(action_result(self._unchanged(fresh or request)))
        self.wake_sender()
        return Reply(
            action_result(
                f"Your approval of backfill {request.id} is recorded; it starts once {waiting} "
                "approve as well."
            ),
            changed=True,
        )

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
        self.wake_sender()
        self.executor.wake()
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
    ) -> Reply:
        """Cancel an open request. `channel`: where the click (or with `command`, the
        `/backfill cancel`) came from; None: a caller that checked already."""
        request = await self.lookup.find(
            request_id, user=user, channel=channel, action=CANCEL_REFUSED, command=command
        )
        if isinstance(request, Reply):
            return request
        if request.state not in OPEN_STATES:
            return Reply(action_result(self._unchanged(request)))
        if user != request.requester:  # requesters may always withdraw their own request
            refused = await self._check_clicker(request, user, verb="cancel")
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
                if request.state == RequestState.APPROVED:
                    await self.notices.ended(session, cancelled)  # a running one: the runner
                await self._owe_status_update(session, cancelled)
        except repository.InvalidTransition:
            fresh = await self._load(request.id)
            return Reply(action_result(self._unchanged(fresh or request)))
        self.wake_sender()
        self.executor.wake()
        return Reply(action_result(f"Cancelled backfill {request.id}."), changed=True)

    async def _check_clicker(
        self,
        request: BackfillRequest,
        user: str,
        *,
        verb: Literal["approve", "cancel"],
        plan: Plan | None = None,
    ) -> Reply | None:
        """None if `user` may approve (or cancel) the request; else the audited refusal. Under
        an `approve: all_owners` rule the owners of the plan's other DAGs may approve too."""
        root = DagRef(request.root_namespace, request.root_dag)
        also: list[str] = []
        if plan is not None and requires_all_owners(self.config, root):
            also = [name for step in plan.steps for name in step.owners]
        denial = await may_approve(
            self.config, self.groups, root, requester=request.requester, user=user, also=also
        )
        if denial is None:
            return None
        reason = denied(denial, action=verb)
        action = APPROVE_REFUSED if verb == "approve" else CANCEL_REFUSED
        async with self.sessions.begin() as session:
            await add_audit(
                session, actor=user, action=action, request_id=request.id, detail={"reason": reason}
            )
        return Reply(refusal(reason))

    async def _owe_status_update(self, session: AsyncSession, request: BackfillRequest) -> None:
        """Rewrite the request's current message (preview or status) to show its state."""
        await outbox.enqueue(
            session,
            channel=request.status_channel or request.channel or "",
            payload=request_status(status_of(request)),
            method="chat.update",
            role=OutboxRole.STATUS_UPDATE,
            request_id=request.id,
        )

    async def _owe_approval_messages(self, session: AsyncSession, request: BackfillRequest) -> None:
        """Shrink the preview to a pointer and post the status message that parents the
        progress thread. Replies wait for the new parent: its ts is cleared until it is posted."""
        channel = request.status_channel or request.channel or ""
        who = user_mention(request.approvers[-1]) if request.approvers else "someone"
        pointer = action_result(
            sentence(
                "Backfill {} of {} {}..{} was approved by {}; its status and progress follow in "
                "the message below.",
                request.id,
                code(request.root_dag),
                request.start_date.isoformat(),
                request.end_date.isoformat(),
                who,
            )
        )
        if request.status_message_ts:
            await outbox.enqueue(
                session,
                channel=channel,
                payload={**pointer, "ts": request.status_message_ts},
                method="chat.update",
                request_id=request.id,
            )
            await guards.forget_status_message(session, request.id)
        await outbox.enqueue(
            session,
            channel=channel,
            payload=request_status(status_of(request)),
            role=OutboxRole.STATUS,
            request_id=request.id,
        )

    def _unchanged(self, request: BackfillRequest) -> str:
        state = RequestState(request.state)
        if state == RequestState.PREVIEWED:
            return f"Backfill {request.id} is still waiting for approval."
        if request.approvers and state == RequestState.APPROVED:
            return sentence(
                "Nothing changed: backfill {} {} by {}.",
                request.id,
                STATE_WORDS[state],
                user_mention(request.approvers[-1]),
            )
        return f"Nothing changed: backfill {request.id} {STATE_WORDS[state]}."

    async def status(self, request_id: str | None, *, user: str, channel: str = "") -> Reply:
        """`/backfill status [ID]` typed in `channel`: the requests `user` may see from there
        (where they live or were announced, and in a DM their own), or the one `request_id`
        names; one they may not see is answered like an unknown id."""
        if request_id is None:
            async with self.sessions() as session:
                recent = await repository.list_requests(session, limit=200)
            mine = [r for r in recent if self.lookup.reachable(r, user, channel, command=True)][:10]
            return Reply(status_list([status_of(r) for r in mine]))
        request = await self.lookup.find(
            request_id, user=user, channel=channel, action="status.refused", command=True
        )
        if isinstance(request, Reply):
            return request
        return Reply(request_status(status_of(request)))

    async def show_plan(self, request_id: str, *, user: str, channel: str) -> Plan | Reply:
        """**Show full plan**: the request's plan, for a click where the request lives."""
        request = await self.lookup.find(
            request_id, user=user, channel=channel, action="show_plan.refused"
        )
        if isinstance(request, Reply):
            return request
        return plan_from_json(request.plan)
