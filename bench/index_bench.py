"""The local lineage index against the Marquez stand-in with synthetic layered lineage.

For each size: a full reconcile from the stand-in into a fresh SQLite index; then, in a child
process that holds only what `serve` would (no stand-in, no reconcile), the index loaded from
that database (load time, RSS after load and peak RSS), `/backfill` → plan latency and Marquez
requests per plan, and impact latency p99 (what a FAIL → alert computes). First, plan compute
over a 100,000-node graph already in memory. Today's crawl figures: bench/lineage_fetch_bench.py.

Run: .venv/bin/python bench/index_bench.py [--jobs 500 2000 10000 50000] [--impacts 200]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lineage_fetch_bench import events
from planner_bench import RANGE, daily, random_layers

from bot.clients.marquez import MarquezClient
from bot.config import BotConfig, IndexSettings
from bot.core.db import make_engine, session_factory, upgrade
from bot.core.model import DagRef, DatasetRef
from bot.lineage.rules.dag_graph import DagLineage, JobLineage
from bot.lineage.rules.graph import affected_dags
from bot.lineage.rules.planner import make_plan
from bot.lineage.service.index import LineageIndex
from bot.lineage.service.index_planner import IndexPlanner
from bot.lineage.service.planning import PlanRequest
from bot.lineage.service.reconcile import Reconciler
from standins.marquez.server import running_standin


class Counting(MarquezClient):
    calls = 0

    async def _get(self, path: str, query: Any = ()) -> Any:
        Counting.calls += 1
        return await super()._get(path, query)


def rss_mb(field: str = "VmRSS") -> float:
    """This process's RSS, or with "VmHWM" its peak. Not `ru_maxrss`: Linux carries that over
    `exec` from the forking parent, so a child of a 1.5 GB bench would report 1.5 GB."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def reconcile(jobs: int) -> tuple[str, float]:
    """A fresh SQLite index holding a full reconcile of the stand-in: its URL, and seconds."""
    async with running_standin() as server:
        for item in events(jobs):
            server.state.ingest(item)
        url = f"sqlite:///{tempfile.mkdtemp()}/index.db"
        upgrade(url)
        engine = make_engine(url)
        index = LineageIndex(session_factory(engine))
        make = lambda: Counting(server.url)  # noqa: E731
        began = time.perf_counter()
        await Reconciler(index.sessions, make, index, IndexSettings()).full()
        reconcile_s = time.perf_counter() - began
        await engine.dispose()
    return url, reconcile_s


def measure(jobs: int, impacts: int) -> None:
    """Reconcile the stand-in into a fresh index, then time the bot alone on it."""
    url, reconcile_s = asyncio.run(reconcile(jobs))
    # A fresh process, as `serve` starts: the stand-in's memory and the reconcile's are not
    # the bot's. Marquez is gone by now, so every DAG must come from the index.
    child = subprocess.run(
        [sys.executable, __file__, "--bot", url, "--jobs", str(jobs), "--impacts", str(impacts)],
        check=True,
        capture_output=True,
        text=True,
    )
    bot = json.loads(child.stdout.strip().splitlines()[-1])
    print(
        f"{jobs:,} jobs: full reconcile {reconcile_s:.1f} s; bot alone: index load "
        f"{bot['load_s']:.2f} s, peak RSS {bot['peak_mb']:,.0f} MB (at the end of the load "
        f"{bot['load_peak_mb']:,.0f} MB, after it {bot['loaded_mb']:,.0f} MB); "
        f"/backfill→plan {bot['plan_ms']:.0f} ms "
        f"({bot['dags']:,} DAGs, {bot['runs']:,} runs), {bot['requests']} Marquez requests; "
        f"impact p99 {bot['p99_ms']:.0f} ms over {bot['impacts']} DAGs "
        f"(max {bot['max_ms']:.0f} ms)",
        flush=True,
    )


