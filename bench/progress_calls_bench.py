"""Slack calls a long backfill costs: a simulated 6-hour backfill of 50 DAGs driven through the
Runner (bot/backfill/run/runner.py) on SQLite, with a fake clock and an in-process backend, counting
what the outbox sender would send for it: the preview, the approval pointer, the status message,
its edits, the thread replies and the summary.

Run: .venv/bin/python bench/progress_calls_bench.py [--hours 6] [--dags 50] [--poll-s 5]
                                                  [--progress-update-s 5] [--parallel 4]
(about 2 minutes per cadence at the defaults: ~4,300 runner passes each, on SQLite)

The plan is a root, three branches of chains and diamonds (a → b, a → c, b + c → d) and a DAG
joining them, 30 daily runs per DAG; each DAG takes 0.6-1.4x an even share of the critical path
(seeded), its runs finishing evenly over that time, so the whole lasts about --hours. The runner
passes every --poll-s of fake time. After each pass the rows it enqueued are counted as the
sender would send them (it is woken after every pass): each row one call, except consecutive
replies of one thread (one merged post) and a status edit a newer one supersedes (skipped).

Two cadences are compared on the same simulation: the growing gap of bot/backfill/rules/progress.py
(`report_due`), and the gap fixed at progress_update_s. With the defaults (a pass every 5 s,
progress_update_s 5) the second is what the runner sent before the gap grew: an edit for every
pass that changed the status, a reply for every pass that saw a DAG start, end or be skipped.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import random
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.backfill.messages.backfill import plan_preview, request_status
from bot.backfill.messages.progress import status_of
from bot.backfill.rules import progress as progress_rules
from bot.backfill.rules.progress import Counts
from bot.backfill.rules.states import RequestState
from bot.backfill.run.backends import Finding, Progress, State, StepWork
from bot.backfill.run.runner import Runner
from bot.backfill.store import guards, repository
from bot.backfill.store.models import BackfillRequest
from bot.config import Execution
from bot.core.db import make_engine, session_factory, upgrade
from bot.core.metrics import Metrics
from bot.core.model import DagRef
from bot.lineage.rules.planner import plan_from_json
from bot.slack.messages.common import action_result
from bot.slack.store import outbox
from bot.slack.store.models import OutboxMessage, OutboxRole

NS = "bench"
CHANNEL = "C0BENCH001"
RUNS_PER_DAG = 30
FIRST_DAY = datetime(2021, 6, 1, tzinfo=UTC)
DAY = timedelta(days=1)


# --- the plan: a root, three branches of chains and diamonds, a join ------------------------


def _branch(head: str, count: int, names: Iterator[str]) -> tuple[list[tuple[str, list[str]]], str]:
    """`count` DAGs after `head`, alternating a chain of 3 and a diamond of 4; (steps, tail)."""
    steps: list[tuple[str, list[str]]] = []
    tail = head
    for shape in itertools.cycle(("chain", "diamond")):
        if count <= 0:
            break
        if shape == "diamond" and count >= 4:
            a, b, c, d = (next(names) for _ in range(4))
            steps += [(a, [tail]), (b, [a]), (c, [a]), (d, [b, c])]
            tail, count = d, count - 4
            continue
        for _ in range(min(3, count)):
            dag = next(names)
            steps.append((dag, [tail]))
            tail, count = dag, count - 1
    return steps, tail


def plan_of(dags: int) -> tuple[dict[str, Any], int]:
    """The plan's JSON (plan order is topological) and the length of its longest path."""
    names = (f"dag{i:02d}" for i in itertools.count())
    root = next(names)
    steps: list[tuple[str, list[str]]] = [(root, [])]
    tails = []
    per_branch, extra = divmod(dags - 2, 3)
    for index in range(3):
        branch, tail = _branch(root, per_branch + (1 if index < extra else 0), names)
        steps += branch
        tails.append(tail)
    steps.append((next(names), tails))
    depth: dict[str, int] = {}
    for dag, upstream in steps:
        depth[dag] = 1 + max((depth[u] for u in upstream), default=0)
    intervals = [
        {"start": (FIRST_DAY + i * DAY).isoformat(), "end": (FIRST_DAY + (i + 1) * DAY).isoformat()}
        for i in range(RUNS_PER_DAG)
    ]
    plan = {
        "dag_id": root,
        "namespace": NS,
        "start": intervals[0]["start"],
        "end": intervals[-1]["end"],
        "steps": [
            {"dag_id": dag, "namespace": NS, "intervals": intervals, "upstream": upstream}
            for dag, upstream in steps
        ],
    }
    return plan, max(depth.values())


