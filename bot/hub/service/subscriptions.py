"""`/backfill subscribe`, `subscriptions` and `unsubscribe`: a channel (or a DM) subscribed to
the events of the DAGs a pattern matches. The hub (bot/hub/service/hub.py, bot/hub/rules/routing.py)
reads them (`bot.hub.store.subscriptions.active`) and delivers; this only keeps them.

Where a subscription lives (`home`): a channel's under its channel id; one typed in a DM under
the user's id. A slash command in a DM gives the DM's D… id, which the bot cannot post in when
the DM is between two people; `chat.postMessage` to a user id reaches the user's DM with the
bot, so that is what is stored, and `subscriptions` / `unsubscribe` typed in any DM of the
user find it there.

Who may: in a DM anyone, to anything; in a channel as BOT_CONFIG `hub.subscriptions` says
(`bot.ownership.service.may_subscribe`). A subscription is removed by whoever added it, anyone
allowed to add it there, or anyone in the DM it belongs to. Adding and removing are audited
with the change, refusals on their own; an id of another channel is answered like an unknown
one."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.config import BotConfig
from bot.core.after_commit import log_after_commit
from bot.core.audit import Refused, add_audit, add_refusal
from bot.core.tables import utcnow
from bot.hub.rules.subscriptions import (
    AlreadyRemoved,
    RemoveDenied,
    Subscribed,
    SubscribeDenied,
    SubscriptionLine,
    SubscriptionsListed,
    TooMany,
    UnknownSubscription,
    Unsubscribed,
)
from bot.hub.store import subscriptions as store
from bot.hub.store.models import Subscription
from bot.ownership.service import GroupDirectory, may_subscribe
from bot.slack.rules.commands import SubscribeCommand
from bot.slack.rules.ids import is_direct_message

logger = logging.getLogger(__name__)

MAX_PER_CHANNEL = 50
"""Active subscriptions one channel (or DM) may have."""
SUBSCRIBE_REFUSED = "subscribe.refused"
UNSUBSCRIBE_REFUSED = "unsubscribe.refused"
ADDED = "subscription.added"
REMOVED = "subscription.removed"


def home(*, user: str, channel: str) -> str:
    """Where a subscription typed in `channel` by `user` is kept, and where the hub posts its
    events: the channel id, or for a DM (D…) the user's id (the bot's DM with them)."""
    return user if is_direct_message(channel) else channel


def _why(teams: tuple[str, ...]) -> str:
    """A refusal's reason, as its audit row records it."""
    owners = ", ".join(teams) if teams else "no team"
    return f"neither an approver nor in a team owning the pattern (owned by {owners})"


def line_of(row: Subscription) -> SubscriptionLine:
    return SubscriptionLine(
        row.id, row.pattern, tuple(row.events), bool(row.downstream), row.created_by,
        row.created_at,
    )  # fmt: skip


