"""The stand-in's aiohttp middlewares: the request log, Dropwizard's error shapes, latency."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from types import MappingProxyType

from aiohttp import web

from standins.marquez.errors import ApiError
from standins.marquez.events import JsonDict

__all__ = [
    "LATENCY",
    "LATENCY_ROUTES",
    "REQUESTS",
    "REQUESTS_KEPT",
    "errors",
    "latency",
    "log",
    "reply",
]

REQUESTS: web.AppKey[deque[str]] = web.AppKey("marquez_requests", deque)
"""The latest requests received, as `METHOD /path?query` (tests count what a client asked)."""
LATENCY: web.AppKey[Mapping[str, float]] = web.AppKey("marquez_latency", Mapping)
REQUESTS_KEPT = 100_000

LATENCY_ROUTES: Mapping[str, str] = MappingProxyType(
    {
        "post": "POST /api/v1/lineage",
        "lineage": "GET /api/v1/lineage",
        "namespaces": "GET /api/v1/namespaces[/{namespace}]",
        "jobs": "GET /api/v1/jobs, GET /api/v1/namespaces/{namespace}/jobs",
        "job": "GET /api/v1/namespaces/{namespace}/jobs/{job}",
        "runs": "GET …/jobs/{job}/runs, GET /api/v1/jobs/runs/{id}[/facets]",
        "datasets": "GET /api/v1/namespaces/{namespace}/datasets[/{dataset}]",
        "events": "GET /api/v1/events/lineage",
        "search": "GET /api/v1/search",
    }
)
"""The names `latency` may delay (`"*"` delays every route). Real Marquez is slow where these
are: the lineage CTE on big graphs (issue #3058), `GET /jobs` with one findByLatestJob per
job (issue #2987) — FIDELITY.md row 13. A `lineage` delay is for the default depth (20 job
hops): LineageDao's recursive CTE walks `depth` hops, so a shallower request is delayed in
proportion (a depth-2 request a tenth as long), as a small neighbourhood is cheap there too."""
LINEAGE_DEPTH = 20  # OpenLineageResource.getLineage's default depth


def reply(body: JsonDict | None, status: int = 200) -> web.Response:
    if body is None:
        return web.Response(status=status)
    return web.json_response(body, status=status)


@web.middleware
async def log(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    request.app[REQUESTS].append(f"{request.method} {request.path_qs}")
    return await handler(request)


@web.middleware
async def errors(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    try:
        return await handler(request)
    except ApiError as exc:
        return reply(exc.body, exc.status)
    except web.HTTPException as exc:  # unknown route or method: Jersey's JSON, not aiohttp's text
        if exc.status < 400:
            raise
        return reply({"code": exc.status, "message": f"HTTP {exc.status} {exc.reason}"}, exc.status)


@web.middleware
async def latency(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    delays = request.app[LATENCY]
    group = (request.match_info.route.name or "").partition(".")[0]
    delay = delays.get(group, delays.get("*", 0.0))
    if group == "lineage" and delay > 0:
        try:
            depth = int(request.query.get("depth", LINEAGE_DEPTH))
        except ValueError:
            depth = LINEAGE_DEPTH  # the handler answers the bad value
        delay *= min(max(depth, 1), LINEAGE_DEPTH) / LINEAGE_DEPTH
    if delay > 0:
        await asyncio.sleep(delay)
    return await handler(request)
