"""Helpers of the PySpark pipeline tests: a Marquez stand-in serving from its own thread,
warehouse snapshots, and the seed's story played for real (`play_story`)."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import threading
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest
import requests
from pyspark.sql import Row, SparkSession

from pipeline.food_delivery.catalog import JOBS, TABLES, first_period, midnight
from pipeline.food_delivery.jobs import PipelineSettings
from pipeline.food_delivery.runs import Outcome, Planned, full_plan, run_stages
from pipeline.food_delivery.warehouse import table_dir
from standins.marquez.server import StandInServer, start_standin

FIRST_DAY, LAST_DAY = date(2021, 5, 24), date(2021, 6, 13)
FAILED_DAYS = frozenset({date(2021, 6, 4), date(2021, 6, 5), date(2021, 6, 6)})
ORDERS_PER_DAY = 12  # small: the tests are about correctness, not volume
# The seed story's backfill of example.etl_orders 2021-06-04..2021-06-06: runs per DAG.
PLANNED = {
    "example.etl_orders": 3,
    "example.etl_orders_7_days": 2,
    "example.etl_delivery_7_days": 2,
    "example.orders_popular_day_of_week": 2,
    "example.delivery_times_7_days": 2,
}
Snapshot = dict[str, list[Row]]


@contextlib.contextmanager
def threaded_standin(seed: str | None = None) -> Iterator[StandInServer]:
    """A Marquez stand-in on its own event loop thread, so synchronous code (the pipeline's
    OpenLineage client, `requests`) can call it from the test's thread."""
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    box: dict[str, Any] = {}

    def serve() -> None:
        asyncio.set_event_loop(loop)
        try:
            box["server"] = loop.run_until_complete(start_standin(seed=seed))
        except BaseException as exc:
            box["error"] = exc
            return
        finally:
            ready.set()
        loop.run_forever()

    thread = threading.Thread(target=serve, name="marquez-standin", daemon=True)
    thread.start()
    ready.wait(30)
    if "server" not in box:
        thread.join(5)
        loop.close()
        raise RuntimeError(f"stand-in did not start: {box.get('error')!r}")
    server: StandInServer = box["server"]
    try:
        yield server
    finally:
        asyncio.run_coroutine_threadsafe(server.stop(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)
        loop.close()


def get_json(server: StandInServer, path: str, **params: Any) -> Any:
    reply = requests.get(server.url + path, params=params, timeout=10)
    reply.raise_for_status()
    return reply.json()


def run_states(server: StandInServer) -> dict[tuple[str, str], str]:
    """(job name, nominal start) → state of its latest run, for every job in food_delivery."""
    states: dict[tuple[str, str], str] = {}
    for job in get_json(server, "/api/v1/namespaces/food_delivery/jobs")["jobs"]:
        runs = get_json(server, f"/api/v1/namespaces/food_delivery/jobs/{job['name']}/runs")
        for run in reversed(runs["runs"]):  # newest first: keep the newest per interval
            states[(job["name"], run["nominalStartTime"])] = run["state"]
    return states


def snapshot(spark: SparkSession, warehouse: Path) -> Snapshot:
    """Every table's rows, in a total order (so two snapshots compare exactly)."""
    found: Snapshot = {}
    for table in TABLES.values():
        root = table_dir(warehouse, table)
        if not root.is_dir():
            found[table.directory] = []
            continue
        frame = spark.read.schema(table.schema).parquet(str(root))
        found[table.directory] = frame.orderBy(*frame.columns).collect()
    return found


def repair_plan(failed: frozenset[date]) -> list[list[Planned]]:
    """What a backfill of the failed days reruns: those days, then every weekly job for each
    week holding one of them, stage by stage."""
    day = timedelta(days=1)
    stages = [
        [Planned("example.etl_orders", midnight(d), midnight(d) + day) for d in sorted(failed)]
    ]
    for names in (
        ["example.etl_orders_7_days"],
        ["example.etl_delivery_7_days", "example.orders_popular_day_of_week"],
        ["example.delivery_times_7_days"],
    ):
        weeks = sorted({first_period(JOBS[names[0]], d) for d in failed})
        stages.append(
            [Planned(n, midnight(w), midnight(w) + 7 * day) for n in names for w in weeks]
        )
    return stages


@dataclass
class Story:
    clean_warehouse: Path
    broken_warehouse: Path  # repaired by the end of the story
    broken_copy: Path  # that warehouse as the failed runs left it, for tests to repair again
    clean: Snapshot
    broken: Snapshot
    repaired: Snapshot
    broken_outcomes: list[Outcome]
    repair_outcomes: list[Outcome]
    events_after_failure: list[dict[str, Any]]
    states_after_failure: dict[tuple[str, str], str]
    states_after_repair: dict[tuple[str, str], str]
    lineage_nodes: list[dict[str, Any]]


def play_story(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Story:
    """The seed's story for real: a clean full recompute (no lineage); the same days with the
    order loads of 2021-06-04..06 failing, two runs at a time, reported to a stand-in; then
    the backfill of those days and their weeks, reported to the same stand-in."""
    clean_dir = tmp_path_factory.mktemp("clean")
    broken_dir = tmp_path_factory.mktemp("broken")
    plan = full_plan(FIRST_DAY, LAST_DAY)
    clean_settings = PipelineSettings(warehouse=clean_dir, orders_per_day=ORDERS_PER_DAY)
    clean_outcomes = run_stages(spark, plan, clean_settings)
    assert all(o.ok for o in clean_outcomes), [o.error for o in clean_outcomes if not o.ok]
    with threaded_standin() as server:
        settings = PipelineSettings(
            warehouse=broken_dir,
            lineage_url=server.url,
            fail_dates=FAILED_DAYS,
            orders_per_day=ORDERS_PER_DAY,
        )
        broken_outcomes = run_stages(spark, plan, settings, parallel=2)
        events = [e.body for e in server.state.events]
        states_after_failure = run_states(server)
        broken = snapshot(spark, broken_dir)
        broken_copy = tmp_path_factory.mktemp("broken_copy") / "warehouse"
        shutil.copytree(broken_dir, broken_copy)
        fixed = replace(settings, fail_dates=frozenset())  # the cause is fixed, then backfill
        repair_outcomes = run_stages(spark, repair_plan(FAILED_DAYS), fixed, parallel=2)
        states_after_repair = run_states(server)
        nodes = get_json(
            server,
            "/api/v1/lineage",
            nodeId="job:food_delivery:example.etl_orders.spark_job",
            depth=20,
        )["graph"]
    return Story(
        clean_warehouse=clean_dir,
        broken_warehouse=broken_dir,
        broken_copy=broken_copy,
        clean=snapshot(spark, clean_dir),
        broken=broken,
        repaired=snapshot(spark, broken_dir),
        broken_outcomes=broken_outcomes,
        repair_outcomes=repair_outcomes,
        events_after_failure=events,
        states_after_failure=states_after_failure,
        states_after_repair=states_after_repair,
        lineage_nodes=nodes,
    )
