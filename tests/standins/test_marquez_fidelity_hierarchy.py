"""Marquez 0.51.1's own behavioural tests, ported to the stand-in over HTTP
(tests/fixtures/marquez/FIDELITY.md section 3, "Behavioural oracles").

Each test names the Marquez test it ports, under api/src/test/java/marquez/ at tag 0.51.1:
OpenLineageIntegrationTest.java's Airflow job hierarchy (#L212-L930, events built like its
`createAirflowRunEvent`/`createRunEvent`, #L1244-L1313), LineageDaoTest.java and
LineageServiceTest.java (which call the DAOs directly; here the same events go through
`POST /api/v1/lineage` and the assertions read `GET /api/v1/lineage`).

Not ported: LineageDaoTest#testGetLineageForSymlinkedJob (#L172) symlinks a job with
`JobDao.upsertJob(…, symlinkTargetUuid, …)`; no API or event does that, so the stand-in has no job
symlinks.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

import aiohttp
import pytest

from standins.marquez.events import to_name_based_uuid
from standins.marquez.server import StandInServer

NAMESPACE = "namespace"  # LineageTestUtils.NAMESPACE; OpenLineageIntegrationTest's NAMESPACE_NAME
PRODUCER = "http://openlineage.test.com/"
RUN_EVENT = "https://openlineage.io/spec/1-0-1/OpenLineage.json#/definitions/RunEvent"
START_OF_HOUR = datetime(2024, 3, 1, 10, tzinfo=UTC)


def facet(**fields: Any) -> dict[str, Any]:
    """`ol.newRunFacet()` and friends: `_producer` and `_schemaURL` set."""
    return {"_producer": PRODUCER, "_schemaURL": "http://test.schema/", **fields}


class Marquez:
    """HTTP to the stand-in, plus `createLineageRow`/`createAirflowRunEvent` look-alikes."""

    def __init__(self, base: str, session: aiohttp.ClientSession) -> None:
        self.base, self.session = base, session
        self._clock: Iterator[int] = itertools.count()

    def now(self) -> str:
        """`Instant.now()`: each event a second after the one before."""
        return (START_OF_HOUR + timedelta(seconds=next(self._clock))).isoformat()

    async def send(self, *bodies: dict[str, Any]) -> None:
        for body in bodies:
            async with self.session.post(f"{self.base}/api/v1/lineage", json=body) as resp:
                assert resp.status == 201, await resp.text()

    async def get(self, path: str, **params: str) -> Any:
        async with self.session.get(f"{self.base}{path}", params=params) as resp:
            assert resp.status == 200, await resp.text()
            return await resp.json()

    async def job(self, namespace: str, name: str) -> Any:
        return await self.get(f"/api/v1/namespaces/{namespace}/jobs/{quote(name, safe='')}")

    async def runs(self, namespace: str, name: str) -> list[Any]:
        path = f"/api/v1/namespaces/{namespace}/jobs/{quote(name, safe='')}/runs"
        runs: list[Any] = (await self.get(path))["runs"]
        return runs

    async def lineage(self, node_id: str, depth: int) -> list[dict[str, Any]]:
        graph: list[dict[str, Any]] = (
            await self.get("/api/v1/lineage", nodeId=node_id, depth=str(depth))
        )["graph"]
        return graph

    def airflow_event(
        self,
        task: str,
        *,
        parent_run_id: str | None = None,
        dag: str | None = None,
        namespace: str = NAMESPACE,
        hour: int = 0,
        airflow_facet: bool = True,
    ) -> dict[str, Any]:
        """OpenLineageIntegrationTest#createAirflowRunEvent / #createRunEvent (#L1244-L1313)."""
        start = START_OF_HOUR + timedelta(hours=hour)
        run_facets: dict[str, Any] = {
            "nominalTime": facet(
                nominalStartTime=start.isoformat(),
                nominalEndTime=(start + timedelta(hours=1)).isoformat(),
            )
        }
        if parent_run_id is not None:
            run_facets["parent"] = facet(
                run={"runId": parent_run_id}, job={"namespace": namespace, "name": dag}
            )
        if airflow_facet:
            run_facets["airflow_version"] = facet(
                airflowVersion="2.1.0", openlineageAirflowVersion="0.10"
            )
        return {
            "eventType": "COMPLETE",
            "eventTime": self.now(),
            "run": {"runId": str(uuid.uuid4()), "facets": run_facets},
            "job": {
                "namespace": namespace,
                "name": task,
                "facets": {
                    "documentation": facet(description="the job docs"),
                    "sql": facet(query="SELECT * FROM the_table"),
                },
            },
            "inputs": [],
            "outputs": [],
            "producer": PRODUCER,
            "schemaURL": RUN_EVENT,
        }

    async def lineage_row(
        self,
        job: str,
        status: str,
        inputs: Sequence[str] = (),
        outputs: Sequence[str] = (),
        *,
        job_facets: dict[str, Any] | None = None,
        run_id: str | None = None,
    ) -> None:
        """LineageTestUtils#createLineageRow (#L150-L200): one event, a new run unless given."""

        def datasets(names: Sequence[str]) -> list[dict[str, Any]]:
            return [{"namespace": NAMESPACE, "name": name, "facets": _dataset_facets()}
                    for name in names]  # fmt: skip

        await self.send(
            {
                "eventType": status,
                "eventTime": self.now(),
                "run": {"runId": run_id or str(uuid.uuid4()), "facets": {}},
                "job": {"namespace": NAMESPACE, "name": job, "facets": job_facets or {}},
                "inputs": datasets(inputs),
                "outputs": datasets(outputs),
                "producer": PRODUCER,
                "schemaURL": RUN_EVENT,
            }
        )

    async def downstream(self, levels: list[tuple[str, int, str | None]], dataset: str) -> None:
        """LineageTestUtils#writeDownstreamLineage: per level, N consumers of `dataset` named
        `<name><i><-<dataset>`, each writing `<output><-<job>` read by the next level."""
        name, count, output = levels[0]
        for i in range(count):
            job = f"{name}{i}<-{dataset}"
            written = f"{output}<-{job}" if output else None
            await self.lineage_row(job, "COMPLETE", [dataset], [written] if written else [])
            if written and levels[1:]:
                await self.downstream(levels[1:], written)


