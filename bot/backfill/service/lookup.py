"""Which backfill request an id names, for the person asking and where they ask: a click only
where the request lives, a typed id (or its 8-character prefix) also in the channels the bot
told about it and in a DM to its requester and approvers. Anything else gets the answer an
unknown id gets (a request elsewhere stays unrevealed) and an audited refusal."""

from __future__ import annotations

from contextlib import suppress

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.backfill.messages import answers
from bot.backfill.messages.progress import status_of
from bot.backfill.rules.outcomes import Ambiguous, Lookup, NotFound, StatusListed, StatusShown
from bot.backfill.rules.states import RequestState
from bot.backfill.rules.visibility import lives_in, may_see
from bot.backfill.run import budget
from bot.backfill.service.notices import TeamNotices
from bot.backfill.store import repository
from bot.backfill.store.models import BackfillRequest
from bot.config import BotConfig
from bot.core.audit import Refused, add_refusal
from bot.core.tables import utcnow
from bot.lineage.rules.planner import Plan, plan_from_json

PREFIX_MATCHES = 50
"""Requests a short id is looked up among (those the asker may see are kept)."""


class RequestLookup:
    def __init__(
        self, sessions: async_sessionmaker[AsyncSession], notices: TeamNotices, config: BotConfig
    ) -> None:
        self.sessions = sessions
        self.notices = notices
        self.config = config

    async def find(
        self,
        given: str,
        *,
        user: str,
        channel: str | None,
        action: str,
        command: bool = False,
    ) -> BackfillRequest | Lookup:
        """The request `given` names, if `user` may reach it from `channel`: a click only where
        the request lives (`lives_in`); a command (`command`: a short id is a prefix) also where
        the bot told a team about it, and in a DM to its requester and approvers (`may_see`).
        Otherwise the answer an unknown id gets, so a request elsewhere stays unrevealed, and
        an audit row (`action`) saying which it was. `channel` None: a caller that checked."""
        prefix = command and len(given) < 32
        async with self.sessions() as session:
            ids = [given]
            if prefix:
                ids = await repository.ids_starting(session, given, limit=PREFIX_MATCHES)
            found: list[BackfillRequest] = []
            for request_id in ids:
                with suppress(repository.RequestNotFound):
                    found.append(await repository.get_request(session, request_id))
        seen = [
            r for r in found if channel is None or self.reachable(r, user, channel, command=command)
        ]
        if len(seen) == 1:
            return seen[0]
        if seen:
            return Ambiguous(given)
        unknown = NotFound(given, prefix=prefix)
        elsewhere = found[0] if len(found) == 1 else None
        reason = answers.reason(unknown)
        if found:
            homes = ", ".join(sorted({str(r.status_channel or r.channel) for r in found}))
            reason = f"not reachable from {channel or 'no channel'}: lives in {homes}"
        async with self.sessions.begin() as session:
            await add_refusal(
                session,
                actor=user,
                action=action,
                refused=Refused.WRONG_CHANNEL if found else Refused.UNKNOWN_ID,
                reason=reason,
                given_id=given,
                channel=channel,
                request_id=elsewhere.id if elsewhere else None,
            )
        return unknown

    def reachable(
        self, request: BackfillRequest, user: str, channel: str, *, command: bool
    ) -> bool:
        """Whether `user` may reach the request from `channel` (`command`: by typing its id)."""
        if not command:
            return lives_in(request, channel)
        return may_see(request, user=user, channel=channel, told=self.told(request))

    def told(self, request: BackfillRequest) -> list[str]:
        """The other teams' channels the bot told about the request (once it was approved)."""
        if request.state == RequestState.PREVIEWED or not request.approvers:
            return []
        return [channel for channel, _ in self.notices.reruns(request)]

    async def status(
        self, request_id: str | None, *, user: str, channel: str = ""
    ) -> StatusShown | StatusListed | Lookup:
        """`/backfill status [ID]` typed in `channel`: the requests `user` may see from there
        (where they live or were announced, and in a DM their own), or the one `request_id`
        names; one they may not see is answered like an unknown id."""
        if request_id is None:
            async with self.sessions() as session:
                recent = await repository.list_requests(session, limit=200)
            mine = [r for r in recent if self.reachable(r, user, channel, command=True)][:10]
            return StatusListed(tuple(status_of(r) for r in mine))
        request = await self.find(
            request_id, user=user, channel=channel, action="status.refused", command=True
        )
        if not isinstance(request, BackfillRequest):
            return request
        now = utcnow()
        async with self.sessions() as session:
            place = await budget.queued(session, request, self.config.execution.budget, now)
        return StatusShown(status_of(request, queued=place, now=now))

    async def show_plan(self, request_id: str, *, user: str, channel: str) -> Plan | Lookup:
        """**Show full plan**: the request's plan, for a click where the request lives."""
        request = await self.find(
            request_id, user=user, channel=channel, action="show_plan.refused"
        )
        if not isinstance(request, BackfillRequest):
            return request
        return plan_from_json(request.plan)
