"""The in-memory side of the local lineage index: the DAG-level graph, learned schedules and
name look-ups, loaded from the database at start and caught up by change number.

Rows come from `bot/lineage/store/index.py` (events and Marquez). This object never writes:
any number of them, in one process or several on one database, converge by reading the rows
whose `seq` is above the last one they applied. Memory stays small at 50,000 jobs: per job
its DAG and frozensets of shared dataset refs, per DAG a learned schedule (equal schedules are
one object), and the graph as integer adjacency sets (`bot/lineage/rules/dag_graph.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, replace
from datetime import datetime
from operator import attrgetter
from sys import intern
from typing import Any

from sqlalchemy import func, select, tuple_
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.core.model import DagRef, DatasetRef, Interval
from bot.lineage.rules.dag_graph import DagGraph, DagLineage, JobLineage, add_to, take_from
from bot.lineage.rules.graph import top_dag
from bot.lineage.rules.schedule import Schedule, Unscheduled, schedule_from_intervals
from bot.lineage.service.catalog import resolve_among
from bot.lineage.store.index import read_state
from bot.lineage.store.models import LineageDataset, LineageIo, LineageJob, LineageRun

_UNSCHEDULED = Unscheduled()
HISTORY_RUNS = 60  # as many runs per DAG as the crawl planner reads
_CHUNK = 400
LOAD_CHUNK = 5_000
ASKERS_FIRST_S = 15.0
"""How long the full reconcile holds a page for plans asking Marquez: above a walk's budget
(bot/lineage/service/neighbourhood.py), far below its lease."""


@dataclass(frozen=True)
class Freshness:
    """How current the index is against Marquez."""

    reconciled_at: datetime | None
    full_reconcile_at: datetime | None
    seq: int


class LineageIndex:
    """Jobs → DAG graph, DAG schedules from history, and resolution of DAG names."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self.sessions = sessions
        self.lineage = DagLineage()
        self.seq = 0
        self.freshness = Freshness(None, None, 0)
        self._schedules: dict[DagRef, Schedule] = {}
        self._shared: dict[tuple[Interval, ...], Schedule] = {}
        self._intervals: dict[Interval, Interval] = {}
        self._datasets: dict[tuple[str, str], DatasetRef] = {}
        # task job name → its DAG(s): a tuple, as a rule of one (a set costs 216 bytes)
        self._tasks: dict[str, tuple[DagRef, ...]] = {}
        self._by_name: dict[str, list[DagRef]] | None = None
        self._lock = asyncio.Lock()
        self.ready = asyncio.Event()
        """Set once the index holds a full reconcile with Marquez (this process's or another
        replica's). Nothing waits for it to plan; benchmarks and tests watch it."""
        self._asking = 0
        self._quiet = asyncio.Event()
        self._quiet.set()

    @contextlib.asynccontextmanager
    async def asking(self) -> AsyncIterator[None]:
        """Someone waits on Marquez through this index (a preview or an alert planning while
        it loads): the full reconcile holds its next page until they have their answer, so
        Marquez and this process answer them first."""
        self._asking += 1
        self._quiet.clear()
        try:
            yield
        finally:
            self._asking -= 1
            if not self._asking:
                self._quiet.set()

    async def let_askers_first(self, limit_s: float = ASKERS_FIRST_S) -> None:
        """Wait (at most `limit_s`) until nobody is `asking`."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._quiet.wait(), limit_s)

    @property
    def graph(self) -> DagGraph:
        return self.lineage.graph

    # -- catching up ----------------------------------------------------------------------

    async def catch_up(self) -> int:
        """Apply every change committed since the last call; returns how many rows."""
        async with self._lock, self.sessions() as session:
            state = await read_state(session)
            self.freshness = Freshness(state.reconciled_at, state.full_reconcile_at, state.seq)
            ready = state.full_reconcile_at is not None
            if state.seq == self.seq:
                if ready:
                    self.ready.set()
                return 0
            jobs = await self._load_jobs(session)
            dags = await self._changed_run_dags(session)
            await self._learn(session, dags)
            self.seq = state.seq
        if ready:
            self.ready.set()
        return jobs + len(dags)

    async def _load_jobs(self, session: AsyncSession) -> int:
        """Apply the job rows changed since the last catch-up, `LOAD_CHUNK` rows at a time (at
        start that is every row: 100,000 rows and their datasets never cross the wire at once)."""
        table = LineageJob.__table__
        c = table.c  # only what the index keeps (not timestamps, sources…)
        wanted = select(c.id, c.namespace, c.name, c.dag_namespace, c.dag_id, c.is_dag)
        wanted = wanted.add_columns(c.owners, c.deleted).where(c.seq > self.seq)
        loaded = 0
        cursor = 0
        kept: list[tuple[str, str]] = []
        while True:
            rows = list(
                await session.execute(wanted.where(c.id > cursor).order_by(c.id).limit(LOAD_CHUNK))
            )
            if not rows:
                break
            cursor = rows[-1].id
            io = await self._io(session, [row.id for row in rows if not row.deleted])
            kept += self._apply_jobs(rows, io)
            loaded += len(rows)
            del rows, io
        self._follow_parents(kept)
        return loaded

    async def _io(
        self, session: AsyncSession, ids: list[int]
    ) -> dict[int, tuple[set[DatasetRef], set[DatasetRef]]]:
        """Each job's input and output datasets."""
        io: dict[int, tuple[set[DatasetRef], set[DatasetRef]]] = {i: (set(), set()) for i in ids}
        if not ids:
            return io
        query = select(
            LineageIo.job_id, LineageIo.direction, LineageDataset.namespace, LineageDataset.name
        ).join(LineageDataset, LineageDataset.id == LineageIo.dataset_id)
        if len(ids) > _CHUNK and ids[-1] - ids[0] < 2 * len(ids):
            # a dense run of ids (a first load): one range on the key, not IN lists
            parts = [query.where(LineageIo.job_id.between(ids[0], ids[-1]))]
        else:
            parts = [
                query.where(LineageIo.job_id.in_(ids[i : i + _CHUNK]))
                for i in range(0, len(ids), _CHUNK)
            ]
        for part in parts:
            for job_id, direction, namespace, name in await session.execute(part):
                sides = io.get(job_id)
                if sides is not None:
                    sides[0 if direction == "in" else 1].add(self._dataset(namespace, name))
        return io

    def _apply_jobs(
        self, rows: list[Any], io: dict[int, tuple[set[DatasetRef], set[DatasetRef]]]
    ) -> list[tuple[str, str]]:
        """Apply job rows to the graph; returns the keys of those not deleted."""
        kept: list[tuple[str, str]] = []
        for row in rows:
            # Namespaces repeat on every job and dataset: one string object each.
            key = (intern(row.namespace), row.name)
            old = self.lineage.jobs.get(key)
            if old is not None and key != (old.dag.namespace, old.dag.dag_id):
                take_from(self._tasks, row.name, old.dag)
            if row.deleted:
                changed = self.lineage.remove_job(key)
            else:
                dag = DagRef(intern(row.dag_namespace), row.dag_id)
                inputs, outputs = io[row.id]
                owners = tuple(str(o) for o in row.owners or ())
                job = JobLineage.of(dag, inputs, outputs, owners)
                changed = self.lineage.set_job(key, job)
                if not row.is_dag:
                    add_to(self._tasks, row.name, dag)
                kept.append(key)
            if changed:
                self._by_name = None
        return kept

    def _follow_parents(self, keys: list[tuple[str, str]]) -> None:
        """A job whose DAG is itself another job's child (Marquez files a Spark application
        under its Airflow task `dag.task` when no `root` says more) joins that task's DAG."""
        jobs = self.lineage.jobs

        def parent_of(dag: DagRef) -> DagRef | None:
            above = jobs.get((dag.namespace, dag.dag_id))
            return above.dag if above is not None and above.dag != dag else None

        for key in keys:
            job = jobs.get(key)
            if job is None:
                continue
            top = top_dag(job.dag, parent_of)
            if top != job.dag:
                self.lineage.set_job(key, replace(job, dag=top))
                add_to(self._tasks, key[1], top)
                self._by_name = None

    def _dataset(self, namespace: str, name: str) -> DatasetRef:
        key = (namespace, name)
        found = self._datasets.get(key)
        if found is None:
            found = self._datasets[key] = DatasetRef(intern(namespace), name)
        return found

    async def _changed_run_dags(self, session: AsyncSession) -> set[DagRef]:
        table = LineageRun.__table__
        found = await session.execute(
            select(table.c.dag_namespace, table.c.dag_id).where(table.c.seq > self.seq).distinct()
        )
        return {DagRef(ns, dag) for ns, dag in found}

    async def _learn(self, session: AsyncSession, dags: set[DagRef]) -> None:
        """Relearn the schedules of these DAGs from their newest stored runs."""
        if not dags:
            return
        table = LineageRun.__table__
        key = (table.c.dag_namespace, table.c.dag_id)
        # The newest HISTORY_RUNS runs of each DAG, chosen by the database: at start the
        # table may hold 400 days of every DAG's runs, which need not all cross the wire.
        newest = func.row_number().over(partition_by=key, order_by=table.c.nominal_start.desc())
        ranked = select(*key, table.c.nominal_start, table.c.nominal_end, newest.label("n"))

        def query(where: Any = None) -> Any:
            inner = (ranked if where is None else ranked.where(where)).subquery()
            return select(
                inner.c.dag_namespace, inner.c.dag_id, inner.c.nominal_start, inner.c.nominal_end
            ).where(inner.c.n <= HISTORY_RUNS)

        wanted = sorted(dags)
        parts = (
            [query()]
            if self.seq == 0
            else [
                query(tuple_(*key).in_([(d.namespace, d.dag_id) for d in wanted[i : i + _CHUNK]]))
                for i in range(0, len(wanted), _CHUNK)
            ]
        )
        history: dict[DagRef, list[Interval]] = {}
        for part in parts:
            for ns, dag_id, start, end in await session.execute(part):
                runs = history.setdefault(DagRef(ns, dag_id), [])
                if len(runs) < HISTORY_RUNS and (end is None or end >= start):
                    runs.append(self._interval(start, end or start))
        for dag in dags:
            self._schedules.pop(dag, None)
        for dag, runs in history.items():
            known = tuple(sorted(set(runs)))
            schedule = self._shared.get(known)
            if schedule is None:
                schedule = self._shared[known] = schedule_from_intervals(known)
            if not isinstance(schedule, Unscheduled):
                self._schedules[dag] = schedule

    def _interval(self, start: datetime, end: datetime) -> Interval:
        interval = Interval(start, end)
        return self._intervals.setdefault(interval, interval)

    # -- reading --------------------------------------------------------------------------

    def schedule_of(self, dag: DagRef) -> Schedule:
        # One shared object: the planner recognises equal schedules by identity first.
        return self._schedules.get(dag) or _UNSCHEDULED

    def knows(self, dag: DagRef) -> bool:
        return dag in self.lineage.graph

    def upstream_of(self, dag: DagRef, *, limit: int = 10_000) -> frozenset[DagRef]:
        """Every DAG upstream of `dag` (at most `limit`: a runaway lineage stays bounded)."""
        graph = self.lineage.graph
        if dag not in graph:
            return frozenset()
        seen: set[DagRef] = set()
        todo = [dag]
        while todo and len(seen) < limit:
            for parent in graph.pred[todo.pop()]:
                if parent not in seen and parent != dag:
                    seen.add(parent)
                    todo.append(parent)
        return frozenset(seen)

    def resolve(
        self, name: str, namespace: str | None = None, default_namespace: str | None = None
    ) -> DagRef:
        """As `Catalog.resolve`, over the DAGs the index knows."""
        if self._by_name is None:
            by_name: dict[str, list[DagRef]] = {}
            for dag in self.lineage.graph:
                by_name.setdefault(dag.dag_id, []).append(dag)
            self._by_name = by_name

        def task_dag(task: str) -> DagRef | None:
            dags = sorted(self._tasks.get(task, ()))
            return dags[0] if dags else None

        return resolve_among(
            name,
            self._by_name.get(name.strip(), []),
            lambda: list(self.lineage.graph),
            task_dag,
            namespace=namespace,
            default_namespace=default_namespace,
        )

    async def readers(self, namespace: str, name: str) -> frozenset[DagRef] | None:
        """The DAGs that read a dataset (with what was committed since the index last caught
        up); None while the index has not loaded and knows no reader (it cannot tell yet)."""
        await self.catch_up()
        dataset = self._datasets.get((namespace, name))
        found = self.lineage.readers_of(dataset) if dataset is not None else frozenset()
        if found or self.ready.is_set():
            return found
        return None

    def outputs(self, dags: Iterable[DagRef]) -> list[DatasetRef]:
        # Sorted by a tuple key: the dataclass's own `<` is Python code, and a failure at the
        # top of 100,000 DAGs has as many datasets downstream.
        members, jobs = self.lineage.members, self.lineage.jobs
        found = {d for dag in dags for key in members.get(dag, ()) for d in jobs[key].outputs}
        return sorted(found, key=attrgetter("namespace", "name"))
