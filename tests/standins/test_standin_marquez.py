"""The Marquez stand-in over real HTTP: the behaviours of Marquez 0.51.1 the bot depends on.

Each test names a rule from tests/fixtures/marquez/NOTES.md (sections 1.x and the checklist in
section 6) and fails if the stand-in stops following it.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

import aiohttp
import pytest
from yarl import URL

from standins.marquez.server import (
    EventValidationError,
    MarquezState,
    StandInServer,
    serve_forever,
    start_standin,
)

PRODUCER = "https://example.com/stand-in-tests"
RUN_A = "11111111-1111-4111-8111-111111111111"
RUN_B = "22222222-2222-4222-8222-222222222222"
T0 = datetime(2024, 1, 1, tzinfo=UTC)


def at(minute: int) -> str:
    return (T0 + timedelta(minutes=minute)).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def facet(**fields: Any) -> dict[str, Any]:
    return {"_producer": PRODUCER, "_schemaURL": "https://example.com/schema.json", **fields}


def event(
    event_type: str | None,
    minute: int,
    *,
    job: str = "job_a",
    ns: str = "ns",
    run_id: str = RUN_A,
    inputs: Sequence[str | tuple[str, str]] = (),
    outputs: Sequence[str | tuple[str, str]] = (),
    run_facets: dict[str, Any] | None = None,
    job_facets: dict[str, Any] | None = None,
) -> dict[str, Any]:
    def refs(names: Sequence[str | tuple[str, str]]) -> list[dict[str, str]]:
        pairs = [(ns, n) if isinstance(n, str) else n for n in names]
        return [{"namespace": a, "name": b} for a, b in pairs]

    body: dict[str, Any] = {
        "eventTime": at(minute),
        "run": {"runId": run_id, "facets": run_facets or {}},
        "job": {"namespace": ns, "name": job, "facets": job_facets or {}},
        "inputs": refs(inputs),
        "outputs": refs(outputs),
        "producer": PRODUCER,
    }
    if event_type is not None:
        body["eventType"] = event_type
    return body


@dataclass
class Api:
    base: str
    session: aiohttp.ClientSession

    async def post(self, body: Any) -> tuple[int, Any]:
        async with self.session.post(f"{self.base}/api/v1/lineage", json=body) as resp:
            text = await resp.text()
            return resp.status, (await resp.json() if text else text)

    async def get(self, path: str, params: Any = None) -> tuple[int, Any]:
        # `path` is sent exactly as written: callers percent-encode names themselves.
        async with self.session.get(URL(self.base + path, encoded=True), params=params) as resp:
            return resp.status, await resp.json()

    async def ok(self, path: str, params: Any = None) -> Any:
        status, body = await self.get(path, params)
        assert status == 200, body
        return body

    async def ingest(self, *events: dict[str, Any]) -> None:
        for body in events:
            status, answer = await self.post(body)
            assert status == 201, answer


@pytest.fixture
async def api(marquez_standin: StandInServer) -> AsyncIterator[Api]:
    async with aiohttp.ClientSession() as session:
        yield Api(marquez_standin.url, session)


@pytest.fixture
async def seeded(food_delivery_marquez: StandInServer) -> AsyncIterator[Api]:
    async with aiohttp.ClientSession() as session:
        yield Api(food_delivery_marquez.url, session)


def ids(graph: dict[str, Any]) -> list[str]:
    return [node["id"] for node in graph["graph"]]


# -- POST /api/v1/lineage -----------------------------------------------------------------------


async def test_post_answers_201_with_an_empty_body(api: Api) -> None:
    assert await api.post(event("START", 0)) == (201, "")


def _without(path: str) -> dict[str, Any]:
    body = event(
        "START",
        0,
        run_facets={
            "nominalTime": facet(nominalStartTime=at(0)),
            "parent": facet(run={"runId": RUN_B}, job={"namespace": "ns", "name": "dag"}),
        },
        job_facets={"documentation": facet(description="d"), "sql": facet(query="select 1")},
    )
    *parents, leaf = path.split(".")
    target = body
    for key in parents:
        target = target["facets"][key] if key in ("nominalTime", "parent", "sql") else target[key]
    del target[leaf]
    return body


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("eventTime", "eventTime must not be null"),
        ("producer", "producer must not be null"),
        ("run.runId", "run.runId must not be null"),
        ("job.namespace", "job.namespace must not be null"),
        ("job.name", "job.name must not be null"),
        (
            "run.nominalTime.nominalStartTime",
            "run.facets.nominalTime.nominalStartTime must not be null",
        ),
        ("run.nominalTime._producer", "run.facets.nominalTime._producer must not be null"),
        ("run.parent._schemaURL", "run.facets.parent._schemaURL must not be null"),
        ("run.parent.run.runId", "run.facets.parent.run.runId must not be null"),
        ("run.parent.job.namespace", "run.facets.parent.job.namespace must not be null"),
        ("run.parent.job.name", "run.facets.parent.job.name must not be null"),
        ("job.sql.query", "job.facets.sql.query must not be null"),
    ],
)
async def test_missing_required_fields_answer_422_and_store_nothing(
    api: Api, path: str, message: str
) -> None:
    assert await api.post(_without(path)) == (422, {"errors": [message]})
    assert (await api.ok("/api/v1/events/lineage"))["totalCount"] == 0
    assert (await api.ok("/api/v1/namespaces"))["namespaces"] == []


async def test_every_missing_field_is_reported_at_once(api: Api) -> None:
    status, body = await api.post({"run": {}, "job": {}})
    assert status == 422
    assert set(body["errors"]) == {
        "eventTime must not be null",
        "producer must not be null",
        "run.runId must not be null",
        "job.namespace must not be null",
        "job.name must not be null",
    }


async def test_malformed_json_and_date_only_times_answer_500_with_code_400(api: Api) -> None:
    """Marquez's JsonProcessingExceptionMapper answers HTTP 500 with `{"code":400,...}`
    (JsonProcessingExceptionMapper.java#L21-L27; FIDELITY.md row 9); nothing is stored."""
    async with api.session.post(
        f"{api.base}/api/v1/lineage",
        data=b"{not json",
        headers={"Content-Type": "application/json"},
    ) as resp:
        assert resp.status == 500
        assert (await resp.json())["code"] == 400
    date_only = event("START", 0) | {"eventTime": "2021-11-03"}
    status, body = await api.post(date_only)
    assert status == 500
    assert body["code"] == 400
    assert "2021-11-03" in body["message"]
    assert (await api.ok("/api/v1/events/lineage"))["totalCount"] == 0


async def test_times_without_zone_are_utc_and_nanoseconds_are_accepted(api: Api) -> None:
    await api.ingest(
        event("START", 0) | {"eventTime": "2024-01-01T10:00:00.123456"},
        event("COMPLETE", 0) | {"eventTime": "2024-01-01T10:00:01.123456789Z"},
    )
    run = await api.ok(f"/api/v1/jobs/runs/{RUN_A}")
    assert run["startedAt"] == "2024-01-01T10:00:00.123456Z"
    assert run["endedAt"] == "2024-01-01T10:00:01.123456Z"
    assert run["durationMs"] == 1000


async def test_invalid_dataset_namespace_answers_400_with_empty_body(api: Api) -> None:
    """The raw event is stored all the same, the model update stopped at the job
    (OpenLineageService.java#L122-L157, OpenLineageDao.toDatasetId; FIDELITY.md row 5)."""
    assert await api.post(event("START", 0, inputs=[("bad namespace!", "t")])) == (400, "")
    assert (await api.ok("/api/v1/events/lineage"))["totalCount"] == 1
    assert (await api.get("/api/v1/namespaces/ns/jobs/job_a"))[0] == 404


# -- runs -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("event_type", "state"),
    [
        ("START", "RUNNING"),
        ("RUNNING", "RUNNING"),
        ("OTHER", "RUNNING"),
        ("SOMETHING_NEW", "RUNNING"),
        ("COMPLETE", "COMPLETED"),
        ("FAIL", "FAILED"),
        ("ABORT", "ABORTED"),
        (None, "NEW"),
    ],
)
async def test_event_type_maps_to_run_state(api: Api, event_type: str | None, state: str) -> None:
    # Without eventType, the run facets' insert fails after the run is written (row 9): 500.
    assert (await api.post(event(event_type, 0)))[0] == (201 if event_type else 500)
    assert (await api.ok(f"/api/v1/jobs/runs/{RUN_A}"))["state"] == state


