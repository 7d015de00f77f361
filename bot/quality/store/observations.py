"""The SQL of data quality, in the caller's transaction."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import NamedTuple, cast

from sqlalchemy import Table, delete, insert, select, tuple_
from sqlalchemy.ext.asyncio import AsyncSession

from bot.events.rules.data_facts import OutputFacts
from bot.quality.rules.checks import Fields
from bot.quality.store.models import ColumnLineage, DatasetSchema, Observation, dataset_key

ColumnKey = tuple[str, str]
"""(dataset key, column)."""

_SCAN = 4  # rows read per interval wanted: reruns of one interval take several


class Kept(NamedTuple):
    """The latest run of one interval of a dataset."""

    interval_key: str
    job: str | None
    rows: int | None
    size: int | None
    usual: bool


async def history(
    session: AsyncSession, namespace: str, name: str, *, interval_key: str, intervals: int
) -> list[tuple[int | None, int | None, bool]]:
    """(rows, bytes, found usual) of the latest run of each of the dataset's last `intervals`
    intervals other than `interval_key`, newest first."""
    found = await latest(session, namespace, name, intervals=intervals, besides=interval_key)
    return [(k.rows, k.size, k.usual) for k in found]


async def latest_writers(
    session: AsyncSession, namespace: str, name: str, *, interval_key: str, intervals: int
) -> list[tuple[str | None, int | None, bool]]:
    """(job, rows, found usual) of the latest run of each of the dataset's last `intervals`
    intervals other than `interval_key`, newest first."""
    found = await latest(session, namespace, name, intervals=intervals, besides=interval_key)
    return [(k.job, k.rows, k.usual) for k in found]


async def latest(
    session: AsyncSession, namespace: str, name: str, *, intervals: int, besides: str | None = None
) -> list[Kept]:
    """The latest run of each of the dataset's last `intervals` intervals (but `besides`),
    newest first."""
    query = select(
        Observation.interval_key, Observation.job_name, Observation.rows, Observation.size,
        Observation.usual,
    ).where(Observation.dataset_key == dataset_key(namespace, name))  # fmt: skip
    if besides is not None:
        query = query.where(Observation.interval_key != besides)
    found = await session.execute(
        query.order_by(Observation.event_time.desc(), Observation.id.desc()).limit(
            intervals * _SCAN
        )
    )
    kept: dict[str, Kept] = {}
    for key, job, rows, size, usual in found:
        kept.setdefault(key, Kept(key, job, rows, size, bool(usual)))
    return list(kept.values())[:intervals]


def observe(
    session: AsyncSession,
    output: OutputFacts,
    *,
    interval_key: str,
    interval_start: datetime | None,
    event_time: datetime,
    run_id: str,
    dag: tuple[str, str],
    usual: bool,
    job: str | None = None,
) -> None:
    session.add(
        Observation(
            dataset_key=dataset_key(output.namespace, output.name),
            namespace=output.namespace,
            name=output.name,
            interval_key=interval_key,
            interval_start=interval_start,
            event_time=event_time,
            run_id=run_id,
            job_name=job,
            dag_namespace=dag[0],
            dag_id=dag[1],
            rows=output.rows,
            size=output.size,
            usual=usual,
        )
    )


async def schema(session: AsyncSession, namespace: str, name: str) -> DatasetSchema | None:
    return await session.get(DatasetSchema, dataset_key(namespace, name))


def previous_fields(row: DatasetSchema | None) -> Fields | None:
    return tuple((f[0], f[1]) for f in row.fields) if row is not None else None


async def keep_schema(
    session: AsyncSession, output: OutputFacts, event_time: datetime, row: DatasetSchema | None
) -> None:
    """Record `output`'s schema as its dataset's latest, unless a later run's is there."""
    if output.fields is None:
        return
    fields = [list(f) for f in output.fields]
    if row is None:
        session.add(
            DatasetSchema(
                dataset_key=dataset_key(output.namespace, output.name),
                namespace=output.namespace,
                name=output.name,
                fields=fields,
                event_time=event_time,
            )
        )
        await session.flush()
    elif row.event_time <= event_time:
        row.fields, row.event_time = fields, event_time