def _dataset_facets() -> dict[str, Any]:
    """LineageTestUtils#newDatasetFacet: documentation, schema, dataSource."""
    return {
        "documentation": facet(description="the dataset documentation"),
        "schema": facet(fields=[{"name": "firstname", "type": "string"}]),
        "dataSource": facet(name="the source", uri="http://thesource.com"),
    }


@pytest.fixture
async def marquez(marquez_standin: StandInServer) -> AsyncIterator[Marquez]:
    async with aiohttp.ClientSession() as session:
        yield Marquez(marquez_standin.url, session)


def node_ids(graph: list[dict[str, Any]]) -> list[str]:
    return [node["id"] for node in graph]


async def assert_dag_and_task(
    marquez: Marquez, dag: str, task: str, namespace: str = NAMESPACE
) -> None:
    """The assertions every hierarchy test makes: the task's id and parent, the DAG top-level."""
    job = await marquez.job(namespace, task)
    assert (job["id"], job["parentJobName"]) == ({"namespace": namespace, "name": task}, dag)
    parent = await marquez.job(namespace, dag)
    assert (parent["id"], parent["parentJobName"]) == ({"namespace": namespace, "name": dag}, None)


# -- OpenLineageIntegrationTest: the Airflow job hierarchy -------------------------------------


async def test_open_lineage_job_hierarchy_airflow_integration(marquez: Marquez) -> None:
    """OpenLineageIntegrationTest#testOpenLineageJobHierarchyAirflowIntegration (#L212-L262)."""
    dag_run = str(uuid.uuid4())
    await marquez.send(
        marquez.airflow_event("the_dag.task1", parent_run_id=dag_run, dag="the_dag"),
        marquez.airflow_event("the_dag.task2", parent_run_id=dag_run, dag="the_dag"),
    )
    await assert_dag_and_task(marquez, "the_dag", "the_dag.task1")
    assert len(await marquez.runs(NAMESPACE, "the_dag")) == 1


