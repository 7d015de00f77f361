"""Phase C of a runner pass: hand one claimed step to the backend and record its answer. A step
the backend took is told as started (in the next report); `Busy` waits for its retry time; a
refusal for good (`StepRejected`) fails the step at once; anything else is tried again with
growing pauses until `SubmitRetry` gives up, and then the step fails saying why. What the
backend decided before a submission was cut short (`SubmitInterrupted`) is kept."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.backfill.messages import progress as progress_messages
from bot.backfill.run.backends import Backend, Busy, StepRejected, StepWork, SubmitInterrupted
from bot.backfill.run.submit_retry import SubmitRetry, span
from bot.backfill.store import execution
from bot.backfill.store.models import BackfillRequest, BackfillStep
from bot.config import Execution
from bot.core.metrics import Metrics

logger = logging.getLogger(__name__)
# Step state kept while submissions fail: how many in a row, and since when.
FAILURE_KEYS = ("submit_failures", "failing_since")
Reject = Callable[[str, BackfillStep, str], Awaitable[None]]


class Submitter:
    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        backend: Backend,
        settings: Execution,
        *,
        clock: Callable[[], datetime],
        metrics: Metrics,
        retry: SubmitRetry,
        reject: Reject,
    ) -> None:
        """`reject`: fail the step with a reason (the runner records it as a pass would)."""
        self.sessions = sessions
        self.backend = backend
        self.settings = settings
        self.clock = clock
        self.metrics = metrics
        self.retry = retry
        self.reject = reject
        self.in_flight: set[str] = set()
        """Steps this process is submitting now: nobody else's orphans."""

    async def submit(self, request: BackfillRequest, step: BackfillStep, work: StepWork) -> bool:
        """Submit one claimed step; True if the backend took it."""
        request_id, step_id = request.id, step.id
        self.in_flight.add(step_id)
        try:
            state = await self.backend.submit(work)
        except Busy as exc:  # the backend answered: whatever failed before has passed
            retry = exc.retry_at or self.clock() + timedelta(seconds=self.settings.conflict_retry_s)
            waiting = {k: v for k, v in work.state.items() if k not in FAILURE_KEYS}
            await self._note(step_id, {**waiting, "retry_at": retry.isoformat()}, message=str(exc))
            return False
        except StepRejected as exc:
            self.metrics.request_failed(exc)
            await self.reject(request_id, step, str(exc))
            return False
        except Exception as exc:  # unreachable or confused backend: try again later, up to a limit
            self.metrics.request_failed(exc)
            await self._failed(request_id, step, work, exc)
            return False
        finally:
            self.in_flight.discard(step_id)
        merged = {**work.state, **state, "started": True}
        for key in ("retry_at", *FAILURE_KEYS):
            merged.pop(key, None)
        handle = str(merged.get("handle", "")) or None
        started = progress_messages.Started(
            step.dag_id, len(step.intervals), self.backend.link(replace(work, state=merged))
        )
        async with self.sessions.begin() as session:
            await execution.note_step(
                session, step_id, executor_state=merged, handle=handle, clear_message=True
            )
            # "Started" only now that the backend took it (a 409, a paused DAG or an outage
            # before this would have made it untrue); the next report carries the line.
            reported = await execution.lock_reported(session, request_id)
            lines = progress_messages.event_lines(request, [started])
            await execution.keep_lines(session, request_id, [*reported.lines, *lines])
        logger.info(
            "submitted step %s (%s) of backfill %s to %s%s",
            step_id, step.dag_id, request_id, self.backend.name, f" as {handle}" if handle else "",
            extra={"request_id": request_id, "step_id": step_id, "dag_id": step.dag_id,
                   "executor": self.backend.name, "handle": handle},
        )  # fmt: skip
        return True

    async def _failed(
        self, request_id: str, step: BackfillStep, work: StepWork, error: Exception
    ) -> None:
        """Count a failed submission; retry it after a growing pause, or fail the step once
        `retry` gives up. What the backend decided before it failed is kept."""
        if isinstance(error, SubmitInterrupted):
            work = replace(work, state={**work.state, **error.state})
            error = error.cause
        now = self.clock()
        policy = self.retry
        failures = int(work.state.get("submit_failures", 0)) + 1
        since_text = work.state.get("failing_since")
        since = datetime.fromisoformat(since_text) if isinstance(since_text, str) else now
        elapsed = (now - since).total_seconds()
        if failures >= policy.attempts or elapsed >= policy.give_up_after_s:
            logger.warning(
                "submitting %s of %s failed %d times; giving up: %s",
                step.dag_id, request_id, failures, error,
            )  # fmt: skip
            tries = f"{failures} attempt{'s' if failures > 1 else ''}"
            over = f" over {span(elapsed)}" if failures > 1 else ""
            await self.reject(request_id, step, f"gave up after {tries}{over}: {error}")
            return
        # The last try comes at the deadline, not after it.
        deadline = since + timedelta(seconds=policy.give_up_after_s)
        retry = min(now + policy.delay(failures, self.settings.poll_interval_s), deadline)
        logger.warning(
            "submitting %s of %s failed (%d of %d); retrying at %s: %s",
            step.dag_id, request_id, failures, policy.attempts, retry.isoformat(), error,
        )  # fmt: skip
        state = {
            **work.state,
            "retry_at": retry.isoformat(),
            "submit_failures": failures,
            "failing_since": since.isoformat(),
        }
        message = f"will retry ({failures} of {policy.attempts} attempts failed): {error}"
        await self._note(step.id, state, message=message)

    async def _note(self, step_id: str, state: dict[str, object], *, message: str) -> None:
        async with self.sessions.begin() as session:
            await execution.note_step(session, step_id, executor_state=state, message=message)
