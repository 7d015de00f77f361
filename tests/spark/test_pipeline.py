"""The pipeline on real Spark: partitions, the failure story, the backfill that repairs it, and
reruns that change nothing."""

from __future__ import annotations

import shutil
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from bot.core.model import DagRef
from bot.lineage.rules.graph import build_lineage
from pipeline.food_delivery.catalog import TABLES, midnight
from pipeline.food_delivery.jobs import PipelineSettings, run_interval
from pipeline.food_delivery.warehouse import existing_partitions, partition_dir
from tests.spark.support import (
    FAILED_DAYS,
    FIRST_DAY,
    LAST_DAY,
    ORDERS_PER_DAY,
    Story,
    snapshot,
)

pytestmark = pytest.mark.spark

WEEKS = [date(2021, 5, 23), date(2021, 5, 30), date(2021, 6, 6)]
WEEKLY_TABLES = [t for t in TABLES.values() if t.partition == "week_start"]
DAY = timedelta(days=1)


def by_week(rows: list[Any], week: date) -> list[Any]:
    return [r for r in rows if r.week_start == week]


def ref(name: str) -> DagRef:
    return DagRef("food_delivery", f"example.{name}")


def test_full_run_writes_every_partition(story: Story) -> None:
    days = [FIRST_DAY + n * DAY for n in range((LAST_DAY - FIRST_DAY).days + 1)]
    assert existing_partitions(story.clean_warehouse, TABLES["public.orders"]) == days
    for table in WEEKLY_TABLES:
        assert existing_partitions(story.clean_warehouse, table) == WEEKS, table.dataset
    orders, week_orders = story.clean["orders"], story.clean["orders_7_days"]
    # The week of 2021-06-13 has not ended by LAST_DAY, so its orders are in no week yet.
    assert sorted(r.order_id for r in week_orders) == sorted(
        r.order_id for r in orders if r.order_date < LAST_DAY
    )
    popular = story.clean["popular_orders_day_of_week"]
    assert [len(by_week(popular, w)) for w in WEEKS] == [6, 7, 7]  # 2021-05-23 had no orders
    for week in WEEKS:
        ranked = sorted(by_week(popular, week), key=lambda r: r.rank)
        assert [r.rank for r in ranked] == list(range(1, len(ranked) + 1))
        busiest_first = [(-r.orders_placed, r.day_of_week) for r in ranked]
        assert busiest_first == sorted(busiest_first)
    delivered = [r for r in week_orders if r.status == "DELIVERED"]
    assert len(story.clean["delivery_7_days"]) == len(delivered)
    top = story.clean["top_delivery_times"]
    assert sum(r.deliveries for r in top) == len(delivered)
    for week in WEEKS:
        ranked = sorted(by_week(top, week), key=lambda r: r.rank)
        assert [r.rank for r in ranked] == list(range(1, len(ranked) + 1))
        means = [r.avg_delivery_minutes for r in ranked]
        assert means == sorted(means, reverse=True)


def test_failed_order_loads_leave_gaps_and_report_fail(story: Story) -> None:
    failed = [o for o in story.broken_outcomes if not o.ok]
    assert sorted((o.run.dag, o.run.start.date()) for o in failed) == [
        ("example.etl_orders", d) for d in sorted(FAILED_DAYS)
    ]
    for outcome in failed:
        assert outcome.error == (
            'relation "tmp_orders" does not exist: '
            f"the extract for {outcome.run.start.date().isoformat()} failed"
        )
    loaded = {r.order_date for r in story.broken["orders"]}
    assert loaded == {r.order_date for r in story.clean["orders"]} - FAILED_DAYS
    fails = [e for e in story.events_after_failure if e["eventType"] == "FAIL"]
    assert sorted(e["job"]["name"] for e in fails) == sorted(
        ["example.etl_orders", "example.etl_orders.spark_job"] * 3
    )
    for event in fails:
        facets = event["run"]["facets"]
        assert facets["errorMessage"]["programmingLanguage"] == "python"
        assert 'relation "tmp_orders" does not exist' in facets["errorMessage"]["message"]
        start = date.fromisoformat(facets["nominalTime"]["nominalStartTime"][:10])
        assert start in FAILED_DAYS
    for day in FAILED_DAYS:
        for job in ("example.etl_orders", "example.etl_orders.spark_job"):
            key = (job, f"{day.isoformat()}T00:00:00Z")
            assert story.states_after_failure[key] == "FAILED"
            assert story.states_after_repair[key] == "COMPLETED"


