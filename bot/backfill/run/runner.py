"""The step runner: drives approved backfills through a backend (Airflow 3, Airflow 2, Spark).

Each pass over a request has three phases. (A) Outside any transaction, ask the backend about
the steps under way (and cancel them if the request was cancelled). (B) In one transaction,
record what changed: step states and counts, steps to skip, steps claimed to start, and the
thread lines those changes owe, gathered with the request; when a report is due (the gap of
bot/backfill/rules/progress.py `report_due`, which grows as the backfill ages, or the final state)
the gathered lines become one thread reply and the status message one edit, if it changed.
(C) Outside, submit the claimed steps, then record each backend's answer. A claim is a
conditional UPDATE, so two bot processes never start the same step, and a backend's `submit`
finds work a crashed process already started. A submission the backend refuses for good
(`StepRejected`) fails the step at once; one that fails for a reason that may pass (unreachable,
5xx, 429, timeouts) is tried again with growing pauses until `SubmitRetry` gives up, and then the
step fails saying why.
Everything the runner knows lives in the database, so a restarted bot carries on where it was.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.backfill.messages import progress as progress_messages
from bot.backfill.rules.estimate import for_request
from bot.backfill.rules.options import RerunCounts, RunOptions, default_rerun
from bot.backfill.rules.progress import (
    Counts,
    StepView,
    next_moves,
    outcome,
)
from bot.backfill.rules.states import STEP_ACTIVE, STEP_FINAL, RequestState, StepState
from bot.backfill.rules.status import ReportEstimate
from bot.backfill.run import preview, reports
from bot.backfill.run.backends import (
    Backend,
    Progress,
    StepRejected,
    StepWork,
)
from bot.backfill.run.budget import BudgetGate
from bot.backfill.run.holds import Holds
from bot.backfill.run.submit import Submitter
from bot.backfill.run.submit_retry import SubmitRetry
from bot.backfill.store import execution, repository
from bot.backfill.store.models import BackfillRequest, BackfillStep
from bot.config import Execution
from bot.core.after_commit import wake_after_commit, wake_on_commit
from bot.core.metrics import Metrics
from bot.core.model import DagRef
from bot.core.tables import utcnow
from bot.core.worker import Worker
from bot.lineage.rules.planner import Plan, PlanNote, interval_from_json

logger = logging.getLogger(__name__)
EndHook = Callable[[AsyncSession, BackfillRequest], Coroutine[Any, Any, None]]
StartHook = Callable[
    [AsyncSession, BackfillRequest, Sequence[ReportEstimate]], Coroutine[Any, Any, None]
]
# A claimed step with no backend answer recorded this long ago was left by a crashed process.
ORPHAN_AFTER = timedelta(minutes=2)


@dataclass
class _Pass:
    """What one pass over a request learnt, before it is written."""

    polled: dict[str, Progress] = field(default_factory=dict)
    cancel_states: dict[str, dict[str, object]] = field(default_factory=dict)
    resubmit: list[str] = field(default_factory=list)
    events: list[progress_messages.Event] = field(default_factory=list)


class Runner:
    """An `Executor` that runs steps itself, through a backend, and reports in Slack."""

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        backend: Backend,
        settings: Execution,
        *,
        clock: Callable[[], datetime] = utcnow,
        submit_retry: SubmitRetry | None = None,
        metrics: Metrics,
        on_end: EndHook | None = None,
        on_start: StartHook | None = None,
    ) -> None:
        """`on_end`: what else a request owes when it ends (notices to other teams, its alert's
        edit), written in the same transaction as its final state; `on_start`: what it owes
        when its first step starts (the report owners' estimates), in that transaction."""
        self.sessions = sessions
        self.metrics = metrics
        self.backend = backend
        self.settings = settings
        self.submit_retry = submit_retry or SubmitRetry()
        self.clock = clock
        self.submitter = Submitter(
            sessions, backend, settings, clock=clock, metrics=metrics,
            retry=self.submit_retry, reject=self._reject,
        )  # fmt: skip
        self.on_end = on_end
        self.on_start = on_start
        self._worker = Worker("runner", self.tick, every_s=self.settings.poll_interval_s)
        self.holds = Holds(sessions, self.options)
        self.budget = BudgetGate(
            settings.budget,
            self.options,
            lambda request, step: backend.runs_at_once(self._work(request, step, cancelling=False)),
        )
        wake_on_commit(sessions, execution.OWED, self.wake)  # a hand-off wakes the runner
        self._booted = clock()

    @property
    def name(self) -> str:
        return self.backend.name

    keeps_time = True

    # --- the Executor protocol (called inside the caller's transaction) -----------------

    async def start(self, session: AsyncSession, request: BackfillRequest) -> None:
        """Start at once, or hold it `scheduled` until its `--at` and its off-peak window."""
        now = self.clock()
        if await self.holds.held(session, request, now):
            return
        await repository.transition_request(
            session,
            request.id,
            expected={RequestState.APPROVED},
            to=RequestState.RUNNING,
            actor="system",
            detail={"executor": self.name},
        )
        await execution.mark_started(session, request.id, at=now)
        wake_after_commit(session, execution.OWED)

    async def cancel(self, session: AsyncSession, request: BackfillRequest) -> None:
        if request.started_at is not None:
            wake_after_commit(session, execution.OWED)
            return None  # the next pass cancels what runs and skips the rest
        # Never handed to us: nothing runs, so it ends here and no pass will look at it.
        for step in request.steps:
            if step.state == StepState.PENDING:
                await self._move(
                    session, step, StepState.SKIPPED, message="cancelled before it started"
                )
        await execution.mark_finished(session, request.id, at=self.clock())

    def wake(self) -> None:
        self._worker.wake()

    async def check(self, plan: Plan) -> tuple[PlanNote, ...]:
        try:
            return await preview.check(self.backend, plan)
        except Exception as exc:
            self.metrics.request_failed(exc)
            raise

    def unhonoured(self, options: RunOptions) -> tuple[str, ...]:
        return self.backend.unhonoured(options)

    async def check_options(self, plan: Plan, options: RunOptions) -> tuple[PlanNote, ...]:
        return await preview.check_options(self.backend, plan, options)

    async def asset_consumers(self, plan: Plan) -> list[dict[str, str]]:
        return await preview.asset_consumers(self.backend, plan)

    async def paces(self, plan: Plan, options: RunOptions) -> dict[str, dict[str, Any]]:
        return await preview.paces(self.backend, plan, options)

    async def rerun_counts(self, plan: Plan) -> RerunCounts | None:
        return await preview.rerun_counts(self.backend, plan)

    # --- the loop ---------------------------------------------------------------------------

    def stop(self) -> None:
        """End `run_forever` after the pass under way (no step is left half-recorded)."""
        self._worker.stop()

    async def run_forever(self) -> None:
        await self._worker.run_forever()

    async def tick(self) -> int:
        """One pass over every request that needs attention; returns how many there were."""
        await self.holds.wake_due(self.clock())
        async with self.sessions() as session:
            ids = await execution.requests_to_follow(session)
        for request_id in ids:
            try:
                await self.advance(request_id)
            except Exception:
                logger.exception("advancing backfill %s failed; retrying next pass", request_id)
        return len(ids)

    async def advance(self, request_id: str) -> None:
        request = await self._load(request_id)
        if request is None:
            return
        cancelled = request.state == RequestState.CANCELLED
        seen = await self._observe(request, cancelled)
        starts = await self._record(request_id, seen)
        submitted = [
            step_id
            for step_id in [*seen.resubmit, *starts]
            if await self._submit(request_id, step_id)
        ]
        if submitted:
            self.wake()  # a submit may have finished a step at once; look again soon

    # --- phase A: ask the backend -----------------------------------------------------------

    def options(self, request: BackfillRequest) -> RunOptions:
        default = default_rerun(self.settings.airflow.reprocess_behavior)
        return RunOptions.from_json(request.options, default_rerun=default)

    def _work(self, request: BackfillRequest, step: BackfillStep, *, cancelling: bool) -> StepWork:
        return StepWork(
            request_id=request.id,
            step_id=step.id,
            dag=DagRef(step.namespace, step.dag_id),
            intervals=tuple(interval_from_json(i) for i in step.intervals),
            state=dict(step.executor_state or {}),
            cancelling=cancelling,
            since=step.started_at,
            options=self.options(request),
            pausing=request.state == RequestState.PAUSED and not cancelling,
            budget=BudgetGate.granted(step),
        )

    def _orphaned(self, step: BackfillStep, now: datetime) -> bool:
        """Claimed by a process that died before the backend answered (or by this one before
        a restart): nobody else is submitting it."""
        if step.id in self.submitter.in_flight:
            return False
        return step.updated_at < self._booted or now - step.updated_at > ORPHAN_AFTER

    def _needs_submit(self, step: BackfillStep, now: datetime) -> bool:
        state = step.executor_state or {}
        if state.get("started") or step.id in self.submitter.in_flight:
            return False
        retry_at = state.get("retry_at")
        if isinstance(retry_at, str):
            return datetime.fromisoformat(retry_at) <= now
        return self._orphaned(step, now)

    async def _observe(self, request: BackfillRequest, cancelled: bool) -> _Pass:
        seen = _Pass()
        now = self.clock()
        for step in request.steps:
            if step.state not in STEP_ACTIVE:
                continue
            work = self._work(request, step, cancelling=cancelled)
            if not work.state.get("started"):
                if cancelled and ("retry_at" in work.state or self._orphaned(step, now)):
                    # Nothing was started, and nobody is starting it right now.
                    seen.polled[step.id] = Progress(Counts(), done=True, ok=False)
                elif not cancelled and not work.pausing and self._needs_submit(step, now):
                    seen.resubmit.append(step.id)
                continue
            result = await self._follow(request, work, seen)
            if result is None:
                continue
            if result.lost and cancelled:
                result = Progress(result.counts, done=True, ok=False, message="interrupted")
            elif result.lost:
                seen.resubmit.append(step.id)
                lost_state = {**work.state, **(result.state or {}), "started": False}
                seen.cancel_states[step.id] = lost_state
                continue
            seen.polled[step.id] = result
        return seen

    async def _follow(
        self, request: BackfillRequest, work: StepWork, seen: _Pass
    ) -> Progress | None:
        """Cancel (once) if the request was cancelled, then poll; None if the backend could not
        be asked this time."""
        if work.cancelling and not work.state.get("cancel_sent"):
            try:
                new_state = await self.backend.cancel(work)
            except Exception as exc:
                self.metrics.request_failed(exc)
                logger.warning("cannot cancel %s of %s: %s", work.dag.dag_id, request.id, exc)
            else:
                merged = {**work.state, **(new_state or {}), "cancel_sent": True}
                seen.cancel_states[work.step_id] = merged
                work = replace(work, state=merged)
        if not work.cancelling and bool(work.state.get("paused_sent")) != work.pausing:
            try:
                new_state = await self.backend.pause(work, work.pausing)
            except Exception as exc:  # asked again next pass
                self.metrics.request_failed(exc)
                logger.warning("cannot pause %s of %s: %s", work.dag.dag_id, request.id, exc)
            else:
                merged = {**work.state, **(new_state or {}), "paused_sent": work.pausing}
                seen.cancel_states[work.step_id] = merged
                work = replace(work, state=merged)
        try:
            return await self.backend.poll(work)
        except StepRejected as exc:  # e.g. the DAG was paused or deleted between chunks
            self.metrics.request_failed(exc)
            return Progress(Counts.from_json(None), done=True, ok=False, message=str(exc))
        except Exception as exc:
            self.metrics.request_failed(exc)
            logger.warning("cannot follow %s of %s: %s", work.dag.dag_id, request.id, exc)
            return None

    # --- phase B: record ----------------------------------------------------------------

    async def _record(self, request_id: str, seen: _Pass) -> list[str]:
        now = self.clock()
        async with self.sessions.begin() as session:
            request = await repository.get_request(session, request_id)
            cancelled = request.state == RequestState.CANCELLED
            by_id = {s.id: s for s in request.steps}
            for step_id, state in seen.cancel_states.items():
                if by_id[step_id].state in STEP_ACTIVE:  # else another replica moved it on
                    await execution.note_step(session, step_id, executor_state=state)
                    # What `_apply` merges a poll's state into below: not the copy read before.
                    by_id[step_id].executor_state = dict(state)
            for step_id, result in seen.polled.items():
                await self._apply(session, request, by_id[step_id], result, seen)
            request = await repository.get_request(session, request_id)
            views = [StepView(s.id, s.dag_id, s.state, tuple(s.upstream)) for s in request.steps]
            paused = await self.holds.pause_if_due(session, request, seen.events, now)
            moves = next_moves(
                views,
                cancelled=cancelled,
                max_parallel=self.settings.max_parallel_steps,
                paused=paused or request.state == RequestState.PAUSED,
                first=self.budget.first(request, now),
            )
            skipped = []
            for step_id, why in moves.skip:
                step = await self._move(session, by_id[step_id], StepState.SKIPPED, message=why)
                if step is not None:
                    skipped.append((step.dag_id, why))
            if skipped:
                seen.events.append(progress_messages.Skipped(tuple(skipped)))
            starts = []
            fresh = all(s.state == StepState.PENDING for s in request.steps)
            ready = [by_id[step_id] for step_id in moves.start]
            admitted = await self.budget.admit(session, request, ready, now) if ready else {}
            for step_id, runs in admitted.items():
                step = await self._move(
                    session, by_id[step_id], StepState.SUBMITTED, executor=self.name
                )
                if step is None:
                    continue
                if runs:  # what the backend keeps to: `StepWork.budget`
                    state = {**(step.executor_state or {}), "budget": runs}
                    await execution.note_step(session, step.id, executor_state=state)
                starts.append(step.id)  # told as started once the backend accepts it
            request = await repository.get_request(session, request_id)
            if fresh and starts and self.on_start is not None:
                await self.on_start(session, request, for_request(request, now))
            await self._settle_budget(session, request)
            await self._finish_if_done(session, request, seen, now)
            request = await repository.get_request(session, request_id)
            await self._owe_messages(session, request, seen, now)
        return starts

    async def _settle_budget(self, session: AsyncSession, request: BackfillRequest) -> None:
        """Give back the runs of steps that ended, and take a request that starts nothing now
        out of the queue; wake the runner (other requests may start) if runs came free."""
        ended = [s.id for s in request.steps if s.state in STEP_FINAL]
        freed = await self.budget.release(session, ended)
        if request.state != RequestState.RUNNING:
            await self.budget.withdraw(session, request.id)
        if freed:
            wake_after_commit(session, execution.OWED)

    async def _move(
        self,
        session: AsyncSession,
        step: BackfillStep,
        to: StepState,
        *,
        message: str | None = None,
        executor: str | None = None,
        counts: Counts | None = None,
    ) -> BackfillStep | None:
        try:
            moved = await repository.transition_step(
                session,
                step.id,
                expected={step.state},
                to=to,
                executor=executor,
                counts=counts.to_json() if counts else None,
                detail={"message": message} if message else None,
            )
        except repository.InvalidTransition:
            return None  # another worker moved it first; it reports the move
        if message:
            await execution.note_step(session, step.id, message=message)
        return moved

    async def _apply(
        self,
        session: AsyncSession,
        request: BackfillRequest,
        step: BackfillStep,
        result: Progress,
        seen: _Pass,
    ) -> None:
        if step.state not in STEP_ACTIVE:
            # Another replica recorded this step's end since this pass asked the backend: what
            # was seen is stale, and it reported the end already.
            return
        await execution.note_step(
            session,
            step.id,
            counts=result.counts.to_json(),
            executor_state=None
            if result.state is None
            else {**(step.executor_state or {}), **result.state},
            message=result.message,
        )
        if not result.done:
            if step.state == StepState.SUBMITTED and (
                result.counts.running or result.counts.succeeded
            ):
                await self._move(session, step, StepState.RUNNING)
            return
        cancelled = request.state == RequestState.CANCELLED
        if result.ok:
            to = StepState.SUCCEEDED
        else:
            to = StepState.CANCELLED if cancelled else StepState.FAILED
        moved = await self._move(session, step, to, message=result.message, counts=result.counts)
        if moved is None:
            return
        work = self._work(request, moved, cancelling=cancelled)
        seen.events.append(
            progress_messages.Finished(
                moved.dag_id,
                to.value,
                result.counts,
                progress_messages.span(moved.started_at, moved.finished_at),
                result.message,
                self.backend.link(work),
            )
        )

    async def _finish_if_done(
        self, session: AsyncSession, request: BackfillRequest, seen: _Pass, now: datetime
    ) -> None:
        cancelled = request.state == RequestState.CANCELLED
        final = outcome((s.state for s in request.steps), cancelled=cancelled)
        if final is None or request.finished_at is not None:
            return
        if not await execution.mark_finished(session, request.id, at=now):
            return
        if request.state in (RequestState.RUNNING, RequestState.PAUSED):
            await repository.transition_request(
                session, request.id, expected={request.state}, to=final, actor="system"
            )
        if self.on_end is not None:
            await self.on_end(session, await repository.get_request(session, request.id))
        seen.events.append(progress_messages.Summary(final))

    async def _owe_messages(
        self, session: AsyncSession, request: BackfillRequest, seen: _Pass, now: datetime
    ) -> bool:
        queued = await self.budget.queued(session, request, now)
        return await reports.owe(session, request, seen.events, now, self.settings, queued)

    # --- phase C: submit ------------------------------------------------------------------

    async def _submit(self, request_id: str, step_id: str) -> bool:
        """Submit one claimed step; True if the backend took it."""
        request = await self._load(request_id)
        step = next((s for s in request.steps if s.id == step_id), None) if request else None
        if request is None or step is None or step.state not in STEP_ACTIVE:
            return False
        if request.state == RequestState.PAUSED:
            # Claimed just before the pause: submitted as soon as the request resumes.
            waiting = {**(step.executor_state or {}), "retry_at": self.clock().isoformat()}
            await self._note(step_id, waiting, message="waiting: the backfill is paused")
            return False
        if request.state != RequestState.RUNNING:
            return False
        work = self._work(request, step, cancelling=False)
        return await self.submitter.submit(request, step, work)

    async def _note(self, step_id: str, state: dict[str, object], *, message: str) -> None:
        async with self.sessions.begin() as session:
            await execution.note_step(session, step_id, executor_state=state, message=message)

    async def _reject(self, request_id: str, step: BackfillStep, why: str) -> None:
        seen = _Pass()
        seen.polled[step.id] = Progress(Counts.of([], expected=0), done=True, message=why)
        await self._record(request_id, seen)
        self.wake()

    async def _load(self, request_id: str) -> BackfillRequest | None:
        async with self.sessions() as session:
            try:
                return await repository.get_request(session, request_id)
            except repository.RequestNotFound:
                return None
