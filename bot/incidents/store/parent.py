"""An incident as a parent of outbox rows (`bot.slack.store.parents`): its alert, where it
was posted. Its thread holds the alert's replies and the backfill started from it."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from bot.incidents.store.models import Incident


class Alerts:
    """`ParentStore` over the incidents table."""

    async def posted_at(self, session: AsyncSession, parent_id: str) -> str | None:
        return await session.scalar(select(Incident.alert_ts).where(Incident.id == parent_id))

    async def thread_of(self, session: AsyncSession, parent_id: str) -> str | None:
        return None  # an alert is posted in its channel

    async def record_posted(
        self, session: AsyncSession, parent_id: str, *, channel: str, ts: str, at: datetime
    ) -> None:
        await session.execute(
            update(Incident)
            .where(Incident.id == parent_id)
            .values(alert_ts=ts, channel=channel, updated_at=at)
        )
