"""What the pipeline is made of: its jobs, their schedules and the tables they read and write.

Pure data (no Spark session needed), shared by the jobs, the lineage events and the DAG files.
Job and dataset names are those of the bot's `food_delivery` Marquez seed.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from types import MappingProxyType

from pyspark.sql.types import (
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

NAMESPACE = "food_delivery"
DAILY = "@daily"
WEEKLY = "0 0 * * 0"  # Sunday 00:00 UTC to the next Sunday
_PERIODS = {DAILY: timedelta(days=1), WEEKLY: timedelta(days=7)}
SUNDAY = 6  # date.weekday()


@dataclass(frozen=True)
class Column:
    name: str
    type: DataType
    description: str
    nullable: bool = True


@dataclass(frozen=True)
class Table:
    """A Parquet table under the warehouse: `<warehouse>/<directory>/<partition>=<day>/`."""

    dataset: str  # the OpenLineage dataset name, e.g. "public.orders"
    directory: str
    partition: str  # a DATE column: the order day for daily tables, the week's Sunday else
    columns: tuple[Column, ...]
    description: str

    @property
    def schema(self) -> StructType:
        """The table's schema, partition column last (where Spark puts it on read)."""
        return StructType([StructField(c.name, c.type, c.nullable) for c in self.columns])

    @property
    def data_columns(self) -> list[str]:
        return [c.name for c in self.columns]


def _col(name: str, kind: DataType, description: str, nullable: bool = True) -> Column:
    return Column(name, kind, description, nullable)


_WEEK = _col("week_start", DateType(), "The Sunday (UTC) the week starts on.", False)

TABLES: Mapping[str, Table] = MappingProxyType(
    {
        t.dataset: t
        for t in (
            Table(
                "public.orders", "orders", "order_date",
                (
                    _col("order_id", LongType(), "The unique ID of the order.", False),
                    _col("placed_at", TimestampType(), "When the order was placed.", False),
                    _col("dispatched_at", TimestampType(), "When a driver picked it up."),
                    _col("delivered_at", TimestampType(), "When it was delivered."),
                    _col("status", StringType(), "DELIVERED or CANCELLED.", False),
                    _col("customer_id", IntegerType(), "The ordering customer.", False),
                    _col("restaurant_id", IntegerType(), "The restaurant cooking it.", False),
                    _col("driver_id", IntegerType(), "The driver (none if cancelled)."),
                    _col("menu_item_id", IntegerType(), "The menu item ordered.", False),
                    _col("menu_item", StringType(), "The menu item's name.", False),
                    _col("category", StringType(), "The menu item's category.", False),
                    _col("quantity", IntegerType(), "How many were ordered.", False),
                    _col("amount", DecimalType(10, 2), "What the customer paid.", False),
                    _col("order_date", DateType(), "The day (UTC) the order was placed.", False),
                ),
                "Orders placed, one partition per day.",
            ),
            Table(
                "public.orders_7_days", "orders_7_days", "week_start",
                (
                    _col("order_id", LongType(), "The unique ID of the order.", False),
                    _col("placed_at", TimestampType(), "When the order was placed.", False),
                    _col("dispatched_at", TimestampType(), "When a driver picked it up."),
                    _col("delivered_at", TimestampType(), "When it was delivered."),
                    _col("status", StringType(), "DELIVERED or CANCELLED.", False),
                    _col("customer_id", IntegerType(), "The ordering customer.", False),
                    _col("restaurant_id", IntegerType(), "The restaurant cooking it.", False),
                    _col("driver_id", IntegerType(), "The driver (none if cancelled)."),
                    _col("menu_item_id", IntegerType(), "The menu item ordered.", False),
                    _col("category", StringType(), "The menu item's category.", False),
                    _col("amount", DecimalType(10, 2), "What the customer paid.", False),
                    _col("order_date", DateType(), "The day (UTC) the order was placed.", False),
                    _col("order_day_of_week", StringType(), "Monday, Tuesday, ...", False),
                    _col("day_of_week", IntegerType(), "1 = Sunday ... 7 = Saturday.", False),
                    _WEEK,
                ),
                "The week's orders, one partition per week.",
            ),
            Table(
                "public.delivery_7_days", "delivery_7_days", "week_start",
                (
                    _col("order_id", LongType(), "The delivered order.", False),
                    _col("restaurant_id", IntegerType(), "The restaurant.", False),
                    _col("driver_id", IntegerType(), "The driver.", False),
                    _col("customer_id", IntegerType(), "The customer.", False),
                    _col("order_placed_on", TimestampType(), "When it was placed.", False),
                    _col("order_dispatched_on", TimestampType(), "When it left.", False),
                    _col("order_delivered_on", TimestampType(), "When it arrived.", False),
                    _col("delivery_minutes", IntegerType(), "Placed to delivered.", False),
                    _WEEK,
                ),
                "The week's deliveries.",
            ),
            Table(
                "public.top_delivery_times", "top_delivery_times", "week_start",
                (
                    _col("rank", IntegerType(), "1 = slowest average delivery.", False),
                    _col("restaurant_id", IntegerType(), "The restaurant.", False),
                    _col("deliveries", LongType(), "Deliveries in the week.", False),
                    _col("avg_delivery_minutes", DoubleType(), "Mean minutes, 2 decimals."),
                    _col("max_delivery_minutes", IntegerType(), "The slowest delivery."),
                    _col("slowest_order_id", LongType(), "The slowest delivery's order."),
                    _col("slowest_driver_id", IntegerType(), "Who drove it."),
                    _WEEK,
                ),
                "Weekly delivery times by restaurant (the 'Weekly delivery times' report).",
            ),
            Table(
                "public.popular_orders_day_of_week", "popular_orders_day_of_week", "week_start",
                (
                    _col("rank", IntegerType(), "1 = the busiest day of the week.", False),
                    _col("order_day_of_week", StringType(), "Monday, Tuesday, ...", False),
                    _col("day_of_week", IntegerType(), "1 = Sunday ... 7 = Saturday.", False),
                    _col("orders_placed", LongType(), "Orders placed that day.", False),
                    _col("revenue", DecimalType(20, 2), "What those orders paid."),
                    _WEEK,
                ),
                "Orders by day of week (the analysts' weekly food order trends report).",
            ),
        )
    }
)  # fmt: skip


