"""Planning speed on large lineage, beside the seed script's recursive traversal.

Run: .venv/bin/python bench/planner_bench.py [--nodes 100000] [--levels 20] [--budget-s 60]

The "seed script" is the Marquez blog's bash + jq backfill loop, re-implemented faithfully in
Python over the same in-memory lineage nodes (its HTTP calls become dict look-ups, which only
flatters it): starting at the failed job it calls `airflow backfill` for the job, then follows
the job's output datasets to every job that reads them, recursively, with no memory of what it
already backfilled. It therefore backfills a DAG once per path that reaches it, in depth-first
order (which can run a DAG before one of its upstream DAGs).
"""

from __future__ import annotations

import argparse
import random
import resource
import sys
import time
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.core.model import DagRef, DateRange
from bot.lineage.rules.graph import build_lineage
from bot.lineage.rules.planner import make_plan
from bot.lineage.rules.schedule import PeriodicSchedule, Schedule
from standins.seeds.synthetic import JobSpec, lineage_nodes

NS = "synthetic"
RANGE = DateRange(date(2021, 6, 4), date(2021, 6, 6))


def random_layers(total_nodes: int, seed: int = 7) -> tuple[list[JobSpec], str]:
    """Half jobs, half datasets, in layers of 500; each job reads 1-3 outputs of the two layers
    above it, so paths reconverge as they do in real warehouses (staging -> marts -> reports)."""
    rng = random.Random(seed)
    jobs_wanted = total_nodes // 2
    width = 500
    jobs: list[JobSpec] = []
    written: list[str] = []
    for index in range(jobs_wanted):
        layer = index // width
        pool = written[max(0, layer - 2) * width : layer * width]
        reads = (
            tuple(sorted(set(rng.sample(pool, k=min(len(pool), rng.randint(1, 3))))))
            if pool
            else ()
        )
        output = f"ds{index}"
        jobs.append(JobSpec(f"job{index}", reads, (output,)))
        written.append(output)
    return jobs, "job0"


def diamond_lattice(levels: int) -> tuple[list[JobSpec], str]:
    """A root, then `levels` levels of two jobs that each read both datasets of the level above."""
    jobs = [JobSpec("root", (), ("root.out",))]
    above = ["root.out"]
    for level in range(1, levels + 1):
        outputs = [f"l{level}a.out", f"l{level}b.out"]
        for side, output in zip("ab", outputs, strict=True):
            jobs.append(JobSpec(f"l{level}{side}", tuple(above), (output,)))
        above = outputs
    return jobs, "root"


def timed(action: Callable[[], Any]) -> tuple[Any, float]:
    began = time.perf_counter()
    result = action()
    return result, time.perf_counter() - began


def daily(jobs: list[JobSpec]) -> dict[DagRef, Schedule]:
    anchor = datetime(2021, 6, 13, tzinfo=UTC)
    day = timedelta(days=1)
    return {DagRef(NS, j.name): PeriodicSchedule(anchor, day, day) for j in jobs}


def seed_script(nodes: list[dict[str, Any]], root: str, budget_s: float) -> dict[str, Any]:
    """The blog's recursion, with a time budget because it is exponential on diamonds."""
    by_id = {n["id"]: n for n in nodes}
    calls = 0
    order_violations = 0
    done: set[str] = set()
    upstream: dict[str, set[str]] = {}
    for node in nodes:
        if node["type"] == "JOB":
            upstream[node["id"]] = {
                producer["origin"]
                for edge in node["inEdges"]
                for producer in by_id[edge["origin"]]["inEdges"]
            }
    stack = [f"job:{NS}:{root}"]
    began = time.perf_counter()
    finished = True
    while stack:
        job = stack.pop()
        calls += 1  # airflow dags backfill --start-date S --end-date S <job>
        if job != f"job:{NS}:{root}" and not upstream[job] <= done:
            order_violations += 1
        done.add(job)
        for out in reversed(by_id[job]["outEdges"]):
            for consumer in reversed(by_id[out["destination"]]["outEdges"]):
                stack.append(consumer["destination"])
        if calls % 65536 == 0 and time.perf_counter() - began > budget_s:
            finished = False
            break
    return {
        "calls": calls,
        "distinct": len(done),
        "order_violations": order_violations,
        "seconds": time.perf_counter() - began,
        "finished": finished,
    }


def path_count(nodes: list[dict[str, Any]], root: str, plan_order: list[str]) -> int:
    """How many backfill calls the seed script makes in full: the number of root paths."""
    by_id = {n["id"]: n for n in nodes}
    paths = {f"job:{NS}:{root}": 1}
    for name in plan_order[1:]:
        job = by_id[f"job:{NS}:{name}"]
        paths[job["id"]] = sum(
            paths.get(producer["origin"], 0)
            for edge in job["inEdges"]
            for producer in by_id[edge["origin"]]["inEdges"]
        )
    return sum(paths.values())


def report(title: str, jobs: list[JobSpec], root: str, budget_s: float) -> None:
    nodes, t_nodes = timed(lambda: lineage_nodes(jobs))
    lineage, t_graph = timed(lambda: build_lineage(nodes))
    schedules = daily(jobs)
    plan, t_plan = timed(lambda: make_plan(lineage.dags, DagRef(NS, root), RANGE, schedules))
    order = [s.dag.dag_id for s in plan.steps]
    total = path_count(nodes, root, order)
    seed = seed_script(nodes, root, budget_s)
    print(f"## {title}")
    print(
        f"lineage nodes: {len(nodes):,} ({len(jobs):,} jobs); "
        f"built as Marquez JSON in {t_nodes:.2f} s"
    )
    print(
        f"backfill-bot: graph build {t_graph:.2f} s, plan {t_plan:.3f} s, "
        f"total {t_graph + t_plan:.2f} s -> {len(plan.steps):,} DAGs once each, "
        f"{plan.run_count:,} runs, lineage order"
    )
    status = "finished" if seed["finished"] else f"stopped at the {budget_s:.0f} s budget"
    print(
        f"seed script: {seed['calls']:,} backfill calls in {seed['seconds']:.2f} s ({status}); "
        f"{seed['distinct']:,} distinct DAGs; {seed['order_violations']:,} calls ran a DAG "
        f"before one of its upstream DAGs"
    )
    print(
        f"seed script in full would make {total:,} backfill calls "
        f"({total / max(len(plan.steps), 1):,.1f} per DAG)"
    )
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--levels", type=int, default=20)
    parser.add_argument("--budget-s", type=float, default=30.0)
    args = parser.parse_args()
    jobs, root = random_layers(args.nodes)
    report(f"random layered lineage, {args.nodes:,} nodes", jobs, root, args.budget_s)
    jobs, root = diamond_lattice(args.levels)
    report(f"diamond lattice, {args.levels} levels", jobs, root, args.budget_s)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak memory (RSS): {peak_mb:,.0f} MB")


if __name__ == "__main__":
    main()
