"""The messages a request's moves owe, written to the outbox in the move's transaction: the
status message redrawn, and on approval the preview shrunk to a pointer and the status message
that parents the progress thread."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from bot.backfill.messages import answers
from bot.backfill.messages.backfill import request_status
from bot.backfill.messages.progress import status_of
from bot.backfill.store import guards
from bot.backfill.store.models import BackfillRequest
from bot.slack.store import outbox
from bot.slack.store.models import OutboxRole


async def status_update(session: AsyncSession, request: BackfillRequest) -> None:
    """Rewrite the request's current message (preview or status) to show its state."""
    await outbox.enqueue(
        session,
        channel=request.status_channel or request.channel or "",
        payload=request_status(status_of(request)),
        method="chat.update",
        role=OutboxRole.STATUS_UPDATE,
        request_id=request.id,
    )


async def approval_messages(session: AsyncSession, request: BackfillRequest) -> None:
    """Shrink the preview to a pointer and post the status message that parents the
    progress thread. Replies wait for the new parent: its ts is cleared until it is posted."""
    channel = request.status_channel or request.channel or ""
    pointer = answers.approval_pointer(
        request.id,
        request.root_dag,
        request.start_date.isoformat(),
        request.end_date.isoformat(),
        request.approvers[-1] if request.approvers else None,
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