async def keep_columns(session: AsyncSession, output: OutputFacts, dag: tuple[str, str]) -> None:
    """Record `output`'s column lineage as its dataset's latest (the previous run's goes)."""
    if output.columns is None:
        return
    key = dataset_key(output.namespace, output.name)
    await session.execute(delete(ColumnLineage).where(ColumnLineage.out_key == key))
    rows = [
        {
            "out_key": key,
            "out_namespace": output.namespace,
            "out_name": output.name,
            "out_column": column,
            "in_key": dataset_key(namespace, name),
            "in_column": field,
            "dag_namespace": dag[0],
            "dag_id": dag[1],
        }
        for column, inputs in output.columns
        for namespace, name, field in inputs
    ]
    if rows:
        await session.execute(insert(cast(Table, ColumnLineage.__table__)), rows)


async def column_readers(
    session: AsyncSession, columns: Sequence[ColumnKey]
) -> list[tuple[ColumnKey, tuple[str, str, str], tuple[str, str]]]:
    """For each column, the output columns computed from it: (input column, (output namespace,
    name, column), writing DAG)."""
    if not columns:
        return []
    rows = await session.execute(
        select(
            ColumnLineage.in_key, ColumnLineage.in_column, ColumnLineage.out_namespace,
            ColumnLineage.out_name, ColumnLineage.out_column, ColumnLineage.dag_namespace,
            ColumnLineage.dag_id,
        ).where(tuple_(ColumnLineage.in_key, ColumnLineage.in_column).in_(list(columns)))
    )  # fmt: skip
    return [((r[0], r[1]), (r[2], r[3], r[4]), (r[5], r[6])) for r in rows]


async def dags_with_column_lineage(
    session: AsyncSession, namespace: str, name: str
) -> set[tuple[str, str]]:
    """The DAGs whose outputs' column lineage names any column of the dataset."""
    rows = await session.execute(
        select(ColumnLineage.dag_namespace, ColumnLineage.dag_id)
        .where(ColumnLineage.in_key == dataset_key(namespace, name))
        .distinct()
    )
    return {(r[0], r[1]) for r in rows}


class Written(NamedTuple):
    """One run's count of one dataset for one interval, and when the bot took it in."""

    dataset_key: str
    namespace: str
    name: str
    interval_start: datetime | None
    interval_key: str
    rows: int | None
    size: int | None
    usual: bool
    seen_at: datetime | None


async def of_intervals(
    session: AsyncSession, dag: tuple[str, str], starts: Sequence[datetime]
) -> list[Written]:
    """What `dag`'s runs of those intervals wrote, every run, oldest first."""
    found: list[Written] = []
    for at in range(0, len(starts), _CHUNK):
        rows = await session.execute(
            select(
                Observation.dataset_key, Observation.namespace, Observation.name,
                Observation.interval_start, Observation.interval_key, Observation.rows,
                Observation.size, Observation.usual, Observation.seen_at,
            )
            .where(
                Observation.dag_namespace == dag[0],
                Observation.dag_id == dag[1],
                Observation.interval_start.in_(list(starts[at : at + _CHUNK])),
            )
            .order_by(Observation.id)
        )  # fmt: skip
        found += [Written(*row) for row in rows]
    return found


async def sends_statistics(session: AsyncSession, dag: tuple[str, str]) -> bool:
    """Whether any run of `dag` ever sent statistics the bot kept."""
    found = await session.scalar(
        select(Observation.id)
        .where(Observation.dag_namespace == dag[0], Observation.dag_id == dag[1])
        .limit(1)
    )
    return found is not None


_CHUNK = 500  # interval starts per IN list
