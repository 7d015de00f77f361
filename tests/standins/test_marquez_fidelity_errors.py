"""Error statuses and bodies as Marquez 0.51.1's Jersey/Dropwizard stack answers them
(tests/fixtures/marquez/FIDELITY.md rows 8, 9 and 11).

Paths are under api/src/main/java/marquez/ at tag 0.51.1 unless they name a test.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from standins.marquez.server import StandInServer
from tests.standins.test_standin_marquez import RUN_A, RUN_B, Api, event, facet

NOT_FOUND = {"code": 404, "message": "HTTP 404 Not Found"}
SERVER_ERROR = re.compile(
    r"There was an error processing your request\. It has been logged \(ID [0-9a-f]{16}\)\."
)


@pytest.fixture
async def api(marquez_standin: StandInServer) -> AsyncIterator[Api]:
    async with aiohttp.ClientSession() as session:
        api = Api(marquez_standin.url, session)
        await api.ingest(
            event("START", 0, inputs=["t"], outputs=["u"]),
            event("COMPLETE", 1, inputs=["t"], outputs=["u"]),
        )
        yield api


def is_server_error(answer: tuple[int, Any]) -> bool:
    status, body = answer
    return status == 500 and body["code"] == 500 and SERVER_ERROR.fullmatch(body["message"])


# -- row 8: GET ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "query"),
    [
        ("/api/v1/namespaces", {"limit": "ten"}),
        ("/api/v1/namespaces", {"offset": "1.5"}),
        ("/api/v1/namespaces/ns/jobs", {"limit": "9999999999"}),  # beyond Java's int
        ("/api/v1/jobs", {"offset": " 1"}),  # Integer.valueOf does not trim
        ("/api/v1/events/lineage", {"limit": "1e3"}),
        ("/api/v1/namespaces/ns/jobs/job_a/runs", {"limit": "x"}),
        ("/api/v1/namespaces/ns/datasets", {"offset": "x"}),
        ("/api/v1/search", {"q": "t", "limit": "x"}),
        ("/api/v1/lineage", {"nodeId": "job:ns:job_a", "depth": "deep"}),
    ],
)
async def test_a_non_integer_int_parameter_is_404(api: Api, path: str, query: Any) -> None:
    """Plain `int` @QueryParams (api/NamespaceResource.java#L77-L79, JobResource.java#L169-L186,
    #L256-L260, DatasetResource.java#L148-L151, OpenLineageResource.java#L118-L136,
    SearchResource.java#L59): Jersey's PrimitiveValueOfExtractor calls Integer.valueOf and
    turns its NumberFormatException into a ParamException, 404 with no message of its own."""
    assert await api.get(path, query) == (404, NOT_FOUND)


async def test_a_blank_int_parameter_takes_the_default(api: Api) -> None:
    """PrimitiveValueOfExtractor.extract: a blank value means the @DefaultValue."""
    assert len((await api.ok("/api/v1/namespaces", {"limit": ""}))["namespaces"]) == 1


async def test_negative_limits_violate_min_zero(api: Api) -> None:
    """`@Min(value = 0)` (api/JobResource.java#L171-L172 and the others): Dropwizard's
    JerseyViolationExceptionMapper, 400 with every message. `depth` has no @Min."""
    assert await api.get("/api/v1/jobs", {"limit": "-1", "offset": "-2"}) == (
        400,
        {
            "errors": [
                "query param limit must be greater than or equal to 0",
                "query param offset must be greater than or equal to 0",
            ]
        },
    )
    assert (await api.get("/api/v1/lineage", {"nodeId": "job:ns:job_a", "depth": "-1"}))[0] == 200


async def test_node_ids_outside_the_four_prefixes_are_404(api: Api) -> None:
    """service/models/NodeId.java#L49-L69: the constructor Jersey converts `nodeId` with checks
    `^(dataset|datasetField|job|run):.*$` and throws IllegalArgumentException: ParamException,
    404."""
    for node_id in ("nonsense", "jobs:ns:job_a", "", "job:ns:job_a\nmore"):
        assert await api.get("/api/v1/lineage", {"nodeId": node_id}) == (404, NOT_FOUND)
    assert await api.get("/api/v1/lineage") == (
        400,
        {"errors": ["query param nodeId must not be null"]},
    )


async def test_unknown_nodes_answer_marquez_texts(api: Api) -> None:
    """api/BaseResource.java#L158-L170 → JobNotFoundException, DatasetNotFoundException,
    RunNotFoundException, FieldNotFoundException (api/exceptions/*.java#L17); a `run:` node that
    exists reaches service/LineageService.java#L263-L277: NodeIdNotFoundException."""
    cases = {
        "job:ns:nope": "Job 'nope' not found.",
        "dataset:ns:nope": "Dataset 'nope' not found.",
        f"run:{RUN_B}": f"Run '{RUN_B}' not found.",
        f"run:{RUN_A}": f"Node 'run:{RUN_A}' must be of type dataset or job!",
        "datasetField:ns:t:nope": "Field 'nope' not found for dataset 't'.",
    }
    for node_id, message in cases.items():
        assert await api.get("/api/v1/lineage", {"nodeId": node_id}) == (
            404,
            {"code": 404, "message": message},
        )


async def test_node_ids_marquez_cannot_split_are_500(api: Api) -> None:
    """service/models/NodeId.java#L212-L241: too few parts → UnsupportedOperationException;
    extra parts but too few colons not followed by `//` or digits → IllegalStateException (issue
    #2921); a run id that is not a UUID, a namespace outside NamespaceName's pattern →
    IllegalArgumentException in the resource. None is mapped: Dropwizard's
    LoggingExceptionMapper answers 500."""
    for node_id in (
        "job:ns",
        "dataset:postgres://host:5432",  # four parts, one colon it may split at
        "run:not-a-uuid",
        "job:bad ns:x",
        "job:ns:x#v",
    ):
        assert is_server_error(await api.get("/api/v1/lineage", {"nodeId": node_id})), node_id


async def test_path_parameters_marquez_cannot_convert_are_404(api: Api) -> None:
    """`@PathParam RunId` (api/JobResource.java#L270-L284; common/Utils.java#L161-L167:
    36 characters, a UUID) and `@PathParam NamespaceName` (NamespaceName.java's pattern): a
    constructor that throws is a ParamException, 404, before the resource runs."""
    for path in (
        "/api/v1/jobs/runs/not-a-uuid",
        f"/api/v1/jobs/runs/{RUN_A}x/facets",
        "/api/v1/namespaces/bad%20ns",
        "/api/v1/namespaces/bad%20ns/jobs",
        "/api/v1/namespaces/bad%20ns/datasets/t",
    ):
        assert await api.get(path, {"type": "run"}) == (404, NOT_FOUND), path
    assert await api.get(f"/api/v1/jobs/runs/{RUN_B}") == (
        404,
        {"code": 404, "message": f"Run '{RUN_B}' not found."},
    )


async def test_enum_and_null_parameters(api: Api) -> None:
    """Dropwizard's FuzzyEnumParamConverter (400 `{"code":400,…}`) and `@NotNull`
    (api/JobResource.java#L283, 400 `{"errors":…}`)."""
    path = f"/api/v1/jobs/runs/{RUN_A}/facets"
    assert await api.get(path) == (400, {"errors": ["query param type must not be null"]})
    assert await api.get(path, {"type": "bogus"}) == (
        400,
        {"code": 400, "message": "type must be one of [RUN, JOB]"},
    )
    assert (await api.get(path, {"type": "Run"}))[0] == 200  # fuzzy: any case


async def test_search_parameters(api: Api) -> None:
    """api/SearchResource.java#L55-L62: `@NotBlank q`, `@Pattern(YYYY_MM_DD)` on before/after
    (400), then `LocalDate.parse` in the resource (an impossible date: 500)."""
    assert await api.get("/api/v1/search", {"q": " "}) == (
        400,
        {"errors": ["query param q must not be blank"]},
    )
    assert await api.get("/api/v1/search", {"q": "t", "before": "2024-1-1"}) == (
        400,
        {"errors": ['query param before must match "^\\d{4}-\\d{2}-\\d{2}$"']},
    )
    assert is_server_error(await api.get("/api/v1/search", {"q": "t", "after": "2024-13-45"}))


# -- row 9: POST bodies Jackson cannot bind ---------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        {"run": "not an object"},
        {"inputs": {"namespace": "ns", "name": "t"}},  # no ACCEPT_SINGLE_VALUE_AS_ARRAY
        {"eventTime": "2021-11-03"},
        {"eventTime": True},
        {"job": {"namespace": "ns", "name": ["a"]}},
        {"producer": {"name": "me"}},
        {"schemaURL": "not a uri"},
    ],
)
async def test_unbindable_bodies_answer_500_with_code_400(api: Api, body: dict[str, Any]) -> None:
    """api/exceptions/JsonProcessingExceptionMapper.java#L21-L27: `Response.serverError()` with
    `ErrorMessage(400, e.getMessage())`; OpenLineageIntegrationTest.java#L179-L197 checks the
    Jackson text. Binding fails before anything is stored."""
    status, answer = await api.post(event("START", 5, run_id=RUN_B) | body)
    assert status == 500
    assert answer["code"] == 400
    assert answer["message"].startswith("Cannot deserialize value of type `")
    assert (await api.ok("/api/v1/events/lineage"))["totalCount"] == 2


async def test_malformed_json_nan_and_non_objects_answer_500_with_code_400(api: Api) -> None:
    """The same mapper for Jackson's JsonParseException (NaN needs ALLOW_NON_NUMERIC_NUMBERS,
    off by default) and for a body that is not an object."""
    for raw in (b"{not json", b'{"eventTime": NaN}', b"[]", b'"event"'):
        async with api.session.post(
            f"{api.base}/api/v1/lineage", data=raw, headers={"Content-Type": "application/json"}
        ) as resp:
            assert (resp.status, (await resp.json())["code"]) == (500, 400), raw


# -- row 11: Bean Validation of every typed facet ---------------------------------------------


def _jobtype(**fields: str) -> dict[str, Any]:
    return facet(
        **{"processingType": "BATCH", "integration": "AIRFLOW", "jobType": "TASK"} | fields
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda e: e["job"]["facets"]["jobType"].pop("processingType"),
         "job.facets.jobType.processingType must not be null"),
        (lambda e: e["job"]["facets"]["jobType"].pop("integration"),
         "job.facets.jobType.integration must not be null"),
        (lambda e: e["job"]["facets"]["jobType"].pop("jobType"),
         "job.facets.jobType.jobType must not be null"),
        (lambda e: e["job"]["facets"]["sourceCodeLocation"].pop("_producer"),
         "job.facets.sourceCodeLocation._producer must not be null"),
        (lambda e: e["outputs"][0]["facets"]["lifecycleStateChange"].pop("_schemaURL"),
         "outputs[0].facets.lifecycleStateChange._schemaURL must not be null"),
        (lambda e: e["outputs"][0]["facets"]["columnLineage"].pop("_producer"),
         "outputs[0].facets.columnLineage._producer must not be null"),
        (lambda e: e["outputs"][0]["facets"]["symlinks"].pop("_schemaURL"),
         "outputs[0].facets.symlinks._schemaURL must not be null"),
        (lambda e: e["outputs"][0]["facets"]["symlinks"]["identifiers"][0].pop("namespace"),
         "outputs[0].facets.symlinks.identifiers[0].namespace must not be null"),
        (lambda e: e["outputs"][0]["facets"]["symlinks"]["identifiers"][0].pop("name"),
         "outputs[0].facets.symlinks.identifiers[0].name must not be null"),
        (lambda e: e["outputs"][0]["facets"]["schema"]["fields"][0].pop("name"),
         "outputs[0].facets.schema.fields[0].name must not be null"),
        (lambda e: e["outputs"][0]["facets"]["dataSource"].pop("_producer"),
         "outputs[0].facets.dataSource._producer must not be null"),
    ],
)  # fmt: skip
async def test_every_typed_facet_is_validated(api: Api, change: Any, message: str) -> None:
    """service/models/LineageEvent.java#L119-L142 (`BaseFacet`: `@NotNull _producer, _schemaURL`)
    on every typed facet, #L345-L349 (JobTypeJobFacet's three fields), #L504 (SchemaField.name),
    #L534-L535 (SymlinkIdentifier namespace and name): 422, nothing stored."""
    body = event(
        "START", 5, run_id=RUN_B,
        job_facets={"jobType": _jobtype(), "sourceCodeLocation": facet(type="git", url="u")},
    )  # fmt: skip
    body["outputs"] = [{
        "namespace": "ns", "name": "v",
        "facets": {
            "lifecycleStateChange": facet(lifecycleStateChange="CREATE"),
            "columnLineage": facet(fields={}),
            "symlinks": facet(identifiers=[{"namespace": "ns", "name": "alias", "type": "TABLE"}]),
            "schema": facet(fields=[{"name": "id", "type": "INT"}]),
            "dataSource": facet(name="db", uri="postgres://db"),
        },
    }]  # fmt: skip
    change(body)
    assert await api.post(body) == (422, {"errors": [message]})
    assert (await api.ok("/api/v1/events/lineage"))["totalCount"] == 2


async def test_column_lineage_columns_are_not_validated(api: Api) -> None:
    """ColumnLineageDatasetFacetFields keeps its columns in an any-setter map without @Valid
    (service/models/LineageEvent.java#L598-L617): a column without namespace passes."""
    column = {"inputFields": [{"name": "t", "field": "id"}]}
    body = event("START", 5, run_id=RUN_B)
    body["outputs"] = [{"namespace": "ns", "name": "v",
                        "facets": {"columnLineage": facet(fields={"id": column})}}]  # fmt: skip
    assert (await api.post(body))[0] == 201


async def test_a_symlinks_facet_without_identifiers_is_a_500_after_the_event_is_stored(
    api: Api,
) -> None:
    """`identifiers` has no @NotNull, but db/OpenLineageDao.java#L883-L903 streams it: NPE in
    the model update, 500 with an empty body; the raw event stays (FIDELITY.md row 5)."""
    body = event("START", 5, run_id=RUN_B)
    body["outputs"] = [{"namespace": "ns", "name": "v", "facets": {"symlinks": facet()}}]
    assert await api.post(body) == (500, "")
    assert (await api.ok("/api/v1/events/lineage"))["totalCount"] == 3