async def test_open_lineage_job_hierarchy_airflow_integration_with_parent_run_facet(
    marquez: Marquez,
) -> None:
    """OpenLineageIntegrationTest#testOpenLineageJobHierarchyAirflowIntegrationWithParentRunFacet
    (#L264-L321): the old integration's `parentRun` is LineageEvent's `@JsonAlias`."""
    dag_run = str(uuid.uuid4())
    events = [
        marquez.airflow_event(f"the_dag.{task}", parent_run_id=dag_run, dag="the_dag")
        for task in ("task1", "task2")
    ]
    for body in events:
        facets = body["run"]["facets"]
        facets["parentRun"] = facets.pop("parent")
    await marquez.send(*events)
    await assert_dag_and_task(marquez, "the_dag", "the_dag.task1")
    assert len(await marquez.runs(NAMESPACE, "the_dag")) == 1


async def test_open_lineage_job_hierarchy_with_parent_and_parent_run_facet(
    marquez: Marquez,
) -> None:
    """OpenLineageIntegrationTest#testOpenLineageJobHierarchyAirflowIntegrationWithParentAndParen
    tRunFacet (#L323-L395): `parent` names another DAG, `parentRun` (later in the body) the
    right one; Jackson sets the property twice and the later value stays."""
    dag_run = str(uuid.uuid4())
    events = []
    for task in ("task1", "task2"):
        body = marquez.airflow_event(f"the_dag.{task}", parent_run_id=dag_run, dag="the_dag")
        facets = body["run"]["facets"]
        right = facets["parent"]
        facets["parent"] = facet(
            run=right["run"], job={"name": "a_new_dag", "namespace": "incorrect_namespace"}
        )
        facets["parentRun"] = right
        events.append(body)
    await marquez.send(*events)
    await assert_dag_and_task(marquez, "the_dag", "the_dag.task1")
    assert len(await marquez.runs(NAMESPACE, "the_dag")) == 1


async def test_open_lineage_job_hierarchy_with_parent_on_start_event_only(
    marquez: Marquez,
) -> None:
    """OpenLineageIntegrationTest#testOpenLineageJobHierarchyAirflowIntegrationWithParentOnStart
    EventOnly (#L397-L455): the COMPLETE without the facet keeps the task under its DAG, and the
    DAG run (made from the START) has started."""
    start = marquez.airflow_event("the_dag.task1", parent_run_id=str(uuid.uuid4()), dag="the_dag")
    start["eventType"] = "START"
    complete = {**start, "eventType": "COMPLETE", "eventTime": marquez.now()}
    complete["run"] = {**start["run"], "facets": dict(start["run"]["facets"])}
    del complete["run"]["facets"]["parent"]
    await marquez.send(start, complete)
    await assert_dag_and_task(marquez, "the_dag", "the_dag.task1")
    runs = await marquez.runs(NAMESPACE, "the_dag")
    assert len(runs) == 1
    assert runs[0]["startedAt"] is not None


async def test_open_lineage_job_hierarchy_airflow_missing_parent_for_existing_job(
    marquez: Marquez,
) -> None:
    """OpenLineageIntegrationTest#testOpenLineageJobHierarchyAirflowMissingParentForExistingJob
    (#L457-L520): a later run without the facet lands in the same (child) job."""
    first = marquez.airflow_event("the_dag.task1", parent_run_id=str(uuid.uuid4()), dag="the_dag")
    second = marquez.airflow_event("the_dag.task1", hour=1)
    await marquez.send(first, second)
    await assert_dag_and_task(marquez, "the_dag", "the_dag.task1")
    runs = await marquez.runs(NAMESPACE, "the_dag.task1")
    assert {r["id"] for r in runs} == {first["run"]["runId"], second["run"]["runId"]}


async def test_open_lineage_job_hierarchy_airflow_add_parent_for_existing_job(
    marquez: Marquez,
) -> None:
    """OpenLineageIntegrationTest#testOpenLineageJobHierarchyAirflowAddParentForExistingJob
    (#L522-L580): a top-level `the_dag.task1` gains its parent and simple name."""
    first = marquez.airflow_event("the_dag.task1")
    second = marquez.airflow_event(
        "the_dag.task1", parent_run_id=str(uuid.uuid4()), dag="the_dag", hour=1
    )
    await marquez.send(first, second)
    await assert_dag_and_task(marquez, "the_dag", "the_dag.task1")
    assert (await marquez.job(NAMESPACE, "the_dag.task1"))["simpleName"] == "task1"
    runs = await marquez.runs(NAMESPACE, "the_dag.task1")
    assert {r["id"] for r in runs} == {first["run"]["runId"], second["run"]["runId"]}


