"""Recorded events replayed through the Marquez stand-in, with what Marquez 0.51.1 answers.

tests/fixtures/marquez/ holds Marquez's own test resources (SOURCE.md; FIDELITY.md section 3),
tests/fixtures/openlineage/airflow-3.3.2/ what a real Airflow 3.3.2 provider sent. Each test
names the Marquez test or source (paths under api/src/ at tag 0.51.1) whose answer it expects.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp
import pytest

from standins.marquez.events import to_name_based_uuid
from standins.marquez.server import StandInServer
from tests.standins.test_standin_marquez import Api

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
MARQUEZ = FIXTURES / "marquez"
AIRFLOW = FIXTURES / "openlineage" / "airflow-3.3.2"
# OpenLineageIntegrationTest#data (#L91-L102): event_large.json is left out there too.
SENT_BY_TEST_SEND_OPEN_LINEAGE = [
    "event_full.json",
    "event_simple.json",
    "event_without_schema_url.json",
    "event_required_only.json",
    "event_unicode.json",
    "null_nominal_end_time.json",
    "event_namespace_naming.json",
]


def load(path: Path) -> Any:
    return json.loads(path.read_text())


@pytest.fixture
async def api(marquez_standin: StandInServer) -> AsyncIterator[Api]:
    async with aiohttp.ClientSession() as session:
        yield Api(marquez_standin.url, session)


def job_path(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{quote(namespace, safe='')}/jobs/{quote(name, safe='')}"


def dataset_path(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{quote(namespace, safe='')}/datasets/{quote(name, safe='')}"


# -- Marquez's own fixtures ---------------------------------------------------------------------


@pytest.mark.parametrize("name", SENT_BY_TEST_SEND_OPEN_LINEAGE)
async def test_send_open_lineage(api: Api, name: str) -> None:
    """test/java/marquez/OpenLineageIntegrationTest#testSendOpenLineage (#L1315-L1378): 201, then
    the job's, the run's and every dataset's facets read back equal to the posted ones
    (`filterDataQualityFacets` drops the data quality facets from the datasets')."""
    body = load(MARQUEZ / "open_lineage" / name)
    await api.ingest(body)
    job = await api.ok(job_path(body["job"]["namespace"], body["job"]["name"]))
    assert job["facets"] == body["job"].get("facets", {})
    run = await api.ok(f"/api/v1/jobs/runs/{body['run']['runId']}")
    assert run["facets"] == body["run"].get("facets", {})
    for dataset in (*body.get("inputs", ()), *body.get("outputs", ())):
        answered = await api.ok(dataset_path(dataset["namespace"], dataset["name"]))
        assert (answered["namespace"], answered["name"]) == (dataset["namespace"], dataset["name"])
        facets = {k: v for k, v in answered["facets"].items() if not k.startswith("dataQuality")}
        assert facets == dataset.get("facets", {})


async def test_send_dataset_event(api: Api) -> None:
    """OpenLineageIntegrationTest#testSendDatasetEvent (#L1380-L1424): 201, the dataset's facets
    as posted; the feed lists run events only, but counts it (OpenLineageDao.java#L135-L165)."""
    body = load(MARQUEZ / "open_lineage" / "event_dataset_event.json")
    await api.ingest(body)
    dataset = body["dataset"]
    answered = await api.ok(dataset_path(dataset["namespace"], dataset["name"]))
    assert answered["facets"] == dataset["facets"]
    assert await api.ok("/api/v1/events/lineage") == {"events": [], "totalCount": 1}


async def test_send_job_event(api: Api) -> None:
    """OpenLineageIntegrationTest#testSendJobEvent (#L1426-L1499): the job's facets, its input
    and output (the single job answer takes the job version's IO, db/JobDao.java#L142-L152), the
    datasets' descriptions, no event listed."""
    body = load(MARQUEZ / "open_lineage" / "event_job_event.json")
    await api.ingest(body)
    job = await api.ok(job_path(body["job"]["namespace"], body["job"]["name"]))
    assert job["facets"] == body["job"].get("facets", {})
    assert job["inputs"] == [{"namespace": "my-datasource-namespace",
                              "name": "instance.schema.input-1"}]  # fmt: skip
    assert job["outputs"] == [{"namespace": "my-datasource-namespace",
                               "name": "instance.schema.output-1"}]  # fmt: skip
    for side, text in (("inputs", "input documentation"), ("outputs", "output documentation")):
        ref = body[side][0]
        assert (await api.ok(dataset_path(ref["namespace"], ref["name"])))["description"] == text
    assert (await api.ok("/api/v1/events/lineage"))["events"] == []


async def test_every_fixture_event_in_the_feed(api: Api) -> None:
    """Every open_lineage fixture, POSTed: the feed answers the run events re-serialised
    (times in UTC ISO_OFFSET form, service/models/LineageEvent.java's typed nulls) and counts the
    dataset and job events too (db/OpenLineageDao.java#L135-L165)."""
    paths = sorted((MARQUEZ / "open_lineage").glob("*.json"))
    for path in paths:
        await api.ingest(load(path))
    feed = await api.ok("/api/v1/events/lineage", {"sortDirection": "asc"})
    assert feed["totalCount"] == len(paths)
    assert len(feed["events"]) == len(paths) - 2
    for event in feed["events"]:
        assert event["eventTime"].endswith("Z")
        assert {"eventType", "eventTime", "run", "job", "inputs", "outputs"} <= set(event)
    zone_less = load(MARQUEZ / "open_lineage" / "event_required_no_timezone.json")
    assert zone_less["eventTime"] + "Z" in [e["eventTime"] for e in feed["events"]]  # server: UTC
    full = load(MARQUEZ / "open_lineage" / "event_full.json")
    child = await api.ok(job_path("my-scheduler-namespace", "myjob.mytask"))
    assert (child["simpleName"], child["parentJobName"]) == ("mytask", "myjob")
    # The parent run was made by the first child event that named it (event_additional_facet,
    # a START); later children find it and leave it alone (OpenLineageDao.java#L612-L623).
    parent_run = full["run"]["facets"]["parent"]["run"]["runId"]
    assert (await api.ok(f"/api/v1/jobs/runs/{parent_run}"))["state"] == "RUNNING"


async def test_run_listener_events(api: Api) -> None:
    """test/java/marquez/service/OpenLineageServiceIntegrationTest#getData (#L124-L129): after
    listener/1.json (RUNNING) and 2.json (COMPLETE), the run has read 3 datasets and written 2;
    `startedAt` is the RUNNING event's time."""
    for name in ("1.json", "2.json"):
        await api.ingest(load(MARQUEZ / "open_lineage" / "listener" / name))
    run_id = load(MARQUEZ / "open_lineage" / "listener" / "1.json")["run"]["runId"]
    run = await api.ok(f"/api/v1/jobs/runs/{run_id}")
    assert (len(run["inputDatasetVersions"]), len(run["outputDatasetVersions"])) == (3, 2)
    assert (run["state"], run["startedAt"]) == ("COMPLETED", "2020-12-28T09:52:00.001Z")


async def test_apples_lineage_follows_the_current_versions(api: Api) -> None:
    """test/resources/apples (graphql/LineageTest): grandma picked crab apples the second time,
    so gather_apples' current version reads backyard:crab.apples, not laurents-orchard; lineage
    follows current job versions only (db/LineageDao.java#L56-L99, `is_current_job_version`)."""
    for path in sorted((MARQUEZ / "apples").glob("*.json")):
        await api.ingest(load(path))
    graph = await api.ok(
        "/api/v1/lineage", {"nodeId": "job:grandmas.kitchen:prepare_apple_filling", "depth": "10"}
    )
    nodes = {node["id"]: node for node in graph["graph"]}
    assert "dataset:laurents-orchard:red.delicious" not in nodes
    gather = nodes["job:grandmas.kitchen:gather_apples"]
    assert [e["origin"] for e in gather["inEdges"]] == ["dataset:backyard:crab.apples"]
    filling = nodes["job:grandmas.kitchen:prepare_apple_filling"]
    assert [e["origin"] for e in filling["inEdges"]] == [
        "dataset:cupboard:sugar",
        "dataset:grandmas.kitchen:apples",
        "dataset:grandmas.kitchen:cinnamon",
    ]
    assert len([n for n in nodes if n.startswith("job:")]) == 5


# -- what a real Airflow 3.3.2 sent -------------------------------------------------------------


@pytest.mark.parametrize(
    ("scenario", "dag", "tasks", "state"),
    [
        ("success.json", "ol_test.success", ("extract", "count"), "COMPLETED"),
        ("failure.json", "ol_test.failing", ("prepare", "load"), "FAILED"),
        ("manual.json", "ol_test.manual", ("work",), "COMPLETED"),
    ],
)
async def test_airflow_dag_and_tasks(
    api: Api, scenario: str, dag: str, tasks: tuple[str, ...], state: str
) -> None:
    """db/OpenLineageDao.java#L547-L593: a task event's `parent` facet names the DAG run, so
    the task is stored as `<dag>.<task>` under the DAG job; since 0.50.0 its current run is the
    DAG's (#L565-L579), and `/lineage` shows that run as the task's `latestRun`
    (service/LineageService.java#L96-L99) — with the DAG run's `airflowDagRun` facet."""
    events = load(AIRFLOW / scenario)
    await api.ingest(*events)
    dag_run = next(e for e in events if e["job"]["name"] == dag)["run"]["runId"]
    top = await api.ok(job_path("airflow-test", dag))
    assert (top["parentJobName"], top["latestRun"]["id"], top["latestRun"]["state"]) == (
        None,
        dag_run,
        state,
    )
    for task in tasks:
        name = f"{dag}.{task}"
        job = await api.ok(job_path("airflow-test", name))
        assert (job["simpleName"], job["parentJobName"]) == (task, dag)
        assert job["latestRun"]["id"] != dag_run  # the job's own answer lists its own runs
        graph = await api.ok("/api/v1/lineage", {"nodeId": f"job:airflow-test:{name}"})
        node = next(n for n in graph["graph"] if n["id"] == f"job:airflow-test:{name}")
        assert node["data"]["latestRun"]["id"] == dag_run
        assert "airflowDagRun" in node["data"]["latestRun"]["facets"]
    names = sorted(
        j["name"] for j in (await api.ok("/api/v1/namespaces/airflow-test/jobs"))["jobs"]
    )
    assert names == sorted([dag, *(f"{dag}.{t}" for t in tasks)])


async def test_a_triggered_dag_is_named_under_its_trigger_and_again_at_the_top(api: Api) -> None:
    """trigger.json: the child DAG's own events carry a `parent` facet naming the trigger task,
    so Marquez stores the DAG as `ol_test.parent.trigger_child.ol_test.child`
    (db/OpenLineageDao.java#L547-L563). Its tasks name `ol_test.child` as parent: the run's
    stored job name differs, Marquez "assumes a run UUID conflict" and creates a second,
    top-level `ol_test.child` with run `toNameBasedUuid(namespace, name, runId)` (#L596-L651)."""
    events = load(AIRFLOW / "trigger.json")
    await api.ingest(*events)
    child_run = next(e for e in events if e["job"]["name"] == "ol_test.child")["run"]["runId"]
    nested = await api.ok(job_path("airflow-test", "ol_test.parent.trigger_child.ol_test.child"))
    assert (nested["simpleName"], nested["parentJobName"]) == (
        "ol_test.child",
        "ol_test.parent.trigger_child",
    )
    assert nested["latestRun"]["id"] == child_run
    top = await api.ok(job_path("airflow-test", "ol_test.child"))
    conflict_run = str(to_name_based_uuid("airflow-test", "ol_test.child", child_run))
    assert (top["parentJobName"], top["latestRun"]["id"]) == (None, conflict_run)
    work = await api.ok(job_path("airflow-test", "ol_test.child.work"))
    assert work["parentJobName"] == "ol_test.child"
    graph = await api.ok("/api/v1/lineage", {"nodeId": "job:airflow-test:ol_test.child.work"})
    assert graph["graph"][0]["data"]["latestRun"]["id"] == conflict_run


async def test_airflow_events_in_the_feed(api: Api) -> None:
    """The provider's events come back bound: the parent facet's run/job links lose their
    `facets` (RunLink and JobLink declare nothing else, LineageEvent.java#L188-L211), `root`
    stays, times come back in UTC with the fraction's trailing zeros stripped."""
    events = load(AIRFLOW / "success.json")
    await api.ingest(*events)
    feed = (await api.ok("/api/v1/events/lineage", {"sortDirection": "asc"}))["events"]
    assert [e["job"]["name"] for e in feed] == [e["job"]["name"] for e in events]
    parent = feed[1]["run"]["facets"]["parent"]
    assert parent["run"] == {"runId": events[1]["run"]["facets"]["parent"]["run"]["runId"]}
    assert parent["job"] == {"namespace": "airflow-test", "name": "ol_test.success"}
    assert parent["root"] == events[1]["run"]["facets"]["parent"]["root"]
    assert feed[0]["eventTime"] == "2026-11-24T01:10:00.170808Z"
