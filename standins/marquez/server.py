"""A Marquez 0.51.1 stand-in: the HTTP API the bot uses, over an in-memory model.

Shared by the tests and the local demo (`backfill-bot standin marquez`). Behaviour follows
tests/fixtures/marquez/NOTES.md, which was read from Marquez's source; where the published
openapi.yml disagrees, the stand-in does what Marquez's code does (201 on POST /lineage,
`totalCount` on run lists, `GET /api/v1/jobs`, `lastRunStates`, ...).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from datetime import UTC, datetime
from operator import attrgetter
from types import MappingProxyType
from typing import Any

from aiohttp import web

from standins.http_server import start_app
from standins.marquez import middleware, params, queries, views
from standins.marquez.errors import ApiError, not_found, violation, web_error
from standins.marquez.events import (
    EventFormatError,
    EventValidationError,
    ModelUpdateError,
)
from standins.marquez.lineage import lineage_answer
from standins.marquez.middleware import LATENCY, LATENCY_ROUTES, REQUESTS, REQUESTS_KEPT, reply
from standins.marquez.model import Job, Run
from standins.marquez.state import MarquezState
from standins.seeds.food_delivery import food_delivery_events

__all__ = [
    "LATENCY_ROUTES",
    "SEEDS",
    "EventValidationError",
    "MarquezState",
    "StandInServer",
    "create_app",
    "running_standin",
    "serve_forever",
    "start_standin",
]

SEEDS: Mapping[str, Callable[[], list[dict[str, Any]]]] = MappingProxyType(
    {"food_delivery": food_delivery_events}
)

STATE: web.AppKey[MarquezState] = web.AppKey("marquez_state", MarquezState)
LISTING: web.AppKey[dict[tuple[int, int], list[Job]]] = web.AppKey("marquez_listing", dict)
_RUN_STATES = ("NEW", "RUNNING", "COMPLETED", "ABORTED", "FAILED", "OTHER")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_DEFAULT_BEFORE = datetime(2030, 1, 1, tzinfo=UTC)  # events dated later are hidden by default


# -- handlers ---------------------------------------------------------------------------------


async def _post_lineage(request: web.Request) -> web.Response:
    if request.content_type != "application/json":
        raise web_error(415, "HTTP 415 Unsupported Media Type")
    raw = await request.read()
    try:
        body = json.loads(raw, parse_constant=_no_constant) if raw.strip() else None
    except ValueError as exc:
        # Jackson's JsonParseException: Marquez's JsonProcessingExceptionMapper, HTTP 500.
        raise ApiError(500, {"code": 400, "message": f"Unexpected character: {exc}"}) from exc
    try:
        request.app[STATE].ingest(body)
    except EventValidationError as exc:
        raise ApiError(422, {"errors": exc.errors}) from exc
    except EventFormatError as exc:
        raise ApiError(500, {"code": 400, "message": str(exc)}) from exc
    except ModelUpdateError as exc:  # the raw event is stored; the update failed part-way
        raise ApiError(exc.status, None) from exc
    return reply(None, 201)


def _no_constant(name: str) -> Any:
    raise ValueError(
        f"Non-standard token '{name}': enable JsonReadFeature.ALLOW_NON_NUMERIC_NUMBERS"
    )


async def _get_lineage(request: web.Request) -> web.Response:
    node_id = request.query.get("nodeId")
    depth = params.java_int(request, "depth", 20)  # no @Min: any int
    if node_id is None:
        raise violation("query param nodeId must not be null")
    return reply(lineage_answer(request.app[STATE], node_id, depth))


async def _namespaces(request: web.Request) -> web.Response:
    limit, offset = params.java_int(request, "limit", 100), params.java_int(request, "offset", 0)
    params.require_min(("limit", limit), ("offset", offset))
    spaces = sorted(request.app[STATE].namespaces.values(), key=lambda n: n.name)
    return reply({"namespaces": [views.namespace_json(n) for n in spaces[offset:][:limit]]})


def _require_namespace(request: web.Request) -> str:
    name = params.namespace_param(request)
    if name not in request.app[STATE].namespaces:
        raise not_found(f"Namespace '{name}' not found.")
    return name


async def _namespace(request: web.Request) -> web.Response:
    name = _require_namespace(request)
    return reply(views.namespace_json(request.app[STATE].namespaces[name]))


def _jobsreply(request: web.Request, namespace: str | None) -> web.Response:
    states = {
        state
        for raw in request.query.getall("lastRunStates", [])
        if (state := params.choice(raw, "lastRunStates", _RUN_STATES)) is not None
    }
    limit, offset = params.java_int(request, "limit", 100), params.java_int(request, "offset", 0)
    params.require_min(("limit", limit), ("offset", offset))
    listed = _newest_first(request.app)
    jobs = listed if namespace is None else [j for j in listed if j.namespace == namespace]
    page, total = queries.jobs_page(jobs, states or None, limit, offset)
    return reply({"jobs": page, "totalCount": total})


async def _namespace_jobs(request: web.Request) -> web.Response:
    # No namespace check here: an unknown namespace lists no jobs (0.51 behaviour).
    return _jobsreply(request, params.namespace_param(request))


async def _all_jobs(request: web.Request) -> web.Response:
    return _jobsreply(request, None)


def _require_job(request: web.Request) -> Job:
    namespace = _require_namespace(request)
    name = request.match_info["job"]
    job = request.app[STATE].visible_job((namespace, name))
    if job is None:
        raise not_found(f"Job '{name}' not found.")
    return job


async def _job(request: web.Request) -> web.Response:
    return reply(views.job_json(_require_job(request)))


async def _job_runs(request: web.Request) -> web.Response:
    limit, offset = params.java_int(request, "limit", 100), params.java_int(request, "offset", 0)
    job = _require_job(request)
    params.require_min(("limit", limit), ("offset", offset))
    page, total = queries.runs_page(job, limit, offset)
    return reply({"runs": page, "totalCount": total})


def _require_run(request: web.Request) -> Run:
    run_uuid = params.run_id_param(request)
    run = request.app[STATE].runs.get(run_uuid)
    if run is None:
        raise not_found(f"Run '{run_uuid}' not found.")
    return run


async def _run(request: web.Request) -> web.Response:
    return reply(views.run_json(_require_run(request)))


async def _run_facets(request: web.Request) -> web.Response:
    run_uuid = params.run_id_param(request)
    kind = params.choice(request.query.get("type"), "type", ("RUN", "JOB"))
    if kind is None:
        raise violation("query param type must not be null")
    run = _require_run(request)
    assert run.uuid == run_uuid
    facets = views.run_json(run)["facets"] if kind == "RUN" else views.run_job_facets(run)
    return reply({"runId": str(run.uuid), "facets": facets})


async def _events(request: web.Request) -> web.Response:
    after = params.zoned(request, "after", _EPOCH)
    before = params.zoned(request, "before", _DEFAULT_BEFORE)
    direction = params.choice(
        request.query.get("sortDirection", "desc"), "sortDirection", ("ASC", "DESC")
    )
    limit, offset = params.java_int(request, "limit", 100), params.java_int(request, "offset", 0)
    params.require_min(("limit", limit), ("offset", offset))
    events, total = queries.events_page(
        request.app[STATE], after, before, direction == "ASC", limit, offset
    )
    return reply({"events": events, "totalCount": total})


async def _search(request: web.Request) -> web.Response:
    kind = params.choice(request.query.get("filter"), "filter", ("DATASET", "JOB"))
    # Validated; `ORDER BY :sort` binds a constant, so it has no effect (SearchDao.java#L82).
    params.choice(request.query.get("sort", "name"), "sort", ("NAME", "UPDATE_AT"))
    limit = params.java_int(request, "limit", 10)
    errors = []
    if not request.query.get("q", "").strip():
        errors.append("query param q must not be blank")
    if limit < 0:
        errors.append("query param limit must be greater than or equal to 0")
    if errors:
        raise ApiError(400, {"errors": errors})
    before, after = params.day(request, "before"), params.day(request, "after")
    results = queries.search(
        request.app[STATE], request.query["q"], kind, request.query.get("namespace"),
        after=after, before=before, limit=limit,
    )  # fmt: skip
    return reply({"totalCount": len(results), "results": results})


async def _datasets(request: web.Request) -> web.Response:
    limit, offset = params.java_int(request, "limit", 100), params.java_int(request, "offset", 0)
    namespace = _require_namespace(request)
    params.require_min(("limit", limit), ("offset", offset))
    # datasets_view has a row per name, aliases included, ORDER BY name.
    found = sorted(
        (key, d)
        for key, d in request.app[STATE].datasets.items()
        if key[0] == namespace and not d.is_hidden
    )
    page = [views.dataset_json(d, key) for key, d in found[offset:][:limit]]
    return reply({"datasets": page, "totalCount": len(found)})


async def _dataset(request: web.Request) -> web.Response:
    namespace = _require_namespace(request)
    name = request.match_info["dataset"]
    dataset = request.app[STATE].visible_dataset((namespace, name))
    if dataset is None:
        raise not_found(f"Dataset '{name}' not found.")
    return reply(views.dataset_json(dataset, (namespace, name)))


async def _delete_dataset(request: web.Request) -> web.Response:
    """DatasetResource.delete: the dataset as it was, then `is_hidden = true` on the row named
    so in its own (primary) namespace — an alias name finds it but hides nothing: 404."""
    answer = await _dataset(request)
    namespace, name = request.match_info["namespace"], request.match_info["dataset"]
    dataset = request.app[STATE].datasets[(namespace, name)]
    if dataset.key != (namespace, name):
        raise not_found(f"Dataset '{name}' not found.")
    dataset.is_hidden = True
    return answer


async def _delete_job(request: web.Request) -> web.Response:
    """JobResource.delete: the job as it was, then `is_hidden = true`."""
    job = _require_job(request)
    answer = reply(views.job_json(job))
    job.is_hidden = True
    request.app[STATE].generation += 1
    return answer


def _newest_first(app: web.Application) -> list[Job]:
    """The visible jobs by updatedAt DESC (ties as stored), kept until the jobs change: a
    100,000-job listing reads 1,000 pages, and sorting every job for each one made the
    stand-in, not the reader, what a benchmark of the reconcile measured. `jobs_page` sorts
    again, which costs one pass over jobs already in order."""
    state, cached = app[STATE], app[LISTING]
    key = (state.generation, len(state.jobs))
    if key not in cached:
        jobs = [j for j in state.jobs.values() if not j.is_hidden]
        jobs.sort(key=attrgetter("updated_at"), reverse=True)
        cached.clear()
        cached[key] = jobs
    return cached[key]


def create_app(
    state: MarquezState | None = None, latency: Mapping[str, float] | None = None
) -> web.Application:
    """The aiohttp application serving Marquez's `/api/v1` routes over `state`.

    `latency` delays the named routes (LATENCY_ROUTES; `"*"` for all others) by that many
    seconds per request, as a big real deployment would; none by default."""
    unknown = set(latency or {}) - set(LATENCY_ROUTES) - {"*"}
    if unknown:
        raise ValueError(
            f"unknown latency routes {sorted(unknown)}; known: {', '.join(LATENCY_ROUTES)}, *"
        )
    app = web.Application(middlewares=[middleware.log, middleware.errors, middleware.latency])
    app[STATE] = state if state is not None else MarquezState()
    app[REQUESTS] = deque(maxlen=REQUESTS_KEPT)
    app[LISTING] = {}  # (generation, jobs) → the listing; the app is frozen once started
    app[LATENCY] = MappingProxyType(dict(latency or {}))
    ns = "/api/v1/namespaces/{namespace}"
    routes: list[tuple[str, str, Callable[[web.Request], Awaitable[web.Response]], str]] = [
        ("POST", "/api/v1/lineage", _post_lineage, "post"),
        ("GET", "/api/v1/lineage", _get_lineage, "lineage"),
        ("GET", "/api/v1/namespaces", _namespaces, "namespaces"),
        ("GET", ns, _namespace, "namespaces"),
        ("GET", f"{ns}/jobs", _namespace_jobs, "jobs"),
        ("GET", f"{ns}/jobs/{{job}}", _job, "job"),
        ("GET", f"{ns}/jobs/{{job}}/runs", _job_runs, "runs"),
        ("GET", f"{ns}/datasets", _datasets, "datasets"),
        ("GET", f"{ns}/datasets/{{dataset}}", _dataset, "datasets"),
        ("DELETE", f"{ns}/jobs/{{job}}", _delete_job, "job"),
        ("DELETE", f"{ns}/datasets/{{dataset}}", _delete_dataset, "datasets"),
        ("GET", "/api/v1/jobs", _all_jobs, "jobs"),
        ("GET", "/api/v1/jobs/runs/{id}", _run, "runs"),
        ("GET", "/api/v1/jobs/runs/{id}/facets", _run_facets, "runs"),
        ("GET", "/api/v1/events/lineage", _events, "events"),
        ("GET", "/api/v1/search", _search, "search"),
    ]
    for index, (method, path, handler, group) in enumerate(routes):
        # aiohttp route names are unique: the group is the part before the dot.
        app.router.add_route(method, path, handler, name=f"{group}.r{index}")
    return app


class StandInServer:
    """A running stand-in: its base `url` (no trailing slash) and its in-memory `state`."""

    def __init__(self, url: str, state: MarquezState, runner: web.AppRunner) -> None:
        self.url = url
        self.state = state
        self._runner = runner

    @property
    def requests(self) -> list[str]:
        """The requests received so far (the latest 100,000), as `METHOD /path?query`."""
        log: deque[str] = _runner_app(self._runner)[REQUESTS]
        return list(log)

    async def stop(self) -> None:
        await self._runner.cleanup()


def _runner_app(runner: web.AppRunner) -> web.Application:
    app = runner.app
    assert isinstance(app, web.Application)
    return app


def seeded_state(seed: str | None, state: MarquezState | None = None) -> MarquezState:
    """A fresh state (or `state`), with the named seed's events ingested directly (no HTTP)."""
    state = state if state is not None else MarquezState()
    if seed is not None:
        factory = SEEDS.get(seed)
        if factory is None:
            raise ValueError(f"unknown seed {seed!r}; known seeds: {', '.join(sorted(SEEDS))}")
        for event in factory():
            state.ingest(event)
    return state


