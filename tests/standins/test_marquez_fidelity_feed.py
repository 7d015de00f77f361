"""`GET /api/v1/events/lineage` as Marquez 0.51.1 answers it: the bound event, failed ingests,
paging over ties (tests/fixtures/marquez/FIDELITY.md rows 4, 5, 6, 9, 14 and 15).

Each test names the Marquez source it follows (paths under api/src/main/java/marquez/ at tag
0.51.1).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any
from zoneinfo import ZoneInfo

import aiohttp
import pytest

from standins.http_server import start_app
from standins.marquez.server import MarquezState, StandInServer, create_app
from tests.standins.test_standin_marquez import PRODUCER, RUN_A, RUN_B, Api, at, event, facet

FEED = "/api/v1/events/lineage"


@pytest.fixture
async def api(marquez_standin: StandInServer) -> AsyncIterator[Api]:
    async with aiohttp.ClientSession() as session:
        yield Api(marquez_standin.url, session)


async def only_event(api: Api) -> dict[str, Any]:
    events: list[dict[str, Any]] = (await api.ok(FEED))["events"]
    assert len(events) == 1
    return events[0]


# -- row 4: the feed answers the event as Marquez bound and re-serialised it ------------------


async def test_typed_but_absent_keys_come_back_null(api: Api) -> None:
    """service/models/LineageEvent.java#L45-L53, #L83-L117, #L246-L286, #L373-L459: the typed
    properties of LineageEvent, Run(Facet), Job(Facet), Dataset and DatasetFacets are read back
    from the NON_NULL JSON (db/OpenLineageDao.java#L1152-L1161) and written by Dropwizard's
    mapper, which keeps nulls (api/OpenLineageResource.java#L170-L177)."""
    body = {
        "eventTime": "2024-01-01T00:00:00Z",
        "run": {"runId": RUN_A, "facets": {}},
        "job": {"namespace": "ns", "name": "job_a", "facets": {}},
        "outputs": [{"namespace": "ns", "name": "t", "facets": {}}],
        "producer": PRODUCER,
    }
    assert (await api.post(body))[0] == 500  # no eventType but run facets: row 9
    answered = await only_event(api)
    assert answered == {
        "eventType": None,
        "eventTime": "2024-01-01T00:00:00Z",
        "run": {"runId": RUN_A, "facets": {"nominalTime": None, "parent": None}},
        "job": {
            "namespace": "ns",
            "name": "job_a",
            "facets": {
                "documentation": None,
                "sourceCodeLocation": None,
                "sql": None,
                "jobType": None,
            },
        },
        "inputs": None,
        "outputs": [
            {
                "namespace": "ns",
                "name": "t",
                "facets": {
                    "documentation": None,
                    "schema": None,
                    "dataSource": None,
                    "description": None,
                    "lifecycleStateChange": None,
                    "columnLineage": None,
                    "symlinks": None,
                },
                "inputFacets": None,
                "outputFacets": None,
            }
        ],
        "producer": PRODUCER,
        "schemaURL": None,
    }


async def test_keys_come_back_in_jacksons_order_unknown_keys_kept(api: Api) -> None:
    """LineageEvent.java: declared properties first, in declaration order (#L45-L53) or by
    @JsonPropertyOrder (#L88, #L252, #L402-L410); BaseJsonModel.java#L18-L22 sorts the keys no
    class declares (`@JsonPropertyOrder(alphabetic = true)` on its any-getter); the facet maps
    keep arrival order (#L98-L108); RunLink/JobLink have no any-setter: their extra keys go."""
    body = event("START", 0, outputs=["t"])
    body = {"zeta": 1, "producer": body.pop("producer"), "alpha": {"b": 1, "a": 2}, **body}
    body["run"]["facets"] = {
        "custom": facet(v=1),
        "parent": facet(run={"runId": RUN_B, "extra": 1}, job={"namespace": "ns", "name": "dag"}),
        "another": facet(v=2),
    }
    body["job"]["facets"] = {"sql": facet(query="q"), "documentation": facet(description="d")}
    await api.ingest(body)
    answered = await only_event(api)
    assert list(answered) == [
        "eventType", "eventTime", "run", "job", "inputs", "outputs", "producer", "schemaURL",
        "alpha", "zeta",
    ]  # fmt: skip
    assert answered["alpha"] == {"b": 1, "a": 2}  # an opaque value is kept as sent
    facets = answered["run"]["facets"]
    assert list(facets) == ["nominalTime", "parent", "custom", "another"]
    assert facets["parent"]["run"] == {"runId": RUN_B}
    assert list(answered["job"]["facets"]) == [
        "documentation",
        "sourceCodeLocation",
        "sql",
        "jobType",
    ]


@pytest.mark.parametrize(
    ("sent", "answered"),
    [
        ("2024-01-01T00:05:00.000Z", "2024-01-01T00:05:00Z"),
        ("2024-01-01T00:05:00.120Z", "2024-01-01T00:05:00.12Z"),
        ("2024-01-01T00:05:00.123456789Z", "2024-01-01T00:05:00.123456789Z"),
        ("2024-01-01T00:05Z", "2024-01-01T00:05:00Z"),
        ("2024-01-01T10:05:00+10:00", "2024-01-01T00:05:00Z"),
        ("2024-01-01t00:05:00+00:00", "2024-01-01T00:05:00Z"),
        ("2024-01-01T00:05:00", "2024-01-01T00:05:00Z"),  # no zone: the server's (UTC here)
        (1704067500000, "2024-01-01T00:05:00Z"),  # a number: epoch milliseconds
    ],
)
async def test_times_come_back_iso_offset_in_utc(api: Api, sent: Any, answered: str) -> None:
    """common/models/FlexibleDateTimeDeserializer.java#L28-L55 parses (offset optional), and
    Dropwizard's mapper keeps ADJUST_DATES_TO_CONTEXT_TIME_ZONE on (MarquezApp.java#L98-L99 only
    disables WRITE_DATES_AS_TIMESTAMPS; Utils.java#L93 disables the adjustment for the store
    mapper only), so Jackson's InstantDeserializer moves the time to UTC; the mappers write
    ISO_OFFSET_DATE_TIME: seconds always, the fraction without trailing zeros. (FIDELITY.md
    row 4 expects the posted offset to survive; the source does not keep it.)"""
    nominal = {"nominalTime": facet(nominalStartTime=sent)}
    await api.ingest(event("START", 0, run_facets=nominal) | {"eventTime": sent})
    answered_event = await only_event(api)
    assert answered_event["eventTime"] == answered
    assert answered_event["run"]["facets"]["nominalTime"]["nominalStartTime"] == answered
    facets = await api.ok(f"/api/v1/jobs/runs/{RUN_A}/facets", {"type": "run"})
    assert facets["facets"]["nominalTime"] == {  # the facet tables hold the NON_NULL JSON
        "_producer": PRODUCER,
        "_schemaURL": "https://example.com/schema.json",
        "nominalStartTime": answered,
    }


async def test_run_args_keep_java_tostring_in_zone_utc(api: Api) -> None:
    """db/OpenLineageDao.java#L1121-L1141 stores `getNominalStartTime().toString()` of the bound
    time — in zone `UTC` (a region), so `[UTC]` follows the offset."""
    nominal = {"nominalTime": facet(nominalStartTime="2024-01-01T02:00:00.5+02:00")}
    await api.ingest(event("START", 0, run_facets=nominal))
    run = await api.ok(f"/api/v1/jobs/runs/{RUN_A}")
    assert run["args"] == {"nominal_start_time": "2024-01-01T00:00:00.500Z[UTC]"}


async def test_times_without_zone_are_in_the_servers_zone() -> None:
    """FlexibleDateTimeDeserializer.java#L47-L54: `ZoneId.systemDefault()` for a zone-less time
    (FIDELITY.md row 14); `MarquezState(zone=…)` plays a server outside UTC."""
    state = MarquezState(zone=ZoneInfo("Europe/Paris"))
    url, runner = await start_app(create_app(state), "127.0.0.1", 0)
    try:
        async with aiohttp.ClientSession() as session:
            api = Api(url, session)
            await api.ingest(event("START", 0) | {"eventTime": "2024-01-01T10:00:00"})
            assert (await only_event(api))["eventTime"] == "2024-01-01T09:00:00Z"
    finally:
        await runner.cleanup()


async def test_parent_run_comes_back_as_parent(api: Api) -> None:
    """LineageEvent.java#L93-L96: `@JsonAlias("parentRun")` binds it to `parent`, which is the
    name Jackson writes (FIDELITY.md rows 4 and 10)."""
    parent = facet(run={"runId": RUN_B}, job={"namespace": "ns", "name": "dag"})
    await api.ingest(event("START", 0, job="dag.task", run_facets={"parentRun": parent}))
    facets = (await only_event(api))["run"]["facets"]
    assert "parentRun" not in facets
    assert facets["parent"]["job"] == {"namespace": "ns", "name": "dag"}


async def test_event_type_comes_back_as_sent_and_any_case_counts(api: Api) -> None:
    """db/OpenLineageDao.java#L1103-L1119 lower-cases eventType for the run state; the stored
    event keeps it as sent (FIDELITY.md row 15)."""
    await api.ingest(event("start", 0), event("fail", 1))
    assert [e["eventType"] for e in (await api.ok(FEED))["events"]] == ["fail", "start"]
    assert (await api.ok(f"/api/v1/jobs/runs/{RUN_A}"))["state"] == "FAILED"


# -- rows 5 and 9: a failed model update leaves the raw event (and what it wrote) -------------


async def test_an_ingest_rejected_with_400_is_still_listed_and_counted(api: Api) -> None:
    """service/OpenLineageService.java#L122-L157 stores the raw event and updates the model in
    two independent futures; db/OpenLineageDao.java#L746-L757 (`toDatasetId`, evaluated by
    buildJobFromEvent before JobDao.upsertJob, #L578) throws IllegalArgumentException for an
    input namespace outside NamespaceName's pattern: 400, empty body
    (api/OpenLineageResource.java#L93-L109). Each statement commits on its own (no @Transaction
    on updateMarquezModel), so the job's namespace and the parent job and run stay; the job,
    its run and the datasets are never written."""
    parent = facet(run={"runId": RUN_B}, job={"namespace": "ns", "name": "dag"})
    bad = event("START", 0, job="dag.task", inputs=[("bad namespace!", "t")],
                run_facets={"parent": parent})  # fmt: skip
    assert await api.post(bad) == (400, "")
    feed = await api.ok(FEED)
    assert (feed["totalCount"], [e["job"]["name"] for e in feed["events"]]) == (1, ["dag.task"])
    assert [n["name"] for n in (await api.ok("/api/v1/namespaces"))["namespaces"]] == ["ns"]
    assert [j["name"] for j in (await api.ok("/api/v1/namespaces/ns/jobs"))["jobs"]] == ["dag"]
    assert (await api.ok(f"/api/v1/jobs/runs/{RUN_B}"))["state"] == "RUNNING"
    assert (await api.get(f"/api/v1/jobs/runs/{RUN_A}"))[0] == 404


async def test_a_bad_output_namespace_fails_only_the_complete_after_the_update(api: Api) -> None:
    """Outputs are written without NamespaceName's check (db/OpenLineageDao.java#L837-L903);
    on COMPLETE, OpenLineageService.buildJobOutput (#L204-L233) maps the run's dataset versions
    through `NamespaceName.of` and throws after the whole update: 400, the job version made."""
    outputs = [("bad namespace!", "t")]
    assert (await api.post(event("START", 0, outputs=outputs)))[0] == 201
    assert await api.post(event("COMPLETE", 1, outputs=outputs)) == (400, "")
    assert (await api.ok(FEED))["totalCount"] == 2
    job = await api.ok("/api/v1/namespaces/ns/jobs/job_a")
    assert job["latestRun"]["state"] == "COMPLETED"
    assert job["currentVersion"] is not None


async def test_no_event_type_with_run_facets_is_a_500_after_the_run_row(api: Api) -> None:
    """db/RunFacetsDao.java#L94-L99: `@NonNull String lineageEventType`; updateBaseMarquezModel
    (db/OpenLineageDao.java#L349-L354) has written the namespace, job, run args and run (no
    state) by then. An NPE is not an IllegalArgumentException: 500, empty body."""
    assert await api.post(event(None, 0, run_facets={"custom": facet(v=1)}, outputs=["t"])) == (
        500,
        "",
    )
    assert (await api.ok(FEED))["totalCount"] == 1
    run = await api.ok(f"/api/v1/jobs/runs/{RUN_A}")
    assert (run["state"], run["facets"]) == ("NEW", {})  # the facets never got in
    assert (await api.get("/api/v1/namespaces/ns/datasets/t"))[0] == 404  # nor the outputs
    without_facets = event(None, 1, run_id=RUN_B)
    del without_facets["run"]["facets"]
    assert (await api.post(without_facets))[0] == 201


async def test_bean_validation_failures_store_nothing(api: Api) -> None:
    """Bean Validation runs on the resource's parameter, before OpenLineageService: 422 and no
    row at all (FIDELITY.md row 5)."""
    body = event("START", 0)
    del body["job"]["name"]
    assert await api.post(body) == (422, {"errors": ["job.name must not be null"]})
    assert await api.ok(FEED) == {"events": [], "totalCount": 0}
    assert (await api.ok("/api/v1/namespaces"))["namespaces"] == []


# -- row 6: ties are not stable from one page to the next --------------------------------------

TIED_RUNS = [f"{n:08d}-0000-4000-8000-0000000000{n:02d}" for n in range(8)]


async def test_events_tied_on_event_time_can_repeat_or_skip_across_pages(api: Api) -> None:
    """db/OpenLineageDao.java#L135-L157: `ORDER BY le.event_time` with no tie-breaker;
    PostgreSQL's order of equal keys may differ between LIMIT/OFFSET queries."""
    first, *tied = TIED_RUNS
    await api.ingest(event("START", 0, run_id=first), *(event("START", 1, run_id=r) for r in tied))
    window = {"sortDirection": "asc", "limit": "3"}
    pages = [
        [e["run"]["runId"] for e in (await api.ok(FEED, window | {"offset": str(o)}))["events"]]
        for o in (0, 3, 6)
    ]
    assert pages[0][0] == first  # distinct keys keep their order
    seen = [run for page in pages for run in page]
    assert len(seen) == 8
    assert set(seen) != set(TIED_RUNS)  # some tied event repeats, another is skipped
    again = (await api.ok(FEED, window | {"offset": "3"}))["events"]
    assert [e["run"]["runId"] for e in again] == pages[1]  # the same page answers the same


async def test_jobs_and_runs_tied_keys_are_not_stable_across_pages() -> None:
    """db/JobDao.java#L246-L248 `ORDER BY j.updated_at DESC`; db/RunDao.java#L220-L221
    `ORDER BY r.started_at DESC NULLS LAST`: no unique tie-breaker either."""
    state = MarquezState()
    url, runner = await start_app(create_app(state), "127.0.0.1", 0)
    try:
        async with aiohttp.ClientSession() as session:
            api = Api(url, session)
            for n, run_id in enumerate(TIED_RUNS):  # first inserts: updated_at = event time
                await api.ingest(event("START", 0, job=f"job_{n}", run_id=run_id))
                other_run = run_id.replace("-8000-", "-9000-")
                await api.ingest(event("START", 0, job="many_runs", run_id=other_run))
            for path, key in (("/api/v1/namespaces/ns/jobs", "jobs"),
                              ("/api/v1/namespaces/ns/jobs/many_runs/runs", "runs")):  # fmt: skip
                everything = (await api.ok(path))[key]
                ids = [j.get("id") if key == "runs" else j["name"] for j in everything]
                pages = []
                for offset in range(0, len(ids), 3):
                    page = (await api.ok(path, {"limit": "3", "offset": str(offset)}))[key]
                    pages += [j.get("id") if key == "runs" else j["name"] for j in page]
                assert len(pages) == len(ids)
                assert pages != ids  # the pages do not slice one ordering
    finally:
        await runner.cleanup()


async def test_a_count_alone_is_unaffected(api: Api) -> None:
    """db/OpenLineageDao.java#L159-L165: the count has no ORDER BY."""
    await api.ingest(*(event("START", 1, run_id=r) for r in TIED_RUNS))
    counted = await api.ok(FEED, {"limit": "0", "after": at(0)})
    assert counted == {"events": [], "totalCount": 8}
