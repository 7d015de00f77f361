"""Writes to the local lineage index, in the caller's transaction.

Two feeds: every run event the bot ingests (`record_events`, called from ingest) and Marquez
(`apply_jobs` / `mark_deleted` from the reconciler and on-demand fetches). Events only ever add
what they say (a job, its DAG, datasets, a run's interval): one event shows one run's datasets,
and a retry still running may show none. Marquez describes a job as it now is, so its datasets
replace the stored ones (unless it shows none: a retry without datasets hides them, as in
`bot/lineage/rules/graph.py`). A dataset may have other names (its `symlinks` facet, registered
from events as Marquez does): job IO always references the dataset itself, never an alias.
Every write that changes something takes the next `seq` first: a row lock on `lineage_state`
held to commit, so readers catching up with `seq > :last` never skip a change committed late.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import delete, func, or_, select, tuple_, update
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncSession

from bot.core.model import DagRef, DatasetRef
from bot.core.tables import utcnow
from bot.lineage.store.models import LineageDataset, LineageIo, LineageJob, LineageRun, LineageState

if TYPE_CHECKING:
    from bot.events.rules.event import ParsedEvent

CHUNK = 400  # keys per IN list (bind-parameter limits)
SEEN_EVERY = timedelta(hours=1)  # seen_at is refreshed at most this often by events
EVENT_STATES = {"COMPLETE": "COMPLETED", "FAIL": "FAILED", "ABORT": "ABORTED"}
Naming = tuple[DatasetRef, tuple[DatasetRef, ...]]  # a dataset's name and its aliases


@dataclass(frozen=True)
class JobFacts:
    """What one feed says about a job. `owners` None means "not said" (events)."""

    namespace: str
    name: str
    dag: DagRef
    inputs: frozenset[DatasetRef] = frozenset()
    outputs: frozenset[DatasetRef] = frozenset()
    owners: tuple[str, ...] | None = None
    seen_at: datetime | None = None
    marquez_updated_at: datetime | None = None


@dataclass(frozen=True)
class RunFacts:
    dag: DagRef
    run_id: str
    nominal_start: datetime
    nominal_end: datetime | None = None
    state: str | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None


def _insert(session: AsyncSession) -> Any:
    dialect = session.get_bind().dialect.name
    if dialect == "postgresql":
        return postgresql_insert
    if dialect == "sqlite":
        return sqlite_insert
    raise ValueError(f"the lineage index is stored on SQLite or PostgreSQL, not {dialect}")


def _chunks(items: Sequence[Any]) -> Iterable[Sequence[Any]]:
    for first in range(0, len(items), CHUNK):
        yield items[first : first + CHUNK]


async def next_seq(session: AsyncSession) -> int:
    """The next change number; the row stays locked until the caller's transaction ends."""
    result = await session.execute(
        update(LineageState)
        .where(LineageState.id == 1)
        .values(seq=LineageState.seq + 1)
        .returning(LineageState.seq)
    )
    return int(result.scalar_one())


def facts_from_events(events: Sequence[ParsedEvent]) -> tuple[list[JobFacts], list[RunFacts]]:
    """Jobs (merged per job over the batch) and DAG runs with a nominal interval."""
    jobs: dict[tuple[str, str], JobFacts] = {}
    runs: dict[tuple[DagRef, str], RunFacts] = {}
    for event in events:
        dag = DagRef(event.dag_namespace, event.dag_id)
        key = (event.namespace, event.job_name)
        found = jobs.get(key)
        inputs = frozenset(DatasetRef(ns, name) for ns, name in event.inputs)
        outputs = frozenset(DatasetRef(ns, name) for ns, name in event.outputs)
        seen = max(event.event_time, found.seen_at) if found and found.seen_at else event.event_time
        jobs[key] = JobFacts(
            event.namespace,
            event.job_name,
            dag,
            inputs | (found.inputs if found else frozenset()),
            outputs | (found.outputs if found else frozenset()),
            seen_at=seen,
        )
        if event.nominal_start is None:
            continue
        is_dag = key == (dag.namespace, dag.dag_id)
        run_id = event.run_id if is_dag else (event.dag_run_id or event.run_id)
        state = (EVENT_STATES.get(event.event_type, "RUNNING")) if is_dag else None
        before = runs.get((dag, run_id))
        runs[(dag, run_id)] = RunFacts(
            dag,
            run_id,
            event.nominal_start,
            event.nominal_end,
            state or (before.state if before else None),
            event.event_time if is_dag and event.event_type == "START" else None,
            event.event_time if is_dag and event.event_type in EVENT_STATES else None,
        )
    return list(jobs.values()), list(runs.values())


