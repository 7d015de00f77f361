"""The Marquez stand-in's current runs and job clocks, as Marquez 0.51.1's source has them.

No Marquez test pins these down (tests/fixtures/marquez/FIDELITY.md, rows 1 and 2), so each
test names the source lines it follows instead.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

import aiohttp
import pytest

from standins.http_server import start_app
from standins.marquez.server import MarquezState, create_app
from tests.standins.test_standin_marquez import RUN_A, RUN_B, Api, event, facet

DAG_RUN_1 = "d1d1d1d1-0000-4000-8000-000000000001"
DAG_RUN_2 = "d2d2d2d2-0000-4000-8000-000000000002"
TASK_RUN = "7a7a7a7a-0000-4000-8000-000000000003"
SERVER_NOW = datetime(2030, 5, 5, 12, 0, tzinfo=UTC)


@pytest.fixture
async def clocked() -> AsyncIterator[tuple[Api, list[datetime]]]:
    """A stand-in whose database clock (`now()`) the test sets: `clock[0]`."""
    clock = [SERVER_NOW]
    url, runner = await start_app(create_app(MarquezState(clock=lambda: clock[0])), "127.0.0.1", 0)
    try:
        async with aiohttp.ClientSession() as session:
            yield Api(url, session), clock
    finally:
        await runner.cleanup()


def dag_event(event_type: str, minute: int, run_id: str, **kw: Any) -> dict[str, Any]:
    """The Airflow provider's DAG-run event: the DAG's job, the `airflowDagRun` facet."""
    dag_run = facet(dag={"dag_id": "core.sessions"}, dagRun={"run_id": f"scheduled_{run_id[:4]}"})
    return event(event_type, minute, job="core.sessions", run_id=run_id,
                 run_facets={"airflowDagRun": dag_run}, **kw)  # fmt: skip


def task_event(
    event_type: str, minute: int, dag_run: str, *, task: str = "extract", **kw: Any
) -> dict[str, Any]:
    """A task's event, with the `parent` facet naming its DAG run (as the provider sends it)."""
    parent = facet(run={"runId": dag_run}, job={"namespace": "ns", "name": "core.sessions"})
    airflow = facet(dag={"dag_id": "core.sessions"}, task={"task_id": task})
    return event(event_type, minute, job=f"core.sessions.{task}", run_id=kw.pop("run_id", TASK_RUN),
                 run_facets={"parent": parent, "airflow": airflow}, **kw)  # fmt: skip


def node(graph: dict[str, Any], node_id: str) -> dict[str, Any]:
    found: dict[str, Any] = next(n["data"] for n in graph["graph"] if n["id"] == node_id)
    return found


async def test_a_tasks_lineage_node_carries_its_dag_run(
    clocked: tuple[Api, list[datetime]],
) -> None:
    """OpenLineageDao.java#L565-L593 (0.51.1): upsertJob's child branch stores
    `parent.getCurrentRunUuid()` as the child's current run; LineageService.java#L96-L99 shows
    that run as the node's `latestRun`. The job's own answer (JobDao.findWithDatasetsAndRun →
    RunDao.findByLatestJob) still lists the task's own runs."""
    api, _ = clocked
    await api.ingest(
        dag_event("START", 0, DAG_RUN_1),
        task_event("START", 1, DAG_RUN_1, outputs=["sessions"]),
        task_event("COMPLETE", 2, DAG_RUN_1, outputs=["sessions"]),
    )
    graph = await api.ok("/api/v1/lineage", {"nodeId": "job:ns:core.sessions.extract"})
    task = node(graph, "job:ns:core.sessions.extract")
    assert task["parentJobName"] == "core.sessions"
    assert task["latestRun"]["id"] == DAG_RUN_1
    assert "airflowDagRun" in task["latestRun"]["facets"]
    own = await api.ok(f"/api/v1/namespaces/ns/jobs/{quote('core.sessions.extract')}")
    assert own["latestRun"]["id"] == TASK_RUN
    assert [r["id"] for r in own["latestRuns"]] == [TASK_RUN]


async def test_the_current_run_is_the_dag_run_of_the_tasks_latest_event(
    clocked: tuple[Api, list[datetime]],
) -> None:
    """OpenLineageDao.java#L565-L593 and the jobs rewrite function (`current_run_uuid =
    EXCLUDED.current_run_uuid`, R__Jobs_view_and_rewrite_function.sql#L77): each child event
    re-points the child at whichever run its parent job points at then — during concurrent DAG
    runs, that can be another DAG run than the task's own parent."""
    api, _ = clocked
    await api.ingest(
        dag_event("START", 0, DAG_RUN_1),
        task_event("START", 1, DAG_RUN_1, outputs=["sessions"]),
        dag_event("START", 2, DAG_RUN_2),  # a second DAG run now is the DAG's current one
        task_event("COMPLETE", 3, DAG_RUN_1, outputs=["sessions"]),
    )
    graph = await api.ok("/api/v1/lineage", {"nodeId": "job:ns:core.sessions.extract"})
    assert node(graph, "job:ns:core.sessions.extract")["latestRun"]["id"] == DAG_RUN_2