# --- a backend that runs DAGs in fake time --------------------------------------------------


@dataclass
class SimulatedAirflow:
    """Each DAG's runs finish evenly over its duration, a few at a time, in fake time."""

    clock: Callable[[], datetime]
    durations: dict[str, timedelta]
    name: str = "simulated"
    started: dict[str, datetime] = field(default_factory=dict)

    async def check(self, dags: Sequence[DagRef]) -> dict[DagRef, Finding]:
        return {}

    async def submit(self, work: StepWork) -> State:
        self.started.setdefault(work.step_id, self.clock())
        return {"handle": f"backfill of {work.dag.dag_id}"}

    async def poll(self, work: StepWork) -> Progress:
        runs = len(work.intervals)
        share = (self.clock() - self.started[work.step_id]) / self.durations[work.dag.dag_id]
        done = min(runs, int(runs * share))
        running = min(4, runs - done)
        counts = Counts(queued=runs - done - running, running=running, succeeded=done)
        return Progress(counts, done=done == runs, ok=done == runs)

    async def cancel(self, work: StepWork) -> State | None:
        return None

    def link(self, work: StepWork) -> str | None:
        return f"http://airflow.example.com/dags/{work.dag.dag_id}/grid"

    async def close(self) -> None:
        return None


# --- what the sender would send -------------------------------------------------------------


def sender_calls(batch: Sequence[OutboxMessage]) -> Counter[str]:
    """Slack calls for rows delivered in one sender pass, as OutboxSender sends them."""
    calls: Counter[str] = Counter()
    taken: set[int] = set()
    for index, row in enumerate(batch):
        if row.id in taken:
            continue
        later = batch[index + 1 :]
        if row.role == OutboxRole.STATUS_UPDATE:
            if any(r.role == OutboxRole.STATUS_UPDATE and r.request_id == row.request_id
                   for r in later):  # fmt: skip
                continue  # superseded: the newer edit is sent
            calls["status edits"] += 1
        elif row.role == OutboxRole.THREAD:
            for follower in later:  # consecutive replies of the thread are one post
                if follower.request_id != row.request_id:
                    break
                if follower.role == OutboxRole.STATUS_UPDATE:
                    continue
                if follower.role != OutboxRole.THREAD:
                    break
                taken.add(follower.id)
            calls["thread replies"] += 1
        elif row.method == "chat.update":
            calls["approval pointer"] += 1
        else:
            calls["preview + status message"] += 1
    return calls