async def record_events(session: AsyncSession, events: Sequence[ParsedEvent]) -> None:
    """Index what these events say (jobs, DAG membership, datasets, aliases, DAG run intervals)."""
    # Dataset names in event order (the jobs' facts lose it): the first registration wins.
    named = [(DatasetRef(*name), tuple(DatasetRef(*a) for a in aliases))
             for event in events for name, aliases in event.dataset_names()]  # fmt: skip
    jobs, runs = facts_from_events(events)
    seq = await apply_jobs(session, jobs, source="event", named=named)
    await upsert_runs(session, runs, seq=seq)


async def _stored(session: AsyncSession, names: Iterable[DatasetRef]) -> dict[DatasetRef, int]:
    """The dataset each stored name refers to: its own row, or the dataset it is an alias of."""
    table = LineageDataset.__table__
    found: dict[DatasetRef, int] = {}
    for part in _chunks(sorted(set(names))):
        keys = [(d.namespace, d.name) for d in part]
        rows = await session.execute(
            select(table.c.namespace, table.c.name, func.coalesce(table.c.alias_of, table.c.id))
            .where(tuple_(table.c.namespace, table.c.name).in_(keys))
        )  # fmt: skip
        found.update({DatasetRef(ns, name): i for ns, name, i in rows})
    return found


async def _dataset_ids(
    session: AsyncSession, refs: set[DatasetRef], named: Sequence[Naming] = ()
) -> dict[DatasetRef, int]:
    """The id of the dataset each name refers to (an alias: its dataset, whichever feed names
    it). New names are registered as Marquez 0.51.1 does (OpenLineageDao.java:873-903): `named`
    in order, each dataset's own name then its symlinks as aliases of the dataset that name
    refers to, then the rest of `refs`; the first registration of a name wins (DatasetSymlinkDao
    .java:48, `ON CONFLICT (name, namespace_uuid) DO NOTHING`)."""
    names = [*named, *((d, ()) for d in sorted(refs))]
    found = await _stored(session, {n for name, aliases in names for n in (name, *aliases)})
    # What each new name will refer to, by name: itself for a new dataset; for an alias, a
    # new dataset or a stored name, resolved to its dataset's id below (no alias chains).
    target: dict[DatasetRef, DatasetRef] = {}
    for name, aliases in names:
        if name not in found:
            target.setdefault(name, name)
        dataset = target.get(name, name)
        for alias in aliases:
            if alias not in found and alias not in target:
                target[alias] = dataset
    # DO NOTHING: a name another writer registered meanwhile keeps what it refers to; sorted,
    # so two writers inserting the same names lock them in one order.
    insert = _insert(session)(LineageDataset.__table__).on_conflict_do_nothing()
    new = sorted(name for name, dataset in target.items() if name == dataset)
    if new:
        await session.execute(insert, [{"namespace": d.namespace, "name": d.name} for d in new])
        found.update(await _stored(session, new))
    links = sorted((alias, dataset) for alias, dataset in target.items() if alias != dataset)
    if links:
        rows = [{"namespace": a.namespace, "name": a.name, "alias_of": found[d]} for a, d in links]
        await session.execute(insert, rows)
        found.update(await _stored(session, [alias for alias, _ in links]))
    return found


async def _existing(
    session: AsyncSession, keys: Sequence[tuple[str, str]]
) -> tuple[dict[tuple[str, str], Any], dict[int, set[tuple[int, str]]]]:
    rows: dict[tuple[str, str], Any] = {}
    for part in _chunks(keys):
        found = await session.execute(
            select(LineageJob.__table__).where(
                tuple_(LineageJob.namespace, LineageJob.name).in_(list(part))
            )
        )
        rows.update({(r.namespace, r.name): r for r in found})
    io: dict[int, set[tuple[int, str]]] = {row.id: set() for row in rows.values()}
    ids = sorted(io)
    for part in _chunks(ids):
        found = await session.execute(
            select(LineageIo.job_id, LineageIo.dataset_id, LineageIo.direction).where(
                LineageIo.job_id.in_(list(part))
            )
        )
        for job_id, dataset_id, direction in found:
            io[job_id].add((dataset_id, direction))
    return rows, io


