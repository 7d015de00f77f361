"""The budget's queue order (bot/backfill/rules/capacity.py) against first come, first served:
which reports are correct again by their `ready_by` when 20 backfills share one budget.

A discrete-event simulation on a fake clock (no sleeps): `--backfills` backfills of 5 teams
arrive at seeded times between 00:00 and 01:00 on a Monday, each a chain of 1-4 steps (a step is
ready once the step before it ended). The first step is a DAG of the backfill's team (the team
the budget charges); each later one is a finance DAG (in the pool) with probability 0.4. A step
has N runs to do (`--intervals`, 3-15), each taking its run time (`--run-minutes`, 5-30, seeded
per step), and asks for runs at once (`--wanted`, 2-8); granted k, it ends after ceil(N/k)
waves and holds its grant until then, as the bot does. Each backfill feeds one report, read
daily at 07:00, 08:00, 09:00 or 12:00, or on Tuesdays at 07:00; "on time" means done by its
first reading after the backfill arrived.

At every event (an arrival, a step's end) the real `allocate` decides which waiting steps start
and with how many runs, under `--total`, `--per-team` and the pool `--pool-dags`/`--pool-max`.
The same workload runs twice: every claim ranked by arrival alone (first come, first served),
then as the bot ranks it: `rank()` with the report's next reading (`Deadline.next_after(now)`,
as bot/backfill/run/budget.py does), `--urgent-within`, and two "high" and two "low" backfills.
The peaks of runs granted at once, per limit, come from the simulation's own counters.

The defaults make ~120 run-hours of work, ~15 h for 8 runs at once, so the order decides which
reports make it. With 3-30 intervals of 5-90 min (~640 run-hours, ~80 h) both orders miss all
but two or three reports, by a day or more.

Run: .venv/bin/python bench/budget_queue_bench.py [--seed 7] [--backfills 20] [--total 8]
     [--per-team 4] [--pool-dags 'finance.*'] [--pool-max 3] [--urgent-within 12]
"""

from __future__ import annotations

import argparse
import heapq
import math
import random
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.backfill.rules.capacity import Claim, Limits, Rank, allocate, rank
from bot.config.base import matches
from bot.core.run_options import Priority
from bot.core.windows import Deadline

START = datetime(2024, 3, 4, tzinfo=UTC)  # a Monday, 00:00
HOUR = timedelta(hours=1)
DAILY = frozenset(range(7))
READY_BY = (  # daily at 07:00, 08:00, 09:00, 12:00; Tuesdays at 07:00
    *(Deadline(DAILY, time(h)) for h in (7, 8, 9, 12)),
    Deadline(frozenset({1}), time(7)),
)
TEAMS = ("finance", "marketing", "ops", "growth", "risk")
NAMESPACE = "warehouse"


@dataclass(frozen=True)
class Step:
    dag: str
    intervals: int
    run: timedelta
    wanted: int


@dataclass(frozen=True)
class Backfill:
    name: str  # and its report's
    team: str
    priority: Priority
    arrives: datetime
    deadline: Deadline
    steps: tuple[Step, ...]

    @property
    def ready_by(self) -> datetime:
        """When its report is first read after it arrives (what "on time" is judged by)."""
        return self.deadline.next_after(self.arrives)


def workload(args: argparse.Namespace) -> list[Backfill]:
    rng = random.Random(args.seed)
    special = rng.sample(range(args.backfills), 4)
    found = []
    for i in range(args.backfills):
        team = TEAMS[i % len(TEAMS)]
        steps = tuple(
            Step(
                dag=f"{team if k == 0 or rng.random() >= 0.4 else 'finance'}.dag_{i:02d}_{k}",
                intervals=rng.randint(*args.intervals),
                run=timedelta(minutes=rng.randint(*args.run_minutes)),
                wanted=rng.randint(*args.wanted),
            )
            for k in range(rng.randint(1, 4))
        )
        priority: Priority = "normal"
        if i in special:
            priority = "high" if special.index(i) < 2 else "low"
        arrives = START + timedelta(minutes=rng.randrange(60))
        deadline = rng.choice(READY_BY)
        found.append(Backfill(f"report_{i:02d}", team, priority, arrives, deadline, steps))
    return sorted(found, key=lambda b: b.arrives)


