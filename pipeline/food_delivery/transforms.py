"""The jobs' transformations, as functions from DataFrames to the DataFrame a job writes.

Every aggregate is computed in exact arithmetic (integer and decimal sums; a mean is one exact
sum divided by one count), so the same input gives bit-identical output however Spark splits
the work: that is what lets a backfill be checked against a full recompute row for row.

Each transform's column lineage (which input columns each output column comes from, and how) is
declared beside it, in `COLUMN_LINEAGE`, for the OpenLineage `columnLineage` facet: what the
Spark integration would derive from the plan, stated once here so it changes with the code.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from types import MappingProxyType

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from pipeline.food_delivery.catalog import TABLES
from pipeline.food_delivery.generator import orders_for_day

ORDERS = TABLES["public.orders"]


@dataclass(frozen=True)
class Source:
    """An input column an output column (or the whole output) depends on, and how: `kind` and
    `subtype` as in the OpenLineage spec (DIRECT: IDENTITY, TRANSFORMATION, AGGREGATION;
    INDIRECT: FILTER, GROUP_BY, JOIN, SORT, WINDOW, CONDITIONAL)."""

    column: str
    kind: str
    subtype: str
    description: str = ""


@dataclass(frozen=True)
class ColumnLineage:
    """How one transform derives its output from its one input dataset."""

    input: str  # the dataset read, e.g. "public.orders"
    # Per output column, the input columns its value is computed from. A count of rows reads no
    # column: its entry is empty (the grouping that shapes it is in `dataset`).
    fields: Mapping[str, tuple[Source, ...]]
    # Input columns that shape the whole output (filters, groupings, joins, windows).
    dataset: tuple[Source, ...] = field(default=())


def _same(*columns: str) -> dict[str, tuple[Source, ...]]:
    return {c: (Source(c, "DIRECT", "IDENTITY"),) for c in columns}


def _direct(column: str, subtype: str, description: str) -> Source:
    return Source(column, "DIRECT", subtype, description)


def _indirect(subtype: str, description: str, *columns: str) -> tuple[Source, ...]:
    return tuple(Source(c, "INDIRECT", subtype, description) for c in columns)


def generated_orders(spark: SparkSession, days: Sequence[date], orders_per_day: int) -> DataFrame:
    """The raw orders of those days, from the deterministic generator."""
    rows = [row for day in days for row in orders_for_day(day, orders_per_day)]
    return spark.createDataFrame(rows, ORDERS.schema)


def _week_start(day: Column) -> Column:
    # dayofweek: 1 = Sunday, so this is the Sunday on or before the day.
    return F.date_sub(day, F.dayofweek(day) - 1)


def orders_7_days(orders: DataFrame, weeks: Sequence[date]) -> DataFrame:
    """The orders of each week, tagged with their week and day of week."""
    return (
        orders.withColumn("week_start", _week_start(F.col("order_date")))
        .where(F.col("week_start").isin(list(weeks)))
        .withColumn("order_day_of_week", F.date_format("order_date", "EEEE"))
        .withColumn("day_of_week", F.dayofweek("order_date"))
    )


_ORDERS_7_DAYS_LINEAGE = ColumnLineage(
    "public.orders",
    {
        **_same(
            "order_id", "placed_at", "dispatched_at", "delivered_at", "status", "customer_id",
            "restaurant_id", "driver_id", "menu_item_id", "category", "amount", "order_date",
        ),
        "order_day_of_week": (_direct("order_date", "TRANSFORMATION", "date_format EEEE"),),
        "day_of_week": (_direct("order_date", "TRANSFORMATION", "dayofweek"),),
        "week_start": (_direct("order_date", "TRANSFORMATION", "the Sunday on or before"),),
    },
    _indirect("FILTER", "the order's week is one of the interval's", "order_date"),
)  # fmt: skip


def delivery_7_days(orders_week: DataFrame) -> DataFrame:
    """The week's delivered orders and how long each took, in whole minutes."""
    seconds = F.col("delivered_at").cast("long") - F.col("placed_at").cast("long")
    return orders_week.where(
        (F.col("status") == "DELIVERED") & F.col("delivered_at").isNotNull()
    ).select(
        "order_id",
        "restaurant_id",
        "driver_id",
        "customer_id",
        F.col("placed_at").alias("order_placed_on"),
        F.col("dispatched_at").alias("order_dispatched_on"),
        F.col("delivered_at").alias("order_delivered_on"),
        F.floor(seconds / 60).cast("int").alias("delivery_minutes"),
        "week_start",
    )