async def test_a_new_run_has_every_key_with_nulls_and_z_times(api: Api) -> None:
    assert (await api.post(event(None, 0)))[0] == 500  # RunFacetsDao's NPE, after the run row
    run = await api.ok(f"/api/v1/jobs/runs/{RUN_A}")
    assert run == {
        "id": RUN_A,
        "createdAt": "2024-01-01T00:00:00Z",
        "updatedAt": "2024-01-01T00:00:00Z",
        "nominalStartTime": None,
        "nominalEndTime": None,
        "state": "NEW",
        "startedAt": None,
        "endedAt": None,
        "durationMs": None,
        "args": {},
        "jobVersion": None,
        "inputDatasetVersions": [],
        "outputDatasetVersions": [],
        "facets": {},
    }


async def test_running_heartbeat_moves_started_at_and_duration_needs_both_ends(api: Api) -> None:
    await api.ingest(event("START", 0), event("RUNNING", 30))
    run = await api.ok(f"/api/v1/jobs/runs/{RUN_A}")
    assert (run["startedAt"], run["endedAt"], run["durationMs"]) == (at(30)[:-5] + "Z", None, None)
    await api.ingest(event("COMPLETE", 40))
    run = await api.ok(f"/api/v1/jobs/runs/{RUN_A}")
    assert run["durationMs"] == 10 * 60_000


