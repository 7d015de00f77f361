"""Plan and impact use cases: fetch lineage and run history from Marquez, then call the pure
domain functions. Shared by the CLI and (later) the Slack handlers."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol, TypeVar

import networkx as nx

from bot.clients.marquez import MarquezClient, MarquezNotFound, job_node_id
from bot.config import BotConfig
from bot.core.model import DagRef
from bot.lineage.rules.graph import (
    LineageGraph,
    affected_dags,
    catalog_nodes,
    settled_jobs,
)
from bot.lineage.rules.impact import Impact
from bot.lineage.rules.planner import Plan, check_size, make_plan, resolve_exclusions
from bot.lineage.rules.ranges import parse_range
from bot.lineage.rules.schedule import CronSchedule, Schedule, Unscheduled, schedule_from_runs
from bot.lineage.service.catalog import Catalog, load_catalog
from bot.ownership.rules import owners

LINEAGE_DEPTH = 20
HISTORY_RUNS = 60
CONCURRENCY = 8
T = TypeVar("T")


@dataclass(frozen=True)
class PlanRequest:
    dag: str
    range_text: str
    namespace: str | None = None
    only: bool = False
    exclude: tuple[str, ...] = ()


class PlanSource(Protocol):
    """What the services ask of a planner: `Planner` (Marquez crawl, the CLI) or
    `IndexPlanner` (the local lineage index, `serve`)."""

    async def resolve(self, name: str, namespace: str | None = None) -> DagRef: ...

    async def plan(self, request: PlanRequest) -> Plan: ...

    async def impact(self, name: str, namespace: str | None = None) -> Impact: ...


async def _bounded(calls: Iterable[Callable[[], Awaitable[T]]]) -> list[T]:
    gate = asyncio.Semaphore(CONCURRENCY)

    async def run(call: Callable[[], Awaitable[T]]) -> T:
        async with gate:
            return await call()

    return list(await asyncio.gather(*(run(c) for c in calls)))


PlannerFactory = Callable[[], AbstractAsyncContextManager[PlanSource]]
"""Where plans come from, one planner per use (`bot.app.build_lineage`: the local index once
it is reconciled, else a Marquez crawl)."""


class Planner:
    """Reads Marquez for one request; create one per request (it caches what it fetched)."""

    def __init__(
        self, client: MarquezClient, config: BotConfig, *, default_namespace: str | None = None
    ) -> None:
        self.client = client
        self.config = config
        self.default_namespace = default_namespace
        self._catalog: Catalog | None = None

    async def catalog(self) -> Catalog:
        if self._catalog is None:
            self._catalog = await load_catalog(self.client)
        return self._catalog

    async def resolve(self, name: str, namespace: str | None = None) -> DagRef:
        catalog = await self.catalog()
        return catalog.resolve(name, namespace=namespace, default_namespace=self.default_namespace)

    async def lineage(self, root: DagRef) -> LineageGraph:
        """The lineage around `root`, expanded until every affected DAG's edges are complete.

        Edges come from every job's datasets in the catalog and from `GET /lineage`. One
        lineage response covers `LINEAGE_DEPTH` job hops around its start; affected jobs at that
        horizon (or absent from every response) are queried next, a few at a time, because
        one query from the horizon usually settles its neighbours too.
        """
        catalog = await self.catalog()
        affected = {root}
        lineage = LineageGraph()
        lineage.merge_nodes(catalog_nodes(catalog.jobs), rebuild=False)
        lineage.rebuild()
        if root in lineage.dags:
            affected = {root} | nx.descendants(lineage.dags, root)
        queried: set[str] = set()
        settled: set[str] = set()
        while True:
            candidates = [
                job
                for job in self._jobs_of(catalog, lineage, affected)
                if job not in settled and job not in queried
            ]
            if not candidates:
                return lineage
            batch = candidates[:CONCURRENCY]
            queried.update(batch)
            responses = await _bounded([partial(self._fetch_lineage, node) for node in batch])
            for node, nodes in zip(batch, responses, strict=True):
                lineage.merge_nodes(nodes, rebuild=False)
                settled |= settled_jobs(nodes, node, LINEAGE_DEPTH)
            lineage.rebuild()
            if root in lineage.dags:
                affected = {root} | nx.descendants(lineage.dags, root)

    @staticmethod
    def _jobs_of(catalog: Catalog, lineage: LineageGraph, dags: set[DagRef]) -> list[str]:
        """Node ids of every job of these DAGs, known from the catalog or from lineage."""
        found = [job_node_id(ns, name) for dag in sorted(dags) for ns, name in catalog.jobs_of(dag)]
        found += sorted(job for job, dag in lineage.jobs.items() if dag in dags)
        return list(dict.fromkeys(found))

    async def _fetch_lineage(self, node_id: str) -> list[dict[str, Any]]:
        try:
            return await self.client.get_lineage(node_id, depth=LINEAGE_DEPTH)
        except MarquezNotFound:
            return []  # a job that never finished a run has no lineage yet

    async def schedules(self, dags: Sequence[DagRef]) -> dict[DagRef, Schedule]:
        """Explicit cron rules first, else what each DAG's run history shows."""
        found: dict[DagRef, Schedule] = {}
        inferred: list[DagRef] = []
        for dag in dags:
            cron = self.config.cron_for(dag)
            if cron:
                found[dag] = CronSchedule(cron)
            else:
                inferred.append(dag)
        histories = await _bounded([partial(self._history_schedule, dag) for dag in inferred])
        found.update(zip(inferred, histories, strict=True))
        return found

    async def _history_schedule(self, dag: DagRef) -> Schedule:
        catalog = await self.catalog()
        candidates = [dag.dag_id] + [name for _, name in catalog.jobs_of(dag)]
        for job in dict.fromkeys(candidates):
            try:
                runs = await self.client.list_runs(dag.namespace, job, max_runs=HISTORY_RUNS)
            except MarquezNotFound:
                continue
            schedule = schedule_from_runs(runs)
            if not isinstance(schedule, Unscheduled):
                return schedule
        return Unscheduled()

    def owners(self, catalog: Catalog) -> Callable[[DagRef], tuple[str, ...]]:
        from_facets = catalog.owners_from_facets()

        def lookup(dag: DagRef) -> tuple[str, ...]:
            return owners(self.config, dag, from_facets.get(dag, ()))

        return lookup

    async def plan(self, request: PlanRequest) -> Plan:
        """Validate the range, resolve the DAG, read lineage and history, and plan."""
        date_range = parse_range(request.range_text, max_days=self.config.limits.max_range_days)
        root = await self.resolve(request.dag, request.namespace)
        lineage = await self.lineage(root)
        excluded = resolve_exclusions(lineage.dags, root, request.exclude)
        affected = affected_dags(lineage.dags, root, exclude=excluded, only=request.only)
        check_size(len(affected.order), self.config.limits.max_plan_dags)  # before history
        schedules = await self.schedules(affected.order)
        return make_plan(
            lineage.dags,
            root,
            date_range,
            schedules,
            exclude=excluded,
            only=request.only,
            owners=self.owners(await self.catalog()),
            max_dags=self.config.limits.max_plan_dags,
        )

    async def impact(self, name: str, namespace: str | None = None) -> Impact:
        """Downstream DAGs, rewritten datasets, reports and owners of a DAG."""
        root = await self.resolve(name, namespace)
        lineage = await self.lineage(root)
        affected = affected_dags(lineage.dags, root)
        datasets = sorted({d for dag in affected.order for d in lineage.outputs.get(dag, ())})
        return Impact.of(
            affected, datasets, self.config, self.owners(await self.catalog()),
            lambda dag: lineage.outputs.get(dag, ()),
        )  # fmt: skip