class Outbox:
    """Reads what each pass enqueued and counts it as one sender pass."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self.sessions = sessions
        self.last = 0
        self.calls: Counter[str] = Counter()

    async def deliver(self) -> None:
        async with self.sessions() as session:
            rows = list(
                await session.scalars(
                    select(OutboxMessage)
                    .where(OutboxMessage.id > self.last)
                    .order_by(OutboxMessage.id)
                )
            )
        if rows:
            self.last = rows[-1].id
            self.calls += sender_calls(rows)


# --- one simulated backfill -----------------------------------------------------------------


@dataclass
class Result:
    calls: Counter[str]
    took: timedelta
    passes: int


async def approved_and_running(
    sessions: async_sessionmaker[AsyncSession], runner: Runner, plan: dict[str, Any], out: Outbox
) -> str:
    """The rows BackfillService owes for a preview and its approval, then the hand-off."""
    async with sessions.begin() as session:
        row = await repository.create_request(
            session, plan=plan, requester="U0REQUEST1", channel=CHANNEL
        )
        preview = plan_preview(
            plan_from_json(plan), request_id=row.id, requester="U0REQUEST1", dry_run=False
        )
        await outbox.enqueue(
            session, channel=CHANNEL, payload=preview, role=OutboxRole.STATUS, request_id=row.id
        )
        await repository.set_status_message(session, row.id, channel=CHANNEL, ts="1.000001")
    await out.deliver()
    async with sessions.begin() as session:
        approved = await repository.transition_request(
            session, row.id, expected={RequestState.PREVIEWED}, to=RequestState.APPROVED,
            actor="U0OWNER001",
        )  # fmt: skip
        pointer = action_result(f"Backfill {row.id} was approved.")
        await outbox.enqueue(
            session,
            channel=CHANNEL,
            payload={**pointer, "ts": "1.000001"},
            method="chat.update",
            request_id=row.id,
        )
        await guards.forget_status_message(session, row.id)
        await outbox.enqueue(
            session,
            channel=CHANNEL,
            payload=request_status(status_of(approved)),
            role=OutboxRole.STATUS,
            request_id=row.id,
        )
        await runner.start(session, await repository.get_request(session, row.id))
    await out.deliver()
    return row.id


async def simulate(
    database_url: str, plan: dict[str, Any], durations: dict[str, timedelta], args: Any
) -> Result:
    upgrade(database_url)
    engine = make_engine(database_url)
    sessions = session_factory(engine)
    now = [datetime.now(UTC)]
    settings = Execution(
        poll_interval_s=args.poll_s,
        progress_update_s=args.progress_update_s,
        max_parallel_steps=args.parallel,
    )
    runner = Runner(
        sessions,
        SimulatedAirflow(lambda: now[0], durations),
        settings,
        clock=lambda: now[0],
        metrics=Metrics(),
    )
    out = Outbox(sessions)
    try:
        request_id = await approved_and_running(sessions, runner, plan, out)
        began, passes = now[0], 0
        while True:
            now[0] += timedelta(seconds=args.poll_s)
            await runner.advance(request_id)
            await out.deliver()
            passes += 1
            async with sessions() as session:
                state, finished = (
                    await session.execute(
                        select(BackfillRequest.state, BackfillRequest.finished_at).where(
                            BackfillRequest.id == request_id
                        )
                    )
                ).one()
            if finished is not None:
                break
        assert state == RequestState.SUCCEEDED, state
        return Result(out.calls, now[0] - began, passes)
    finally:
        await engine.dispose()


@contextmanager
def growth_capped_at(cap: timedelta) -> Iterator[None]:
    """Run the Runner with the report gap growing to `cap` at most: 0 keeps it at
    progress_update_s, the runner's cadence before the gap grew with age."""
    kept = progress_rules.MAX_REPORT_GAP
    progress_rules.MAX_REPORT_GAP = cap
    try:
        yield
    finally:
        progress_rules.MAX_REPORT_GAP = kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=float, default=6.0)
    parser.add_argument("--dags", type=int, default=50)
    parser.add_argument("--poll-s", type=float, default=5.0, help="execution.poll_interval_s")
    parser.add_argument("--progress-update-s", type=float, default=5.0)
    parser.add_argument("--parallel", type=int, default=4, help="execution.max_parallel_steps")
    args = parser.parse_args()

    plan, depth = plan_of(args.dags)
    rng = random.Random(11)
    # Each DAG takes about an even share of the hours along the longest path, less an eighth:
    # max_parallel_steps holds a few ready DAGs back, which makes the whole that much longer.
    unit = timedelta(hours=args.hours) / (depth * 1.125)
    durations = {s["dag_id"]: unit * rng.uniform(0.6, 1.4) for s in plan["steps"]}
    print(
        f"{len(plan['steps'])} DAGs x {RUNS_PER_DAG} runs, longest path {depth} DAGs, "
        f"max_parallel_steps {args.parallel}, a pass every {args.poll_s:g} s, "
        f"progress_update_s {args.progress_update_s:g}"
    )
    rows = []
    for label, cap in (
        ("growing gap (report_due)", progress_rules.MAX_REPORT_GAP),
        ("fixed gap (progress_update_s)", timedelta(0)),
    ):
        with tempfile.TemporaryDirectory() as folder, growth_capped_at(cap):
            wall = time.perf_counter()
            result = asyncio.run(simulate(f"sqlite:///{folder}/bench.db", plan, durations, args))
            wall = time.perf_counter() - wall
        rows.append((label, result, wall))
    kinds = ["preview + status message", "approval pointer", "status edits", "thread replies"]
    print(f"{'cadence':31} {'ran':>8} {'passes':>6} " + " ".join(f"{k:>24}" for k in kinds)
          + f" {'Slack calls':>11} {'bench s':>7}")  # fmt: skip
    for label, result, wall in rows:
        hours, rest = divmod(int(result.took.total_seconds()), 3600)
        ran = f"{hours}h {rest // 60:02d}m"
        counts = " ".join(f"{result.calls[k]:>24}" for k in kinds)
        total = sum(result.calls.values())
        print(f"{label:31} {ran:>8} {result.passes:>6} {counts} {total:>11} {wall:>7.1f}")


if __name__ == "__main__":
    main()
