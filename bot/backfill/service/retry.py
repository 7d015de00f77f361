"""Retry of a failed backfill: a new plan of the DAGs that did not succeed, posted for approval.

The Retry button of a failed request's status message carries only its id; everything is
reloaded here. The retry is an ordinary previewed request (approved with the ordinary Approve)
that remembers what it retries (`retry_of`), lives in the failed backfill's thread and belongs
to its incident. One open retry per failed request: a second click names the first.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.backfill.messages import answers
from bot.backfill.messages.backfill import plan_preview
from bot.backfill.rules.outcomes import NotFound, RetryPosted, RetryRefused
from bot.backfill.rules.retry import retry_plan
from bot.backfill.rules.states import RequestState, StepState
from bot.backfill.rules.visibility import lives_in
from bot.backfill.store import guards, repository
from bot.backfill.store.models import BackfillRequest
from bot.core.audit import Refused, add_audit, add_refusal
from bot.core.tables import utcnow
from bot.lineage.rules.planner import Plan, plan_from_json
from bot.slack.store import outbox
from bot.slack.store.models import OutboxRole


def retried(options: dict[str, Any] | None, clear: list[str] | None = None) -> dict[str, Any]:
    """A retry's options: the failed request's, but every interval of what did not succeed
    runs again (under `--rerun missing` a failed interval has a run, and a skipped DAG's old
    runs succeeded on the data being repaired); the run-history counts were the old plan's.
    `clear`: the DAGs whose failed runs clear only their failed tasks."""
    chosen = {**(options or {}), "rerun": "all", "counts": None}
    chosen.pop("clear_failed", None)
    return {**chosen, "clear_failed": list(clear)} if clear else chosen


class _Refused(Exception):
    """Rolls the retry back; the outcome says why."""

    def __init__(self, outcome: RetryRefused, **detail: Any) -> None:
        super().__init__(outcome.why)
        self.outcome = outcome
        self.detail = detail


class RetryService:
    def __init__(
        self,
        *,
        sessions: async_sessionmaker[AsyncSession],
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.sessions = sessions
        self.clock = clock

    async def retry(
        self, request_id: str, *, user: str, channel: str | None = None, tasks: bool = False
    ) -> RetryPosted | RetryRefused | NotFound:
        """Post, for approval, a new plan of the failed, skipped and cancelled DAGs of a failed
        backfill, in its thread; refuse (audited) when there is nothing to retry, a retry of it
        is already open, or the click did not come from the channel the backfill lives in
        (`channel`; None: a caller that checked), answered like an unknown id. With `tasks`,
        the DAGs that failed clear only the failed tasks of their failed runs (the others,
        skipped or cancelled, run anew)."""
        old = await self._load(request_id)
        if old is None or (channel is not None and not lives_in(old, channel)):
            return await self._not_found(request_id, user=user, channel=channel, elsewhere=old)
        if old.state != RequestState.FAILED:
            not_failed = RetryRefused("not_failed", old.id, state=old.state)
            return await self._refuse(user, not_failed, request_id=old.id)
        # Steps of a failed request are final: what did not succeed failed, was skipped or
        # was cancelled (or never started, if the request failed before running it).
        dags = [s.dag_id for s in old.steps if s.state != StepState.SUCCEEDED]
        if not dags:
            all_succeeded = RetryRefused("all_succeeded", old.id)
            return await self._refuse(user, all_succeeded, request_id=old.id)
        plan = retry_plan(plan_from_json(old.plan), set(dags))
        failed = [s.dag_id for s in old.steps if s.state == StepState.FAILED] if tasks else []
        try:
            created = await self._create(old, plan, user=user, dags=dags, clear=failed)
        except _Refused as exc:
            return await self._refuse(user, exc.outcome, **exc.detail)
        return RetryPosted(created, of=old.id)

    async def _create(
        self, old: BackfillRequest, plan: Plan, *, user: str, dags: list[str], clear: list[str]
    ) -> str:
        """The retry request, its audit row and its preview, in one transaction; its id."""
        async with self.sessions.begin() as session:
            # Holds the failed request until commit: two clicks at once make one retry.
            if not await guards.hold(session, old.id, state=RequestState.FAILED):
                raise _Refused(RetryRefused("gone", old.id), request_id=old.id)
            already = await repository.open_retry(session, old.id)
            if already is not None:
                open_one = RetryRefused("open", old.id, other=already.id, other_state=already.state)
                raise _Refused(open_one, request_id=old.id, retry=already.id)
            row = await repository.create_request(
                session,
                plan=plan.to_json(),
                requester=user,
                channel=old.channel,
                options=retried(old.options, clear),
            )
            await repository.link_retry(
                session,
                row.id,
                retry_of=old.id,
                # The retry's preview, status and progress land in the failed backfill's thread.
                thread_ts=old.thread_ts or old.status_message_ts,
                incident_id=old.incident_id,
            )
            await add_audit(
                session,
                actor=user,
                action="request.retry",
                request_id=old.id,
                detail={"retry": row.id, "dags": dags, "clear_failed": clear},
                at=self.clock(),
            )
            preview = plan_preview(
                plan,
                request_id=row.id,
                requester=user,
                dry_run=False,
                retry_of=old.id,
                options=row.options,
                now=self.clock(),
            )
            await outbox.enqueue(
                session,
                channel=old.channel or "",
                payload=preview,
                role=OutboxRole.STATUS,
                request_id=row.id,
            )
            return row.id

    async def _refuse(self, user: str, outcome: RetryRefused, **detail: Any) -> RetryRefused:
        async with self.sessions.begin() as session:
            await add_audit(
                session,
                actor=user,
                action="retry.refused",
                detail={"reason": answers.reason(outcome), **detail},
                at=self.clock(),
            )
        return outcome

    async def _not_found(
        self,
        given: str,
        *,
        user: str,
        channel: str | None,
        elsewhere: BackfillRequest | None,
    ) -> NotFound:
        unknown = NotFound(given)
        reason = answers.reason(unknown)
        if elsewhere is not None:
            reason = f"not clicked where it lives ({elsewhere.status_channel or elsewhere.channel})"
        async with self.sessions.begin() as session:
            await add_refusal(
                session,
                actor=user,
                action="retry.refused",
                refused=Refused.WRONG_CHANNEL if elsewhere else Refused.UNKNOWN_ID,
                reason=reason,
                given_id=given,
                channel=channel,
                request_id=elsewhere.id if elsewhere else None,
                at=self.clock(),
            )
        return unknown

    async def _load(self, request_id: str) -> BackfillRequest | None:
        async with self.sessions() as session:
            try:
                return await repository.get_request(session, request_id)
            except repository.RequestNotFound:
                return None
