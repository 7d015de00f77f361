"""A backfill request as a parent of outbox rows (`bot.slack.store.parents`): its status
message, where it was posted, and the thread the request lives in."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from bot.backfill.store.models import BackfillRequest


class StatusMessages:
    """`RequestParents` over the backfill_requests table."""

    async def posted_at(self, session: AsyncSession, parent_id: str) -> str | None:
        return await session.scalar(
            select(BackfillRequest.status_message_ts).where(BackfillRequest.id == parent_id)
        )

    async def thread_of(self, session: AsyncSession, parent_id: str) -> str | None:
        return await session.scalar(
            select(BackfillRequest.thread_ts).where(BackfillRequest.id == parent_id)
        )

    async def record_posted(
        self, session: AsyncSession, parent_id: str, *, channel: str, ts: str, at: datetime
    ) -> None:
        await session.execute(
            update(BackfillRequest)
            .where(BackfillRequest.id == parent_id)
            .values(status_message_ts=ts, status_channel=channel, updated_at=at)
        )

    async def asker(self, session: AsyncSession, request_id: str) -> tuple[str, str] | None:
        request = await session.get(BackfillRequest, request_id)
        return (request.requester, request.root_dag) if request is not None else None
