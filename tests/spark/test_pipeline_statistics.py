"""Data statistics in the pipeline's OpenLineage events, as the Spark integration reports them:
`outputStatistics` on COMPLETE (the rows, bytes and files really written), the zero-rows switch,
and `columnLineage` naming real columns of real inputs; the same from `history_events`."""

from __future__ import annotations

from dataclasses import replace
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from pipeline.food_delivery.catalog import JOBS, TABLES, midnight
from pipeline.food_delivery.jobs import PipelineSettings, run_interval
from pipeline.food_delivery.lineage import history_events
from pipeline.food_delivery.warehouse import partition_dir
from tests.spark.support import ORDERS_PER_DAY, Story, threaded_standin

Event = dict[str, Any]
DAY = timedelta(days=1)
SUBTYPES = {  # the OpenLineage spec's, by type
    "DIRECT": {"IDENTITY", "TRANSFORMATION", "AGGREGATION"},
    "INDIRECT": {"JOIN", "GROUP_BY", "FILTER", "SORT", "WINDOW", "CONDITIONAL"},
}


def task_completes(events: list[Event]) -> list[Event]:
    return [
        e
        for e in events
        if e["eventType"] == "COMPLETE" and e["job"]["name"].endswith(".spark_job")
    ]


def start_of(event: Event) -> date:
    return date.fromisoformat(event["run"]["facets"]["nominalTime"]["nominalStartTime"][:10])


def statistics(events: list[Event]) -> dict[tuple[str, date], dict[str, int]]:
    """(DAG, interval start) → the outputStatistics of its task's COMPLETE."""
    found = {}
    for event in task_completes(events):
        (output,) = event["outputs"]
        stats = dict(output["outputFacets"]["outputStatistics"])
        del stats["_producer"], stats["_schemaURL"]
        found[event["job"]["name"].removesuffix(".spark_job"), start_of(event)] = stats
    return found


def check_column_lineage(events: list[Event]) -> int:
    """Every columnLineage facet maps each output column to columns the task's inputs have;
    the number of facets checked."""
    checked = 0
    for event in events:
        if not event["job"]["name"].endswith(".spark_job"):
            continue
        columns = {
            (i["namespace"], i["name"]): {f["name"] for f in i["facets"]["schema"]["fields"]}
            for i in event["inputs"]
        }
        for output in event["outputs"]:
            lineage = output["facets"].get("columnLineage")
            if not columns:  # generated orders: no dataset to name
                assert lineage is None
                continue
            schema = {f["name"] for f in output["facets"]["schema"]["fields"]}
            assert set(lineage["fields"]) == schema, output["name"]
            sources = [f for c in lineage["fields"].values() for f in c["inputFields"]]
            assert lineage["dataset"], output["name"]  # every transform filters or groups
            for source in [*sources, *lineage["dataset"]]:
                assert source["field"] in columns[source["namespace"], source["name"]], source
                for how in source["transformations"]:
                    assert how["subtype"] in SUBTYPES[how["type"]], how
            checked += 1
    return checked


def sources_of(events: list[Event], dataset: str, column: str) -> set[tuple[str, str, str]]:
    event = next(e for e in events if e["outputs"] and e["outputs"][0]["name"] == dataset)
    fields = event["outputs"][0]["facets"]["columnLineage"]["fields"][column]["inputFields"]
    return {(f["field"], t["type"], t["subtype"]) for f in fields for t in f["transformations"]}


@pytest.mark.spark
def test_complete_reports_the_rows_bytes_and_files_written(story: Story) -> None:
    events = story.events_after_failure
    found = statistics(events)
    assert len(found) == sum(o.ok for o in story.broken_outcomes)
    # The failing run wrote every partition once: what is on disk after it is what it wrote.
    for (dag, start), stats in found.items():
        table = TABLES[JOBS[dag].outputs[0]]
        rows = [r for r in story.broken[table.directory] if r[table.partition] == start]
        files = sorted(partition_dir(story.broken_copy, table, start).glob("*.parquet"))
        assert stats == {
            "rowCount": len(rows),
            "size": sum(f.stat().st_size for f in files),
            "fileCount": len(files),
        }, (dag, start)
        assert len(files) == 1  # written (no zero-row run here), in one file
    # As the Spark integration: statistics on COMPLETE only.
    for event in events:
        if event not in task_completes(events):
            assert all(not o.get("outputFacets") for o in event["outputs"])