async def test_open_lineage_job_hierarchy_airflow_handles_parent_for_events_out_of_order(
    marquez: Marquez,
) -> None:
    """OpenLineageIntegrationTest#testOpenLineageJobHierarchyAirflowHandlesParentForEventsOutOf
    Order (#L582-L643): the COMPLETE without the facet arrives first, then the START with it."""
    start = marquez.airflow_event("the_dag.task1", parent_run_id=str(uuid.uuid4()), dag="the_dag")
    complete = {**start, "run": {**start["run"], "facets": dict(start["run"]["facets"])}}
    del complete["run"]["facets"]["parent"]
    start = {**start, "eventType": "START"}
    await marquez.send(complete, start)
    await assert_dag_and_task(marquez, "the_dag", "the_dag.task1")
    runs = await marquez.runs(NAMESPACE, "the_dag.task1")
    assert [r["id"] for r in runs] == [complete["run"]["runId"]]


async def test_open_lineage_job_hierarchy_airflow_integration_with_dag_name_with_dot(
    marquez: Marquez,
) -> None:
    """OpenLineageIntegrationTest#testOpenLineageJobHierarchyAirflowIntegrationWithDagNameWithDot
    (#L645-L695)."""
    dag_run = str(uuid.uuid4())
    await marquez.send(
        marquez.airflow_event("the.dag.task1", parent_run_id=dag_run, dag="the.dag"),
        marquez.airflow_event("the.dag.task2", parent_run_id=dag_run, dag="the.dag"),
    )
    await assert_dag_and_task(marquez, "the.dag", "the.dag.task1")
    assert len(await marquez.runs(NAMESPACE, "the.dag")) == 1


async def test_open_lineage_job_hierarchy_airflow_integration_with_task_group(
    marquez: Marquez,
) -> None:
    """OpenLineageIntegrationTest#testOpenLineageJobHierarchyAirflowIntegrationWithTaskGroup
    (#L697-L747)."""
    dag, dag_run = "dag_with_task_group", str(uuid.uuid4())
    await marquez.send(
        marquez.airflow_event(f"{dag}.task_group.task1", parent_run_id=dag_run, dag=dag),
        marquez.airflow_event(f"{dag}.task_group.task2", parent_run_id=dag_run, dag=dag),
    )
    await assert_dag_and_task(marquez, dag, f"{dag}.task_group.task1")
    assert (await marquez.job(NAMESPACE, f"{dag}.task_group.task1"))["simpleName"] == (
        "task_group.task1"
    )
    assert len(await marquez.runs(NAMESPACE, dag)) == 1


async def test_open_lineage_job_hierarchy_old_airflow_integration(marquez: Marquez) -> None:
    """OpenLineageIntegrationTest#testOpenLineageJobHierarchyOldAirflowIntegration (#L749-L812):
    the parent facet names the task itself and an Airflow run id; Marquez takes the DAG as the
    name up to the last dot and `Utils.toNameBasedUuid(namespace, dag, runId)` as its run."""
    run_id = "scheduled__2022-04-25T00:20:00+00:00"
    await marquez.send(
        *(
            marquez.airflow_event(f"the_dag.{task}", parent_run_id=run_id, dag=f"the_dag.{task}")
            for task in ("task1", "task2")
        )
    )
    await assert_dag_and_task(marquez, "the_dag", "the_dag.task1")
    assert (await marquez.job(NAMESPACE, "the_dag.task1"))["simpleName"] == "task1"
    runs = await marquez.runs(NAMESPACE, "the_dag")
    assert [r["id"] for r in runs] == [str(to_name_based_uuid(NAMESPACE, "the_dag", run_id))]
    assert len(await marquez.runs(NAMESPACE, "the_dag.task1")) == 1


