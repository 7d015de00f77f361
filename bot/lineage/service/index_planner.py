"""Plan and impact from the local lineage index: no Marquez crawl on the hot path.

`IndexPlanner` answers what `Planner` answers (resolve, plan, impact) from the in-memory index
(`bot/lineage/service/index.py`), caught up with the database first, so an event ingested a
moment ago already counts. It never waits for a reconcile. A DAG the index has not seen yet is
fetched from Marquez with a few requests (the job by its exact name, a search for its tasks)
and its downstream walked (`bot/lineage/service/neighbourhood.py`: bounded); while the index
is still loading (no full reconcile yet, or a stale one) every plan and impact walks its DAG's
downstream that way, writes what it found to the index like any reconcile, and says on the
plan (`Plan.lineage_loading`) how far the index was and whether the walk saw everything.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import replace
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.clients.marquez import MarquezClient, MarquezError, MarquezNotFound
from bot.config import BotConfig
from bot.core.model import DagRef, DatasetRef
from bot.core.tables import utcnow
from bot.lineage.rules.graph import affected_dags, dag_of, has_own_run, job_io
from bot.lineage.rules.impact import Impact
from bot.lineage.rules.planner import (
    LineageLoading,
    Plan,
    check_size,
    make_plan,
    resolve_exclusions,
)
from bot.lineage.rules.ranges import parse_range
from bot.lineage.rules.schedule import CronSchedule, Schedule
from bot.lineage.service.catalog import UnknownDag
from bot.lineage.service.index import Freshness, LineageIndex
from bot.lineage.service.neighbourhood import Neighbourhood, fetch_downstream
from bot.lineage.service.planning import PlanRequest
from bot.lineage.store.index import JobFacts, RunFacts, apply_jobs, upsert_runs
from bot.lineage.store.reconcile_state import read_progress
from bot.ownership.rules import owners, team_name

logger = logging.getLogger(__name__)
SEARCH_LIMIT = 100
EXACT_NAMESPACES = 4
"""Namespaces a DAG named without one is looked up in exactly before any search (all of them
if the search answer was cut and did not hold it)."""
MarquezFactory = Callable[[], AbstractAsyncContextManager[MarquezClient]]


def _key(job: dict[str, Any]) -> tuple[Any, Any]:
    return (job.get("namespace"), job.get("name"))


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def marquez_facts(job: dict[str, Any]) -> tuple[JobFacts, list[RunFacts]] | None:
    """What a Marquez Job object (jobs list, single job or lineage node data) tells the index:
    the job with its DAG and datasets, and the nominal intervals of the runs it carries."""
    try:
        dag = dag_of(job)
    except ValueError:
        return None
    inputs, outputs = job_io(job)
    facet = (job.get("facets") or {}).get("ownership")
    owners: tuple[str, ...] | None = None
    if isinstance(facet, dict) and isinstance(facet.get("owners"), list):
        owners = tuple(
            team_name(str(o["name"]))
            for o in facet["owners"]
            if isinstance(o, dict) and isinstance(o.get("name"), str)
        )
    elif "facets" in job:
        owners = ()
    facts = JobFacts(
        job.get("namespace") or dag.namespace,
        str(job.get("name") or dag.dag_id),
        dag,
        frozenset(DatasetRef(ns, n) for ns, n in inputs),
        frozenset(DatasetRef(ns, n) for ns, n in outputs),
        owners=owners,
        marquez_updated_at=_time(job.get("updatedAt")),
    )
    runs: list[RunFacts] = []
    # A lineage node's `latestRun` may be its parent's current run (Marquez 0.50+); `dag_of`
    # then names that parent, so the run still counts in the history of the DAG it names.
    for run in [*(job.get("latestRuns") or ()), job.get("latestRun")]:
        if not isinstance(run, dict) or not isinstance(run.get("id"), str):
            continue
        start = _time(run.get("nominalStartTime"))
        if start is not None:
            runs.append(
                RunFacts(
                    dag,
                    run["id"],
                    start,
                    _time(run.get("nominalEndTime")),
                    run.get("state") if isinstance(run.get("state"), str) else None,
                    _time(run.get("startedAt")),
                    _time(run.get("endedAt")),
                )
            )
    return facts, runs


async def write_marquez_jobs(
    sessions: async_sessionmaker[AsyncSession],
    jobs: list[dict[str, Any]],
    *,
    also: Callable[[AsyncSession], Awaitable[None]] | None = None,
) -> None:
    """Index Marquez Job objects in one transaction (with what `also` writes, if given)."""
    facts: dict[tuple[str, str], JobFacts] = {}
    runs: dict[tuple[DagRef, str], RunFacts] = {}
    for job in jobs:
        found = marquez_facts(job)
        if found is not None:
            facts[(found[0].namespace, found[0].name)] = found[0]
            runs.update({(r.dag, r.run_id): r for r in found[1]})
    async with sessions.begin() as session:
        seq = await apply_jobs(session, list(facts.values()), source="marquez")
        await upsert_runs(session, list(runs.values()), seq=seq)
        if also is not None:
            await also(session)


class IndexPlanner:
    """The `Planner` interface over the local index (one per request, like `Planner`)."""

    def __init__(
        self,
        index: LineageIndex,
        config: BotConfig,
        marquez: MarquezFactory,
        *,
        default_namespace: str | None = None,
        refresh: Callable[[], Awaitable[object]] | None = None,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.index = index
        self.config = config
        self.marquez = marquez
        self.default_namespace = default_namespace
        self.refresh = refresh
        """An incremental reconcile: what Marquez changed since the last one, every job with
        its datasets (usually one page), for a name the index does not know yet."""
        self.requests = 0
        """Marquez requests this planner made (on-demand fetches only)."""

        self.loading: LineageLoading | None = None
        """Set by `plan`/`impact` when the index was still loading: what they planned from."""
        self.clock = clock

    @property
    def freshness(self) -> Freshness:
        return self.index.freshness

    def _loading(self) -> bool:
        """No full reconcile yet, or none for longer than a full reconcile's period (a stored
        index from a process that stopped long ago): Marquez is asked about the DAG's
        downstream instead of trusting the index alone."""
        freshness = self.index.freshness
        if freshness.full_reconcile_at is None or freshness.reconciled_at is None:
            return True
        age = (self.clock() - freshness.reconciled_at).total_seconds()
        return age > self.config.index.full_reconcile_s

    async def resolve(self, name: str, namespace: str | None = None) -> DagRef:
        """The DAG a user means, from the index (never waiting for a reconcile), or fetched
        from Marquez when the index does not know it yet."""
        await self.index.catch_up()
        try:
            return self.index.resolve(name, namespace, self.default_namespace)
        except UnknownDag:
            if not await self._fetch(name.strip(), namespace):
                raise
        await self.index.catch_up()
        return self.index.resolve(name, namespace, self.default_namespace)

    async def _root(self, name: str, namespace: str | None) -> DagRef:
        """`resolve`, then, while the index is loading, the DAG's downstream from Marquez."""
        if not self._loading():
            return await self.resolve(name, namespace)
        async with self.index.asking():
            root = await self.resolve(name, namespace)
            found = await self._walk(root)
            async with self.index.sessions() as session:
                progress = await read_progress(session)
            self.loading = LineageLoading(
                progress.jobs_read, progress.jobs_total, len(found.dags), found.complete
            )
        return root

    async def _walk(self, root: DagRef) -> Neighbourhood:
        """Fetch `root`'s downstream from Marquez into the index (bounded)."""
        members = self.index.lineage.members
        try:
            async with self.marquez() as client:
                # Marquez's graph reaches a DAG only through its tasks' datasets, and a loading
                # index may hold some of the DAG's tasks, or only its own job: ask for them all.
                tasks = await self._tasks_of(client, root)

                def known(dag: DagRef) -> set[tuple[str, str]]:
                    return set(members.get(dag, ())) | (tasks if dag == root else set())

                found = await fetch_downstream(client, root, known)
        except MarquezError as exc:  # plan from what the index holds, and say so
            logger.warning("lineage: could not fetch %s's downstream: %s", root.dag_id, exc)
            found = Neighbourhood([], 0, frozenset({root}), False)
        self.requests += found.requests
        held = self.index.lineage.jobs
        # a node showing its parent's run says less of a job than the index already holds
        jobs = [j for j in found.jobs if has_own_run(j) or _key(j) not in held]
        await write_marquez_jobs(self.index.sessions, jobs)
        await self.index.catch_up()
        return found

    async def _tasks_of(self, client: MarquezClient, dag: DagRef) -> set[tuple[str, str]]:
        """The DAG's tasks Marquez knows (`dag.task`, found by a search)."""
        self.requests += 1
        found = await client.search(
            dag.dag_id, filter="JOB", namespace=dag.namespace, limit=SEARCH_LIMIT
        )
        return {
            (dag.namespace, str(r["name"]))
            for r in found
            if r.get("namespace") == dag.namespace
            and str(r.get("name", "")).startswith(f"{dag.dag_id}.")
        }

    async def _fetch(self, name: str, namespace: str | None) -> bool:
        """Bring a DAG Marquez knows and the index does not into the index: an exact lookup
        (≤ EXACT_NAMESPACES requests), a search for its tasks, one task's lineage graph."""
        if self.refresh is not None and self.index.freshness.full_reconcile_at is not None:
            # Marquez's newest jobs, each task with its own datasets: a DAG created since the
            # last reconcile arrives whole, which a search and one task's lineage cannot say.
            self.requests += 1
            await self.refresh()
            try:
                self.index.resolve(name, namespace, self.default_namespace)
                return True
            except UnknownDag:
                pass  # its events were dated before the reconcile's mark: search for it
        async with self.marquez() as client:
            # Exactly first: Marquez's search has no order under its limit (SearchDao binds
            # `ORDER BY :sort` as a constant), so a DAG with many similarly named jobs can be
            # cut from a search answer; a DAG is unknown only if no namespace has it.
            spaces = [namespace] if namespace else await self._namespaces(client, everywhere=False)
            known = await self._exact(client, name, spaces[:EXACT_NAMESPACES])
            self.requests += 1
            found = await client.search(name, filter="JOB", namespace=namespace, limit=SEARCH_LIMIT)
            exact = {
                str(r["namespace"]): dict(r)
                for r in found
                if r.get("name") == name and isinstance(r.get("namespace"), str)
            }
            if not known and not exact and namespace is None and len(found) >= SEARCH_LIMIT:
                # the search was cut where the DAG may sit: ask every other namespace exactly
                tried = set(spaces[:EXACT_NAMESPACES])
                rest = [
                    s for s in await self._namespaces(client, everywhere=True) if s not in tried
                ]
                known = await self._exact(client, name, rest)
            exact.update(known)
            if not exact:
                return False
            homes = set(exact)
            tasks = sorted(
                (str(r["namespace"]), str(r["name"]))
                for r in found
                if r.get("namespace") in homes and str(r.get("name", "")).startswith(f"{name}.")
            )
        # The DAG and its tasks (Marquez names them `dag.task`); their datasets and what is
        # downstream come from the walk (`_walk`), bounded, never one deep `/lineage`.
        jobs: list[dict[str, Any]] = []
        for space in sorted(homes):
            jobs.append(known.get(space) or {"namespace": space, "name": name})
        for space, task in tasks:
            jobs.append({"namespace": space, "name": task, "parentJobName": name})
        await write_marquez_jobs(self.index.sessions, jobs)
        if not self._loading():
            # A complete index plans from what it holds: only this new DAG's lineage is asked.
            await self.index.catch_up()
            await self._walk(self.index.resolve(name, namespace, self.default_namespace))
        return True

    async def _exact(
        self, client: MarquezClient, name: str, spaces: list[str]
    ) -> dict[str, dict[str, Any]]:
        """The job named exactly `name` in each of these namespaces that has one
        (`GET /namespaces/{ns}/jobs/{name}`), by namespace."""
        found: dict[str, dict[str, Any]] = {}
        for space in spaces:
            self.requests += 1
            try:
                found[space] = await client.get_job(space, name)
            except MarquezNotFound:
                continue
        return found

    async def _namespaces(self, client: MarquezClient, *, everywhere: bool) -> list[str]:
        """Where to look a DAG up: the default namespace and those the index holds DAGs in;
        Marquez's own list too when `everywhere` (or when the index is still empty)."""
        held = sorted({dag.namespace for dag in self.index.graph})
        if everywhere or (not held and self.default_namespace is None):
            self.requests += 1
            listed = await client.list_namespaces()
            held += sorted(str(n["name"]) for n in listed if isinstance(n.get("name"), str))
        return list(dict.fromkeys([*filter(None, [self.default_namespace]), *held]))

    def schedules(self, dags: tuple[DagRef, ...]) -> dict[DagRef, Schedule]:
        """Explicit cron rules first, else what each DAG's stored run history shows."""
        found: dict[DagRef, Schedule] = {}
        crons: dict[str, CronSchedule] = {}
        for dag in dags:
            cron = self.config.cron_for(dag)
            if cron:
                found[dag] = crons.setdefault(cron, CronSchedule(cron))
            else:
                found[dag] = self.index.schedule_of(dag)
        return found

    def owners(self, dag: DagRef) -> tuple[str, ...]:
        return owners(self.config, dag, self.index.lineage.owners_of(dag))

    async def plan(self, request: PlanRequest) -> Plan:
        """Validate the range, resolve the DAG, and plan from the index."""
        parse_range(request.range_text, max_days=self.config.limits.max_range_days)
        root = await self._root(request.dag, request.namespace)
        return self._plan(root, request)

    def plan_now(self, request: PlanRequest) -> Plan:
        """The plan `plan` makes, from the index as it stands: no wait, no Marquez request (an
        alert's proposal is drawn inside a transaction). Raises UnknownDag for a DAG the
        index does not know yet, PlanningError as `plan` does."""
        parse_range(request.range_text, max_days=self.config.limits.max_range_days)
        root = self.index.resolve(request.dag, request.namespace, self.default_namespace)
        return self._plan(root, request)

    def _plan(self, root: DagRef, request: PlanRequest) -> Plan:
        date_range = parse_range(request.range_text, max_days=self.config.limits.max_range_days)
        graph = self.index.graph
        excluded = resolve_exclusions(graph, root, request.exclude)
        affected = affected_dags(graph, root, exclude=excluded, only=request.only)
        check_size(len(affected.order), self.config.limits.max_plan_dags)
        plan = make_plan(
            graph,
            root,
            date_range,
            self.schedules(affected.order),
            exclude=excluded,
            only=request.only,
            owners=self.owners,
            max_dags=self.config.limits.max_plan_dags,
            affected=affected,
        )
        return replace(
            plan, lineage_as_of=self.index.freshness.reconciled_at, lineage_loading=self.loading
        )

    async def impact(self, name: str, namespace: str | None = None) -> Impact:
        """Downstream DAGs, rewritten datasets, reports and owners of a DAG."""
        root = await self._root(name, namespace)
        affected = affected_dags(self.index.graph, root)
        return Impact.of(
            affected, self.index.outputs(affected.order), self.config, self.owners,
            lambda dag: self.index.outputs([dag]),
        )  # fmt: skip


def freshness_text(freshness: Freshness, now: datetime | None = None) -> str | None:
    """ "lineage as of 14:02 UTC, 3 min ago" (None before the first reconcile)."""
    at = freshness.reconciled_at
    if at is None:
        return None
    minutes = max(0, int(((now or utcnow()) - at).total_seconds() // 60))
    return f"lineage as of {at:%H:%M} UTC, {minutes} min ago"
