"""What a lineage-aware backfill saves on the food_delivery pipeline, and what sharing one
SparkSession saves over starting Spark for every job.

Run: .venv/bin/python bench/spark_bench.py [--days 365] [--parallel 2] [--process-samples 3]

(a) A year of orders is computed once (the "recompute everything" figure); then a backfill
    reruns 3 days and only the weekly intervals that read them. tests/spark shows the two
    give identical tables; here it is about wall time, partitions and rows written.
(b) The same 20 job runs on one shared session, then with a new session per job (stopped and
    recreated in this process: the JVM stays, the SparkContext does not), then a few runs as
    new processes (`python -m pipeline.food_delivery run`, what an Airflow task does).
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import date, timedelta
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from pipeline.food_delivery.catalog import JOBS, first_period, midnight  # noqa: E402
from pipeline.food_delivery.jobs import PipelineSettings, run_interval  # noqa: E402
from pipeline.food_delivery.runs import Outcome, Planned, full_plan, run_stages  # noqa: E402
from pipeline.food_delivery.session import shared_session, stop_shared_session  # noqa: E402

DAY = timedelta(days=1)
FIRST_DAY = date(2021, 1, 1)
BACKFILL_DAYS = (date(2021, 6, 4), date(2021, 6, 5), date(2021, 6, 6))


def backfill_plan(days: tuple[date, ...]) -> list[list[Planned]]:
    """The failed days, then each weekly job for every week holding one, stage by stage."""
    plan = [[Planned("example.etl_orders", midnight(d), midnight(d) + DAY) for d in days]]
    for names in (
        ["example.etl_orders_7_days"],
        ["example.etl_delivery_7_days", "example.orders_popular_day_of_week"],
        ["example.delivery_times_7_days"],
    ):
        weeks = sorted({first_period(JOBS[names[0]], d) for d in days})
        plan.append([Planned(n, midnight(w), midnight(w) + 7 * DAY) for n in names for w in weeks])
    return plan


def report(label: str, seconds: float, outcomes: list[Outcome]) -> None:
    results = [o.result for o in outcomes if o.result is not None]
    failed = len(outcomes) - len(results)
    partitions = sum(len(r.partitions) for r in results)
    rows = sum(r.rows_written for r in results)
    print(
        f"  {label:<22} {seconds:8.1f} s  {len(outcomes):5d} runs  {partitions:5d} partitions"
        f"  {rows:9d} rows" + (f"  ({failed} FAILED)" if failed else ""),
        flush=True,
    )


def bench_backfill(warehouse: Path, days: int, parallel: int) -> None:
    last_day = FIRST_DAY + (days - 1) * DAY
    print(f"(a) backfill 3 days vs recompute {days} days ({FIRST_DAY}..{last_day}), "
          f"{parallel} runs at a time", flush=True)  # fmt: skip
    spark = shared_session()
    settings = PipelineSettings(warehouse=warehouse)
    began = time.perf_counter()
    everything = run_stages(spark, full_plan(FIRST_DAY, last_day), settings, parallel=parallel)
    full_s = time.perf_counter() - began
    report("recompute everything", full_s, everything)
    began = time.perf_counter()
    backfill = run_stages(spark, backfill_plan(BACKFILL_DAYS), settings, parallel=parallel)
    backfill_s = time.perf_counter() - began
    report("backfill 3 days+weeks", backfill_s, backfill)
    print(f"  backfill takes {backfill_s / full_s:.1%} of the recompute's time", flush=True)


def twenty_runs() -> list[Planned]:
    runs = [Planned("example.etl_orders", midnight(d), midnight(d) + DAY)
            for d in (date(2021, 6, 1) + n * DAY for n in range(14))]  # fmt: skip
    for name in ("example.etl_orders_7_days", "example.etl_delivery_7_days",
                 "example.delivery_times_7_days"):  # fmt: skip
        runs += [Planned(name, midnight(w), midnight(w) + 7 * DAY)
                 for w in (date(2021, 5, 30), date(2021, 6, 6))]  # fmt: skip
    return runs


def timed_runs(warehouse: Path, runs: list[Planned], *, fresh_session: bool) -> list[float]:
    settings = PipelineSettings(warehouse=warehouse)
    times = []
    for run in runs:
        began = time.perf_counter()
        spark = shared_session()
        run_interval(spark, run.dag, run.start, run.end, settings)
        if fresh_session:
            stop_shared_session()
        times.append(time.perf_counter() - began)
    return times


def process_runs(warehouse: Path, runs: list[Planned]) -> list[float]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "FOOD_DELIVERY_WAREHOUSE": str(warehouse)}
    times = []
    for run in runs:
        began = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "pipeline.food_delivery", "run", run.dag,
             "--start", run.start.isoformat(), "--end", run.end.isoformat()],
            env=env, check=True, capture_output=True,
        )  # fmt: skip
        times.append(time.perf_counter() - began)
    return times


def describe(label: str, times: list[float]) -> None:
    print(
        f"  {label:<30} total {sum(times):7.1f} s   per job: median {statistics.median(times):5.2f}"
        f"  min {min(times):5.2f}  max {max(times):5.2f}  ({len(times)} runs)",
        flush=True,
    )


def bench_sessions(warehouse: Path, samples: int) -> None:
    runs = twenty_runs()
    print(f"(b) {len(runs)} job runs: one shared session vs a new one per job", flush=True)
    stop_shared_session()  # both sides pay for starting Spark in this process
    describe("shared session (incl. start)", timed_runs(warehouse, runs, fresh_session=False))
    stop_shared_session()
    describe("new session per job", timed_runs(warehouse, runs, fresh_session=True))
    if samples:
        describe("new process per job (Airflow)", process_runs(warehouse, runs[:samples]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--days", type=int, default=365)
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--process-samples", type=int, default=3)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    root = Path(tempfile.mkdtemp(prefix="food_delivery_bench_"))
    try:
        jvm = os.environ.get("FOOD_DELIVERY_JAVA_OPTIONS") or "default JVM options"
        print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, {jvm}", flush=True)
        bench_backfill(root / "a", args.days, args.parallel)
        bench_sessions(root / "b", args.process_samples)
    finally:
        stop_shared_session()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