class SubscriptionService:
    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        config: BotConfig,
        groups: GroupDirectory,
        *,
        clock: Callable[[], datetime] = utcnow,
        limit: int = MAX_PER_CHANNEL,
    ) -> None:
        self.sessions = sessions
        self.config = config
        self.groups = groups
        self.clock = clock
        self.limit = limit

    async def subscribe(
        self, command: SubscribeCommand, *, user: str, channel: str
    ) -> Subscribed | SubscribeDenied | TooMany:
        """`/backfill subscribe PATTERN [flags]` typed by `user` in `channel`."""
        dm = is_direct_message(channel)
        where = home(user=user, channel=channel)
        detail = {
            "pattern": command.pattern,
            "events": list(command.events),
            "downstream": command.downstream,
        }
        denial = await may_subscribe(
            self.config, self.groups, command.pattern, user=user, channel=channel
        )
        if denial is not None:
            await self._refused(
                SUBSCRIBE_REFUSED, user, channel, command.pattern, _why(denial.teams),
                Refused.NOT_ALLOWED, detail,
            )  # fmt: skip
            return SubscribeDenied(denial)
        async with self.sessions.begin() as session:
            same = await store.find_same(
                session,
                channel=where,
                pattern=command.pattern,
                events=command.events,
                downstream=command.downstream,
            )
            if same is not None:
                return Subscribed(line_of(same), dm=dm, existing=True)
            if await store.count_active(session, where) >= self.limit:
                await add_refusal(
                    session, actor=user, action=SUBSCRIBE_REFUSED, refused=Refused.NOT_ALLOWED,
                    reason=f"{self.limit} subscriptions already", given_id=command.pattern,
                    channel=channel, detail=detail,
                )  # fmt: skip
                return TooMany(self.limit, dm=dm)
            row = await store.add(
                session,
                channel=where,
                pattern=command.pattern,
                events=command.events,
                downstream=command.downstream,
                created_by=user,
                at=self.clock(),
            )
            await add_audit(
                session,
                actor=user,
                action=ADDED,
                detail={"id": row.id, "channel": where, "typed_in": channel, **detail},
            )
            log_after_commit(
                session, logger, "subscription %s added: %s to %s", row.id, where,
                command.pattern, subscription_id=row.id, channel=where,
            )  # fmt: skip
            line = line_of(row)
        return Subscribed(line, dm=dm)

    async def list(self, *, user: str, channel: str) -> SubscriptionsListed:
        """`/backfill subscriptions`: the active subscriptions of `channel` (of the user's DM
        with the bot, typed in a DM), oldest first."""
        async with self.sessions() as session:
            rows = await store.of_channel(session, home(user=user, channel=channel))
        lines = [line_of(row) for row in rows]
        return SubscriptionsListed(lines, dm=is_direct_message(channel))

    async def unsubscribe(
        self, subscription_id: str, *, user: str, channel: str
    ) -> Unsubscribed | UnknownSubscription | AlreadyRemoved | RemoveDenied:
        """`/backfill unsubscribe ID`: the subscription marked removed (kept, for the audit
        trail), if it belongs here and `user` may remove it."""
        dm = is_direct_message(channel)
        where = home(user=user, channel=channel)
        async with self.sessions() as session:
            row = await store.get(session, subscription_id)
            found = line_of(row) if row is not None and row.channel == where else None
            removed = (row.removed_at, row.removed_by) if row is not None else (None, None)
            elsewhere = row is not None and found is None
        if found is None:
            reason = "no such subscription" if not elsewhere else "a subscription elsewhere"
            refused = Refused.WRONG_CHANNEL if elsewhere else Refused.UNKNOWN_ID
            await self._refused(
                UNSUBSCRIBE_REFUSED, user, channel, subscription_id, reason, refused, {}
            )
            return UnknownSubscription(subscription_id, dm=dm)
        if removed[0] is not None:
            return AlreadyRemoved(found.id, removed[1])
        if not dm and found.created_by != user:
            denial = await may_subscribe(
                self.config, self.groups, found.pattern, user=user, channel=channel
            )
            if denial is not None:
                await self._refused(
                    UNSUBSCRIBE_REFUSED, user, channel, subscription_id,
                    f"not its creator; {_why(denial.teams)}", Refused.NOT_ALLOWED,
                    {"pattern": found.pattern},
                )  # fmt: skip
                return RemoveDenied(denial, found.id)
        async with self.sessions.begin() as session:
            if not await store.remove(session, found.id, by=user, at=self.clock()):
                return AlreadyRemoved(found.id, None)
            await add_audit(
                session,
                actor=user,
                action=REMOVED,
                detail={"id": found.id, "channel": where, "typed_in": channel,
                        "pattern": found.pattern},
            )  # fmt: skip
            log_after_commit(
                session, logger, "subscription %s removed from %s", found.id, where,
                subscription_id=found.id, channel=where,
            )  # fmt: skip
        return Unsubscribed(found, dm=dm)

    async def _refused(
        self,
        action: str,
        user: str,
        channel: str,
        given: str,
        reason: str,
        refused: Refused,
        detail: dict[str, object],
    ) -> None:
        async with self.sessions.begin() as session:
            await add_refusal(
                session, actor=user, action=action, refused=refused, reason=reason,
                given_id=given, channel=channel, detail=detail,
            )  # fmt: skip
