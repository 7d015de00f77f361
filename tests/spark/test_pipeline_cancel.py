"""Cancelling a run through its Spark job group, from another thread."""

from __future__ import annotations

import threading
import time
from datetime import date, timedelta
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from pipeline.food_delivery import jobs
from pipeline.food_delivery.catalog import midnight
from pipeline.food_delivery.jobs import (
    JobCancelled,
    PipelineSettings,
    cancel_interval,
    job_group,
    run_interval,
)
from tests.spark.support import threaded_standin

pytestmark = pytest.mark.spark


def endless(ctx: jobs._Context) -> None:
    # A pure-JVM job that would run for hours: only a cancel ends it.
    ctx.spark.range(0, 1 << 50, numPartitions=2).agg(F.sum("id")).collect()


def test_cancel_interval_stops_the_running_spark_job_and_reports_abort(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(jobs._STEPS, "example.etl_orders", endless)
    start = midnight(date(2021, 6, 4))
    group = job_group("example.etl_orders", start)
    assert not cancel_interval(spark, "example.etl_orders", start)  # nothing runs yet
    errors: list[BaseException] = []
    with threaded_standin() as server:
        settings = PipelineSettings(warehouse=tmp_path, lineage_url=server.url)

        def run() -> None:
            try:
                run_interval(spark, "example.etl_orders", start, start + timedelta(1), settings)
            except BaseException as exc:
                errors.append(exc)

        worker = threading.Thread(target=run)
        worker.start()
        tracker = spark.sparkContext.statusTracker()
        deadline = time.monotonic() + 60
        while not tracker.getJobIdsForGroup(group) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert tracker.getJobIdsForGroup(group), "the run never started its Spark job"
        began = time.monotonic()
        assert cancel_interval(spark, "example.etl_orders", start)
        worker.join(60)
        assert not worker.is_alive()
        assert time.monotonic() - began < 30
        states = [(e.body["job"]["name"], e.body["eventType"]) for e in server.state.events]
    assert len(errors) == 1
    assert isinstance(errors[0], JobCancelled)
    assert str(errors[0]) == "example.etl_orders was cancelled"
    assert states[-2:] == [
        ("example.etl_orders.spark_job", "ABORT"),
        ("example.etl_orders", "ABORT"),
    ]
    assert not cancel_interval(spark, "example.etl_orders", start)  # over and unregistered
