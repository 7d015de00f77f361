"""The local lineage index on SQLite and PostgreSQL: fed by events and by Marquez (the stand-in
over HTTP), planning like the crawl planner, surviving restarts, converging across processes."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import UTC, datetime
from typing import Any, Literal

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.clients.marquez import MarquezClient
from bot.config import BotConfig, IndexSettings
from bot.core.db import make_engine, session_factory, upgrade
from bot.core.model import DagRef, DatasetRef
from bot.core.tables import utcnow
from bot.events.rules.event import ParsedEvent
from bot.lineage.rules.planner import Plan
from bot.lineage.service.index import LineageIndex
from bot.lineage.service.index_planner import IndexPlanner
from bot.lineage.service.neighbourhood import MAX_REQUESTS
from bot.lineage.service.planning import Planner, PlanRequest
from bot.lineage.service.reconcile import Reconciler
from bot.lineage.store.index import (
    JobFacts,
    apply_jobs,
    read_state,
    record_events,
    set_reconciled,
)
from standins.marquez.server import StandInServer

FD = "food_delivery"
PRODUCER = "https://github.com/example/tests"
CONFIG = BotConfig.model_validate({"limits": {"max_plan_dags": 100}})
AT = datetime(2021, 6, 12, 1, 0, tzinfo=UTC)


def completed(
    namespace: str, job: str, *, reads: tuple[str, ...] = (), writes: tuple[str, ...] = ()
) -> list[dict[str, Any]]:
    """START and COMPLETE of one run of `job` (as a pipeline would send them to Marquez)."""
    run = str(uuid.uuid4())
    body = {
        "producer": PRODUCER,
        "run": {"runId": run, "facets": {}},
        "job": {"namespace": namespace, "name": job},
        "inputs": [{"namespace": namespace, "name": d} for d in reads],
        "outputs": [{"namespace": namespace, "name": d} for d in writes],
    }
    return [
        {**body, "eventType": "START", "eventTime": "2021-06-10T01:00:00Z"},
        {**body, "eventType": "COMPLETE", "eventTime": "2021-06-10T01:05:00Z"},
    ]


def ingest(server: StandInServer, events: list[dict[str, Any]]) -> None:
    for item in events:
        server.state.ingest(item)


class CountingClient(MarquezClient):
    """Counts every GET the bot sends to the stand-in."""

    calls: list[str]

    async def _get(self, path: str, query: Any = (), *, slow: bool = False) -> Any:
        self.calls.append(path)
        return await super()._get(path, query, slow=slow)


def counting(server: StandInServer) -> tuple[list[str], Callable[[], CountingClient]]:
    calls: list[str] = []

    def make() -> CountingClient:
        client = CountingClient(server.url)
        client.calls = calls
        return client

    return calls, make


@asynccontextmanager
async def engine_on(database_url: str) -> AsyncIterator[AsyncEngine]:
    engine = make_engine(database_url)
    try:
        yield engine
    finally:
        await engine.dispose()


async def ready_index(database_url: str, engine: AsyncEngine) -> LineageIndex:
    """An index that counts as loaded (a full reconcile is recorded, of whatever Marquez held
    then), so planners trust it instead of walking Marquez."""
    upgrade(database_url)
    index = LineageIndex(session_factory(engine))
    async with index.sessions.begin() as session:
        if (await read_state(session)).full_reconcile_at is None:
            await set_reconciled(session, at=utcnow(), high_water=None, full=True)
    await index.catch_up()
    return index


def planner(index: LineageIndex, make: Callable[[], Any]) -> IndexPlanner:
    factory: Callable[[], AbstractAsyncContextManager[MarquezClient]] = make
    return IndexPlanner(index, CONFIG, factory)


def edges(index: LineageIndex) -> set[tuple[str, str]]:
    graph = index.graph
    return {(a.dag_id, b.dag_id) for a in graph for b in graph.succ[a]}


def event(job: str, *, reads: tuple[str, ...] = (), writes: tuple[str, ...] = ()) -> ParsedEvent:
    return ParsedEvent(
        run_id="3f1c2b1e-0000-4000-8000-000000000001",
        event_type="COMPLETE",
        event_time=AT,
        namespace=FD,
        job_name=job,
        dag_namespace=FD,
        dag_id=job,
        inputs=tuple((FD, d) for d in reads),
        outputs=tuple((FD, d) for d in writes),
    )


async def crawl_plan(server: StandInServer, request: PlanRequest) -> dict[str, Any]:
    async with MarquezClient(server.url) as client:
        return (await Planner(client, CONFIG).plan(request)).to_json()


async def test_an_unknown_dag_is_fetched_on_demand_and_planned_like_the_crawl(
    database_url: str, food_delivery_marquez: StandInServer
) -> None:
    request = PlanRequest("example.etl_orders", "2021-06-04..2021-06-06")
    calls, make = counting(food_delivery_marquez)
    async with engine_on(database_url) as engine:
        index = await ready_index(database_url, engine)
        assert not index.knows(DagRef(FD, "example.etl_orders"))  # never reconciled
        plan = await planner(index, make).plan(request)
        # Marquez's namespaces (the index holds none yet), the DAG looked up exactly in each
        # (food_delivery, reporting), a search for it, then its downstream walked: its tasks
        # searched for, then a few shallow `/lineage` requests at a time (never one deep one).
        assert calls[:5] == [
            "/api/v1/namespaces",
            "/api/v1/namespaces/food_delivery/jobs/example.etl_orders",
            "/api/v1/namespaces/reporting/jobs/example.etl_orders",
            "/api/v1/search",
            "/api/v1/search",
        ]
        walked = calls[5:]
        assert walked
        assert set(walked) == {"/api/v1/lineage"}
        assert len(walked) <= MAX_REQUESTS
        crawled = await crawl_plan(food_delivery_marquez, request)
        assert len(plan.steps) > 3
        # Lineage nodes carry no job facets: ownership facets arrive with the next reconcile.
        assert without_owners(planned(plan)) == without_owners(crawled)
        await Reconciler(index.sessions, make, index, IndexSettings()).incremental()
        assert planned(await planner(index, make).plan(request)) == crawled


class CutSearchClient(CountingClient):
    """Answers searches as a big real Marquez may: `limit` rows of a larger, unordered result
    (SearchDao binds `ORDER BY :sort` as a constant), here never the exact name."""

    async def search(
        self,
        q: str,
        *,
        filter: Literal["DATASET", "JOB"] | None = None,
        namespace: str | None = None,
        limit: int = 10,
    ) -> list[dict[str, Any]]:
        found = await super().search(q, filter=filter, namespace=namespace, limit=limit)
        others = [r for r in found if r.get("name") != q]
        filler = [{"type": "JOB", "name": f"{q}_{n:03d}", "namespace": FD} for n in range(limit)]
        return (others + filler)[:limit]


async def test_a_dag_cut_from_a_full_search_answer_is_still_found(
    database_url: str, food_delivery_marquez: StandInServer
) -> None:
    request = PlanRequest("example.etl_orders", "2021-06-04..2021-06-06")
    calls: list[str] = []

    def make() -> CutSearchClient:
        client = CutSearchClient(food_delivery_marquez.url)
        client.calls = calls
        return client

    async with engine_on(database_url) as engine:
        index = await ready_index(database_url, engine)
        plan = await planner(index, make).plan(request)
        crawled = await crawl_plan(food_delivery_marquez, request)
    assert "/api/v1/namespaces/food_delivery/jobs/example.etl_orders" in calls
    assert [s["dag_id"] for s in plan.to_json()["steps"]] == [s["dag_id"] for s in crawled["steps"]]


def planned(plan: Plan) -> dict[str, Any]:
    """The plan's JSON without how fresh the index was (the crawl reads Marquez live)."""
    data = plan.to_json()
    assert "lineage_as_of" in data
    del data["lineage_as_of"]
    return data