async def bot_alone(url: str, jobs: int, impacts: int) -> dict[str, Any]:
    """What `serve` holds for lineage: the index loaded from the database, one plan, impacts."""
    began = time.perf_counter()
    engine = make_engine(url)
    index = LineageIndex(session_factory(engine))
    await index.catch_up()
    index.ready.set()
    load_s = time.perf_counter() - began
    load_peak_mb = rss_mb("VmHWM")
    gc.collect()
    loaded_mb = rss_mb()
    config = BotConfig.model_validate({"limits": {"max_plan_dags": jobs}})
    make = lambda: Counting("http://127.0.0.1:9")  # noqa: E731  (nothing listens)
    began = time.perf_counter()
    plan = await IndexPlanner(index, config, make).plan(
        PlanRequest("job00000", "2021-06-04..2021-06-05")
    )
    plan_s = time.perf_counter() - began
    roots = sorted(index.graph, key=lambda d: d.dag_id)[:: max(1, jobs // impacts)][:impacts]
    took: list[float] = []
    for root in roots:
        began = time.perf_counter()
        await IndexPlanner(index, config, make).impact(root.dag_id, root.namespace)
        took.append(time.perf_counter() - began)
    took.sort()
    await engine.dispose()
    return {
        "load_s": load_s,
        "loaded_mb": loaded_mb,
        "load_peak_mb": load_peak_mb,
        "peak_mb": rss_mb("VmHWM"),
        "plan_ms": plan_s * 1000,
        "dags": len(plan.steps),
        "runs": plan.run_count,
        "requests": Counting.calls,
        "impacts": len(took),
        "p99_ms": took[min(len(took) - 1, int(len(took) * 0.99))] * 1000,
        "max_ms": took[-1] * 1000,
    }


def compute(nodes: int) -> None:
    """Plan compute over a graph already in memory (the index's DagGraph)."""
    specs, root = random_layers(nodes)
    lineage = DagLineage()
    for spec in specs:
        reads = [DatasetRef(spec.namespace, d) for d in spec.reads]
        writes = [DatasetRef(spec.namespace, d) for d in spec.writes]
        lineage.set_job(
            (spec.namespace, spec.name),
            JobLineage.of(DagRef(spec.namespace, spec.name), reads, writes),
        )
    graph = lineage.graph
    start = DagRef(specs[0].namespace, root)
    # As `IndexPlanner.schedules` hands them over: keyed by the graph's own DAG refs, equal
    # schedules one object (the index learns them that way). `daily` makes a new (equal)
    # schedule object and DAG ref per DAG, which the planner must compare by value.
    shared = next(iter(daily(specs[:1]).values()))
    as_index = dict.fromkeys(graph, shared)
    for title, schedules in (("", as_index), (", one schedule object per DAG", daily(specs))):
        gc.collect()
        best_walk = best_plan = float("inf")
        for _ in range(5):
            began = time.perf_counter()
            affected = affected_dags(graph, start)
            walked = time.perf_counter()
            plan = make_plan(graph, start, RANGE, schedules, affected=affected)
            best_walk = min(best_walk, walked - began)
            best_plan = min(best_plan, time.perf_counter() - began)
        print(
            f"plan compute over {nodes:,} nodes in memory{title}: {best_plan * 1000:.0f} ms "
            f"(walk {best_walk * 1000:.0f} ms) -> {len(plan.steps):,} DAGs, "
            f"{plan.run_count:,} runs",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, nargs="+", default=[500, 2000, 10000, 50000])
    parser.add_argument("--impacts", type=int, default=200)
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--bot", metavar="DATABASE_URL", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.bot:  # the child process of `measure`
        print(json.dumps(asyncio.run(bot_alone(args.bot, args.jobs[0], args.impacts))))
        return
    compute(args.nodes)
    for jobs in args.jobs:
        measure(jobs, args.impacts)


if __name__ == "__main__":
    main()