async def test_open_lineage_job_hierarchy_airflow_integration_conflicting_run_uuid(
    marquez: Marquez,
) -> None:
    """OpenLineageIntegrationTest#testOpenLineageJobHierarchyAirflowIntegrationConflictingRunUuid
    (#L814-L866): one DAG run id in two namespaces makes two DAG jobs and runs."""
    dag, dag_run = "reused_dag_name", str(uuid.uuid4())
    await marquez.send(
        marquez.airflow_event(f"{dag}.task1", parent_run_id=dag_run, dag=dag),
        marquez.airflow_event(
            f"{dag}.task1", parent_run_id=dag_run, dag=dag, namespace="another_namespace"
        ),
    )
    job = await marquez.job(NAMESPACE, f"{dag}.task1")
    assert job["parentJobName"] == dag
    parent = await marquez.job("another_namespace", dag)
    assert (parent["id"], parent["parentJobName"]) == (
        {"namespace": "another_namespace", "name": dag},
        None,
    )
    assert len(await marquez.runs("another_namespace", dag)) == 1


async def test_open_lineage_job_hierarchy_spark_and_airflow(marquez: Marquez) -> None:
    """OpenLineageIntegrationTest#testOpenLineageJobHierarchySparkAndAirflow (#L868-L928): the
    Spark job's parent is the task's run; it is named under the task."""
    task = marquez.airflow_event(
        "the_dag.startSparkJob", parent_run_id=str(uuid.uuid4()), dag="the_dag"
    )
    spark = marquez.airflow_event(
        "the_dag.startSparkJob.theSparkJob",
        parent_run_id=task["run"]["runId"],
        dag="the_dag.startSparkJob",
        airflow_facet=False,
    )
    await marquez.send(task, spark)
    airflow_task = await marquez.job(NAMESPACE, "the_dag.startSparkJob")
    assert (airflow_task["simpleName"], airflow_task["parentJobName"]) == (
        "startSparkJob",
        "the_dag",
    )
    spark_job = await marquez.job(NAMESPACE, "the_dag.startSparkJob.theSparkJob")
    assert (spark_job["simpleName"], spark_job["parentJobName"]) == (
        "theSparkJob",
        "the_dag.startSparkJob",
    )
    assert (await marquez.job(NAMESPACE, "the_dag"))["parentJobName"] is None
    assert len(await marquez.runs(NAMESPACE, "the_dag")) == 1


# -- LineageDaoTest ------------------------------------------------------------------------------


async def test_get_lineage_with_new_job_in_running_state(marquez: Marquez) -> None:
    """LineageDaoTest#testGetLineageWithNewJobInRunningState (#L329-L354): no version yet, so no
    datasets in its lineage."""
    await marquez.lineage_row("writeJob", "RUNNING", outputs=["commonDataset"])
    graph = await marquez.lineage(f"job:{NAMESPACE}:writeJob", 2)
    assert node_ids(graph) == [f"job:{NAMESPACE}:writeJob"]
    assert (graph[0]["data"]["inputs"], graph[0]["data"]["outputs"]) == ([], [])


async def test_get_lineage_with_failed_consumer(marquez: Marquez) -> None:
    """LineageDaoTest#testGetLineageWithFailedConsumer (#L393-L420): "FAILED" is not an
    OpenLineage eventType, so the consumer stays RUNNING, versionless, outside the lineage."""
    await marquez.lineage_row("writeJob", "COMPLETE", outputs=["commonDataset"])
    await marquez.lineage_row("failedConsumer", "FAILED", inputs=["commonDataset"])
    graph = await marquez.lineage(f"job:{NAMESPACE}:writeJob", 2)
    assert [n for n in node_ids(graph) if n.startswith("job:")] == [f"job:{NAMESPACE}:writeJob"]


async def test_get_lineage_changed_job_version(marquez: Marquez) -> None:
    """LineageDaoTest#testGetLineageChangedJobVersion (#L542-L567): a second version without
    datasets still returns the job, with no outputs."""
    await marquez.lineage_row("writeJob", "COMPLETE", outputs=["commonDataset"])
    await marquez.lineage_row("writeJob", "COMPLETE")
    graph = await marquez.lineage(f"job:{NAMESPACE}:writeJob", 2)
    assert node_ids(graph) == [f"job:{NAMESPACE}:writeJob"]
    assert graph[0]["data"]["outputs"] == []