async def start_standin(
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    seed: str | None = None,
    latency: Mapping[str, float] | None = None,
    state: MarquezState | None = None,
) -> StandInServer:
    """Start a stand-in on host:port (0 = an ephemeral port) and return it running.

    `latency` is create_app's; `state` lets a caller choose the clock or server zone."""
    state = seeded_state(seed, state)
    url, runner = await start_app(create_app(state, latency), host, port)
    return StandInServer(url, state, runner)


@contextlib.asynccontextmanager
async def running_standin(
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    seed: str | None = None,
    latency: Mapping[str, float] | None = None,
    state: MarquezState | None = None,
) -> AsyncIterator[StandInServer]:
    """Start a stand-in, yield it, and stop it on the way out."""
    server = await start_standin(host=host, port=port, seed=seed, latency=latency, state=state)
    try:
        yield server
    finally:
        await server.stop()


async def serve_forever(
    host: str = "127.0.0.1",
    port: int = 0,
    seed: str | None = None,
    latency: Mapping[str, float] | None = None,
) -> None:
    """Run a stand-in until cancelled, announcing its URL on one stdout line."""
    async with running_standin(host=host, port=port, seed=seed, latency=latency) as server:
        print(f"Marquez stand-in listening on {server.url}", flush=True)
        await asyncio.Event().wait()
