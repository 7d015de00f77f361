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
import re
import uuid
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

from aiohttp import web

from standins.http_server import start_app
from standins.marquez import views
from standins.marquez.events import (
    EventFormatError,
    EventRejectedError,
    EventValidationError,
    JsonDict,
    parse_node_id,
)
from standins.marquez.state import Job, MarquezState, Run
from standins.seeds.food_delivery import food_delivery_events

__all__ = [
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
REQUESTS: web.AppKey[deque[str]] = web.AppKey("marquez_requests", deque)
"""The latest requests received, as `METHOD /path?query` (tests count what a client asked)."""
_REQUESTS_KEPT = 100_000
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_RUN_STATES = ("NEW", "RUNNING", "COMPLETED", "ABORTED", "FAILED", "OTHER")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_DEFAULT_BEFORE = datetime(2030, 1, 1, tzinfo=UTC)  # events dated later are hidden by default


class ApiError(Exception):
    """An error answer in Dropwizard's shapes; `body=None` answers with an empty body."""

    def __init__(self, status: int, body: JsonDict | None) -> None:
        super().__init__(status)
        self.status, self.body = status, body


def _message(status: int, text: str) -> ApiError:
    return ApiError(status, {"code": status, "message": text})


def _reply(body: JsonDict | None, status: int = 200) -> web.Response:
    if body is None:
        return web.Response(status=status)
    return web.json_response(body, status=status)


@web.middleware
async def _log(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    request.app[REQUESTS].append(f"{request.method} {request.path_qs}")
    return await handler(request)


@web.middleware
async def _errors(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    try:
        return await handler(request)
    except ApiError as exc:
        return _reply(exc.body, exc.status)
    except web.HTTPException as exc:  # unknown route or method: Jersey's JSON, not aiohttp's text
        if exc.status < 400:
            raise
        return _reply(
            {"code": exc.status, "message": f"HTTP {exc.status} {exc.reason}"}, exc.status
        )


# -- query parameters -------------------------------------------------------------------------


def _int(request: web.Request, name: str, default: int, minimum: int | None = 0) -> int:
    raw = request.query.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise _message(400, f"query param {name} is not a number.") from None
    if minimum is not None and value < minimum:
        raise ApiError(
            400, {"errors": [f"query param {name} must be greater than or equal to {minimum}"]}
        )
    return value


def _choice(raw: str, name: str, allowed: tuple[str, ...]) -> str:
    # Dropwizard's fuzzy enum conversion: case-insensitive, '-' and ' ' read as '_'.
    value = raw.strip().upper().replace("-", "_").replace(" ", "_")
    if value not in allowed:
        raise _message(400, f"{name} must be one of [{', '.join(allowed)}]")
    return value


def _zoned(request: web.Request, name: str, default: datetime) -> datetime:
    raw = request.query.get(name)
    if raw is None:
        return default
    try:
        value = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        value = None
    if value is None or value.tzinfo is None:
        raise _message(400, f'query param {name} must be a date-time with a zone, got "{raw}"')
    return value.astimezone(UTC)


def _day(request: web.Request, name: str) -> datetime | None:
    raw = request.query.get(name)
    if raw is None:
        return None
    try:
        return datetime.strptime(raw, "%Y-%m-%d").replace(tzinfo=UTC)
    except ValueError:
        raise _message(400, f"query param {name} must be YYYY-MM-DD") from None


# -- handlers ---------------------------------------------------------------------------------


async def _post_lineage(request: web.Request) -> web.Response:
    if request.content_type != "application/json":
        raise _message(415, "HTTP 415 Unsupported Media Type")
    raw = await request.read()
    try:
        body = json.loads(raw) if raw.strip() else None
    except ValueError:
        raise _message(400, "Unable to process JSON") from None
    try:
        request.app[STATE].ingest(body)
    except EventValidationError as exc:
        raise ApiError(422, {"errors": exc.errors}) from exc
    except EventFormatError as exc:
        raise _message(400, str(exc)) from exc
    except EventRejectedError as exc:
        raise ApiError(400, None) from exc
    return _reply(None, 201)


async def _get_lineage(request: web.Request) -> web.Response:
    node_id = request.query.get("nodeId")
    if node_id is None:
        raise ApiError(400, {"errors": ["query param nodeId must not be null"]})
    try:
        kind, namespace, name = parse_node_id(node_id)
    except ValueError as exc:
        raise _message(400, str(exc)) from exc
    if kind not in ("job", "dataset"):
        raise _message(404, "Node must be a dataset node or job node")
    graph = views.lineage_graph(
        request.app[STATE], kind, (namespace, name), _int(request, "depth", 20, None)
    )
    if graph is None:
        raise _message(404, "Could not find node")  # LineageService's NodeIdNotFoundException
    return _reply({"graph": graph})


async def _namespaces(request: web.Request) -> web.Response:
    limit, offset = _int(request, "limit", 100), _int(request, "offset", 0)
    spaces = sorted(request.app[STATE].namespaces.values(), key=lambda n: n.name)
    return _reply({"namespaces": [views.namespace_json(n) for n in spaces[offset:][:limit]]})


async def _namespace(request: web.Request) -> web.Response:
    name = request.match_info["namespace"]
    namespace = request.app[STATE].namespaces.get(name)
    if namespace is None:
        raise _message(404, f"Namespace '{name}' not found.")
    return _reply(views.namespace_json(namespace))


def _require_namespace(request: web.Request) -> str:
    name = request.match_info["namespace"]
    if name not in request.app[STATE].namespaces:
        raise _message(404, f"Namespace '{name}' not found.")
    return name


def _jobs_reply(request: web.Request, namespace: str | None) -> web.Response:
    states = {
        _choice(s, "lastRunStates", _RUN_STATES) for s in request.query.getall("lastRunStates", [])
    }
    jobs = [
        j for j in request.app[STATE].jobs.values() if namespace is None or j.namespace == namespace
    ]
    page, total = views.jobs_page(
        jobs, states or None, _int(request, "limit", 100), _int(request, "offset", 0)
    )
    return _reply({"jobs": page, "totalCount": total})


async def _namespace_jobs(request: web.Request) -> web.Response:
    # No namespace check here: an unknown namespace lists no jobs (0.51 behaviour).
    return _jobs_reply(request, request.match_info["namespace"])


async def _all_jobs(request: web.Request) -> web.Response:
    return _jobs_reply(request, None)


def _require_job(request: web.Request) -> Job:
    namespace = _require_namespace(request)
    name = request.match_info["job"]
    job = request.app[STATE].jobs.get((namespace, name))
    if job is None:
        raise _message(404, f"Job '{name}' not found.")
    return job


async def _job(request: web.Request) -> web.Response:
    return _reply(views.job_json(_require_job(request)))


async def _job_runs(request: web.Request) -> web.Response:
    job = _require_job(request)
    page, total = views.runs_page(job, _int(request, "limit", 100), _int(request, "offset", 0))
    return _reply({"runs": page, "totalCount": total})


def _require_run(request: web.Request) -> Run:
    raw = request.match_info["id"]
    if not _UUID.match(raw):
        raise _message(400, f"Invalid UUID string: {raw}")
    run_uuid = uuid.UUID(raw)
    run = request.app[STATE].runs.get(run_uuid)
    if run is None:
        raise _message(404, f"Run '{run_uuid}' not found.")
    return run


async def _run(request: web.Request) -> web.Response:
    return _reply(views.run_json(_require_run(request)))


async def _run_facets(request: web.Request) -> web.Response:
    run = _require_run(request)
    kind = _choice(request.query.get("type", ""), "type", ("RUN", "JOB"))
    facets = views.run_json(run)["facets"] if kind == "RUN" else views.run_job_facets(run)
    return _reply({"runId": str(run.uuid), "facets": facets})


async def _events(request: web.Request) -> web.Response:
    direction = _choice(
        request.query.get("sortDirection", "desc"), "sortDirection", ("ASC", "DESC")
    )
    events, total = views.events_page(
        request.app[STATE],
        after=_zoned(request, "after", _EPOCH),
        before=_zoned(request, "before", _DEFAULT_BEFORE),
        ascending=direction == "ASC",
        limit=_int(request, "limit", 100),
        offset=_int(request, "offset", 0),
    )
    return _reply({"events": events, "totalCount": total})


async def _search(request: web.Request) -> web.Response:
    query = request.query.get("q", "")
    if not query.strip():
        raise ApiError(400, {"errors": ["query param q must not be blank"]})
    raw_filter, raw_sort = request.query.get("filter"), request.query.get("sort", "name")
    kind = None if raw_filter is None else _choice(raw_filter, "filter", ("DATASET", "JOB"))
    _choice(raw_sort, "sort", ("NAME", "UPDATE_AT"))  # validated; ORDER BY :sort has no effect
    results = views.search(
        request.app[STATE],
        query,
        kind,
        request.query.get("namespace"),
        after=_day(request, "after"),
        before=_day(request, "before"),
        limit=_int(request, "limit", 10),
    )
    return _reply({"totalCount": len(results), "results": results})


async def _datasets(request: web.Request) -> web.Response:
    namespace = _require_namespace(request)
    limit, offset = _int(request, "limit", 100), _int(request, "offset", 0)
    found = sorted(
        (d for d in request.app[STATE].datasets.values() if d.namespace == namespace),
        key=lambda d: d.name,
    )
    page = [views.dataset_json(d) for d in found[offset:][:limit]]
    return _reply({"datasets": page, "totalCount": len(found)})


async def _dataset(request: web.Request) -> web.Response:
    namespace = _require_namespace(request)
    name = request.match_info["dataset"]
    dataset = request.app[STATE].datasets.get((namespace, name))
    if dataset is None:
        raise _message(404, f"Dataset '{name}' not found.")
    return _reply(views.dataset_json(dataset))


def create_app(state: MarquezState | None = None) -> web.Application:
    """The aiohttp application serving Marquez's `/api/v1` routes over `state`."""
    app = web.Application(middlewares=[_log, _errors])
    app[STATE] = state if state is not None else MarquezState()
    app[REQUESTS] = deque(maxlen=_REQUESTS_KEPT)
    ns = "/api/v1/namespaces/{namespace}"
    app.router.add_post("/api/v1/lineage", _post_lineage)
    app.router.add_get("/api/v1/lineage", _get_lineage)
    app.router.add_get("/api/v1/namespaces", _namespaces)
    app.router.add_get(ns, _namespace)
    app.router.add_get(f"{ns}/jobs", _namespace_jobs)
    app.router.add_get(f"{ns}/jobs/{{job}}", _job)
    app.router.add_get(f"{ns}/jobs/{{job}}/runs", _job_runs)
    app.router.add_get(f"{ns}/datasets", _datasets)
    app.router.add_get(f"{ns}/datasets/{{dataset}}", _dataset)
    app.router.add_get("/api/v1/jobs", _all_jobs)
    app.router.add_get("/api/v1/jobs/runs/{id}", _run)
    app.router.add_get("/api/v1/jobs/runs/{id}/facets", _run_facets)
    app.router.add_get("/api/v1/events/lineage", _events)
    app.router.add_get("/api/v1/search", _search)
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


def seeded_state(seed: str | None) -> MarquezState:
    """A fresh state, with the named seed's events ingested directly (no HTTP)."""
    state = MarquezState()
    if seed is not None:
        factory = SEEDS.get(seed)
        if factory is None:
            raise ValueError(f"unknown seed {seed!r}; known seeds: {', '.join(sorted(SEEDS))}")
        for event in factory():
            state.ingest(event)
    return state


async def start_standin(
    *, host: str = "127.0.0.1", port: int = 0, seed: str | None = None
) -> StandInServer:
    """Start a stand-in on host:port (0 = an ephemeral port) and return it running."""
    state = seeded_state(seed)
    url, runner = await start_app(create_app(state), host, port)
    return StandInServer(url, state, runner)


@contextlib.asynccontextmanager
async def running_standin(
    *, host: str = "127.0.0.1", port: int = 0, seed: str | None = None
) -> AsyncIterator[StandInServer]:
    """Start a stand-in, yield it, and stop it on the way out."""
    server = await start_standin(host=host, port=port, seed=seed)
    try:
        yield server
    finally:
        await server.stop()


async def serve_forever(host: str = "127.0.0.1", port: int = 0, seed: str | None = None) -> None:
    """Run a stand-in until cancelled, announcing its URL on one stdout line."""
    async with running_standin(host=host, port=port, seed=seed) as server:
        print(f"Marquez stand-in listening on {server.url}", flush=True)
        await asyncio.Event().wait()