def without_owners(plan: dict[str, Any]) -> dict[str, Any]:
    return {**plan, "steps": [{**s, "owners": []} for s in plan["steps"]]}


async def test_a_reconciled_index_survives_a_restart_and_plans_without_marquez(
    database_url: str, food_delivery_marquez: StandInServer
) -> None:
    request = PlanRequest("example.etl_customers", "2021-06-04..2021-06-06")
    calls, make = counting(food_delivery_marquez)
    async with engine_on(database_url) as engine:
        index = await ready_index(database_url, engine)
        await Reconciler(index.sessions, make, index, IndexSettings()).full()
    calls.clear()
    async with engine_on(database_url) as engine:  # a new process: a fresh engine and index
        index = await ready_index(database_url, engine)
        assert index.freshness.full_reconcile_at is not None
        plan = await planner(index, make).plan(request)
        impact = await planner(index, make).impact("example.etl_customers")
    assert calls == []
    assert planned(plan) == await crawl_plan(food_delivery_marquez, request)
    async with MarquezClient(food_delivery_marquez.url) as client:
        crawled = await Planner(client, CONFIG).impact("example.etl_customers")
    assert impact == crawled


async def test_reconcile_picks_up_new_changed_and_deleted_jobs(
    database_url: str, marquez_standin: StandInServer
) -> None:
    ingest(marquez_standin, completed("ns", "a", writes=("x",)))
    ingest(marquez_standin, completed("ns", "b", reads=("x",), writes=("y",)))
    ingest(marquez_standin, completed("ns", "c", reads=("y",)))
    _, make = counting(marquez_standin)
    async with engine_on(database_url) as engine:
        index = await ready_index(database_url, engine)
        reconciler = Reconciler(index.sessions, make, index, IndexSettings(overlap_s=0))
        await reconciler.full()
        assert edges(index) == {("a", "b"), ("b", "c")}

        later = {"eventTime": "2021-06-20T01:05:00Z"}
        ingest(marquez_standin, [e | later for e in completed("ns", "d", reads=("x",))])  # new
        ingest(marquez_standin, [e | later for e in completed("ns", "c", reads=("x",))])  # changed
        result = await reconciler.incremental()
        assert not result.full
        assert result.pages == 1
        assert edges(index) == {("a", "b"), ("a", "c"), ("a", "d")}

        del marquez_standin.state.jobs[("ns", "b")]  # Marquez no longer lists it
        assert (await reconciler.full()).deleted == 1
        assert DagRef("ns", "b") not in index.graph
        assert edges(index) == {("a", "c"), ("a", "d")}