async def test_last_received_event_wins_even_when_older(api: Api) -> None:
    await api.ingest(event("START", 0), event("COMPLETE", 10), event("RUNNING", 5))
    run = await api.ok(f"/api/v1/jobs/runs/{RUN_A}")
    assert run["state"] == "RUNNING"
    assert run["updatedAt"] == "2024-01-01T00:05:00Z"


async def test_nominal_times_coalesce_args_stay_first_and_facets_merge(api: Api) -> None:
    nominal = {"nominalTime": facet(nominalStartTime="2024-01-01T00:00:00Z")}
    await api.ingest(
        event("START", 0, run_facets=nominal | {"custom": facet(v=1), "keep": facet(v=0)}),
        event(
            "COMPLETE",
            5,
            run_facets={
                "nominalTime": facet(nominalStartTime="2024-01-02T00:00:00Z"),
                "custom": facet(v=2),
            },
        ),
        event("COMPLETE", 6),
    )
    run = await api.ok(f"/api/v1/jobs/runs/{RUN_A}")
    assert run["nominalStartTime"] == "2024-01-02T00:00:00Z"
    # ZonedDateTime.toString of the first event's time, moved to zone UTC by Jackson
    assert run["args"] == {"nominal_start_time": "2024-01-01T00:00Z[UTC]"}
    assert (run["facets"]["custom"]["v"], run["facets"]["keep"]["v"]) == (2, 0)


async def test_job_version_and_edges_exist_only_after_a_terminal_event(api: Api) -> None:
    await api.ingest(event("START", 0, inputs=["in"], outputs=["out"]))
    assert (await api.ok(f"/api/v1/jobs/runs/{RUN_A}"))["jobVersion"] is None
    graph = await api.ok("/api/v1/lineage", {"nodeId": "job:ns:job_a"})
    assert graph["graph"][0]["outEdges"] == []
    assert ids(graph) == ["job:ns:job_a"]
    await api.ingest(event("COMPLETE", 5))
    assert (await api.ok(f"/api/v1/jobs/runs/{RUN_A}"))["jobVersion"]["name"] == "job_a"
    graph = await api.ok("/api/v1/lineage", {"nodeId": "job:ns:job_a"})
    assert ids(graph) == ["dataset:ns:in", "dataset:ns:out", "job:ns:job_a"]