Ranker = Callable[[Backfill, int, datetime], Rank]


def first_come(backfill: Backfill, position: int, now: datetime) -> Rank:
    return Rank(1, None, backfill.arrives, position)


def bots_order(urgent_within: timedelta) -> Ranker:
    def ranked(backfill: Backfill, position: int, now: datetime) -> Rank:
        return rank(backfill.priority, [backfill.deadline.next_after(now)], since=backfill.arrives,
                    position=position, now=now, urgent_within=urgent_within)  # fmt: skip

    return ranked


@dataclass
class Outcome:
    done: dict[str, datetime]
    """Report → when its backfill's last step ended."""
    peak: Counter[str]
    """A limit ("total", "team X", "pool P") → the most runs granted at once against it."""
    over: int
    """Grants that left a limit over its cap (counted after every grant)."""
    short: int
    """Steps granted fewer runs than they asked for."""
    single: int
    """Steps granted one run alone (they run their intervals one after another)."""


def pools_of(limits: Limits, step: Step) -> tuple[str, ...]:
    return tuple(pool for pool in limits.pools or {} if matches(pool, NAMESPACE, step.dag))


def limits_on(limits: Limits, backfill: Backfill, step: Step) -> list[tuple[str, int | None]]:
    """The simulation's own view of the limits a step's grant counts against."""
    pools = [(f"pool {p}", (limits.pools or {})[p]) for p in pools_of(limits, step)]
    return [("total", limits.total), (f"team {backfill.team}", limits.per_team), *pools]


def simulate(backfills: Sequence[Backfill], limits: Limits, ranked: Ranker) -> Outcome:
    by_name = {b.name: b for b in backfills}
    # (time, tie-break, backfill, step index): step `index` is ready, the one before it ended.
    events = [(b.arrives, n, b.name, 0) for n, b in enumerate(backfills)]
    heapq.heapify(events)
    tie = len(events)
    ready: dict[str, tuple[Backfill, int]] = {}  # step id → its backfill and index
    granted: dict[str, int] = {}
    used: Counter[str] = Counter()
    outcome = Outcome({}, Counter(), 0, 0, 0)
    while events:
        now = events[0][0]
        while events and events[0][0] == now:
            _, _, name, index = heapq.heappop(events)
            backfill = by_name[name]
            if index > 0:
                ended = f"{name}/{index - 1}"
                for limit, _ in limits_on(limits, backfill, backfill.steps[index - 1]):
                    used[limit] -= granted[ended]
                del ready[ended], granted[ended]
            if index < len(backfill.steps):
                ready[f"{name}/{index}"] = (backfill, index)
            else:
                outcome.done[name] = now
        claims = [
            Claim(step_id, b.name, b.team, pools_of(limits, b.steps[i]), b.steps[i].wanted,
                  granted.get(step_id, 0), ranked(b, i, now))
            for step_id, (b, i) in ready.items()
        ]  # fmt: skip
        for step_id, runs in allocate(limits, claims).items():
            backfill, index = ready[step_id]
            step = backfill.steps[index]
            granted[step_id] = runs
            outcome.short += runs < step.wanted
            outcome.single += runs == 1
            for limit, cap in limits_on(limits, backfill, step):
                used[limit] += runs
                outcome.peak[limit] = max(outcome.peak[limit], used[limit])
                outcome.over += cap is not None and used[limit] > cap
            end = now + math.ceil(step.intervals / runs) * step.run
            tie += 1
            heapq.heappush(events, (end, tie, backfill.name, index + 1))
    return outcome


def clock(at: datetime) -> str:
    return at.strftime("%a %H:%M")


def hours(span: timedelta) -> str:
    minutes = round(span.total_seconds() / 60)
    return f"{minutes // 60}:{minutes % 60:02d}"