async def test_two_indexes_on_one_database_converge_by_seq(
    database_url: str, food_delivery_marquez: StandInServer
) -> None:
    _, make = counting(food_delivery_marquez)
    async with engine_on(database_url) as one, engine_on(database_url) as two:
        first = await ready_index(database_url, one)
        second = await ready_index(database_url, two)
        await Reconciler(first.sessions, make, first, IndexSettings()).full()
        async with second.sessions.begin() as session:  # the other process ingests an event
            await record_events(
                session, [event("example.audit", reads=("public.orders",), writes=("audit",))]
            )
        await first.catch_up()
        await second.catch_up()
        assert edges(first) == edges(second)
        assert ("example.etl_orders", "example.audit") in edges(first)
        assert first.seq == second.seq > 0


async def test_an_ingested_edge_changes_the_next_plan_without_marquez_requests(
    database_url: str, food_delivery_marquez: StandInServer
) -> None:
    calls, make = counting(food_delivery_marquez)
    request = PlanRequest("example.etl_orders", "2021-06-04")
    async with engine_on(database_url) as engine:
        index = await ready_index(database_url, engine)
        await Reconciler(index.sessions, make, index, IndexSettings()).full()
        before = await planner(index, make).plan(request)
        calls.clear()
        async with index.sessions.begin() as session:
            await record_events(session, [event("example.fraud", reads=("public.orders",))])
        after = await planner(index, make).plan(request)
    assert calls == []
    added = {s.dag.dag_id for s in after.steps} - {s.dag.dag_id for s in before.steps}
    assert added == {"example.fraud"}


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
async def test_events_only_add_datasets_and_tasks_join_their_dag(database_url: str) -> None:
    task = ParsedEvent(
        run_id="3f1c2b1e-0000-4000-8000-000000000002",
        event_type="START",
        event_time=AT,
        namespace=FD,
        job_name="etl.load",
        dag_namespace=FD,
        dag_id="etl",
        outputs=((FD, "t1"),),
    )
    reader = event("report", reads=("t1",))
    async with engine_on(database_url) as engine:
        index = await ready_index(database_url, engine)
        async with index.sessions.begin() as session:
            await record_events(session, [task, reader])
        async with index.sessions.begin() as session:  # a retry naming no datasets
            await record_events(session, [ParsedEvent(**{**task.__dict__, "outputs": ()})])
        await index.catch_up()
    assert edges(index) == {("etl", "report")}
    with pytest.raises(LookupError, match="task of DAG 'etl'"):
        index.resolve("etl.load")


def under(parent: tuple[str, str], events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events with a `parent` run facet (and no `root`, as older producers send)."""
    facet = {
        "_producer": PRODUCER,
        "_schemaURL": "https://openlineage.io/spec/facets/1-0-0/ParentRunFacet.json",
        "run": {"runId": parent[1]},
        "job": {"namespace": "af", "name": parent[0]},
    }
    return [{**e, "run": {**e["run"], "facets": {"parent": facet}}} for e in events]


async def test_a_job_under_a_task_joins_the_tasks_dag_in_the_index(
    database_url: str, marquez_standin: StandInServer
) -> None:
    dag, task = completed("af", "etl"), completed("af", "load")
    ingest(marquez_standin, dag)
    ingest(marquez_standin, under(("etl", dag[0]["run"]["runId"]), task))
    # a Spark application started by the task, writing a table read by a report DAG
    spark = completed("af", "app", writes=("warehouse.t",))
    ingest(marquez_standin, under(("etl.load", task[0]["run"]["runId"]), spark))
    ingest(marquez_standin, completed("af", "report", reads=("warehouse.t",)))
    _, make = counting(marquez_standin)
    async with engine_on(database_url) as engine:
        index = await ready_index(database_url, engine)
        await Reconciler(index.sessions, make, index, IndexSettings()).full()
        impact = await planner(index, make).impact("etl", "af")
    assert [d.name for d in impact.datasets] == ["warehouse.t"]
    assert [d.dag_id for d in impact.downstream] == ["report"]
    assert ("etl", "report") in edges(index)


async def test_new_jobs_with_and_without_owners_are_written_together(database_url: str) -> None:
    """A DAG fetched on demand: Marquez's own job (its ownership facet read) beside its tasks
    named by a search (owners unknown) are new rows of one statement."""
    dag = DagRef(FD, "example.owned")
    facts = [
        JobFacts(FD, "example.owned", dag, owners=("orders",)),
        JobFacts(FD, "example.owned.load", dag, outputs=frozenset({DatasetRef(FD, "owned")})),
    ]
    async with engine_on(database_url) as engine:
        index = await ready_index(database_url, engine)
        async with index.sessions.begin() as session:
            await apply_jobs(session, facts, source="marquez")
        await index.catch_up()
        assert index.lineage.owners_of(dag) == ("orders",)
        assert index.outputs([dag]) == [DatasetRef(FD, "owned")]
