"""What an alert's buttons answer the person who clicked, as typed outcomes (facts, no
words): `bot.incidents.messages.answers` says each in words. Approve backfill, Backfill
downstream and the older Backfill answer with the backfill's own outcomes
(`bot.backfill.rules.outcomes`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from bot.ownership.rules import Denial


@dataclass(frozen=True)
class _Answer:
    changed: ClassVar[bool] = False

    @property
    def request_id(self) -> str | None:
        return None


@dataclass(frozen=True)
class Gone(_Answer):
    """The incident is not reachable from where the click came (the same answer whether it
    never existed or its alert is elsewhere). `meanwhile`: it was there when the click was
    checked and is gone since."""

    meanwhile: bool = False


@dataclass(frozen=True)
class Acknowledged(_Answer):
    changed: ClassVar[bool] = True


@dataclass(frozen=True)
class AlreadyAcknowledged(_Answer):
    """This person had acknowledged it already."""


@dataclass(frozen=True)
class AlreadyResolved(_Answer):
    """The incident is resolved: nothing to snooze or back fill from it."""


@dataclass(frozen=True)
class NotRecovered(_Answer):
    """Backfill downstream: the DAG has not recovered yet."""


@dataclass(frozen=True)
class Snoozed(_Answer):
    hours: int
    changed: ClassVar[bool] = True


@dataclass(frozen=True)
class NotSnoozed(_Answer):
    """Unsnooze of an alert that is not snoozed."""


@dataclass(frozen=True)
class Unsnoozed(_Answer):
    changed: ClassVar[bool] = True


@dataclass(frozen=True)
class SnoozeDenied(_Answer):
    """The person may not (un)snooze this alert; the denial names who may."""

    denial: Denial
    unsnooze: bool = False


@dataclass(frozen=True)
class BackfillUnderWay(_Answer):
    """The incident's backfill is approved or running already."""

    backfill: str
    state: str


@dataclass(frozen=True)
class NoInterval(_Answer):
    """The failed run reported no interval: the range to backfill is unknown."""

    dag_id: str


@dataclass(frozen=True)
class NoPlan(_Answer):
    """Review plan: no plan can be made (`planning`: the planner said why; else Marquez or
    something else failed)."""

    detail: str
    planning: bool


Outcome = (
    Gone
    | Acknowledged
    | AlreadyAcknowledged
    | AlreadyResolved
    | NotRecovered
    | Snoozed
    | NotSnoozed
    | Unsnoozed
    | SnoozeDenied
    | BackfillUnderWay
    | NoInterval
    | NoPlan
)
