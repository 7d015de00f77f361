"""The budget shared by every backfill (`execution.budget`): which waiting steps may start, with
how many runs at once, and where each waiting backfill stands in the queue.

A step of a backfill asks for runs at once (its `--max-active`, or the bot's setting) and holds
what it was granted until it ends. Every grant counts against the bot's total, the team of the
backfill's root DAG and every pool the step's DAG is in. Waiting steps are granted in queue
order: high priority, then normal, then low; within a level, the backfills whose reports are
read soonest (inside `urgent_within`), then the oldest request, then plan order. A step takes
what is free up to what it asked for (never less than one run), so a free run never idles
while the head of the queue waits for a whole grant; a step held back only by its own team's
or pool's limit does not hold back steps the limit does not cover.

Pure: the store gives the claims, the clock is an argument.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal, NamedTuple

from bot.core.run_options import PRIORITIES, Priority

LimitKind = Literal["total", "team", "pool"]


@dataclass(frozen=True)
class Limits:
    total: int | None = None
    per_team: int | None = None
    pools: Mapping[str, int] | None = None
    """Pool (its DAG pattern) → the most runs of its DAGs at once."""

    def of(self, claim: Claim) -> list[Limit]:
        """The limits a claim counts against."""
        found = []
        if self.total is not None:
            found.append(Limit("total", "", self.total))
        if self.per_team is not None and claim.team:
            found.append(Limit("team", claim.team, self.per_team))
        for pool in claim.pools:
            cap = (self.pools or {}).get(pool)
            if cap is not None:
                found.append(Limit("pool", pool, cap))
        return found


class Limit(NamedTuple):
    kind: LimitKind
    name: str
    cap: int


class Rank(NamedTuple):
    """Queue order: smaller goes first."""

    level: int
    """0 high, 1 normal, 2 low."""
    due: datetime | None
    """The soonest `ready_by` of a report downstream, if inside `urgent_within`."""
    since: datetime
    """When the request was approved (first come, first served within the rest)."""
    position: int
    """The step's place in its plan."""

    def key(self) -> tuple[int, int, datetime, datetime, int]:
        return (self.level, self.due is None, self.due or self.since, self.since, self.position)


def rank(
    priority: Priority,
    deadlines: Iterable[datetime],
    *,
    since: datetime,
    position: int,
    now: datetime,
    urgent_within: timedelta,
) -> Rank:
    soonest = min((d for d in deadlines if now <= d <= now + urgent_within), default=None)
    return Rank(PRIORITIES.index(priority), soonest, since, position)


def leading_to(
    steps: Sequence[tuple[str, Sequence[str]]], targets: Iterable[str]
) -> frozenset[str]:
    """The DAGs of a plan (dag id, its upstream dag ids; in plan order) that are `targets` or
    upstream of one: what must rerun before the targets' data is right."""
    wanted = set(targets)
    upstream = dict(steps)
    found: set[str] = set()
    stack = [dag for dag in wanted if dag in upstream]
    while stack:
        dag = stack.pop()
        if dag in found:
            continue
        found.add(dag)
        stack.extend(u for u in upstream.get(dag, ()) if u in upstream)
    return frozenset(found)


@dataclass(frozen=True)
class Claim:
    """A step's claim on the budget: granted (`granted` > 0) or waiting."""

    step_id: str
    request_id: str
    team: str | None
    pools: tuple[str, ...]
    wanted: int
    granted: int
    rank: Rank


class Usage:
    """Runs granted, per limit."""

    def __init__(self, limits: Limits, granted: Iterable[Claim]) -> None:
        self.limits = limits
        self.used: Counter[Limit] = Counter()
        for claim in granted:
            self.add(claim, claim.granted)

    def add(self, claim: Claim, runs: int) -> None:
        for limit in self.limits.of(claim):
            self.used[limit] += runs

    def free(self, claim: Claim) -> int:
        """Runs the claim could take now (its `wanted` if no limit covers it)."""
        room = [limit.cap - self.used[limit] for limit in self.limits.of(claim)]
        return max(0, min([claim.wanted, *room]))

    def full(self, claim: Claim) -> list[Held]:
        """The claim's limits with no run free."""
        return [
            Held(limit.kind, limit.name, self.used[limit], limit.cap)
            for limit in self.limits.of(claim)
            if self.used[limit] >= limit.cap
        ]

    def peak(self) -> int:
        """Runs granted in all (whatever the limits)."""
        return sum(n for limit, n in self.used.items() if limit.kind == "total")


class Held(NamedTuple):
    """A limit that keeps a step waiting: its kind, name, runs in use and cap."""

    kind: LimitKind
    name: str
    used: int
    cap: int


def waiting(claims: Iterable[Claim]) -> list[Claim]:
    """The waiting claims, in queue order."""
    return sorted((c for c in claims if c.granted <= 0), key=lambda c: c.rank.key())


def allocate(limits: Limits, claims: Sequence[Claim]) -> dict[str, int]:
    """The waiting claims that may start now (step id → runs at once), in queue order."""
    usage = Usage(limits, (c for c in claims if c.granted > 0))
    grants: dict[str, int] = {}
    for claim in waiting(claims):
        runs = usage.free(claim)
        if runs >= 1:
            grants[claim.step_id] = runs
            usage.add(claim, runs)
    return grants


@dataclass(frozen=True)
class Place:
    """Where a waiting backfill stands: `position` of `of` waiting backfills, and the limits
    that hold its first waiting step back."""

    position: int
    of: int
    held: tuple[Held, ...]
    ahead: int
    """Steps of other backfills ahead of its first waiting step."""
    steps: int
    """Its waiting steps."""


def places(limits: Limits, claims: Sequence[Claim]) -> dict[str, Place]:
    """Each backfill with a waiting step → its place in the queue, once what may start now has
    started (a backfill all of whose steps may start is not waiting)."""
    grants = allocate(limits, claims)
    after = [c if c.step_id not in grants else _granted(c, grants[c.step_id]) for c in claims]
    usage = Usage(limits, (c for c in after if c.granted > 0))
    queue = waiting(after)
    first: dict[str, tuple[int, Claim]] = {}
    for index, claim in enumerate(queue):
        first.setdefault(claim.request_id, (index, claim))
    count = Counter(c.request_id for c in queue)
    found = {}
    for position, (request_id, (index, claim)) in enumerate(first.items(), start=1):
        ahead = sum(1 for c in queue[:index] if c.request_id != request_id)
        held = tuple(usage.full(claim))
        found[request_id] = Place(position, len(first), held, ahead, count[request_id])
    return found


def _granted(claim: Claim, runs: int) -> Claim:
    return Claim(claim.step_id, claim.request_id, claim.team, claim.pools, claim.wanted, runs,
                 claim.rank)  # fmt: skip