_DELIVERY_7_DAYS_LINEAGE = ColumnLineage(
    "public.orders_7_days",
    {
        **_same("order_id", "restaurant_id", "driver_id", "customer_id", "week_start"),
        "order_placed_on": (_direct("placed_at", "IDENTITY", "renamed"),),
        "order_dispatched_on": (_direct("dispatched_at", "IDENTITY", "renamed"),),
        "order_delivered_on": (_direct("delivered_at", "IDENTITY", "renamed"),),
        "delivery_minutes": (
            _direct("placed_at", "TRANSFORMATION", "whole minutes placed to delivered"),
            _direct("delivered_at", "TRANSFORMATION", "whole minutes placed to delivered"),
        ),
    },
    _indirect("FILTER", "delivered orders only", "status", "delivered_at"),
)


def top_delivery_times(deliveries: DataFrame) -> DataFrame:
    """Per week and restaurant: deliveries, mean and slowest delivery; rank 1 = slowest mean."""
    keys = ["week_start", "restaurant_id"]
    slowest_first = Window.partitionBy(*keys).orderBy(
        F.col("delivery_minutes").desc(), F.col("order_id")
    )
    slowest = (
        deliveries.withColumn("n", F.row_number().over(slowest_first))
        .where(F.col("n") == 1)
        .select(
            *keys,
            F.col("delivery_minutes").alias("max_delivery_minutes"),
            F.col("order_id").alias("slowest_order_id"),
            F.col("driver_id").alias("slowest_driver_id"),
        )
    )
    totals = deliveries.groupBy(*keys).agg(
        F.count(F.lit(1)).alias("deliveries"),
        F.sum(F.col("delivery_minutes").cast("long")).alias("total_minutes"),
    )
    mean = F.round(F.col("total_minutes") / F.col("deliveries"), 2)
    by_mean = Window.partitionBy("week_start").orderBy(
        F.col("avg_delivery_minutes").desc(), F.col("restaurant_id")
    )
    return (
        totals.join(slowest, keys)
        .withColumn("avg_delivery_minutes", mean.cast("double"))
        .withColumn("rank", F.row_number().over(by_mean))
    )


_TOP_DELIVERY_TIMES_LINEAGE = ColumnLineage(
    "public.delivery_7_days",
    {
        **_same("restaurant_id", "week_start"),
        "deliveries": (),  # count(1) of the restaurant's week
        "avg_delivery_minutes": (_direct("delivery_minutes", "AGGREGATION", "mean, 2 decimals"),),
        "max_delivery_minutes": (_direct("delivery_minutes", "AGGREGATION", "max"),),
        # The slowest delivery's row, picked by a window (see `dataset`), taken as it is.
        "slowest_order_id": (_direct("order_id", "IDENTITY", "of the slowest delivery"),),
        "slowest_driver_id": (_direct("driver_id", "IDENTITY", "of the slowest delivery"),),
        "rank": _indirect(
            "WINDOW", "row_number by mean minutes desc, restaurant_id",
            "delivery_minutes", "restaurant_id",
        ),
    },
    (
        *_indirect("GROUP_BY", "per week and restaurant", "week_start", "restaurant_id"),
        *_indirect("JOIN", "totals joined to the slowest delivery", "week_start", "restaurant_id"),
        *_indirect("WINDOW", "the slowest delivery first", "delivery_minutes", "order_id"),
    ),
)  # fmt: skip


def popular_orders_day_of_week(orders_week: DataFrame) -> DataFrame:
    """Per week: orders and revenue by day of week; rank 1 = the busiest day."""
    busiest_first = Window.partitionBy("week_start").orderBy(
        F.col("orders_placed").desc(), F.col("day_of_week")
    )
    return (
        orders_week.groupBy("week_start", "day_of_week", "order_day_of_week")
        .agg(F.count(F.lit(1)).alias("orders_placed"), F.sum("amount").alias("revenue"))
        .withColumn("rank", F.row_number().over(busiest_first))
    )


_POPULAR_ORDERS_DAY_OF_WEEK_LINEAGE = ColumnLineage(
    "public.orders_7_days",
    {
        **_same("order_day_of_week", "day_of_week", "week_start"),
        "orders_placed": (),  # count(1) of the day's orders
        "revenue": (_direct("amount", "AGGREGATION", "sum"),),
        "rank": _indirect("WINDOW", "row_number by orders desc, day_of_week", "day_of_week"),
    },
    _indirect(
        "GROUP_BY", "per week and day of week", "week_start", "day_of_week", "order_day_of_week"
    ),
)

COLUMN_LINEAGE: Mapping[str, ColumnLineage] = MappingProxyType(
    {
        # public.orders has none: its rows come from the generator, not from a dataset.
        "public.orders_7_days": _ORDERS_7_DAYS_LINEAGE,
        "public.delivery_7_days": _DELIVERY_7_DAYS_LINEAGE,
        "public.top_delivery_times": _TOP_DELIVERY_TIMES_LINEAGE,
        "public.popular_orders_day_of_week": _POPULAR_ORDERS_DAY_OF_WEEK_LINEAGE,
    }
)
"""Per output dataset, the column lineage of the transform that writes it."""