async def test_failed_runs_also_create_versions_and_edges(api: Api) -> None:
    await api.ingest(event("START", 0, outputs=["out"]), event("FAIL", 5))
    run = await api.ok(f"/api/v1/jobs/runs/{RUN_A}")
    assert (run["state"], run["jobVersion"] is not None) == ("FAILED", True)
    graph = await api.ok("/api/v1/lineage", {"nodeId": "dataset:ns:out"})
    assert ids(graph) == ["dataset:ns:out", "job:ns:job_a"]


async def test_runs_list_orders_by_started_at_desc_nulls_last_with_total(api: Api) -> None:
    await api.ingest(event("START", 0, run_id=RUN_A))
    assert (await api.post(event(None, 1, run_id=RUN_B)))[0] == 500  # the run row stays
    await api.ingest(event("START", 5, run_id="33333333-3333-4333-8333-333333333333"))
    body = await api.ok("/api/v1/namespaces/ns/jobs/job_a/runs", {"limit": "2"})
    assert [r["id"][:1] for r in body["runs"]] == ["3", "1"]
    assert body["totalCount"] == 3
    body = await api.ok("/api/v1/namespaces/ns/jobs/job_a/runs", {"offset": "2"})
    assert [r["id"] for r in body["runs"]] == [RUN_B]


# -- jobs -----------------------------------------------------------------------------------------


async def test_jobs_list_order_latest_runs_and_state_filter(api: Api) -> None:
    runs = [f"{n:08d}-0000-4000-8000-000000000000" for n in range(12)]
    for n, run_id in enumerate(runs):
        await api.ingest(
            event("START", 10 * n, run_id=run_id), event("COMPLETE", 10 * n + 1, run_id=run_id)
        )
    await api.ingest(
        event("START", 500, job="job_b", run_id=RUN_B),
        event("FAIL", 501, job="job_b", run_id=RUN_B),
    )
    new = event(None, 200, job="job_new", run_id="44444444-4444-4444-8444-444444444444")
    assert (await api.post(new))[0] == 500  # its job and run rows stay
    body = await api.ok("/api/v1/namespaces/ns/jobs")
    # job_new's current run has no state: SQL `state IN (...)` never matches it.
    assert [j["name"] for j in body["jobs"]] == ["job_b", "job_a"]
    assert body["totalCount"] == 3
    job_a = body["jobs"][1]
    assert len(job_a["latestRuns"]) == 10
    assert job_a["latestRun"]["id"] == runs[-1] == job_a["latestRuns"][0]["id"]
    failed = await api.ok("/api/v1/namespaces/ns/jobs", [("lastRunStates", "FAILED")])
    assert ([j["name"] for j in failed["jobs"]], failed["totalCount"]) == (["job_b"], 3)
    both = [("lastRunStates", "FAILED"), ("lastRunStates", "COMPLETED"), ("limit", "1")]
    assert [j["name"] for j in (await api.ok("/api/v1/jobs", both))["jobs"]] == ["job_b"]


async def test_unknown_namespace_lists_no_jobs(api: Api) -> None:
    assert await api.ok("/api/v1/namespaces/nowhere/jobs") == {"jobs": [], "totalCount": 0}


