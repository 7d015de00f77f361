"""A subscription as people see it, and what `/backfill subscribe`, `subscriptions` and
`unsubscribe` answer, as typed outcomes (facts, no words: `bot.hub.messages.subscriptions`
says them)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import ClassVar

from bot.ownership.rules import Denial


@dataclass(frozen=True)
class SubscriptionLine:
    """One subscription as the messages show it."""

    id: str
    pattern: str
    events: Sequence[str]
    downstream: bool
    created_by: str
    """A Slack user id."""
    created_at: datetime


@dataclass(frozen=True)
class Subscribed:
    """Added (or, `existing`, the same subscription was there already: its id)."""

    line: SubscriptionLine
    dm: bool
    existing: bool = False

    @property
    def changed(self) -> bool:
        return not self.existing


@dataclass(frozen=True)
class SubscribeDenied:
    """The person may not subscribe this channel to the pattern; the denial names who may."""

    denial: Denial
    changed: ClassVar[bool] = False


@dataclass(frozen=True)
class TooMany:
    """The channel (or DM) has as many subscriptions as it may."""

    limit: int
    dm: bool
    changed: ClassVar[bool] = False


@dataclass(frozen=True)
class SubscriptionsListed:
    lines: Sequence[SubscriptionLine]
    dm: bool
    changed: ClassVar[bool] = False


@dataclass(frozen=True)
class UnknownSubscription:
    """No subscription of this channel (or DM) has the id (one elsewhere stays unrevealed)."""

    given: str
    dm: bool
    changed: ClassVar[bool] = False


@dataclass(frozen=True)
class AlreadyRemoved:
    subscription_id: str
    by: str | None
    changed: ClassVar[bool] = False


@dataclass(frozen=True)
class RemoveDenied:
    """Someone other than its creator who may not remove it (the denial names who may)."""

    denial: Denial
    subscription_id: str
    changed: ClassVar[bool] = False


@dataclass(frozen=True)
class Unsubscribed:
    line: SubscriptionLine
    dm: bool
    changed: ClassVar[bool] = True


Outcome = (
    Subscribed
    | SubscribeDenied
    | TooMany
    | SubscriptionsListed
    | UnknownSubscription
    | AlreadyRemoved
    | RemoveDenied
    | Unsubscribed
)
