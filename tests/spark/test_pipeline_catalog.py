"""Schedules, intervals, settings and the order generator: the parts that need no Spark."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any, cast

import pytest
from pyspark.sql import SparkSession

from pipeline.food_delivery import jobs
from pipeline.food_delivery.catalog import (
    JOBS,
    TABLES,
    empty_periods,
    periods_of,
    scheduled_intervals,
)
from pipeline.food_delivery.generator import orders_for_day
from pipeline.food_delivery.jobs import (
    JobFailed,
    PipelineSettings,
    job_group,
    run_interval,
)

WEEKLY = JOBS["example.etl_orders_7_days"]
DAILY = JOBS["example.etl_orders"]
NO_SPARK = cast(SparkSession, None)  # bad requests are refused before Spark is touched


def utc(year: int, month: int, day: int, hour: int = 0) -> datetime:
    return datetime(year, month, day, hour, tzinfo=UTC)


def test_jobs_mirror_the_seed_graph() -> None:
    assert list(JOBS) == [
        "example.etl_orders",
        "example.etl_orders_7_days",
        "example.etl_delivery_7_days",
        "example.delivery_times_7_days",
        "example.orders_popular_day_of_week",
    ]
    produced = {out for job in JOBS.values() for out in job.outputs}
    assert all(i in produced for job in JOBS.values() for i in job.inputs)
    assert set(TABLES) == produced
    assert {j.schedule for j in JOBS.values()} == {"@daily", "0 0 * * 0"}


def test_scheduled_intervals_over_the_seed_days() -> None:
    weeks = scheduled_intervals(WEEKLY, date(2021, 5, 24), date(2021, 6, 13))
    assert weeks == [
        (utc(2021, 5, 23), utc(2021, 5, 30)),
        (utc(2021, 5, 30), utc(2021, 6, 6)),
        (utc(2021, 6, 6), utc(2021, 6, 13)),
    ]
    days = scheduled_intervals(DAILY, date(2021, 5, 24), date(2021, 6, 13))
    assert len(days) == 21
    assert days[0] == (utc(2021, 5, 24), utc(2021, 5, 25))


def test_empty_periods_are_those_holding_an_empty_date() -> None:
    days = [date(2021, 6, 4), date(2021, 6, 5), date(2021, 6, 6)]
    empty = {date(2021, 6, 5), date(2021, 6, 9)}
    assert empty_periods(DAILY, days, empty, {DAILY.name}) == {date(2021, 6, 5)}
    assert empty_periods(DAILY, days, empty, {WEEKLY.name}) == frozenset()
    weeks = [date(2021, 5, 30), date(2021, 6, 6), date(2021, 6, 13)]
    assert empty_periods(WEEKLY, weeks, empty, {WEEKLY.name}) == {
        date(2021, 5, 30),
        date(2021, 6, 6),
    }


def test_periods_of_accepts_whole_periods_in_any_zone() -> None:
    plus2 = utc(2021, 6, 6).astimezone(timezone(timedelta(hours=2)))  # 02:00 local
    assert periods_of(WEEKLY, plus2, utc(2021, 6, 20)) == [date(2021, 6, 6), date(2021, 6, 13)]
    assert periods_of(DAILY, utc(2021, 6, 4), utc(2021, 6, 6)) == [
        date(2021, 6, 4),
        date(2021, 6, 5),
    ]


@pytest.mark.parametrize(
    ("dag", "start", "end", "message"),
    [
        ("example.nope", utc(2021, 6, 4), utc(2021, 6, 5), "unknown DAG 'example.nope'"),
        ("example.etl_orders", datetime(2021, 6, 4), utc(2021, 6, 5), "time zone"),
        ("example.etl_orders", utc(2021, 6, 5), utc(2021, 6, 5), "empty"),
        ("example.etl_orders", utc(2021, 6, 4, 12), utc(2021, 6, 5), "midnight UTC of a day"),
        ("example.etl_orders_7_days", utc(2021, 6, 4), utc(2021, 6, 11), "of a Sunday"),
    ],
)
def test_bad_requests_fail_with_a_clear_message(
    dag: str, start: datetime, end: datetime, message: str, tmp_path: Path
) -> None:
    with pytest.raises(JobFailed, match=message):
        run_interval(NO_SPARK, dag, start, end, PipelineSettings(warehouse=tmp_path))


def test_job_group_names_the_dag_and_start_in_utc() -> None:
    start = utc(2021, 6, 4)
    assert job_group("example.etl_orders", start) == "example.etl_orders/2021-06-04T00:00:00+00:00"


def test_generator_is_deterministic_per_day() -> None:
    day = date(2021, 6, 4)
    rows = orders_for_day(day, 300)
    assert rows == orders_for_day(day, 300)
    assert rows != orders_for_day(day + timedelta(days=1), 300)
    assert 200 < len(rows) < 400
    ids = [r[0] for r in rows]
    assert len(set(ids)) == len(ids)
    columns = TABLES["public.orders"].data_columns
    as_dicts: list[dict[str, Any]] = [dict(zip(columns, r, strict=True)) for r in rows]
    assert all(r["order_date"] == day and r["placed_at"].date() == day for r in as_dicts)
    delivered = [r for r in as_dicts if r["status"] == "DELIVERED"]
    assert all(r["placed_at"] < r["dispatched_at"] < r["delivered_at"] for r in delivered)
    assert len(delivered) > 0.9 * len(rows)


def test_settings_from_env() -> None:
    settings = PipelineSettings.from_env(
        {
            "FOOD_DELIVERY_WAREHOUSE": "/data/wh",
            "OPENLINEAGE_URL": "http://marquez:5000",
            "OPENLINEAGE_API_KEY": "k",
            "FOOD_DELIVERY_FAIL_DATES": "2021-06-04, 2021-06-05",
            "FOOD_DELIVERY_FAIL_JOBS": "example.etl_orders,example.etl_orders_7_days",
            "FOOD_DELIVERY_EMPTY_DATES": "2021-06-07",
            "FOOD_DELIVERY_EMPTY_JOBS": " example.etl_orders_7_days ",
            "FOOD_DELIVERY_ORDERS_PER_DAY": "50",
        }
    )
    assert settings.warehouse == Path("/data/wh")
    assert settings.lineage_url == "http://marquez:5000"
    assert settings.lineage_api_key == "k"
    assert settings.fail_dates == {date(2021, 6, 4), date(2021, 6, 5)}
    assert settings.fail_jobs == {"example.etl_orders", "example.etl_orders_7_days"}
    assert settings.empty_dates == {date(2021, 6, 7)}
    assert settings.empty_jobs == {"example.etl_orders_7_days"}
    assert settings.orders_per_day == 50
    defaults = PipelineSettings.from_env(
        {"FOOD_DELIVERY_LINEAGE_URL": "http://a", "OPENLINEAGE_URL": "http://b"}
    )
    assert defaults.lineage_url == "http://a"
    assert defaults.warehouse == Path("var/warehouse").absolute()
    assert defaults.fail_dates == frozenset()
    assert defaults.fail_jobs == {"example.etl_orders"}
    assert defaults.empty_dates == frozenset()
    assert defaults.empty_jobs == {"example.etl_orders"}
    assert PipelineSettings.from_env({}).lineage_url is None


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("FOOD_DELIVERY_FAIL_DATES", "2021-06-31"),
        ("FOOD_DELIVERY_EMPTY_DATES", "June"),
        ("FOOD_DELIVERY_ORDERS_PER_DAY", "0"),
    ],
)
def test_settings_refuse_malformed_values(name: str, value: str) -> None:
    with pytest.raises(ValueError, match=name):
        PipelineSettings.from_env({name: value})


def test_errors_are_described_in_one_line() -> None:
    describe = jobs._describe
    java = RuntimeError(
        "An error occurred while calling o91.parquet.\n"
        ": org.apache.spark.SparkException: Job aborted.\n\tat org.apache..."
    )
    assert describe(java) == "RuntimeError: org.apache.spark.SparkException: Job aborted."
    assert describe(ValueError("")) == "ValueError"
    assert len(describe(ValueError("x" * 2000))) == 500
