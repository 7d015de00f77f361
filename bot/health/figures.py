"""The figures `GET /metrics` reads from the database when it is scraped: every process of one
database reports the same, whichever did the work. Each is one small aggregate query."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import InstrumentedAttribute

from bot.backfill.rules.states import RequestState, StepState
from bot.backfill.store.models import BackfillRequest, BackfillStep
from bot.core.metrics import CursorFigures, Figures
from bot.events.store import set_aside
from bot.events.store.models import RunEvent, WatchCursor
from bot.hub.store import deliveries
from bot.lineage.store.reconcile_state import read_progress
from bot.slack.store.models import OutboxMessage, OutboxState

__all__ = ["read"]


async def read(session: AsyncSession) -> Figures:
    pending, oldest = (
        await session.execute(
            select(func.count(), func.min(OutboxMessage.created_at)).where(
                OutboxMessage.state == OutboxState.PENDING
            )
        )
    ).one()
    progress = await read_progress(session)
    cursors = await session.execute(
        select(WatchCursor.name, WatchCursor.position, WatchCursor.reachable).order_by(
            WatchCursor.name
        )
    )
    return Figures(
        set_aside=await set_aside.count(session),
        outbox_pending=int(pending),
        outbox_oldest_pending=oldest,
        requests=await _by_state(session, BackfillRequest.state),
        request_states=tuple(RequestState),
        steps=await _by_state(session, BackfillStep.state),
        step_states=tuple(StepState),
        cursors=[CursorFigures(name, position, bool(up)) for name, position, up in cursors],
        newest_event=await session.scalar(select(func.max(RunEvent.event_time))),
        sink_pending=await deliveries.pending_by_sink(session),
        failing_sinks=await deliveries.failing_sinks(session),
        index_jobs=(
            progress.jobs_read,
            progress.jobs_total,
            progress.full_reconcile_at is not None,
        ),
    )


async def _by_state(session: AsyncSession, column: InstrumentedAttribute[str]) -> dict[str, int]:
    rows = await session.execute(select(column, func.count()).group_by(column))
    return {str(state): int(count) for state, count in rows}