async def test_job_has_every_key_and_not_found_texts(api: Api) -> None:
    await api.ingest(event("START", 0, job_facets={"documentation": facet(description="Doc")}))
    job = await api.ok("/api/v1/namespaces/ns/jobs/job_a")
    assert set(job) == {
        "id", "type", "name", "simpleName", "parentJobName", "parentJobUuid", "createdAt",
        "updatedAt", "namespace", "inputs", "outputs", "location", "description", "latestRun",
        "latestRuns", "facets", "currentVersion", "labels", "tags",
    }  # fmt: skip
    assert (job["description"], job["currentVersion"], job["facets"]) == ("Doc", None, {})
    assert await api.get("/api/v1/namespaces/nope/jobs/job_a") == (
        404,
        {"code": 404, "message": "Namespace 'nope' not found."},
    )
    assert await api.get("/api/v1/namespaces/ns/jobs/nope") == (
        404,
        {"code": 404, "message": "Job 'nope' not found."},
    )
    assert (await api.get("/api/v1/namespaces/ns/jobs/nope/runs"))[0] == 404
    assert await api.get("/api/v1/jobs/runs/33333333-3333-4333-8333-333333333333") == (
        404,
        {"code": 404, "message": "Run '33333333-3333-4333-8333-333333333333' not found."},
    )
    assert await api.get("/api/v1/jobs/runs/not-a-uuid") == (
        404,
        {"code": 404, "message": "HTTP 404 Not Found"},
    )
    assert await api.get("/api/v1/namespaces/ns/datasets/nope") == (
        404,
        {"code": 404, "message": "Dataset 'nope' not found."},
    )


async def test_parent_facet_creates_parent_job_and_run_and_names_the_child(api: Api) -> None:
    parent = {"parent": facet(run={"runId": RUN_B}, job={"namespace": "ns", "name": "my.dag"})}
    await api.ingest(event("START", 0, job="my.dag.task", run_facets=parent))
    child = await api.ok(f"/api/v1/namespaces/ns/jobs/{quote('my.dag.task')}")
    dag = await api.ok("/api/v1/namespaces/ns/jobs/my.dag")
    assert (child["name"], child["simpleName"], child["parentJobName"]) == (
        "my.dag.task",
        "task",
        "my.dag",
    )
    assert child["parentJobUuid"] is not None
    assert dag["parentJobName"] is None
    assert dag["latestRun"]["id"] == RUN_B
    assert dag["latestRun"]["state"] == "RUNNING"
    run = await api.ok(f"/api/v1/jobs/runs/{RUN_A}")
    assert run["args"] == {"run_id": RUN_B, "name": "my.dag", "namespace": "ns"}


async def test_job_namespaces_are_sanitized(api: Api) -> None:
    await api.ingest(event("START", 0, ns="my ns!"))
    names = [n["name"] for n in (await api.ok("/api/v1/namespaces"))["namespaces"]]
    assert names == ["my_ns_"]
    assert (await api.ok("/api/v1/namespaces/my_ns_/jobs"))["totalCount"] == 1


async def test_percent_encoded_uri_namespaces_and_names_round_trip(api: Api) -> None:
    ns, ds = "postgres://host:5432", "public.t"
    await api.ingest(
        event("START", 0, ns=ns, job="a:b/c.d", outputs=[ds, (ns, "s3://bucket/key")]),
        event("COMPLETE", 1, ns=ns, job="a:b/c.d"),
    )
    enc_ns = quote(ns, safe="")
    assert (await api.ok(f"/api/v1/namespaces/{enc_ns}"))["name"] == ns
    job = await api.ok(f"/api/v1/namespaces/{enc_ns}/jobs/{quote('a:b/c.d', safe='')}")
    assert job["id"] == {"namespace": ns, "name": "a:b/c.d"}
    dataset = await api.ok(
        f"/api/v1/namespaces/{enc_ns}/datasets/{quote('s3://bucket/key', safe='')}"
    )
    assert dataset["id"] == {"namespace": ns, "name": "s3://bucket/key"}
    graph = await api.ok("/api/v1/lineage", {"nodeId": f"dataset:{ns}:{ds}"})
    assert f"job:{ns}:a:b/c.d" in ids(graph)


# -- lineage --------------------------------------------------------------------------------------