@dataclass(frozen=True)
class Job:
    """One Airflow DAG (= Marquez job) of the pipeline and the datasets its task reads/writes."""

    name: str
    schedule: str  # "@daily" or "0 0 * * 0"
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    team: str = ""  # the owning team of examples/bot-config.yml
    description: str = ""

    @property
    def period(self) -> timedelta:
        return _PERIODS[self.schedule]


JOBS: Mapping[str, Job] = MappingProxyType(
    {
        j.name: j
        for j in (
            Job("example.etl_orders", DAILY, (), ("public.orders",), "orders",
                "Loads newly placed orders daily."),
            Job("example.etl_orders_7_days", WEEKLY, ("public.orders",),
                ("public.orders_7_days",), "orders", "Loads newly placed orders weekly."),
            Job("example.etl_delivery_7_days", WEEKLY, ("public.orders_7_days",),
                ("public.delivery_7_days",), "logistics", "Loads new deliveries for the week."),
            Job("example.delivery_times_7_days", WEEKLY, ("public.delivery_7_days",),
                ("public.top_delivery_times",), "logistics",
                "Determine weekly top delivery times by restaurant."),
            Job("example.orders_popular_day_of_week", WEEKLY, ("public.orders_7_days",),
                ("public.popular_orders_day_of_week",), "analytics",
                "Determines the popular day of week orders are placed."),
        )
    }
)  # fmt: skip
"""In dependency order: every job comes after the jobs it reads from."""


def midnight(day: date) -> datetime:
    return datetime.combine(day, time(), tzinfo=UTC)


def first_period(job: Job, day: date) -> date:
    """The start of the job's schedule period containing `day`."""
    if job.schedule == WEEKLY:
        return day - timedelta(days=(day.weekday() - SUNDAY) % 7)
    return day


def periods_of(job: Job, start: datetime, end: datetime) -> list[date]:
    """The schedule periods [start, end) covers, by their first day.

    ValueError (with the reason) unless start and end are timezone-aware and [start, end) is
    one or more whole periods of the job's schedule.
    """
    if start.tzinfo is None or end.tzinfo is None:
        raise ValueError("the interval's start and end must carry a time zone (UTC)")
    start, end = start.astimezone(UTC), end.astimezone(UTC)
    if end <= start:
        raise ValueError(f"the interval is empty: it ends at {end} but starts at {start}")
    what = "a day" if job.schedule == DAILY else "a Sunday"
    for bound in (start, end):
        if bound.timetz() != time(tzinfo=UTC) or first_period(job, bound.date()) != bound.date():
            raise ValueError(
                f"{job.name} runs on schedule {job.schedule!r}: interval bounds must be "
                f"midnight UTC of {what}, got {bound.isoformat()}"
            )
    count = (end - start) // job.period
    return [start.date() + n * job.period for n in range(count)]


def scheduled_intervals(
    job: Job, first_day: date, last_day: date
) -> list[tuple[datetime, datetime]]:
    """The job's scheduled intervals that overlap the days first_day..last_day (inclusive) and
    have ended by the end of last_day: what a scheduler would have run over those days."""
    stop = last_day + timedelta(days=1)
    day = first_period(job, first_day)
    found = []
    while day + job.period <= stop:
        if day + job.period > first_day:
            found.append((midnight(day), midnight(day + job.period)))
        day += job.period
    return found


def injected_failure(
    job: Job, periods: Sequence[date], fail_dates: Collection[date], fail_jobs: Collection[str]
) -> str | None:
    """The error a run over `periods` fails with under the failure switch, or None.

    The switch (FOOD_DELIVERY_FAIL_DATES) replays the seed's story of three failed order
    loads; a job it applies to fails when any day of its interval is a fail date.
    """
    if job.name not in fail_jobs:
        return None
    days = (p + timedelta(days=n) for p in periods for n in range(job.period.days))
    hit = next((d for d in days if d in fail_dates), None)
    if hit is None:
        return None
    table = TABLES[job.outputs[0]].directory
    return f'relation "tmp_{table}" does not exist: the extract for {hit.isoformat()} failed'


def empty_periods(
    job: Job, periods: Sequence[date], empty_dates: Collection[date], empty_jobs: Collection[str]
) -> frozenset[date]:
    """The periods of a run whose source delivers no rows under the zero-rows switch.

    The switch (FOOD_DELIVERY_EMPTY_DATES) plays an upstream that delivers nothing: for a job
    it applies to, a period holding an empty date reads (or generates) no rows, so the run
    completes having written none there and that period's partition is removed.
    """
    if job.name not in empty_jobs:
        return frozenset()
    return frozenset(
        p
        for p in periods
        if any(p + timedelta(days=n) in empty_dates for n in range(job.period.days))
    )
