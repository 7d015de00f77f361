"""A running backfill's reports in Slack: the pass's thread lines gathered with those already
owed, and, when the report gap has passed (bot/backfill/rules/progress.py `report_due`) or at
once on the final state, one thread reply with every gathered line and one edit of the status
message if it changed (its queue place and reports' estimates included)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession

from bot.backfill.messages import progress as progress_messages
from bot.backfill.rules.progress import report_due
from bot.backfill.rules.status import Queued
from bot.backfill.store import execution
from bot.backfill.store.models import BackfillRequest
from bot.config import Execution
from bot.slack.store import outbox
from bot.slack.store.models import OutboxRole


async def owe(
    session: AsyncSession,
    request: BackfillRequest,
    events: Sequence[progress_messages.Event],
    now: datetime,
    settings: Execution,
    queued: Queued | None,
) -> bool:
    """Owe the report if it is due; True if a report was owed."""
    reported = await execution.lock_reported(session, request.id)
    lines = [*reported.lines, *progress_messages.event_lines(request, list(events))]
    status = progress_messages.status_payload(request, queued=queued, now=now)
    digest = progress_messages.digest(status)
    changed = digest != reported.digest
    final = request.finished_at is not None
    due = final or report_due(
        now=now,
        started=request.started_at,
        last=reported.at,
        base_s=settings.progress_update_s,
        urgent=progress_messages.tells_failure(lines),
    )
    if not due or not (lines or changed):
        if len(lines) != len(reported.lines):
            await execution.keep_lines(session, request.id, lines)
        return False
    channel = request.status_channel or request.channel or ""
    if lines:
        await outbox.enqueue(
            session,
            channel=channel,
            payload=progress_messages.reply(lines),
            role=OutboxRole.THREAD,
            request_id=request.id,
        )
    if changed:
        await outbox.enqueue(
            session,
            channel=channel,
            payload=status,
            method="chat.update",
            role=OutboxRole.STATUS_UPDATE,
            request_id=request.id,
        )
    await execution.progress_posted(session, request.id, digest=digest if changed else None, at=now)
    return True
