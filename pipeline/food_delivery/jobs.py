"""Running one DAG of the pipeline for one data interval: the API the bot's executor calls.

`run_interval(spark, dag, start, end, settings)` runs the DAG's Spark job for [start, end),
reports it to OpenLineage, and raises `JobFailed` (after reporting FAIL) when it fails. It is
safe to call from several threads at once on one shared session: each run tags its Spark jobs
with the job group `job_group(dag, start)` (e.g. `example.etl_orders/2021-06-04T00:00:00+00:00`),
so `cancel_interval` (or `spark.sparkContext.cancelJobGroup(job_group(dag, start))`) stops it.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import cast

from openlineage.client.event_v2 import RunState
from pyspark.sql import DataFrame, SparkSession

from pipeline.food_delivery import transforms
from pipeline.food_delivery.catalog import (
    JOBS,
    NAMESPACE,
    TABLES,
    Job,
    Table,
    empty_periods,
    first_period,
    injected_failure,
    periods_of,
)
from pipeline.food_delivery.generator import ORDERS_PER_DAY
from pipeline.food_delivery.lineage import (
    DEFAULT_EMPTY_JOBS,
    DEFAULT_FAIL_JOBS,
    LineageSink,
    RunEvents,
)
from pipeline.food_delivery.stats import Written
from pipeline.food_delivery.warehouse import data_files_size, read_partitions, write_partitions

__all__ = [
    "JOBS",
    "Job",
    "JobCancelled",
    "JobFailed",
    "PipelineSettings",
    "RunResult",
    "cancel_interval",
    "job_group",
    "parse_dates",
    "run_interval",
]

_LOG = logging.getLogger(__name__)


class JobFailed(Exception):
    """A run failed; the message is the error shown to users."""


class JobCancelled(JobFailed):
    """A run was cancelled (`cancel_interval` or its Spark job group was cancelled)."""


def parse_dates(text: str) -> frozenset[date]:
    """`"2021-06-04,2021-06-05"` → those dates; ValueError naming a bad one."""
    days = set()
    for part in text.split(","):
        if part.strip():
            try:
                days.add(date.fromisoformat(part.strip()))
            except ValueError:
                raise ValueError(f"not a date (YYYY-MM-DD): {part.strip()!r}") from None
    return frozenset(days)


@dataclass(frozen=True)
class PipelineSettings:
    warehouse: Path
    lineage_url: str | None = None  # base URL; events go to {url}/api/v1/lineage
    lineage_api_key: str | None = None  # sent as a Bearer token
    namespace: str = NAMESPACE
    fail_dates: frozenset[date] = frozenset()  # the failure switch (see catalog.injected_failure)
    fail_jobs: frozenset[str] = DEFAULT_FAIL_JOBS
    empty_dates: frozenset[date] = frozenset()  # the zero-rows switch (catalog.empty_periods)
    empty_jobs: frozenset[str] = DEFAULT_EMPTY_JOBS
    orders_per_day: int = ORDERS_PER_DAY

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> PipelineSettings:
        """Settings from FOOD_DELIVERY_* variables (and OPENLINEAGE_URL / OPENLINEAGE_API_KEY);
        ValueError for a malformed value."""

        def get(name: str) -> str | None:
            value = environ.get(name, "").strip()
            return value or None

        def dates(name: str) -> frozenset[date]:
            try:
                return parse_dates(get(name) or "")
            except ValueError as exc:
                raise ValueError(f"{name}: {exc}") from None

        def jobs(name: str, default: frozenset[str]) -> frozenset[str]:
            text = get(name)
            if text is None:
                return default
            return frozenset(j.strip() for j in text.split(",") if j.strip())

        orders = get("FOOD_DELIVERY_ORDERS_PER_DAY") or str(ORDERS_PER_DAY)
        if not orders.isdigit() or int(orders) < 1:
            raise ValueError(f"FOOD_DELIVERY_ORDERS_PER_DAY must be a positive integer: {orders}")
        return cls(
            warehouse=Path(get("FOOD_DELIVERY_WAREHOUSE") or "var/warehouse").absolute(),
            lineage_url=get("FOOD_DELIVERY_LINEAGE_URL") or get("OPENLINEAGE_URL"),
            lineage_api_key=get("OPENLINEAGE_API_KEY"),
            fail_dates=dates("FOOD_DELIVERY_FAIL_DATES"),
            fail_jobs=jobs("FOOD_DELIVERY_FAIL_JOBS", DEFAULT_FAIL_JOBS),
            empty_dates=dates("FOOD_DELIVERY_EMPTY_DATES"),
            empty_jobs=jobs("FOOD_DELIVERY_EMPTY_JOBS", DEFAULT_EMPTY_JOBS),
            orders_per_day=int(orders),
        )


@dataclass(frozen=True)
class RunResult:
    dag: str
    start: datetime
    end: datetime
    run_id: str  # the DAG run's OpenLineage runId
    task_run_id: str  # its spark_job task's runId
    rows_written: int
    partitions: tuple[str, ...]  # written, relative to the warehouse: "orders/order_date=..."
    removed: tuple[str, ...]  # partitions the interval left empty, hence deleted
    duration_s: float

    def summary(self) -> str:
        where = ", ".join(self.partitions) or "no partitions"
        return (
            f"{self.dag} [{self.start.isoformat()}, {self.end.isoformat()}): "
            f"{self.rows_written} rows to {where} in {self.duration_s:.1f} s"
        )


def job_group(dag: str, start: datetime) -> str:
    """The Spark job group of a run: `{dag}/{start in UTC, ISO 8601}`."""
    start = start if start.tzinfo is not None else start.replace(tzinfo=UTC)
    return f"{dag}/{start.astimezone(UTC).isoformat()}"


_active_lock = threading.Lock()
_active: dict[str, threading.Event] = {}


def cancel_interval(spark: SparkSession, dag: str, start: datetime) -> bool:
    """Cancel the run of `dag` starting at `start` if one is running in this process.

    Its Spark jobs are cancelled now, and the run stops before its next step even if no job
    was running at this instant. The run then reports ABORT and raises JobCancelled.
    """
    group = job_group(dag, start)
    with _active_lock:  # atomic with a run's final check (_Context.finish)
        flag = _active.get(group)
        if flag is None:
            return False
        flag.set()
    spark.sparkContext.cancelJobGroup(group)
    return True


class _Cancelled(Exception):
    pass


@dataclass
class _Context:
    spark: SparkSession
    settings: PipelineSettings
    group: str
    job: Job
    periods: list[date]
    cancelled: threading.Event
    written: dict[str, int] = field(default_factory=dict)  # rows by partition written
    removed: list[str] = field(default_factory=list)
    statistics: dict[str, Written] = field(default_factory=dict)  # by output dataset

    @property
    def empty(self) -> frozenset[date]:
        """The periods whose source delivers nothing under the zero-rows switch."""
        s = self.settings
        return empty_periods(self.job, self.periods, s.empty_dates, s.empty_jobs)

    def check(self) -> None:
        if self.cancelled.is_set():
            raise _Cancelled

    def finish(self) -> None:
        """Unregister the run, unless a cancel came first: then cancel_interval answered True,
        so the run must end cancelled even though its work is done."""
        with _active_lock:
            self.check()
            _active.pop(self.group, None)

    def days(self) -> list[date]:
        return [w + timedelta(days=n) for w in self.periods for n in range(7)]

    def read(self, dataset: str, days: list[date]) -> DataFrame:
        self.check()
        empty = self.empty
        days = [d for d in days if first_period(self.job, d) not in empty]
        return read_partitions(self.spark, self.settings.warehouse, TABLES[dataset], days)

    def write(self, frame: DataFrame, dataset: str) -> None:
        self.check()
        table: Table = TABLES[dataset]
        counts = write_partitions(frame, self.settings.warehouse, table, self.periods)
        for day, rows in counts.items():
            name = f"{table.directory}/{table.partition}={day.isoformat()}"
            if rows:
                self.written[name] = rows
            else:
                self.removed.append(name)
        written = [day for day, rows in counts.items() if rows]
        size, files = data_files_size(self.settings.warehouse, table, written) or (None, None)
        self.statistics[dataset] = Written(sum(counts.values()), size, files)


def _etl_orders(ctx: _Context) -> None:
    ctx.check()
    days = [d for d in ctx.periods if d not in ctx.empty]
    frame = transforms.generated_orders(ctx.spark, days, ctx.settings.orders_per_day)
    ctx.write(frame, "public.orders")


def _etl_orders_7_days(ctx: _Context) -> None:
    orders = ctx.read("public.orders", ctx.days())
    ctx.write(transforms.orders_7_days(orders, ctx.periods), "public.orders_7_days")


def _etl_delivery_7_days(ctx: _Context) -> None:
    week = ctx.read("public.orders_7_days", ctx.periods)
    ctx.write(transforms.delivery_7_days(week), "public.delivery_7_days")


def _delivery_times_7_days(ctx: _Context) -> None:
    deliveries = ctx.read("public.delivery_7_days", ctx.periods)
    ctx.write(transforms.top_delivery_times(deliveries), "public.top_delivery_times")


def _orders_popular_day_of_week(ctx: _Context) -> None:
    week = ctx.read("public.orders_7_days", ctx.periods)
    ctx.write(transforms.popular_orders_day_of_week(week), "public.popular_orders_day_of_week")


_STEPS: Mapping[str, Callable[[_Context], None]] = {
    "example.etl_orders": _etl_orders,
    "example.etl_orders_7_days": _etl_orders_7_days,
    "example.etl_delivery_7_days": _etl_delivery_7_days,
    "example.delivery_times_7_days": _delivery_times_7_days,
    "example.orders_popular_day_of_week": _orders_popular_day_of_week,
}


def _describe(exc: BaseException) -> str:
    """One line for users: the exception's first line (Spark's are pages long)."""
    lines = [line.strip(" :") for line in str(exc).splitlines() if line.strip(" :")]
    if lines and lines[0].startswith("An error occurred while calling"):
        lines = lines[1:]  # Py4J's preamble; the Java exception follows
    return f"{type(exc).__name__}: {lines[0]}"[:500] if lines else type(exc).__name__


def _clear_job_group(spark: SparkSession) -> None:
    # Spark removes a local property set to null. A stopped session has nothing to clear, and
    # the run's own outcome matters more than this clean-up.
    with contextlib.suppress(Exception):
        for key in ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel"):
            spark.sparkContext.setLocalProperty(key, cast(str, None))


def run_interval(
    spark: SparkSession, dag: str, start: datetime, end: datetime, settings: PipelineSettings
) -> RunResult:
    """Run one DAG for the half-open interval [start, end) (timezone-aware) and report it.

    The interval must be whole periods of the DAG's schedule (days, or Sunday-to-Sunday
    weeks); each period's partition is rewritten. Raises JobFailed for an unknown DAG or a bad
    interval (nothing reported: no run started), and JobFailed (JobCancelled when cancelled)
    after reporting FAIL (ABORT) when the run fails.
    """
    job = JOBS.get(dag)
    if job is None:
        raise JobFailed(f"unknown DAG {dag!r}; the food_delivery DAGs are: {', '.join(JOBS)}")
    try:
        periods = periods_of(job, start, end)
    except ValueError as exc:
        raise JobFailed(f"{dag}: {exc}") from None
    start, end = start.astimezone(UTC), end.astimezone(UTC)
    group = job_group(dag, start)
    cancelled = threading.Event()
    with _active_lock:
        if group in _active:
            raise JobFailed(f"{dag} for {start.isoformat()} is already running")
        _active[group] = cancelled
    try:
        ctx = _Context(spark, settings, group, job, periods, cancelled)
        return _run(spark, job, start, end, settings, ctx)
    finally:
        with _active_lock:
            _active.pop(group, None)


def _run(
    spark: SparkSession,
    job: Job,
    start: datetime,
    end: datetime,
    settings: PipelineSettings,
    ctx: _Context,
) -> RunResult:
    events = RunEvents(
        job.name, start, end, str(uuid.uuid4()), str(uuid.uuid4()), settings.namespace
    )
    sink = LineageSink(settings.lineage_url, settings.lineage_api_key)
    began = time.monotonic()
    now = datetime.now(UTC)
    sink.send(events.dag_event(RunState.START, now))
    sink.send(events.task_event(RunState.START, now))
    try:
        spark.sparkContext.setJobGroup(
            ctx.group,
            f"{job.name} [{start.isoformat()}, {end.isoformat()})",
            interruptOnCancel=True,
        )
        error = injected_failure(job, ctx.periods, settings.fail_dates, settings.fail_jobs)
        if error is not None:
            raise JobFailed(error)
        _STEPS[job.name](ctx)
        ctx.finish()
    except Exception as exc:
        text = str(exc) if isinstance(exc, JobFailed) else _describe(exc)
        aborted = ctx.cancelled.is_set() or "cancelled job group" in str(exc).lower()
        state = RunState.ABORT if aborted else RunState.FAIL
        message = f"{job.name} was cancelled" if aborted else text
        now = datetime.now(UTC)
        sink.send(events.task_event(state, now, message))
        sink.send(events.dag_event(state, now, message))
        _LOG.info("%s [%s, %s) %s: %s", job.name, start, end, state.value, message)
        raise (JobCancelled if aborted else JobFailed)(message) from exc
    finally:
        _clear_job_group(spark)
    now = datetime.now(UTC)
    sink.send(events.task_event(RunState.COMPLETE, now, written=ctx.statistics))
    sink.send(events.dag_event(RunState.COMPLETE, now))
    result = RunResult(
        dag=job.name,
        start=start,
        end=end,
        run_id=events.dag_run_id,
        task_run_id=events.task_run_id,
        rows_written=sum(ctx.written.values()),
        partitions=tuple(ctx.written),
        removed=tuple(ctx.removed),
        duration_s=time.monotonic() - began,
    )
    _LOG.info("%s", result.summary())
    return result
