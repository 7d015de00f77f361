"""What a run writes: its output statistics, as a real run measures them or, for
`lineage.history_events`, as a schedule of runs would have written them, worked out without
Spark.

The model is exact for row counts: orders come from the deterministic generator, and each
weekly table's rows are a function of the order days its partition holds, so following which
days every partition holds (`HistoryWarehouse`) gives the counts a real run writes, failed and
emptied days included (tests/spark/test_pipeline_lineage.py checks them against real runs).
Sizes in bytes cannot be known without writing Parquet: the model estimates them.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import date
from typing import cast

from pipeline.food_delivery.catalog import TABLES, Job
from pipeline.food_delivery.generator import orders_for_day


@dataclass(frozen=True)
class Written:
    """What a run wrote to one output dataset over its interval (the outputStatistics facet)."""

    rows: int
    size: int | None = None  # bytes of the Parquet files of the partitions written
    files: int | None = None


@dataclass(frozen=True)
class _Day:
    orders: int
    delivered: int
    restaurants: frozenset[int]  # those with a delivery that day


_ORDER_COLUMNS = TABLES["public.orders"].data_columns
_STATUS = _ORDER_COLUMNS.index("status")
_DELIVERED_AT = _ORDER_COLUMNS.index("delivered_at")
_RESTAURANT = _ORDER_COLUMNS.index("restaurant_id")


@functools.lru_cache(maxsize=4096)  # a few ms a day; a seed of a year asks for each day 4 times
def _day(day: date, orders_per_day: int) -> _Day:
    rows = orders_for_day(day, orders_per_day)
    # transforms.delivery_7_days's filter
    delivered = [r for r in rows if r[_STATUS] == "DELIVERED" and r[_DELIVERED_AT] is not None]
    return _Day(len(rows), len(delivered), frozenset(cast(int, r[_RESTAURANT]) for r in delivered))


def _rows(dataset: str, days: Iterable[date], orders_per_day: int) -> int:
    """The rows a partition of `dataset` holding the orders of `days` has (see transforms)."""
    summaries = {d: _day(d, orders_per_day) for d in days}
    if dataset in ("public.orders", "public.orders_7_days"):
        return sum(s.orders for s in summaries.values())
    if dataset == "public.delivery_7_days":
        return sum(s.delivered for s in summaries.values())
    if dataset == "public.top_delivery_times":  # one row per restaurant with deliveries
        return len(frozenset().union(*(s.restaurants for s in summaries.values())))
    if dataset == "public.popular_orders_day_of_week":  # one row per day of week with orders
        return len({d.weekday() for d, s in summaries.items() if s.orders})
    raise ValueError(f"no row model for {dataset}")


# Parquet bytes of one partition's file ≈ fixed + per_row * rows: fitted on files that real runs
# wrote (snappy; 7 to 7,000 rows a file), within about 5% of them. An estimate all the same:
# real sizes follow the data's entropy, and a seed only needs sizes of the right magnitude.
_SIZE_MODEL = {
    "public.orders": (4_000, 37.3),
    "public.orders_7_days": (5_000, 36.5),
    "public.delivery_7_days": (3_000, 35.7),
    "public.top_delivery_times": (1_850, 40.5),
    "public.popular_orders_day_of_week": (1_500, 30.0),
}


def estimated_size(dataset: str, rows: int, files: int) -> int:
    fixed, per_row = _SIZE_MODEL[dataset]
    return round(fixed * files + per_row * rows)


class HistoryWarehouse:
    """The warehouse a schedule of runs leaves, starting empty, without the data: for each
    partition, the order days whose rows it holds. Runs must come in dependency order."""

    def __init__(self, orders_per_day: int) -> None:
        self.orders_per_day = orders_per_day
        self._tables: dict[str, dict[date, frozenset[date]]] = {d: {} for d in TABLES}

    def _read(self, job: Job, period: date) -> frozenset[date]:
        """The order days the job's inputs hold for that period (its generator's day if none)."""
        if not job.inputs:
            return frozenset({period})
        end = period + job.period
        return frozenset().union(
            *(
                days
                for dataset in job.inputs
                for day, days in self._tables[dataset].items()
                if period <= day < end
            )
        )

    def run(
        self, job: Job, periods: Collection[date], empty: Collection[date]
    ) -> dict[str, Written]:
        """Play a successful run over `periods` (`empty`: those whose source delivers no rows,
        see catalog.empty_periods); what it wrote to each output."""
        written = {}
        for dataset in job.outputs:
            partitions = self._tables[dataset]
            rows = files = 0
            for period in periods:
                days = frozenset() if period in empty else self._read(job, period)
                count = _rows(dataset, days, self.orders_per_day)
                if count:
                    partitions[period] = days
                    rows, files = rows + count, files + 1  # one file per partition
                else:  # written empty: warehouse.write_partitions removes the partition
                    partitions.pop(period, None)
            written[dataset] = Written(rows, estimated_size(dataset, rows, files), files)
        return written