async def test_lineage_is_undirected_by_job_hops(seeded: Api) -> None:
    node = "job:food_delivery:example.etl_orders"
    one = ids(await seeded.ok("/api/v1/lineage", {"nodeId": node, "depth": "1"}))
    assert "job:food_delivery:example.etl_orders_7_days" in one
    assert "job:food_delivery:example.etl_menus" not in one
    two = ids(await seeded.ok("/api/v1/lineage", {"nodeId": node, "depth": "2"}))
    assert {
        "job:food_delivery:example.etl_menus",
        "job:food_delivery:example.etl_delivery_7_days.extract",
    } <= set(two)
    whole = ids(await seeded.ok("/api/v1/lineage", {"nodeId": node}))
    assert whole == sorted(whole)
    assert sum(i.startswith("job:") for i in whole) == 16
    assert sum(i.startswith("dataset:") for i in whole) == 15
    assert "job:reporting:reporting.weekly_kpis" in whole
    assert "job:food_delivery:example.etl_delivery_7_days" not in whole  # the DAG has no datasets


async def test_edges_to_jobs_outside_the_result_are_dropped(seeded: Api) -> None:
    graph = await seeded.ok(
        "/api/v1/lineage", {"nodeId": "job:food_delivery:example.etl_orders", "depth": "1"}
    )
    nodes = {n["id"]: n for n in graph["graph"]}
    orders_7 = nodes["dataset:food_delivery:public.orders_7_days"]
    assert orders_7["outEdges"] == []  # its reader (extract) is two hops away
    assert orders_7["inEdges"] == [
        {"origin": "job:food_delivery:example.etl_orders_7_days", "destination": orders_7["id"]}
    ]
    menus = nodes["dataset:food_delivery:public.menus"]
    assert menus["inEdges"] == []  # etl_menus is outside
    job = nodes["job:food_delivery:example.etl_orders_7_days"]
    assert job["inEdges"] == sorted(job["inEdges"], key=lambda e: (e["origin"], e["destination"]))
    assert job["data"]["latestRun"]["state"] == "COMPLETED"


async def test_dataset_node_starts_from_its_producer_or_is_an_orphan(api: Api) -> None:
    await api.ingest(
        event("START", 0, job="reader", inputs=["t"]),
        event("COMPLETE", 1, job="reader"),
        event("START", 2, job="writer", run_id=RUN_B, outputs=["t"]),
        event("COMPLETE", 3, job="writer", run_id=RUN_B),
        event(
            "START", 4, job="lonely", run_id="55555555-5555-4555-8555-555555555555", inputs=["o"]
        ),
    )
    graph = await api.ok("/api/v1/lineage", {"nodeId": "dataset:ns:t", "depth": "0"})
    assert ids(graph) == ["dataset:ns:t", "job:ns:writer"]
    orphan = await api.ok("/api/v1/lineage", {"nodeId": "dataset:ns:o"})
    assert ids(orphan) == ["dataset:ns:o"]
    assert orphan["graph"][0]["inEdges"] == orphan["graph"][0]["outEdges"] == []
    assert await api.get("/api/v1/lineage", {"nodeId": "dataset:ns:missing"}) == (
        404,
        {"code": 404, "message": "Dataset 'missing' not found."},
    )
    assert (await api.get("/api/v1/lineage", {"nodeId": "nonsense"}))[0] == 404
    assert (await api.get("/api/v1/lineage", {"nodeId": "job:ns"}))[0] == 500


async def test_node_ids_may_carry_colons_in_names(api: Api) -> None:
    await api.ingest(event("START", 0, outputs=["a:b"]), event("COMPLETE", 1))
    graph = await api.ok("/api/v1/lineage", {"nodeId": "dataset:ns:a:b"})
    assert ids(graph) == ["dataset:ns:a:b", "job:ns:job_a"]


# -- events, search, namespaces, datasets ---------------------------------------------------------


