"""The messages other outbox rows hang off: a backfill request's status message (its replies
are progress; an edit rewrites it) and an incident's alert (its thread, its edits). The outbox
knows that rows have parents, not what they are: the capability that owns a parent says where
its message was posted and records where Slack put it (`bot.backfill.store.parent`,
`bot.incidents.store.parent`), each in the caller's transaction."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from sqlalchemy.ext.asyncio import AsyncSession

from bot.slack.store.models import OutboxMessage, OutboxRole


class ParentStore(Protocol):
    """One kind of parent, by its id (a request's, an incident's)."""

    async def posted_at(self, session: AsyncSession, parent_id: str) -> str | None:
        """The ts of the parent's message, once posted."""
        ...

    async def thread_of(self, session: AsyncSession, parent_id: str) -> str | None:
        """The thread the parent itself lives in (None: the channel)."""
        ...

    async def record_posted(
        self, session: AsyncSession, parent_id: str, *, channel: str, ts: str, at: datetime
    ) -> None:
        """Where Slack posted the parent's message: later rows reply under it or edit it."""
        ...


class RequestParents(ParentStore, Protocol):
    """Backfill requests as parents, and who asked for each."""

    async def asker(self, session: AsyncSession, request_id: str) -> tuple[str, str] | None:
        """(requester, root DAG) of a request, to tell its requester what could not be
        posted (None if the request is gone)."""
        ...


@dataclass(frozen=True)
class Parents:
    """Every kind of parent an outbox row may have."""

    requests: RequestParents
    incidents: ParentStore

    async def parent_ts(self, session: AsyncSession, row: OutboxMessage) -> str | None:
        """The ts of the message this row replies under or edits: an incident's alert or a
        request's status message (None until it is posted)."""
        if row.incident_id:
            return await self.incidents.posted_at(session, row.incident_id)
        assert row.request_id is not None
        return await self.requests.posted_at(session, row.request_id)

    async def request_thread(self, session: AsyncSession, row: OutboxMessage) -> str | None:
        """The thread the row's request lives in (started from an alert, or a retry in the
        failed backfill's thread): its status message and replies are posted there. None for
        an incident's rows and for a request posted in the channel."""
        if row.incident_id or not row.request_id:
            return None
        return await self.requests.thread_of(session, row.request_id)

    async def record(
        self, session: AsyncSession, row: OutboxMessage, *, ts: str | None, at: datetime
    ) -> None:
        """A parent's own message (a STATUS row) was posted: its owner records where."""
        if row.role != OutboxRole.STATUS or not ts:
            return
        if row.incident_id:
            await self.incidents.record_posted(
                session, row.incident_id, channel=row.channel, ts=ts, at=at
            )
        elif row.request_id:
            await self.requests.record_posted(
                session, row.request_id, channel=row.channel, ts=ts, at=at
            )