@pytest.mark.spark
def test_column_lineage_names_real_columns_of_real_inputs(story: Story) -> None:
    events = story.events_after_failure
    weekly_runs = [o for o in story.broken_outcomes if o.run.dag != "example.etl_orders"]
    assert check_column_lineage(events) == 2 * len(weekly_runs)  # their START and COMPLETE
    assert sources_of(events, "public.delivery_7_days", "delivery_minutes") == {
        ("placed_at", "DIRECT", "TRANSFORMATION"),
        ("delivered_at", "DIRECT", "TRANSFORMATION"),
    }
    assert sources_of(events, "public.popular_orders_day_of_week", "revenue") == {
        ("amount", "DIRECT", "AGGREGATION")
    }
    assert sources_of(events, "public.orders_7_days", "customer_id") == {
        ("customer_id", "DIRECT", "IDENTITY")
    }


def test_history_events_carry_the_facets_and_honour_empty_dates() -> None:
    first, last, emptied = date(2021, 5, 30), date(2021, 6, 5), date(2021, 6, 1)
    plain = history_events(first, last)
    empty = history_events(first, last, empty_dates=[emptied])
    # The same runs at the same times, all complete: only what they wrote differs.
    assert [(e["eventTime"], e["run"]["runId"], e["eventType"]) for e in empty] == [
        (e["eventTime"], e["run"]["runId"], e["eventType"]) for e in plain
    ]
    assert check_column_lineage(empty) == 2 * 4  # START and COMPLETE of four weekly tasks
    full, cut = statistics(plain), statistics(empty)
    orders = "example.etl_orders"
    daily = [full[orders, first + n * DAY]["rowCount"] for n in range(7)]
    assert all(200 <= n <= 450 for n in daily), daily  # about 300 a day, more at weekends
    assert cut[orders, emptied] == {"rowCount": 0, "size": 0, "fileCount": 0}
    assert all(cut[orders, d] == full[orders, d] for (_, d) in full if d != emptied)
    assert full["example.etl_orders_7_days", first]["rowCount"] == sum(daily)
    assert cut["example.etl_orders_7_days", first]["rowCount"] == sum(daily) - daily[2]
    for dag in ("example.etl_delivery_7_days", "example.delivery_times_7_days"):
        assert 0 < cut[dag, first]["rowCount"] <= full[dag, first]["rowCount"], dag
    assert full["example.orders_popular_day_of_week", first]["rowCount"] == 7
    assert cut["example.orders_popular_day_of_week", first]["rowCount"] == 6
    # The switch empties a weekly job's whole week: everything downstream writes nothing.
    weekly = statistics(history_events(first, last, empty_dates=[emptied], empty_jobs=frozenset()))
    assert weekly == full
    weekly = statistics(
        history_events(first, last, empty_dates=[emptied], empty_jobs={"example.etl_orders_7_days"})
    )
    assert weekly[orders, emptied] == full[orders, emptied]
    for dag in JOBS:
        if dag != orders:
            assert weekly[dag, first]["rowCount"] == 0, dag


@pytest.mark.spark
def test_an_empty_date_completes_with_zero_rows_as_history_says(
    spark: SparkSession, tmp_path: Path
) -> None:
    week, emptied = date(2021, 5, 30), date(2021, 6, 1)
    with threaded_standin() as server:
        settings = PipelineSettings(
            warehouse=tmp_path,
            lineage_url=server.url,
            orders_per_day=ORDERS_PER_DAY,
            empty_dates=frozenset({emptied}),
        )
        day = midnight(emptied)
        # The day had orders before its source came back empty: the empty run removes them.
        loaded = run_interval(
            spark, "example.etl_orders", day, day + DAY, replace(settings, empty_dates=frozenset())
        )
        result = run_interval(spark, "example.etl_orders", day, day + DAY, settings)
        assert loaded.rows_written > 0
        assert (result.rows_written, result.partitions) == (0, ())
        assert result.removed == ("orders/order_date=2021-06-01",)
        assert not partition_dir(tmp_path, TABLES["public.orders"], emptied).exists()
        (last,) = task_completes([e.body for e in server.state.events])[-1:]
        assert statistics([last]) == {
            ("example.etl_orders", emptied): {"rowCount": 0, "size": 0, "fileCount": 0}
        }
        # The whole week in one run (the empty day included), then its weekly jobs.
        start, end = midnight(week), midnight(week + 7 * DAY)
        for dag in JOBS:
            run_interval(spark, dag, start, end, settings)
        events = [e.body for e in server.state.events]
    assert len(events) == 4 * (2 + len(JOBS))  # the stand-in kept every event: all accepted
    real = statistics(events[8:])
    history = statistics(
        history_events(week, week + 6 * DAY, empty_dates=[emptied], orders_per_day=ORDERS_PER_DAY)
    )
    days = [week + n * DAY for n in range(7)]
    assert real["example.etl_orders", week]["rowCount"] == sum(
        history["example.etl_orders", d]["rowCount"] for d in days
    )
    assert real["example.etl_orders", week]["fileCount"] == 6
    for dag in list(JOBS)[1:]:
        assert real[dag, week]["rowCount"] == history[dag, week]["rowCount"] > 0, dag