async def test_events_window_sort_and_total_over_all_types(api: Api) -> None:
    dataset_event = {
        "eventTime": at(3),
        "dataset": {"namespace": "ns", "name": "d"},
        "producer": PRODUCER,
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/definitions/DatasetEvent",
    }
    late = event("START", 0, run_id=RUN_B) | {"eventTime": "2031-01-01T00:00:00Z"}
    await api.ingest(
        event("START", 0), event("RUNNING", 2), dataset_event, event("COMPLETE", 5), late
    )
    body = await api.ok("/api/v1/events/lineage")
    # Re-serialised as ISO_OFFSET_DATE_TIME: `…00.000Z` comes back `…00Z` (row 4)
    assert [e["eventTime"] for e in body["events"]] == [
        at(5)[:-5] + "Z",
        at(2)[:-5] + "Z",
        at(0)[:-5] + "Z",
    ]
    assert body["totalCount"] == 4  # the DatasetEvent counts, the 2031 event is outside
    window = {"after": at(2), "before": at(5), "sortDirection": "asc"}
    body = await api.ok("/api/v1/events/lineage", window)
    assert ([e["eventTime"] for e in body["events"]], body["totalCount"]) == ([at(2)[:-5] + "Z"], 2)
    paged = await api.ok("/api/v1/events/lineage", {"before": "2032-01-01T00:00:00Z", "limit": "1"})
    assert paged["events"][0]["run"]["runId"] == late["run"]["runId"]
    assert paged["totalCount"] == 5
    # limit=0 (Marquez's @Min(0)) is the count alone; a late arrival counts in its window.
    counted = await api.ok("/api/v1/events/lineage", {**window, "limit": "0"})
    assert counted == {"events": [], "totalCount": 2}
    await api.ingest(event("FAIL", 4, run_id=RUN_B))
    counted = await api.ok("/api/v1/events/lineage", {**window, "limit": "0"})
    assert counted == {"events": [], "totalCount": 3}


async def test_search_is_a_case_insensitive_substring_match(seeded: Api) -> None:
    body = await seeded.ok("/api/v1/search", {"q": "ORDERS"})
    assert body["totalCount"] == len(body["results"]) == 6
    body = await seeded.ok("/api/v1/search", {"q": "etl", "filter": "job"})
    assert len(body["results"]) == 10  # default limit
    assert {r["type"] for r in body["results"]} == {"JOB"}
    assert body["results"][0]["nodeId"] == f"job:food_delivery:{body['results'][0]['name']}"
    assert (await seeded.get("/api/v1/search", {"q": " "}))[0] == 400


async def test_namespaces_are_sorted_paged_and_have_no_total(seeded: Api) -> None:
    body = await seeded.ok("/api/v1/namespaces")
    assert list(body) == ["namespaces"]
    assert [n["name"] for n in body["namespaces"]] == ["food_delivery", "reporting"]
    page = await seeded.ok("/api/v1/namespaces", {"limit": "1", "offset": "1"})
    assert [n["name"] for n in page["namespaces"]] == ["reporting"]
    assert (await seeded.get("/api/v1/namespaces", {"limit": "-1"}))[0] == 400


async def test_datasets_list_and_one_dataset(seeded: Api) -> None:
    body = await seeded.ok("/api/v1/namespaces/food_delivery/datasets", {"limit": "2"})
    assert body["totalCount"] == 14
    assert [d["name"] for d in body["datasets"]] == ["public.categories", "public.customers"]
    menus = await seeded.ok("/api/v1/namespaces/food_delivery/datasets/public.menus")
    assert (menus["sourceName"], menus["type"]) == ("food_delivery_db", "DB_TABLE")
    assert [f["name"] for f in menus["fields"]] == ["id", "name", "restaurant_id", "description"]
    assert (await seeded.get("/api/v1/namespaces/nope/datasets"))[0] == 404


# -- the food_delivery seed as served -------------------------------------------------------------


async def test_seed_failed_orders_runs_and_ownership(seeded: Api) -> None:
    runs = (await seeded.ok("/api/v1/namespaces/food_delivery/jobs/example.etl_orders/runs"))[
        "runs"
    ]
    failed = sorted(r["nominalStartTime"][:10] for r in runs if r["state"] == "FAILED")
    assert failed == ["2021-06-04", "2021-06-05", "2021-06-06"]
    failed_run = next(r for r in runs if r["state"] == "FAILED")
    assert "errorMessage" in failed_run["facets"]
    assert failed_run["jobVersion"] is not None
    job = await seeded.ok("/api/v1/namespaces/food_delivery/jobs/example.etl_orders")
    assert job["facets"]["ownership"]["owners"] == [{"name": "team:orders", "type": "MAINTAINER"}]


