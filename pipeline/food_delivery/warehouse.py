"""Reading and writing date-partitioned Parquet tables under the warehouse directory.

Writes overwrite only the partitions present in the data (dynamic partition overwrite), so
rerunning an interval replaces exactly that interval's partitions and nothing else. A partition
that should exist but came out empty is deleted, so a rerun never leaves stale rows behind.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Sequence
from datetime import date
from pathlib import Path

from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

from pipeline.food_delivery.catalog import Table


def table_dir(warehouse: Path, table: Table) -> Path:
    return warehouse / table.directory


def partition_dir(warehouse: Path, table: Table, day: date) -> Path:
    return table_dir(warehouse, table) / f"{table.partition}={day.isoformat()}"


def existing_partitions(warehouse: Path, table: Table) -> list[date]:
    """The table's partitions on disk, oldest first."""
    root = table_dir(warehouse, table)
    if not root.is_dir():
        return []
    prefix = f"{table.partition}="
    return sorted(
        date.fromisoformat(p.name[len(prefix) :])
        for p in root.iterdir()
        if p.is_dir() and p.name.startswith(prefix)
    )


def read_partitions(
    spark: SparkSession, warehouse: Path, table: Table, days: Iterable[date]
) -> DataFrame:
    """The rows of those partitions that exist (no rows at all when none does).

    Only the wanted partition directories are listed: the table may hold years of days, and
    Spark would otherwise list (and launch a job to list) every one of them on each read.
    """
    paths = [str(p) for p in (partition_dir(warehouse, table, d) for d in days) if p.is_dir()]
    if not paths:
        return spark.createDataFrame([], table.schema)
    frame = (
        spark.read.schema(table.schema)
        .option("basePath", str(table_dir(warehouse, table)))
        .parquet(*paths)
    )
    return frame.select(*table.data_columns)


def write_partitions(
    frame: DataFrame, warehouse: Path, table: Table, days: Sequence[date]
) -> dict[date, int]:
    """Replace the partitions `days` of `table` with `frame`'s rows; rows written per day.

    The counts are observed while writing (no second pass over the data). Raises ValueError if
    `frame` holds rows for any other partition: those are not written (they would overwrite
    data outside the interval), and finding them means a transform is wrong.
    """
    part = F.col(table.partition)
    wanted = part.isin(list(days))
    metrics = [F.count_if(part == F.lit(day)).alias(day.isoformat()) for day in days]
    observed = Observation(f"{table.directory}-rows")
    (
        frame.select(*table.data_columns)
        .observe(observed, F.count_if(~wanted | part.isNull()).alias("stray"), *metrics)
        .where(wanted)
        .coalesce(1)  # the data of one run is small: one file per partition
        .write.mode("overwrite")
        .option("partitionOverwriteMode", "dynamic")
        .partitionBy(table.partition)
        .parquet(str(table_dir(warehouse, table)))
    )
    counts = {day: int(observed.get[day.isoformat()]) for day in days}
    for day, rows in counts.items():
        if not rows:
            shutil.rmtree(partition_dir(warehouse, table, day), ignore_errors=True)
    if observed.get["stray"]:
        raise ValueError(
            f"{table.dataset}: {observed.get['stray']} rows fall outside the interval's partitions"
        )
    return counts


def data_files_size(warehouse: Path, table: Table, days: Iterable[date]) -> tuple[int, int] | None:
    """(bytes, files) of the Parquet data files in those partitions, or None if unreadable.

    One directory listing per partition (a run writes one file per partition), so it costs
    nothing next to the write; Spark's checksum and marker files are not data.
    """
    size = files = 0
    try:
        for day in days:
            folder = partition_dir(warehouse, table, day)
            if not folder.is_dir():
                continue
            for path in folder.iterdir():
                if path.suffix == ".parquet" and not path.name.startswith((".", "_")):
                    size += path.stat().st_size
                    files += 1
    except OSError:  # e.g. a warehouse on a mount that went away: statistics are optional
        return None
    return size, files