def test_weekly_tables_computed_over_the_gap_are_wrong(story: Story) -> None:
    # Every weekly job still succeeded, from what was there: the seed's wrong aggregates.
    assert all(o.ok for o in story.broken_outcomes if o.run.dag != "example.etl_orders")
    for table in WEEKLY_TABLES:
        clean, broken = story.clean[table.directory], story.broken[table.directory]
        assert by_week(broken, WEEKS[0]) == by_week(clean, WEEKS[0]), table.dataset
        for week in WEEKS[1:]:
            assert by_week(broken, week) != by_week(clean, week), (table.dataset, week)
    assert len(story.broken["orders_7_days"]) < len(story.clean["orders_7_days"])


def test_backfilling_failed_days_then_their_weeks_equals_full_recompute(story: Story) -> None:
    assert [o.error for o in story.repair_outcomes if not o.ok] == []
    assert len(story.repair_outcomes) == 3 + 2 * 4  # 3 days, then 2 weeks of 4 weekly jobs
    assert story.repaired.keys() == story.clean.keys()
    for name, rows in story.clean.items():
        assert rows, name
        assert story.repaired[name] == rows, name


def test_events_are_all_accepted_and_lineage_shows_the_dag_graph(story: Story) -> None:
    # The stand-in records only the events it accepted (201).
    assert len(story.events_after_failure) == 4 * len(story.broken_outcomes)
    dags = build_lineage(story.lineage_nodes).dags
    assert set(dags.edges) == {
        (ref("etl_orders"), ref("etl_orders_7_days")),
        (ref("etl_orders_7_days"), ref("etl_delivery_7_days")),
        (ref("etl_orders_7_days"), ref("orders_popular_day_of_week")),
        (ref("etl_delivery_7_days"), ref("delivery_times_7_days")),
    }
    edge = dags.edges[ref("etl_delivery_7_days"), ref("delivery_times_7_days")]
    assert {str(d) for d in edge["datasets"]} == {"food_delivery:public.delivery_7_days"}


def test_rerunning_an_interval_is_idempotent(spark: SparkSession, story: Story) -> None:
    settings = PipelineSettings(warehouse=story.clean_warehouse, orders_per_day=ORDERS_PER_DAY)
    day, week = date(2021, 6, 1), midnight(WEEKS[1])
    first = run_interval(spark, "example.etl_orders", midnight(day), midnight(day + DAY), settings)
    again = run_interval(spark, "example.etl_orders", midnight(day), midnight(day + DAY), settings)
    weekly = run_interval(spark, "example.etl_orders_7_days", week, week + 7 * DAY, settings)
    assert first.partitions == again.partitions == ("orders/order_date=2021-06-01",)
    assert (
        first.rows_written
        == again.rows_written
        == len([r for r in story.clean["orders"] if r.order_date == day])
    )
    assert first.run_id != again.run_id  # a rerun is a new run
    assert weekly.partitions == ("orders_7_days/week_start=2021-05-30",)
    after = snapshot(spark, story.clean_warehouse)
    assert after == story.clean
    for name in ("orders", "orders_7_days"):
        ids = [r.order_id for r in after[name]]
        assert len(ids) == len(set(ids)), name


def test_a_week_left_without_input_loses_its_stale_partition(
    spark: SparkSession, tmp_path: Path
) -> None:
    settings = PipelineSettings(warehouse=tmp_path, orders_per_day=ORDERS_PER_DAY)
    sunday = midnight(date(2021, 6, 6))
    run_interval(spark, "example.etl_orders", sunday, sunday + DAY, settings)
    filled = run_interval(spark, "example.etl_orders_7_days", sunday, sunday + 7 * DAY, settings)
    assert filled.rows_written > 0
    shutil.rmtree(tmp_path / "orders")
    emptied = run_interval(spark, "example.etl_orders_7_days", sunday, sunday + 7 * DAY, settings)
    assert (emptied.rows_written, emptied.partitions) == (0, ())
    assert emptied.removed == ("orders_7_days/week_start=2021-06-06",)
    assert not partition_dir(tmp_path, TABLES["public.orders_7_days"], sunday.date()).exists()