def verdict(backfill: Backfill, done: datetime) -> str:
    late = done - backfill.ready_by
    return f"{clock(done)} {'on time' if late <= timedelta(0) else 'late ' + hours(late):>11}"


def totals(label: str, backfills: Sequence[Backfill], outcome: Outcome) -> None:
    lateness = [outcome.done[b.name] - b.ready_by for b in backfills]
    late = [span for span in lateness if span > timedelta(0)]
    mean = sum(late, timedelta(0)) / len(late) if late else timedelta(0)
    makespan = max(outcome.done.values()) - min(b.arrives for b in backfills)
    print(f"{label:<12} on time {len(backfills) - len(late):>2}/{len(backfills)}   "
          f"late ones {hours(mean):>6} late on average   makespan {hours(makespan)}")  # fmt: skip


def peaks(label: str, limits: Limits, outcome: Outcome, steps: int) -> None:
    caps = {"total": limits.total} | {f"pool {p}": c for p, c in (limits.pools or {}).items()}
    order = sorted(
        outcome.peak, key=lambda limit: (limit != "total", limit.startswith("pool"), limit)
    )
    shown = [f"{limit} {outcome.peak[limit]}/{caps.get(limit, limits.per_team)}" for limit in order]
    over = "never over a limit" if outcome.over == 0 else f"OVER A LIMIT {outcome.over} times"
    print(f"{label:<12} {', '.join(shown)}: {over}")
    print(
        f"{'':<12} {outcome.short} of {steps} steps granted fewer runs than they asked for, "
        f"{outcome.single} just 1 run (each held to the step's end)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--backfills", type=int, default=20)
    parser.add_argument("--total", type=int, default=8)
    parser.add_argument("--per-team", type=int, default=4)
    parser.add_argument("--pool-dags", default="finance.*")
    parser.add_argument("--pool-max", type=int, default=3)
    parser.add_argument("--urgent-within", type=float, default=12.0, help="hours")
    parser.add_argument("--intervals", type=int, nargs=2, default=(3, 15), metavar=("MIN", "MAX"))
    parser.add_argument("--run-minutes", type=int, nargs=2, default=(5, 30), metavar=("MIN", "MAX"))
    parser.add_argument("--wanted", type=int, nargs=2, default=(2, 8), metavar=("MIN", "MAX"))
    args = parser.parse_args()
    limits = Limits(args.total, args.per_team, {args.pool_dags: args.pool_max})
    backfills = workload(args)
    orders = {
        "first come": simulate(backfills, limits, first_come),
        "bot queue": simulate(backfills, limits, bots_order(args.urgent_within * HOUR)),
    }
    work = sum((s.intervals * s.run for b in backfills for s in b.steps), timedelta(0)) / HOUR
    print(f"{len(backfills)} backfills, {sum(len(b.steps) for b in backfills)} steps, "
          f"{work:.0f} run-hours of work; budget total {args.total}, per team {args.per_team}, "
          f"pool {args.pool_dags} {args.pool_max}; seed {args.seed}\n")  # fmt: skip
    print(f"{'report':<10} {'team':<9} {'prio':<6} {'steps':>5} {'arrives':>9} "
          f"{'ready by':>9}  {'first come':<21}  {'bot queue':<21}")  # fmt: skip
    for b in sorted(backfills, key=lambda b: (b.ready_by, b.arrives)):
        print(f"{b.name:<10} {b.team:<9} {b.priority:<6} {len(b.steps):>5} "
              f"{clock(b.arrives)[4:]:>9} {clock(b.ready_by):>9}  "
              + "  ".join(verdict(b, o.done[b.name]) for o in orders.values()))  # fmt: skip
    print()
    for label, outcome in orders.items():
        totals(label, backfills, outcome)
    print("\npeak runs granted at once / cap, from the simulation's own counters:")
    for label, outcome in orders.items():
        peaks(label, limits, outcome, sum(len(b.steps) for b in backfills))


if __name__ == "__main__":
    main()