async def test_get_job_from_input_or_output_prefers_recent_output_job(marquez: Marquez) -> None:
    """LineageDaoTest#testGetJobFromInputOrOutputPrefersRecentOutputJob (#L593-L635): the
    dataset node's lineage starts from the newest writer (seen with depth 0: that job alone)."""
    for i in range(5):
        await marquez.lineage_row(f"consumerJob{i}", "COMPLETE", inputs=["commonDataset"])
    await marquez.lineage_row("olderWriteJob", "COMPLETE", outputs=["commonDataset"])
    await marquez.lineage_row("writeJob", "COMPLETE", outputs=["commonDataset"])
    await marquez.lineage_row("consumerJob", "COMPLETE", inputs=["commonDataset"])
    graph = await marquez.lineage(f"dataset:{NAMESPACE}:commonDataset", 0)
    assert node_ids(graph) == [f"dataset:{NAMESPACE}:commonDataset", f"job:{NAMESPACE}:writeJob"]


# -- LineageServiceTest ------------------------------------------------------------------------


async def test_lineage_with_deleted_dataset(marquez: Marquez) -> None:
    """LineageServiceTest#testLineageWithDeletedDataset (#L230-L339), deleting through
    `DELETE /namespaces/{ns}/datasets/{name}` and `…/jobs/{name}` (DatasetResource.delete,
    JobResource.delete: the DAOs' `is_hidden = true`). The graph still grows through the hidden
    dataset; hidden rows are not nodes."""
    await marquez.lineage_row("writeJob", "COMPLETE", outputs=["commonDataset"])
    await marquez.downstream(
        [("readJob", 20, "outputData"), ("downstreamJob", 1, "outputData2"),
         ("finalConsumer", 1, None)],
        "commonDataset",
    )  # fmt: skip
    second_run = str(uuid.uuid4())
    await marquez.lineage_row("writeJob", "COMPLETE", outputs=["commonDataset"], run_id=second_run)
    await marquez.downstream(
        [("newReadJob", 5, "outputData3"), ("newDownstreamJob", 1, None)], "commonDataset"
    )
    async with marquez.session.delete(
        f"{marquez.base}/api/v1/namespaces/{NAMESPACE}/datasets/commonDataset"
    ) as resp:
        assert resp.status == 200
    graph = await marquez.lineage(f"job:{NAMESPACE}:writeJob", 2)
    kinds = [node["type"] for node in graph]
    assert (len(graph), kinds.count("JOB"), kinds.count("DATASET")) == (96, 51, 45)
    assert not [n for n in node_ids(graph) if "finalConsumer" in n]
    write_job = next(n for n in graph if n["id"] == f"job:{NAMESPACE}:writeJob")
    assert write_job["data"]["latestRun"]["id"] == second_run
    assert write_job["data"]["latestRun"]["inputDatasetVersions"] == []
    assert f"dataset:{NAMESPACE}:commonDataset" not in node_ids(graph)

    hidden = "downstreamJob0<-outputData<-readJob0<-commonDataset"
    async with marquez.session.delete(
        f"{marquez.base}/api/v1/namespaces/{NAMESPACE}/jobs/{quote(hidden, safe='')}"
    ) as resp:
        assert resp.status == 200
    graph = await marquez.lineage(f"job:{NAMESPACE}:writeJob", 2)
    kinds = [node["type"] for node in graph]
    assert (len(graph), kinds.count("JOB"), kinds.count("DATASET")) == (94, 50, 44)
    assert f"job:{NAMESPACE}:{hidden}" not in node_ids(graph)


async def test_lineage_with_with_cycle(marquez: Marquez) -> None:
    """LineageServiceTest#testLineageWithWithCycle (#L355-L422)."""
    await marquez.lineage_row("writeJob", "COMPLETE", ["commonDataset"], ["intermediateDataset"])
    await marquez.lineage_row("intermediateJob", "COMPLETE", ["intermediateDataset"],
                              ["finalDataset"])  # fmt: skip
    await marquez.lineage_row("cycleJob", "COMPLETE", ["finalDataset"], ["commonDataset"])
    graph = await marquez.lineage(f"job:{NAMESPACE}:intermediateJob", 5)
    assert len(graph) == 6
    common = next(n for n in graph if n["id"] == f"dataset:{NAMESPACE}:commonDataset")
    assert [e["origin"] for e in common["inEdges"]] == [f"job:{NAMESPACE}:cycleJob"]
    assert [e["destination"] for e in common["outEdges"]] == [f"job:{NAMESPACE}:writeJob"]


