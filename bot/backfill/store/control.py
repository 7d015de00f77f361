"""Pausing, resuming and scheduling a backfill request: checked state moves (audited by
`repository.transition_request`) with who, when and why written beside them.

Like `repository`, every function works inside the caller's transaction and never commits; the
runner, woken after the commit (`execution.OWED`), holds or releases the work in the backend.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from bot.backfill.rules.states import RequestState
from bot.backfill.store import execution, repository
from bot.backfill.store.models import BackfillRequest
from bot.core.after_commit import wake_after_commit

BY_FAILURE = "failure"
"""`paused_by` of a request `--stop-on-failure` paused."""
BY_WINDOW = "window"
"""`paused_by` of a request paused because its off-peak window closed."""


async def pause(
    session: AsyncSession,
    request_id: str,
    *,
    by: str,
    reason: str,
    at: datetime,
    resume_at: datetime | None = None,
    failures: int | None = None,
) -> bool:
    """Move a running request to paused; False if it was not running (nothing changed)."""
    try:
        await repository.transition_request(
            session,
            request_id,
            expected={RequestState.RUNNING},
            to=RequestState.PAUSED,
            actor=by,
            detail={
                "reason": reason,
                **({"resume_at": resume_at.isoformat()} if resume_at else {}),
            },
        )
    except repository.InvalidTransition:
        return False
    values: dict[str, object] = {
        "paused_at": at, "paused_by": by, "pause_reason": reason[:300], "resume_at": resume_at,
    }  # fmt: skip
    if failures is not None:
        values["failures_seen"] = failures
    await _set(session, request_id, values)
    wake_after_commit(session, execution.OWED)
    return True


async def resume(session: AsyncSession, request_id: str, *, by: str) -> bool:
    """Move a paused request back to running; False if it was not paused."""
    try:
        await repository.transition_request(
            session, request_id, expected={RequestState.PAUSED}, to=RequestState.RUNNING, actor=by
        )
    except repository.InvalidTransition:
        return False
    values: dict[str, object] = {
        "paused_at": None, "paused_by": None, "pause_reason": None, "resume_at": None,
    }  # fmt: skip
    await _set(session, request_id, values)
    wake_after_commit(session, execution.OWED)
    return True


async def schedule(session: AsyncSession, request_id: str, *, until: datetime, why: str) -> None:
    """Hold an approved request until `until` (its `--at`, or its window's opening)."""
    await repository.transition_request(
        session,
        request_id,
        expected={RequestState.APPROVED},
        to=RequestState.SCHEDULED,
        actor="system",
        detail={"until": until.isoformat(), "why": why},
    )
    await _set(session, request_id, {"resume_at": until, "pause_reason": why[:300]})


async def start_scheduled(session: AsyncSession, request_id: str, *, at: datetime) -> bool:
    """Move a scheduled request to running (its time came); False if it no longer waits."""
    try:
        await repository.transition_request(
            session,
            request_id,
            expected={RequestState.SCHEDULED},
            to=RequestState.RUNNING,
            actor="system",
            detail={"at": at.isoformat()},
        )
    except repository.InvalidTransition:
        return False
    await _set(session, request_id, {"resume_at": None, "pause_reason": None})
    wake_after_commit(session, execution.OWED)
    return True


async def wait_more(session: AsyncSession, request_id: str, *, until: datetime) -> None:
    """A waiting request's time came but its window is closed: wait for its next opening."""
    await _set(session, request_id, {"resume_at": until})


async def due(session: AsyncSession, *, now: datetime, limit: int = 100) -> list[str]:
    """Scheduled requests whose start time has come, and requests the bot paused that it
    resumes by itself (`resume_at` has come), oldest first."""
    rows = await session.scalars(
        select(BackfillRequest.id)
        .where(
            BackfillRequest.state.in_([RequestState.SCHEDULED, RequestState.PAUSED]),
            BackfillRequest.resume_at.is_not(None),
            BackfillRequest.resume_at <= now,
        )
        .order_by(BackfillRequest.resume_at)
        .limit(limit)
    )
    return list(rows)


async def _set(session: AsyncSession, request_id: str, values: dict[str, object]) -> None:
    await session.execute(
        update(BackfillRequest)
        .where(BackfillRequest.id == request_id)
        .values(values)
        .execution_options(synchronize_session=False)
    )