async def apply_jobs(
    session: AsyncSession,
    facts: Sequence[JobFacts],
    *,
    source: str,
    seq: int | None = None,
    named: Sequence[Naming] = (),
) -> int | None:
    """Upsert jobs; `source="marquez"` replaces datasets and owners, events only add. `named`
    is the events' dataset names with their aliases, in order (`_dataset_ids`).

    Returns the seq taken for this write, which stamps whatever changed (None if no facts).
    """
    if not facts:
        return seq
    from_marquez = source == "marquez"
    # The change number first: its row lock (held to commit) orders concurrent writers, so the
    # rows read next include every job another writer (a reconcile page, an on-demand fetch,
    # ingest) committed, and two never insert the same new job.
    seq = seq if seq is not None else await next_seq(session)
    rows, io = await _existing(session, [(f.namespace, f.name) for f in facts])
    datasets = await _dataset_ids(session, {d for f in facts for d in f.inputs | f.outputs}, named)
    inserts: list[dict[str, Any]] = []
    new_io: dict[tuple[str, str], set[tuple[int, str]]] = {}
    updates: list[tuple[int, dict[str, Any]]] = []
    io_add: list[dict[str, Any]] = []
    io_drop: list[tuple[int, int, str]] = []
    for fact in facts:
        key = (fact.namespace, fact.name)
        wanted = {(datasets[d], "in") for d in fact.inputs} | {
            (datasets[d], "out") for d in fact.outputs
        }
        row = rows.get(key)
        values: dict[str, Any] = {
            "dag_namespace": fact.dag.namespace,
            "dag_id": fact.dag.dag_id,
            "is_dag": key == (fact.dag.namespace, fact.dag.dag_id),
            "deleted": False,
        }
        if from_marquez:
            values.update(source="marquez", in_marquez=True)
            if fact.marquez_updated_at is not None:
                values["marquez_updated_at"] = fact.marquez_updated_at
        if fact.owners is not None:
            values["owners"] = list(fact.owners)
        if row is None:
            seen = fact.seen_at or fact.marquez_updated_at
            inserts.append({"namespace": fact.namespace, "name": fact.name, **values})
            inserts[-1].setdefault("source", source)
            inserts[-1].setdefault("in_marquez", False)
            inserts[-1].setdefault("owners", None)  # one statement: every row the same keys
            inserts[-1].setdefault("marquez_updated_at", None)
            inserts[-1]["seen_at"] = seen if seen is not None else utcnow()
            new_io[key] = wanted
            continue
        changed = {k: v for k, v in values.items() if getattr(row, k) != v}
        if from_marquez and not wanted:
            wanted = io[row.id]  # a retry without datasets hides them: keep what is known
        have = io[row.id]
        add = wanted - have
        drop = have - wanted if from_marquez else set()
        if fact.seen_at and (row.seen_at is None or fact.seen_at - row.seen_at > SEEN_EVERY):
            changed["seen_at"] = fact.seen_at
        if changed or add or drop:
            updates.append((row.id, changed))
            io_add += [{"job_id": row.id, "dataset_id": d, "direction": s} for d, s in add]
            io_drop += [(row.id, d, s) for d, s in drop]
    if not inserts and not updates:
        return seq
    table = LineageJob.__table__
    if inserts:
        for row in inserts:
            row["seq"] = seq
        created = await session.execute(
            _insert(session)(table).returning(table.c.id, table.c.namespace, table.c.name),
            inserts,
        )
        for job_id, ns, name in created:
            io_add += [
                {"job_id": job_id, "dataset_id": d, "direction": s} for d, s in new_io[(ns, name)]
            ]
    for job_id, changed in updates:
        await session.execute(
            update(LineageJob).where(LineageJob.id == job_id).values(**changed, seq=seq)
        )
    for job_id, dataset_id, direction in io_drop:
        await session.execute(
            delete(LineageIo).where(
                LineageIo.job_id == job_id,
                LineageIo.dataset_id == dataset_id,
                LineageIo.direction == direction,
            )
        )
    if io_add:
        statement = _insert(session)(LineageIo.__table__).on_conflict_do_nothing()
        await session.execute(statement, io_add)
    return seq