def _streaming() -> dict[str, Any]:
    # The Java test builds JobTypeJobFacet with processingType alone, past Bean Validation;
    # over HTTP the facet needs all three fields (LineageEvent.java#L345-L349).
    return {"jobType": facet(processingType="STREAMING", integration="FLINK", jobType="JOB")}


async def test_get_lineage_for_running_streaming_job(marquez: Marquez) -> None:
    """LineageServiceTest#testGetLineageForRunningStreamingJob (#L493-L542): a streaming job
    versions as it runs (OpenLineageDao.updateMarquezOnStreamingJob)."""
    await marquez.lineage_row("someInputBatchJob", "COMPLETE", outputs=["input-dataset"])
    await marquez.lineage_row("streamingjob", "RUNNING", ["input-dataset"], ["output-dataset"],
                              job_facets=_streaming())  # fmt: skip
    await marquez.lineage_row("someOutputBatchJob", "COMPLETE", inputs=["output-dataset"])
    from_input = await marquez.lineage(f"dataset:{NAMESPACE}:input-dataset", 5)
    from_output = await marquez.lineage(f"dataset:{NAMESPACE}:output-dataset", 5)
    assert len(from_input) == 5
    assert from_input == from_output


async def test_get_lineage_for_complete_streaming_job(marquez: Marquez) -> None:
    """LineageServiceTest#testGetLineageForCompleteStreamingJob (#L544-L576): a COMPLETE without
    datasets leaves a streaming job's datasets current."""
    await marquez.lineage_row("streamingjob", "RUNNING", ["input-dataset"], ["output-dataset"],
                              job_facets=_streaming())  # fmt: skip
    await marquez.lineage_row("streamingjob", "COMPLETE", job_facets=_streaming())
    assert len(await marquez.lineage(f"dataset:{NAMESPACE}:output-dataset", 5)) == 3


async def test_lineage_for_orphaned_dataset(marquez: Marquez) -> None:
    """LineageServiceTest#testLineageForOrphanedDataset (#L578-L608)."""
    await marquez.lineage_row("writeJob", "COMPLETE", outputs=["commonDataset"])
    node = f"dataset:{NAMESPACE}:commonDataset"
    assert node_ids(await marquez.lineage(node, 2)) == [node, f"job:{NAMESPACE}:writeJob"]
    await marquez.lineage_row("writeJob", "COMPLETE")
    assert node_ids(await marquez.lineage(node, 2)) == [node]


async def test_symlink_dataset_lineage(marquez: Marquez) -> None:
    """LineageServiceTest#testSymlinkDatasetLineage (#L614-L671), with the symlinks facet as an
    OpenLineage producer sends it. The Java test puts its map in DatasetFacets' `additional`
    (LineageTestUtils#newDatasetFacet), so OpenLineageDao never sees a typed symlinks facet and
    its `hasSize(2)` is the *un*linked graph (secondJob and symlinkDataset). Through the API the
    facet is typed and does what the test's comment expects (OpenLineageDao.java#L873-L903):
    "the first and second job linked together because the main and symlink dataset are in fact
    the same dataset" — shown under the main (primary) name."""
    main = {
        "namespace": NAMESPACE,
        "name": "mainDataset",
        "facets": {
            **_dataset_facets(),
            "symlinks": facet(identifiers=[
                {"namespace": NAMESPACE, "name": "symlinkDataset", "type": "DB_TABLE"}
            ]),
        },
    }  # fmt: skip
    first = {
        "eventType": "COMPLETE",
        "eventTime": marquez.now(),
        "run": {"runId": str(uuid.uuid4()), "facets": {}},
        "job": {"namespace": NAMESPACE, "name": "firstJob", "facets": {}},
        "inputs": [main],
        "producer": PRODUCER,
    }
    await marquez.send(first)
    await marquez.lineage_row("secondJob", "COMPLETE", inputs=["symlinkDataset"])
    graph = await marquez.lineage(f"dataset:{NAMESPACE}:symlinkDataset", 5)
    assert node_ids(graph) == [
        f"dataset:{NAMESPACE}:mainDataset",
        f"job:{NAMESPACE}:firstJob",
        f"job:{NAMESPACE}:secondJob",
    ]
