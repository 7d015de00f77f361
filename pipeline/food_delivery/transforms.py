"""The jobs' transformations, as functions from DataFrames to the DataFrame a job writes.

Every aggregate is computed in exact arithmetic (integer and decimal sums; a mean is one exact
sum divided by one count), so the same input gives bit-identical output however Spark splits
the work: that is what lets a backfill be checked against a full recompute row for row.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from pipeline.food_delivery.catalog import TABLES
from pipeline.food_delivery.generator import orders_for_day

ORDERS = TABLES["public.orders"]


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