async def test_seed_task_jobs_are_children_of_their_dags(seeded: Api) -> None:
    task = await seeded.ok(
        "/api/v1/namespaces/food_delivery/jobs/example.delivery_times_7_days.discounts"
    )
    assert (task["simpleName"], task["parentJobName"]) == (
        "discounts",
        "example.delivery_times_7_days",
    )
    dag = await seeded.ok("/api/v1/namespaces/food_delivery/jobs/example.delivery_times_7_days")
    assert task["parentJobUuid"] is not None
    assert dag["latestRun"]["nominalStartTime"] == "2021-06-06T00:00:00Z"
    assert task["latestRun"]["args"]["run_id"] == dag["latestRun"]["id"]


async def test_job_facets_come_from_the_run_behind_the_current_version(api: Api) -> None:
    await api.ingest(
        event("START", 0, job_facets={"sql": facet(query="v1")}),
        event("COMPLETE", 1),
        event("START", 2, run_id=RUN_B, job_facets={"sql": facet(query="v2")}),
    )
    job = await api.ok("/api/v1/namespaces/ns/jobs/job_a")
    assert (job["latestRun"]["id"], job["facets"]["sql"]["query"]) == (RUN_B, "v1")
    await api.ingest(event("COMPLETE", 3, run_id=RUN_B))
    job = await api.ok("/api/v1/namespaces/ns/jobs/job_a")
    assert job["facets"]["sql"]["query"] == "v2"


async def test_run_facets_by_type(api: Api) -> None:
    await api.ingest(
        event("START", 0, run_facets={"r": facet(v=1)}, job_facets={"sql": facet(query="q")})
    )
    path = f"/api/v1/jobs/runs/{RUN_A}/facets"
    assert (await api.ok(path, {"type": "run"}))["facets"] == {"r": facet(v=1)}
    assert await api.ok(path, {"type": "job"}) == {
        "runId": RUN_A,
        "facets": {"sql": facet(query="q")},
    }
    assert (await api.get(path))[0] == 400


# -- the Python API around the server -------------------------------------------------------------


def test_state_ingest_raises_the_422_errors_and_keeps_its_own_copy() -> None:
    state = MarquezState()
    with pytest.raises(EventValidationError) as caught:
        state.ingest({"run": {"runId": RUN_A}, "job": {"namespace": "ns"}, "producer": PRODUCER})
    assert caught.value.errors == ["eventTime must not be null", "job.name must not be null"]
    body = event("START", 0)
    state.ingest(body)
    body["eventType"] = "COMPLETE"  # reusing the dict must not rewrite the stored event
    assert state.events[0].body["eventType"] == "START"
    assert state.runs[next(iter(state.runs))].state == "RUNNING"


async def test_unknown_seed_is_refused_before_binding() -> None:
    with pytest.raises(ValueError, match="food_delivery"):
        await start_standin(seed="nope")


async def test_unknown_routes_answer_json_404(api: Api) -> None:
    assert await api.get("/api/v1/nothing-here") == (
        404,
        {"code": 404, "message": "HTTP 404 Not Found"},
    )


async def test_serve_forever_announces_its_url_and_serves(
    capsys: pytest.CaptureFixture[str],
) -> None:
    task = asyncio.create_task(serve_forever("127.0.0.1", 0, "food_delivery"))
    printed = ""
    for _ in range(200):
        printed += capsys.readouterr().out
        if printed:
            break
        await asyncio.sleep(0.01)
    match = re.fullmatch(r"Marquez stand-in listening on (http://127\.0\.0\.1:\d+)\n", printed)
    assert match is not None, printed
    try:
        async with aiohttp.ClientSession() as session:
            api = Api(match.group(1), session)
            assert (await api.ok("/api/v1/namespaces/food_delivery/jobs"))["totalCount"] == 17
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
