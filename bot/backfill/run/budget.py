"""The runner's side of `execution.budget`: a step ready to start queues for runs at once, and
starts only once the queue grants them (bot/backfill/rules/capacity.py decides). Grants and the
queue live in `backfill_budget`, decided under one lock in the transaction that claims the
steps, so every replica and a restarted bot share one budget and one queue; a step gives its
runs back in the transaction that records its end.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from bot.backfill.rules import capacity
from bot.backfill.rules.capacity import Claim, Limits, Place
from bot.backfill.rules.estimate import DEADLINES, granted
from bot.backfill.rules.options import RunOptions
from bot.backfill.rules.states import STEP_ACTIVE
from bot.backfill.rules.status import Queued
from bot.backfill.store import budget as store
from bot.backfill.store.models import BackfillRequest, BackfillStep, BudgetClaim
from bot.config.base import matches
from bot.config.execution import Budget
from bot.core.run_options import PRIORITIES
from bot.core.windows import Deadline


def limits_of(config: Budget) -> Limits:
    return Limits(config.total, config.per_team, {p.dags: p.max for p in config.pools})


def team_of(request: BackfillRequest) -> str | None:
    """The team the budget charges: the first owner of the request's root DAG."""
    for step in (request.plan or {}).get("steps", ()):
        if isinstance(step, dict) and step.get("dag_id") == request.root_dag:
            owners = step.get("owners") or ()
            return str(owners[0]) if owners else None
    return None


def step_deadlines(request: BackfillRequest) -> dict[str, list[Deadline]]:
    """Each step's DAG → the `ready_by` of the reports it leads to (it, or a DAG downstream
    of it in the plan, writes what they read; every step when the writers are not known)."""
    steps = [(s.dag_id, tuple(s.upstream)) for s in request.steps]
    found: dict[str, list[Deadline]] = {dag: [] for dag, _ in steps}
    for entry in (request.options or {}).get(DEADLINES) or ():
        if not isinstance(entry, dict):
            continue
        deadline = Deadline.from_json(entry.get("deadline"))
        if deadline is None:
            continue
        writers = [str(d) for d in entry.get("dags") or ()]
        leading = capacity.leading_to(steps, writers) if writers else found.keys()
        for dag in leading:
            found[dag].append(deadline)
    return found


def as_claim(row: BudgetClaim, *, now: datetime, config: Budget) -> Claim:
    deadlines = (Deadline.from_json(d) for d in row.deadlines or ())
    level = PRIORITIES[row.level] if 0 <= row.level < len(PRIORITIES) else "normal"
    rank = capacity.rank(
        level,
        (d.next_after(now) for d in deadlines if d is not None),
        since=row.since,
        position=row.position,
        now=now,
        urgent_within=config.urgent_within,
    )
    return Claim(row.step_id, row.request_id, row.team, tuple(row.pools), row.wanted,
                 row.granted, rank)  # fmt: skip


async def queued(
    session: AsyncSession, request: BackfillRequest, config: Budget, now: datetime
) -> Queued | None:
    """The request's place in the queue as its status message shows it (None: it waits for
    nothing, or there is no budget)."""
    if not config.enforced:
        return None
    claims = [as_claim(r, now=now, config=config) for r in await store.claims(session)]
    place = capacity.places(limits_of(config), claims).get(request.id)
    if place is None:
        return None
    idle = not any(s.state in STEP_ACTIVE for s in request.steps)
    return Queued(place.position, place.of, place.held, idle, place.steps)


class BudgetGate:
    def __init__(
        self,
        config: Budget,
        options: Callable[[BackfillRequest], RunOptions],
        wanted: Callable[[BackfillRequest, BackfillStep], int],
    ) -> None:
        self.config = config
        self.limits = limits_of(config)
        self.options = options
        self.wanted = wanted

    @property
    def enforced(self) -> bool:
        return self.config.enforced

    async def admit(
        self,
        session: AsyncSession,
        request: BackfillRequest,
        ready: Sequence[BackfillStep],
        now: datetime,
    ) -> dict[str, int]:
        """Queue the request's steps that are ready to start; those the queue lets start now,
        with the runs at once each was granted (every step, unbounded, without a budget)."""
        if not self.enforced:
            return {step.id: 0 for step in ready}
        team = team_of(request)
        level = PRIORITIES.index(self.options(request).priority)
        by_dag = step_deadlines(request)
        since = request.started_at or request.created_at
        # The lock first: two replicas queueing the same step would otherwise both insert its
        # claim, and one of them fail its pass on the primary key.
        await store.lock(session)
        for step in ready:
            deadlines = [d.to_json() for d in by_dag.get(step.dag_id, ())]
            pools = [p.dags for p in self.config.pools
                     if matches(p.dags, step.namespace, step.dag_id)]  # fmt: skip
            await store.want(
                session, step_id=step.id, request_id=request.id, team=team, pools=pools,
                wanted=self.wanted(request, step), level=level, deadlines=deadlines,
                since=since, position=step.position,
            )  # fmt: skip
        claims = [as_claim(r, now=now, config=self.config) for r in await store.claims(session)]
        grants = capacity.allocate(self.limits, claims)
        mine = {step.id: grants[step.id] for step in ready if step.id in grants}
        for step_id, runs in mine.items():
            await store.grant(session, step_id, runs, at=now)
        return mine

    def first(self, request: BackfillRequest, now: datetime) -> Callable[[str], Any]:
        """The order a request's ready steps start in: those leading to the report read
        soonest (inside `urgent_within`) first, then plan order."""
        by_dag = step_deadlines(request)
        keys = {
            step.id: capacity.rank(
                "normal", (d.next_after(now) for d in by_dag.get(step.dag_id, ())),
                since=now, position=step.position, now=now,
                urgent_within=self.config.urgent_within,
            ).key()
            for step in request.steps
        }  # fmt: skip
        return lambda step_id: keys[step_id]

    async def release(self, session: AsyncSession, step_ids: Sequence[str]) -> bool:
        """Give back the runs of steps that ended; True if any were held (others may start)."""
        if not self.enforced or not step_ids:
            return False
        return await store.release(session, step_ids) > 0

    async def withdraw(self, session: AsyncSession, request_id: str) -> None:
        """A paused, cancelled or ended request waits for nothing."""
        if self.enforced:
            await store.withdraw(session, request_id)

    async def place(self, session: AsyncSession, request_id: str, now: datetime) -> Place | None:
        """Where the request waits in the queue (None: it waits for nothing)."""
        if not self.enforced:
            return None
        claims = [as_claim(r, now=now, config=self.config) for r in await store.claims(session)]
        return capacity.places(self.limits, claims).get(request_id)

    async def queued(
        self, session: AsyncSession, request: BackfillRequest, now: datetime
    ) -> Queued | None:
        return await queued(session, request, self.config, now)

    @staticmethod
    def granted(step: BackfillStep) -> int | None:
        return granted(step.executor_state)
