"""Search, symlinks, job details and latency of the Marquez stand-in, as in Marquez 0.51.1
(tests/fixtures/marquez/FIDELITY.md rows 3, 12, 13, 16, 17, 18, 19 and 20).

Paths are under api/src/main/java/marquez/ at tag 0.51.1 unless they name a test.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import aiohttp
import pytest

from standins.http_server import start_app
from standins.marquez.events import to_name_based_uuid
from standins.marquez.server import MarquezState, StandInServer, create_app
from tests.standins.test_standin_marquez import RUN_A, RUN_B, Api, event, facet

RUN_C = "33333333-3333-4333-8333-333333333333"


@pytest.fixture
async def api(marquez_standin: StandInServer) -> AsyncIterator[Api]:
    async with aiohttp.ClientSession() as session:
        yield Api(marquez_standin.url, session)


@pytest.fixture
async def seeded(food_delivery_marquez: StandInServer) -> AsyncIterator[Api]:
    async with aiohttp.ClientSession() as session:
        yield Api(food_delivery_marquez.url, session)


async def names(api: Api, query: dict[str, str]) -> list[str]:
    return [r["name"] for r in (await api.ok("/api/v1/search", query))["results"]]


def ids(graph: dict[str, Any]) -> list[str]:
    return [node["id"] for node in graph["graph"]]


# -- rows 3 and 17: search ----------------------------------------------------------------------


async def test_search_has_no_order_under_its_limit(seeded: Api) -> None:
    """db/SearchDao.java#L60-L83: `ORDER BY :sort` binds the sort as a value, so PostgreSQL
    sorts by a constant and LIMIT cuts an unordered UNION; SearchDaoTest only checks
    `contains`. The stand-in answers a stable order that is not the names' order, whatever
    `sort` says, so the shortest (exact) name need not come first."""
    every = await names(seeded, {"q": "example.etl", "filter": "JOB", "limit": "100"})
    assert len(every) == 12
    assert every != sorted(every)
    assert await names(seeded, {"q": "example.etl", "filter": "JOB", "limit": "100"}) == every
    by_update = {"q": "example.etl", "filter": "JOB", "limit": "100", "sort": "UPDATE_AT"}
    assert await names(seeded, by_update) == every
    first = await names(seeded, {"q": "example.etl_orders", "filter": "JOB", "limit": "1"})
    assert first != ["example.etl_orders"]


async def test_search_q_is_an_ilike_pattern(api: Api) -> None:
    """db/SearchDao.java#L69,#L79: `name ILIKE '%' || :query || '%'`, nothing escaped by
    Marquez: `_` is any one character, `%` any run, a backslash (PostgreSQL's default LIKE
    escape) makes the next one literal, case is ignored."""
    for n, job in enumerate(["dag_a", "dagXa", "DAG_A.task", "dag.long.a", "dag%a"]):
        await api.ingest(event("START", n, job=job, run_id=f"{n:08d}-0000-4000-8000-000000000000"))
    assert sorted(await names(api, {"q": "dag_a"})) == ["DAG_A.task", "dag%a", "dagXa", "dag_a"]
    assert sorted(await names(api, {"q": "dag\\_a"})) == ["DAG_A.task", "dag_a"]
    assert sorted(await names(api, {"q": "dag%a"})) == [
        "DAG_A.task", "dag%a", "dag.long.a", "dagXa", "dag_a",
    ]  # fmt: skip
    assert await names(api, {"q": "dag\\%a"}) == ["dag%a"]


async def test_search_before_and_after_are_strict(api: Api) -> None:
    """db/SearchDao.java#L67-L68,#L77-L78: `updated_at < :before`, `updated_at > :after`, the
    dates read as midnight (api/SearchResource.java#L61-L62)."""
    await api.ingest(event("START", 0))  # job_a, updated 2024-01-01T00:00:00Z
    assert await names(api, {"q": "job", "after": "2024-01-01"}) == []
    assert await names(api, {"q": "job", "after": "2023-12-31"}) == ["job_a"]
    assert await names(api, {"q": "job", "before": "2024-01-01"}) == []
    assert await names(api, {"q": "job", "before": "2024-01-02"}) == ["job_a"]


# -- row 12: dataset symlinks -------------------------------------------------------------------


async def test_a_symlinked_name_is_the_same_dataset(api: Api) -> None:
    """db/OpenLineageDao.java#L873-L903: the symlinks facet adds its identifiers to
    `dataset_symlinks` with the dataset's uuid (`ON CONFLICT (name, namespace_uuid) DO
    NOTHING`); a later event naming the alias finds that row, so it reads the same dataset and
    lineage connects through it (db/LineageDao.java#L56-L99 joins on dataset uuids). Nodes use
    the primary name (#L108-L116 keeps `is_primary` rows); datasets_view
    (R__Datasets_view.sql) shows a row per name, so the alias is listed, found and searched."""
    symlinks = {"symlinks": facet(identifiers=[{"namespace": "hive", "name": "db.table",
                                                "type": "TABLE"}])}  # fmt: skip
    writer = event("COMPLETE", 0, job="writer", outputs=["s3://bucket/table"])
    writer["outputs"][0]["facets"] = symlinks
    await api.ingest(writer)
    await api.ingest(
        event("COMPLETE", 1, job="reader", run_id=RUN_B, inputs=[("hive", "db.table")])
    )
    graph = await api.ok("/api/v1/lineage", {"nodeId": "job:ns:reader", "depth": "1"})
    assert ids(graph) == ["dataset:ns:s3://bucket/table", "job:ns:reader", "job:ns:writer"]
    alias = await api.ok(f"/api/v1/namespaces/hive/datasets/{quote('db.table')}")
    assert (alias["id"], alias["physicalName"]) == (
        {"namespace": "hive", "name": "db.table"},
        "db.table",  # physical_name = EXCLUDED.physical_name: the reader's
    )
    listed = await api.ok("/api/v1/namespaces/hive/datasets")
    assert [d["name"] for d in listed["datasets"]] == ["db.table"]
    assert await names(api, {"q": "table", "filter": "DATASET"}) in (
        ["db.table", "s3://bucket/table"],
        ["s3://bucket/table", "db.table"],
    )
    from_alias = await api.ok("/api/v1/lineage", {"nodeId": "dataset:hive:db.table"})
    assert ids(from_alias) == ids(graph)


# -- row 13: latency ----------------------------------------------------------------------------


async def test_latency_delays_the_routes_asked_and_only_those() -> None:
    """Real Marquez is slow on big graphs and catalogs (issues #3058, #2987; FIDELITY.md row
    13). `create_app(latency=…)` plays that, per route; nothing is delayed by default."""
    with pytest.raises(ValueError, match="unknown latency routes"):
        create_app(latency={"lineage-ish": 1.0})
    state = MarquezState()
    url, runner = await start_app(create_app(state, {"lineage": 0.3}), "127.0.0.1", 0)
    try:
        async with aiohttp.ClientSession() as session:
            api = Api(url, session)
            await api.ingest(event("START", 0))
            started = time.monotonic()
            await api.ok("/api/v1/namespaces/ns/jobs")
            fast = time.monotonic() - started
            started = time.monotonic()
            await api.ok("/api/v1/lineage", {"nodeId": "job:ns:job_a"})
            assert time.monotonic() - started >= 0.3 > fast
            started = time.monotonic()  # two hops of the CTE's twenty: a tenth of the delay
            await api.ok("/api/v1/lineage", {"nodeId": "job:ns:job_a", "depth": "2"})
            assert 0.3 > time.monotonic() - started >= 0.03
    finally:
        await runner.cleanup()
    # the command line's `--latency ROUTE=SECONDS`: tests/cli/test_cli_commands.py


# -- row 16: job JSON details -------------------------------------------------------------------


async def test_simple_name_becomes_the_full_name_without_a_parent_facet(api: Api) -> None:
    """R__Jobs_view_and_rewrite_function.sql#L63-L69: on conflict `parent_job_uuid =
    COALESCE(jobs.parent_job_uuid, …)` keeps the parent, `simple_name = CASE WHEN
    EXCLUDED.parent_job_uuid IS NOT NULL THEN EXCLUDED.simple_name ELSE jobs.name`."""
    parent = {"parent": facet(run={"runId": RUN_B}, job={"namespace": "ns", "name": "dag"})}
    await api.ingest(event("START", 0, job="dag.task", run_facets=parent))
    path = f"/api/v1/namespaces/ns/jobs/{quote('dag.task')}"
    assert (await api.ok(path))["simpleName"] == "task"
    await api.ingest(event("COMPLETE", 1, job="dag.task"))
    job = await api.ok(path)
    assert (job["simpleName"], job["parentJobName"]) == ("dag.task", "dag")


async def test_descriptions_and_locations_are_the_last_events(api: Api) -> None:
    """R__Jobs_view_and_rewrite_function.sql#L71-L72 (`description = EXCLUDED.description`,
    `current_location = EXCLUDED.current_location`); a parent job re-created for a new parent
    run gets no description and the child's location (db/OpenLineageDao.java#L674-L704)."""
    documented = {"documentation": facet(description="the DAG"),
                  "sourceCodeLocation": facet(type="git", url="dag.py")}  # fmt: skip
    await api.ingest(event("START", 0, job="dag", run_id=RUN_B, job_facets=documented))
    dag = await api.ok("/api/v1/namespaces/ns/jobs/dag")
    assert (dag["description"], dag["location"]) == ("the DAG", "dag.py")
    parent = {"parent": facet(run={"runId": RUN_C}, job={"namespace": "ns", "name": "dag"})}
    task_facets = {"sourceCodeLocation": facet(type="git", url="task.py")}
    await api.ingest(event("START", 1, job="dag.task", run_facets=parent, job_facets=task_facets))
    dag = await api.ok("/api/v1/namespaces/ns/jobs/dag")
    assert (dag["description"], dag["location"]) == (None, "task.py")
    await api.ingest(event("COMPLETE", 2, job="dag", run_id=RUN_B))
    assert (await api.ok("/api/v1/namespaces/ns/jobs/dag"))["location"] is None


async def test_labels_come_from_the_job_type_facet(api: Api) -> None:
    """db/mappers/JobMapper.java#L77,#L100-L114: `[jobType.jobType, jobType.integration]`."""
    job_type = facet(processingType="BATCH", integration="AIRFLOW", jobType="TASK")
    await api.ingest(event("START", 0, job_facets={"jobType": job_type}), event("COMPLETE", 1))
    assert (await api.ok("/api/v1/namespaces/ns/jobs/job_a"))["labels"] == ["TASK", "AIRFLOW"]


# -- row 18: a dataset node whose job no longer writes it --------------------------------------


async def test_a_dataset_its_start_job_no_longer_touches_is_an_orphan(api: Api) -> None:
    """service/LineageService.java#L110-L121: the start job is the newest producer over every
    version (db/LineageDao.java#L129-L138); when the graph grown from its *current* version
    lacks the dataset, "discarding": the dataset alone."""
    await api.ingest(event("COMPLETE", 0, job="writer", outputs=["old"]))
    await api.ingest(event("COMPLETE", 1, job="writer", run_id=RUN_B, outputs=["new"]))
    graph = await api.ok("/api/v1/lineage", {"nodeId": "dataset:ns:old"})
    assert ids(graph) == ["dataset:ns:old"]
    assert graph["graph"][0]["inEdges"] == graph["graph"][0]["outEdges"] == []


# -- row 19: Spark's run facets -----------------------------------------------------------------


async def test_spark_unknown_is_dropped_and_the_logical_plan_kept_from_the_first_event(
    api: Api,
) -> None:
    """db/RunFacetsDao.java#L100-L117: `spark_unknown` is never stored; `spark.logicalPlan`
    only when the run has none yet."""
    await api.ingest(
        event("START", 0, run_facets={"spark.logicalPlan": facet(plan=1), "spark_unknown": {}}),
        event("COMPLETE", 1, run_facets={"spark.logicalPlan": facet(plan=2), "other": facet()}),
    )
    facets = (await api.ok(f"/api/v1/jobs/runs/{RUN_A}"))["facets"]
    assert set(facets) == {"spark.logicalPlan", "other"}
    assert facets["spark.logicalPlan"]["plan"] == 1


# -- row 20: parent run ids that are not UUIDs --------------------------------------------------


async def test_a_non_uuid_parent_run_id_is_named_from_namespace_dag_and_id(api: Api) -> None:
    """common/Utils.java#L177-L231: `toNameBasedUuid(namespace, dagName, runId)` — MD5 over
    the RFC 4122 URL namespace's bytes and the dot-joined names (version 3)."""
    run_id = "scheduled__2022-04-25T00:20:00+00:00"
    parent = {"parent": facet(run={"runId": run_id}, job={"namespace": "ns", "name": "dag"})}
    await api.ingest(event("START", 0, job="dag.task", run_facets=parent))
    # UUID.nameUUIDFromBytes(NAMESPACE_URL_UUID's 16 bytes + "ns.dag.<runId>" in UTF-8)
    url_namespace = uuid.UUID("6ba7b811-9dad-11d1-80b4-00c04fd430c8").bytes
    digest = hashlib.md5(url_namespace + f"ns.dag.{run_id}".encode()).digest()
    expected = uuid.UUID(bytes=digest, version=3)
    assert to_name_based_uuid("ns", "dag", run_id) == expected
    runs = (await api.ok("/api/v1/namespaces/ns/jobs/dag/runs"))["runs"]
    assert [r["id"] for r in runs] == [str(expected)]
    assert datetime.fromisoformat(runs[0]["createdAt"]) == datetime(2024, 1, 1, tzinfo=UTC)