async def test_a_spark_application_under_a_task_points_at_the_dag_run_too(
    clocked: tuple[Api, list[datetime]],
) -> None:
    """The chain propagates (OpenLineageDao.java#L565-L593 at each level): a Spark application
    whose parent is the task `core.sessions.extract` gets the task's current run, which is the
    DAG run."""
    api, _ = clocked
    spark_parent = facet(
        run={"runId": TASK_RUN}, job={"namespace": "ns", "name": "core.sessions.extract"}
    )
    await api.ingest(
        dag_event("START", 0, DAG_RUN_1),
        task_event("START", 1, DAG_RUN_1),
        event("START", 2, job="sessions_app", run_id=RUN_A, run_facets={"parent": spark_parent}),
        event(
            "COMPLETE",
            3,
            job="sessions_app",
            run_id=RUN_A,
            outputs=["sessions"],
            run_facets={"parent": spark_parent},
        ),
    )
    app = "job:ns:core.sessions.extract.sessions_app"
    graph = await api.ok("/api/v1/lineage", {"nodeId": app})
    assert node(graph, app)["latestRun"]["id"] == DAG_RUN_1


async def test_last_run_states_filters_a_task_on_its_dag_runs_state(
    clocked: tuple[Api, list[datetime]],
) -> None:
    """JobDao.java#L241-L248: `GET /jobs?lastRunStates=` joins `runs r ON r.uuid =
    j.current_run_uuid`, so a task that completed is listed by the state of its DAG run."""
    api, _ = clocked
    await api.ingest(
        dag_event("START", 0, DAG_RUN_1),
        task_event("START", 1, DAG_RUN_1, outputs=["sessions"]),
        task_event("COMPLETE", 2, DAG_RUN_1, outputs=["sessions"]),
    )
    completed = await api.ok("/api/v1/namespaces/ns/jobs", [("lastRunStates", "COMPLETED")])
    running = await api.ok("/api/v1/namespaces/ns/jobs", [("lastRunStates", "RUNNING")])
    assert [j["name"] for j in completed["jobs"]] == []
    assert sorted(j["name"] for j in running["jobs"]) == ["core.sessions", "core.sessions.extract"]
    await api.ingest(dag_event("FAIL", 3, DAG_RUN_1))
    failed = await api.ok("/api/v1/namespaces/ns/jobs", [("lastRunStates", "FAILED")])
    assert sorted(j["name"] for j in failed["jobs"]) == ["core.sessions", "core.sessions.extract"]


async def test_a_top_level_jobs_current_run_is_its_own(clocked: tuple[Api, list[datetime]]) -> None:
    """OpenLineageDao.java#L581-L593: without a parent facet upsertJob passes the event's own
    `runUuid`."""
    api, _ = clocked
    await api.ingest(
        event("START", 0, run_id=RUN_A, outputs=["t"]),
        event("COMPLETE", 1, run_id=RUN_A, outputs=["t"]),
        event("START", 2, run_id=RUN_B, outputs=["t"]),
    )
    graph = await api.ok("/api/v1/lineage", {"nodeId": "job:ns:job_a"})
    assert node(graph, "job:ns:job_a")["latestRun"]["id"] == RUN_B


async def test_a_jobs_updated_at_is_the_servers_clock_until_a_terminal_event(
    clocked: tuple[Api, list[datetime]],
) -> None:
    """R__Jobs_view_and_rewrite_function.sql#L63-L64: the first insert keeps the event's time,
    every later upsert sets `updated_at = now()` (the database's clock);
    JobVersionDao.java#L516-L519 → JobDao.updateVersionFor sets it to the terminal event's
    `transitionedAt` when the version is linked. So `updatedAt` can move backwards."""
    api, clock = clocked
    path = "/api/v1/namespaces/ns/jobs/job_a"
    await api.ingest(event("START", 0, run_id=RUN_A, outputs=["t"]))
    assert (await api.ok(path))["updatedAt"] == "2024-01-01T00:00:00Z"  # first insert
    await api.ingest(event("RUNNING", 5, run_id=RUN_A, outputs=["t"]))
    assert (await api.ok(path))["updatedAt"] == "2030-05-05T12:00:00Z"  # Marquez's now()
    clock[0] += timedelta(minutes=1)
    await api.ingest(event("COMPLETE", 9, run_id=RUN_A, outputs=["t"]))
    assert (await api.ok(path))["updatedAt"] == "2024-01-01T00:09:00Z"  # the terminal event's


async def test_the_jobs_list_orders_by_that_mixed_clock(
    clocked: tuple[Api, list[datetime]],
) -> None:
    """JobDao.java#L246-L248 `ORDER BY j.updated_at DESC`: a job re-upserted by a START (Marquez's
    clock) sorts above a job whose later terminal event set its producer's older time."""
    api, _ = clocked
    await api.ingest(
        event("START", 0, job="late_producer", run_id=RUN_A, outputs=["a"]),
        event("COMPLETE", 1, job="late_producer", run_id=RUN_A, outputs=["a"]),
        event("START", 0, job="steady", run_id=RUN_B, outputs=["b"]),
        event("RUNNING", 2, job="steady", run_id=RUN_B, outputs=["b"]),
    )
    jobs = (await api.ok("/api/v1/namespaces/ns/jobs"))["jobs"]
    assert [(j["name"], j["updatedAt"]) for j in jobs] == [
        ("steady", "2030-05-05T12:00:00Z"),
        ("late_producer", "2024-01-01T00:01:00Z"),
    ]
