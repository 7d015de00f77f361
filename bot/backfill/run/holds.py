"""When an approved backfill runs: at once, at its `--at`, only within its off-peak window, and
not after a failed run when `--stop-on-failure` was chosen. The runner asks at each hand-off
(`held`), at each pass over a request (`pause_if_due`) and at each tick (`wake_due`); every
move is a checked, audited state change (bot/backfill/store/control.py), so a restart, or a
second bot process, carries on from the database. Window arithmetic is in bot/core/windows.py.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.backfill.messages import progress as progress_messages
from bot.backfill.rules.options import RunOptions
from bot.backfill.rules.progress import Counts
from bot.backfill.rules.states import RequestState, StepState
from bot.backfill.store import control, execution, repository
from bot.backfill.store.models import BackfillRequest
from bot.core.after_commit import wake_after_commit
from bot.core.windows import Window
from bot.slack.store import outbox
from bot.slack.store.models import OutboxRole

logger = logging.getLogger(__name__)


def window_of(request: BackfillRequest) -> Window | None:
    """The off-peak window the request keeps to (none with `--now`)."""
    return Window.from_json((request.options or {}).get("window"))


def wait_until(request: BackfillRequest, earliest: datetime) -> datetime:
    """The first moment from `earliest` on that the request's window allows."""
    window = window_of(request)
    return window.next_open(earliest) if window is not None else earliest


class Holds:
    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        options: Callable[[BackfillRequest], RunOptions],
    ) -> None:
        self.sessions = sessions
        self.options = options

    async def held(self, session: AsyncSession, request: BackfillRequest, now: datetime) -> bool:
        """At the hand-off: hold the request `scheduled` until its `--at` and its window
        allow (True), or let it start now (False)."""
        wait = wait_until(request, max(now, request.start_at or now))
        if wait <= now:
            return False
        why = "--at" if wait == request.start_at else "off-peak window"
        await control.schedule(session, request.id, until=wait, why=why)
        wake_after_commit(session, execution.OWED)
        # Nobody follows a scheduled request until it starts: say so in Slack now.
        scheduled = await repository.get_request(session, request.id)
        channel = scheduled.status_channel or scheduled.channel or ""
        lines = progress_messages.event_lines(scheduled, [progress_messages.Scheduled(wait, why)])
        await outbox.enqueue(
            session, channel=channel, payload=progress_messages.reply(lines),
            role=OutboxRole.THREAD, request_id=request.id,
        )  # fmt: skip
        status = progress_messages.status_payload(scheduled)
        await outbox.enqueue(
            session, channel=channel, payload=status, method="chat.update",
            role=OutboxRole.STATUS_UPDATE, request_id=request.id,
        )  # fmt: skip
        await execution.progress_posted(
            session, request.id, digest=progress_messages.digest(status), at=now
        )
        return True

    async def wake_due(self, now: datetime) -> None:
        """Start scheduled requests whose time has come, and resume those their window paused
        once it opens; one whose window is still closed waits for its next opening."""
        async with self.sessions() as session:
            due = await control.due(session, now=now)
        for request_id in due:
            try:
                await self._wake(request_id, now)
            except Exception:
                logger.exception("waking backfill %s failed; retrying next pass", request_id)

    async def _wake(self, request_id: str, now: datetime) -> None:
        async with self.sessions.begin() as session:
            request = await repository.get_request(session, request_id)
            wait = wait_until(request, now)
            if wait > now:
                await control.wait_more(session, request.id, until=wait)
                return
            if request.state == RequestState.SCHEDULED:
                woke = await control.start_scheduled(session, request.id, at=now)
                event = progress_messages.Resumed("schedule")
                if woke:
                    await execution.mark_started(session, request.id, at=now)
            else:
                woke = await control.resume(session, request.id, by=control.BY_WINDOW)
                event = progress_messages.Resumed(control.BY_WINDOW)
            if woke:
                reported = await execution.lock_reported(session, request.id)
                lines = progress_messages.event_lines(request, [event])
                await execution.keep_lines(session, request.id, [*reported.lines, *lines])

    async def pause_if_due(
        self,
        session: AsyncSession,
        request: BackfillRequest,
        events: list[progress_messages.Event],
        now: datetime,
    ) -> bool:
        """During a pass over a running request: pause it at a failed run it has not paused
        for (`--stop-on-failure`), or when its off-peak window has closed. True if it paused
        now; what it tells is appended to `events`."""
        if request.state != RequestState.RUNNING:
            return False
        return await self._stop_on_failure(session, request, events, now) or (
            await self._outside_window(session, request, events, now)
        )

    async def _stop_on_failure(
        self,
        session: AsyncSession,
        request: BackfillRequest,
        events: list[progress_messages.Event],
        now: datetime,
    ) -> bool:
        if not self.options(request).stop_on_failure:
            return False
        failed = {s.dag_id: Counts.from_json(s.counts).failed or int(s.state == StepState.FAILED)
                  for s in request.steps}  # fmt: skip
        total = sum(failed.values())
        if total <= request.failures_seen:
            return False
        dags = [dag for dag, n in failed.items() if n]
        more = len(dags) - 1
        reason = f"stopped at a failed run of {dags[0]}" + (
            f" (and {more} more DAG{'s' if more > 1 else ''})" if more else ""
        )
        paused = await control.pause(
            session, request.id, by=control.BY_FAILURE, reason=reason, at=now, failures=total
        )
        if paused:
            events.append(progress_messages.Paused(control.BY_FAILURE, reason))
        return paused

    async def _outside_window(
        self,
        session: AsyncSession,
        request: BackfillRequest,
        events: list[progress_messages.Event],
        now: datetime,
    ) -> bool:
        window = window_of(request)
        if window is None or window.is_open(now):
            return False
        until = window.next_open(now)
        reason = f"outside its off-peak window ({window.described()})"
        paused = await control.pause(
            session, request.id, by=control.BY_WINDOW, reason=reason, at=now, resume_at=until
        )
        if paused:
            events.append(progress_messages.Paused(control.BY_WINDOW, reason, until))
        return paused
