"""Pause and resume a running backfill, from its status message's buttons or `/backfill pause
ID` / `resume ID`, with the permissions Cancel has: the requester, or whoever may approve it.

A pause is a checked state move (running → paused) written with who, when and why, the status
message's edit and a thread line, in one transaction; the runner, woken by the commit, holds
the work in the backend (Airflow 3 pauses its backfills; Airflow 2 and Spark start no new
interval) while what runs finishes. A paused backfill still holds its DAG intervals.
"""

from __future__ import annotations

from typing import Literal, Protocol

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.backfill.messages import progress as progress_messages
from bot.backfill.rules.outcomes import Denied, Lookup, NotPausable, Paused, Resumed
from bot.backfill.rules.states import PAUSABLE, RequestState
from bot.backfill.service import owed
from bot.backfill.service.lookup import RequestLookup
from bot.backfill.store import control, repository
from bot.backfill.store.models import BackfillRequest
from bot.core.tables import utcnow
from bot.slack.store import outbox
from bot.slack.store.models import OutboxRole

PAUSE_REFUSED = "pause.refused"


class Requests(Protocol):
    """What pausing shares with the other backfill use cases (`BackfillService`)."""

    sessions: async_sessionmaker[AsyncSession]
    lookup: RequestLookup

    async def check_clicker(
        self, request: BackfillRequest, user: str, *, verb: Literal["pause", "resume"]
    ) -> Denied | None: ...


class BackfillControl:
    def __init__(self, backfills: Requests) -> None:
        self.backfills = backfills
        self.sessions = backfills.sessions

    async def pause(
        self, request_id: str, *, user: str, channel: str | None = None, command: bool = False
    ) -> Paused | NotPausable | Denied | Lookup:
        """Pause a running request. `channel`: where the click (or with `command`, the
        `/backfill pause`) came from; None: a caller that checked already."""
        request = await self._allowed(request_id, user, channel, command, "pause")
        if not isinstance(request, BackfillRequest):
            return request
        if request.state not in PAUSABLE:
            return _not(request, "pause")
        async with self.sessions.begin() as session:
            reason = f"paused by <@{user}>"
            if not await control.pause(session, request.id, by=user, reason=reason, at=utcnow()):
                fresh = await repository.get_request(session, request.id)
                return _not(fresh, "pause")
            event = progress_messages.Paused(user, "")
            await self._tell(session, request.id, event)
        return Paused(request.id)

    async def resume(
        self, request_id: str, *, user: str, channel: str | None = None, command: bool = False
    ) -> Resumed | NotPausable | Denied | Lookup:
        """Resume a request someone (or `--stop-on-failure`) paused. One waiting for its
        off-peak window resumes by itself when the window opens."""
        request = await self._allowed(request_id, user, channel, command, "resume")
        if not isinstance(request, BackfillRequest):
            return request
        if request.state != RequestState.PAUSED or request.paused_by == control.BY_WINDOW:
            return _not(request, "resume")
        async with self.sessions.begin() as session:
            if not await control.resume(session, request.id, by=user):
                fresh = await repository.get_request(session, request.id)
                return _not(fresh, "resume")
            await self._tell(session, request.id, progress_messages.Resumed(user))
        return Resumed(request.id)

    async def _allowed(
        self,
        request_id: str,
        user: str,
        channel: str | None,
        command: bool,
        verb: Literal["pause", "resume"],
    ) -> BackfillRequest | Denied | Lookup:
        request = await self.backfills.lookup.find(
            request_id, user=user, channel=channel, action=PAUSE_REFUSED, command=command
        )
        if not isinstance(request, BackfillRequest):
            return request
        if user != request.requester:  # as with Cancel: requesters may always act on theirs
            refused = await self.backfills.check_clicker(request, user, verb=verb)
            if refused is not None:
                return refused
        return request

    async def _tell(
        self, session: AsyncSession, request_id: str, event: progress_messages.Event
    ) -> None:
        """The status message's edit and the thread line the change owes, now."""
        request = await repository.get_request(session, request_id)
        channel = request.status_channel or request.channel or ""
        lines = progress_messages.event_lines(request, [event])
        await outbox.enqueue(
            session,
            channel=channel,
            payload=progress_messages.reply(lines),
            role=OutboxRole.THREAD,
            request_id=request.id,
        )
        await owed.status_update(session, request)


def _not(request: BackfillRequest, verb: Literal["pause", "resume"]) -> NotPausable:
    return NotPausable(
        request.id, request.state, verb, by=request.paused_by, until=request.resume_at
    )