async def upsert_runs(session: AsyncSession, runs: Sequence[RunFacts], *, seq: int | None) -> None:
    """Insert or update DAG runs; a known state or time is never erased by an unknown one."""
    runs = await _changing(session, runs)
    if not runs:
        return  # every event of a run repeats its interval: no change number, no lock
    seq = seq if seq is not None else await next_seq(session)
    table = LineageRun.__table__
    statement = _insert(session)(table)
    new = statement.excluded
    kept = {
        column: func.coalesce(new[column], table.c[column])
        for column in ("nominal_end", "state", "started_at", "ended_at")
    }
    statement = statement.on_conflict_do_update(
        index_elements=["dag_namespace", "dag_id", "run_id"],
        set_={**kept, "nominal_start": new.nominal_start, "seq": new.seq},
        where=or_(
            table.c.nominal_start != new.nominal_start,
            *(kept[c] != table.c[c] for c in kept),
            *(table.c[c].is_(None) & new[c].is_not(None) for c in kept),
        ),
    )
    rows = [
        {
            "dag_namespace": r.dag.namespace,
            "dag_id": r.dag.dag_id,
            "run_id": r.run_id,
            "nominal_start": r.nominal_start,
            "nominal_end": r.nominal_end,
            "state": r.state,
            "started_at": r.started_at,
            "ended_at": r.ended_at,
            "seq": seq,
        }
        for r in runs
    ]
    for part in _chunks(rows):
        await session.execute(statement, list(part))


_RUN_FIELDS = ("nominal_end", "state", "started_at", "ended_at")


async def _changing(session: AsyncSession, runs: Sequence[RunFacts]) -> list[RunFacts]:
    """The runs whose facts would change a stored row (or that are new)."""
    table = LineageRun.__table__
    keys = [(r.dag.namespace, r.dag.dag_id, r.run_id) for r in runs]
    stored: dict[tuple[str, str, str], Any] = {}
    for part in _chunks(keys):
        found = await session.execute(
            select(table.c.dag_namespace, table.c.dag_id, table.c.run_id, table.c.nominal_start,
                   *(table.c[c] for c in _RUN_FIELDS))
            .where(tuple_(table.c.dag_namespace, table.c.dag_id, table.c.run_id).in_(part))
        )  # fmt: skip
        stored.update({(row[0], row[1], row[2]): row for row in found})

    def changes(run: RunFacts) -> bool:
        row = stored.get((run.dag.namespace, run.dag.dag_id, run.run_id))
        if row is None or row.nominal_start != run.nominal_start:
            return True
        return any(
            getattr(run, c) is not None and getattr(run, c) != getattr(row, c) for c in _RUN_FIELDS
        )

    return [r for r in runs if changes(r)]


async def mark_deleted(session: AsyncSession, keys: Sequence[tuple[str, str]]) -> int:
    """Mark jobs Marquez no longer lists as deleted; returns how many changed."""
    if not keys:
        return 0
    seq = await next_seq(session)
    count = 0
    for part in _chunks(keys):
        result = await session.execute(
            update(LineageJob)
            .where(
                tuple_(LineageJob.namespace, LineageJob.name).in_(list(part)),
                LineageJob.deleted.is_(False),
            )
            .values(deleted=True, seq=seq)
        )
        count += int(getattr(result, "rowcount", 0) or 0)
    return count


async def prune_runs(session: AsyncSession, keep: timedelta, now: datetime) -> None:
    """Forget DAG runs whose interval started `keep` before the newest one stored (history is
    only for learning schedules; measured from the data, so a quiet or replayed past stays).
    Runs dated after `now` (a manual run given a future logical date) are not the newest: one
    of them must not make every real run look old."""
    newest = await session.scalar(
        select(func.max(LineageRun.nominal_start)).where(
            LineageRun.nominal_start <= now + timedelta(days=1)
        )
    )
    if newest is not None:
        await session.execute(delete(LineageRun).where(LineageRun.nominal_start < newest - keep))


async def set_reconciled(
    session: AsyncSession, *, at: datetime, high_water: datetime | None, full: bool
) -> None:
    values: dict[str, Any] = {"reconciled_at": at}
    if high_water is not None:
        current = (await read_state(session)).high_water
        values["high_water"] = high_water if current is None else max(current, high_water)
    if full:
        values["full_reconcile_at"] = at
    await session.execute(update(LineageState).where(LineageState.id == 1).values(**values))


async def read_state(session: AsyncSession) -> LineageState:
    return (await session.execute(select(LineageState).where(LineageState.id == 1))).scalar_one()
