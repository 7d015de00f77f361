"""Planner against the Marquez stand-in over HTTP: lineage beyond Marquez's depth horizon,
nodes Marquez cannot find, and tasks whose running retry hides their datasets."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import aiohttp

from bot.clients.marquez import MarquezClient
from bot.config import BotConfig
from bot.core.model import DagRef
from bot.lineage.service.catalog import Catalog
from bot.lineage.service.planning import Planner, PlanRequest
from standins.marquez.server import StandInServer, running_standin

PRODUCER = "https://github.com/OpenLineage/OpenLineage/tree/1.9.1/integration/airflow"


def event(
    kind: str,
    namespace: str,
    job: str,
    *,
    reads: tuple[str, ...] = (),
    writes: tuple[str, ...] = (),
    parent: str | None = None,
    at: str = "2021-06-10T01:00:00Z",
    run: str | None = None,
) -> dict[str, Any]:
    facets: dict[str, Any] = {}
    if parent:
        facets["parent"] = {
            "_producer": PRODUCER,
            "_schemaURL": "https://openlineage.io/spec/facets/1-0-0/ParentRunFacet.json",
            "run": {"runId": str(uuid.uuid5(uuid.NAMESPACE_URL, parent))},
            "job": {"namespace": namespace, "name": parent},
        }
    return {
        "eventType": kind,
        "eventTime": at,
        "producer": PRODUCER,
        "run": {
            "runId": run or str(uuid.uuid5(uuid.NAMESPACE_URL, f"{job}@{at}")),
            "facets": facets,
        },
        "job": {"namespace": namespace, "name": job},
        "inputs": [{"namespace": namespace, "name": d} for d in reads],
        "outputs": [{"namespace": namespace, "name": d} for d in writes],
    }


def completed(namespace: str, job: str, **kw: Any) -> list[dict[str, Any]]:
    run = str(uuid.uuid4())
    return [
        event("START", namespace, job, run=run, at="2021-06-10T01:00:00Z", **kw),
        event("COMPLETE", namespace, job, run=run, at="2021-06-10T01:05:00Z", **kw),
    ]


def ingest(server: StandInServer, events: list[dict[str, Any]]) -> None:
    for item in events:
        server.state.ingest(item)


async def test_downstream_beyond_the_depth_horizon_is_found(marquez_standin: StandInServer) -> None:
    for i in range(50):
        reads = (f"d{i - 1}",) if i else ()
        ingest(marquez_standin, completed("chain", f"job{i:02d}", reads=reads, writes=(f"d{i}",)))
    async with MarquezClient(marquez_standin.url) as client:
        impact = await Planner(client, BotConfig()).impact("job00")
    assert [d.dag_id for d in impact.downstream] == [f"job{i:02d}" for i in range(1, 50)]


async def test_a_node_marquez_cannot_find_does_not_hang(marquez_standin: StandInServer) -> None:
    # Marquez splits `jdbc:oracle://h:1521` wrongly in node ids (NOTES 1.6): lineage 404s.
    ingest(marquez_standin, completed("jdbc:oracle://h:1521", "ora_dag", writes=("t",)))
    async with MarquezClient(marquez_standin.url) as client:
        planner = Planner(client, BotConfig())
        plan = await asyncio.wait_for(planner.plan(PlanRequest("ora_dag", "2021-06-04")), 30)
    assert [s.dag for s in plan.steps] == [DagRef("jdbc:oracle://h:1521", "ora_dag")]


async def test_a_task_retrying_without_datasets_keeps_its_downstream(
    marquez_standin: StandInServer,
) -> None:
    ingest(marquez_standin, completed("ns", "d", parent=None))
    ingest(marquez_standin, completed("ns", "d.a", writes=("xa",), parent="d"))
    ingest(marquez_standin, completed("ns", "d.b", writes=("xb",), parent="d"))
    ingest(marquez_standin, completed("ns", "c", reads=("xb",)))
    retry = event("START", "ns", "d.b", parent="d", at="2021-06-11T01:00:00Z")
    ingest(marquez_standin, [retry])
    async with MarquezClient(marquez_standin.url) as client:
        impact = await Planner(client, BotConfig()).impact("d")
    assert [d.dag_id for d in impact.downstream] == ["c"]


def corpus(name: str) -> list[dict[str, Any]]:
    path = Path(__file__).resolve().parents[1] / "fixtures/openlineage/constructed" / name
    events: list[dict[str, Any]] = json.loads(path.with_suffix(".json").read_text())
    return events


async def test_spark_and_dbt_jobs_under_airflow_tasks_belong_to_the_tasks_dags() -> None:
    # Marquez files each job under its direct parent (and creates the parent jobs it names);
    # the runs' parent/root facets say which Airflow DAG they all belong to.
    events = corpus("spark_under_airflow") + corpus("dbt_chain")
    async with running_standin(seed=None) as marquez, aiohttp.ClientSession() as http:
        for body in events:
            async with http.post(f"{marquez.url}/api/v1/lineage", json=body) as reply:
                assert reply.status == 201
        async with MarquezClient(marquez.url) as client:
            planner = Planner(client, BotConfig())
            catalog = await planner.catalog()
            assert catalog.dags == [
                DagRef("default", "food_delivery_orders_dbt"),
                DagRef("default", "food_delivery_orders_spark"),
            ]
            impact = await planner.impact("food_delivery_orders_spark")
            assert str(impact.datasets[0]).endswith("warehouse/orders_daily")
            dbt = await planner.impact("food_delivery_orders_dbt")
            assert [d.name for d in dbt.datasets] == ["analytics.marts.orders_daily"]


def test_same_named_dags_in_two_namespaces_keep_their_own_tasks() -> None:
    def job(namespace: str, name: str, parent: str | None = None, out: str = "") -> Any:
        outputs = [{"namespace": namespace, "name": out}] if out else []
        return {"namespace": namespace, "name": name, "parentJobName": parent,
                "inputs": [], "outputs": outputs, "latestRun": None}  # fmt: skip

    catalog = Catalog(
        [
            job("prod", "etl"),  # created by Marquez from the tasks' parent facets
            job("prod", "etl.load", "etl", "prod_t"),
            job("staging", "etl"),
            job("staging", "etl.load", "etl", "stg_t"),
        ]
    )
    assert catalog.jobs_of(DagRef("prod", "etl")) == [("prod", "etl.load"), ("prod", "etl")]
    assert catalog.jobs_of(DagRef("staging", "etl")) == [
        ("staging", "etl.load"),
        ("staging", "etl"),
    ]
