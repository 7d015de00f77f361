"""An Airflow stand-in: Airflow 3's REST API (`/api/v2`, JWT from `POST /auth/token`) or
Airflow 2's stable API (`/api/v1`, HTTP basic auth), over a simulated scheduler.

Shared by the tests and the local demo. Shapes, status codes and messages follow the published
specs (tests/fixtures/airflow/v2-rest-api-generated.yaml and v1.yaml) and the behaviour observed
on a real Airflow 3.3.2 (tests/fixtures/airflow/SOURCE.md). Besides DAGs, runs and backfills it
serves a run's task instances, clearing them (the failed ones only: clearing.py) and the assets
the DAGs declare (assets.py). One stand-in serves one major
version, like a real server: `api=3` serves `/auth/token` and `/api/v2`, `api=2` serves `/api/v1`.
Runs progress on the injected clock (see state.py); nothing needs a background task.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from datetime import datetime
from http import HTTPStatus

from aiohttp import web

from standins.airflow import v1 as airflow_v1
from standins.airflow import v2 as airflow_v2
from standins.airflow.auth import basic_credentials, bearer_token
from standins.airflow.dags import (
    FOOD_DELIVERY_DAGS,
    CronTimetable,
    HistoricRun,
    ManualClock,
    StandinDag,
    food_delivery_history,
    system_clock,
)
from standins.airflow.http import STATE, USER, HttpError, detail, problem
from standins.airflow.state import AirflowState, Backfill, DagRun, TaskInstance
from standins.http_server import start_app

__all__ = [
    "FOOD_DELIVERY_DAGS",
    "AirflowStandin",
    "AirflowState",
    "Backfill",
    "CronTimetable",
    "DagRun",
    "HistoricRun",
    "ManualClock",
    "StandinDag",
    "TaskInstance",
    "create_app",
    "food_delivery_history",
    "running_airflow_standin",
    "serve_forever",
    "start_airflow_standin",
]

API: web.AppKey[int] = web.AppKey("airflow_api", int)
_NOT_FOUND_V1 = (
    "The requested URL was not found on the server. If you entered the URL manually please "
    "check your spelling and try again."
)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _route_error(request: web.Request, exc: web.HTTPException) -> HttpError:
    """Unknown paths and methods, in the shape of the API the path belongs to."""
    if request.app[API] == 2:
        body = {"detail": _NOT_FOUND_V1 if exc.status == 404 else "Method Not Allowed",
                "status": exc.status, "title": exc.reason, "type": "about:blank"}  # fmt: skip
        return HttpError(exc.status, body, content_type="application/problem+json")
    return detail(exc.status, exc.reason)


def _authenticate(request: web.Request) -> None:
    """Raise the API's 401 unless the request carries valid credentials; note the user."""
    state, header = request.app[STATE], request.headers.get("Authorization")
    if request.app[API] == 2:
        if request.path in airflow_v1.PUBLIC_PATHS:
            return
        if basic_credentials(header) != request.app[airflow_v2.CREDENTIALS]:
            error = problem(401)
            error.headers["WWW-Authenticate"] = "Basic"
            raise error
        request[USER] = request.app[airflow_v2.CREDENTIALS][0]
        return
    if request.path in airflow_v2.PUBLIC_PATHS:
        return
    token = bearer_token(header)
    trouble = state.tokens.check(token)
    if trouble is not None:
        message = {"missing": "Not authenticated", "expired": "Token Expired"}.get(
            trouble, "Invalid JWT token"
        )
        raise HttpError(401, {"detail": message}, headers={"WWW-Authenticate": "Bearer"})
    request[USER] = request.app[airflow_v2.CREDENTIALS][0]


def _authorize(request: web.Request) -> None:
    """Raise the API's 403 for an authenticated user the stand-in was told to forbid."""
    if USER not in request or not request.app[STATE].forbidden:
        return
    if request.app[API] == 2:
        raise problem(403)
    raise detail(403, "Forbidden")


def _outage_page(status: int) -> web.Response:
    """What a proxy (nginx) in front of an unavailable Airflow answers."""
    title = f"{status} {HTTPStatus(status).phrase}"
    page = f"<html><head><title>{title}</title></head><body><center><h1>{title}</h1></center>"
    return web.Response(
        status=status, text=page + "<hr><center>nginx</center></body></html>",
        content_type="text/html",
    )  # fmt: skip


@web.middleware
async def _middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    state = request.app[STATE]
    status = 500
    try:
        state.advance()
        outage = state.take_outage()
        if outage is not None:
            status = outage
            return _outage_page(outage)
        route_problem = request.match_info.http_exception
        if route_problem is not None:
            raise _route_error(request, route_problem)
        _authenticate(request)
        _authorize(request)
        response = await handler(request)
        status = response.status
        return response
    except HttpError as exc:
        status = exc.status
        return exc.response()
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        error = _route_error(request, exc)
        status = error.status
        return error.response()
    finally:
        state.requests.append((request.method, request.path, status))


def create_app(
    state: AirflowState, *, api: int = 3, username: str = "admin", password: str = "admin"
) -> web.Application:
    """The aiohttp application serving Airflow `api` (2 or 3) over `state`."""
    if api not in (2, 3):
        raise ValueError(f"api must be 2 (Airflow 2, /api/v1) or 3 (Airflow 3, /api/v2), not {api}")
    app = web.Application(middlewares=[_middleware])
    app[STATE] = state
    app[API] = api
    app[airflow_v2.CREDENTIALS] = (username, password)
    (airflow_v1 if api == 2 else airflow_v2).add_routes(app)
    return app


class AirflowStandin:
    """A running stand-in: base `url` (no trailing slash), `state`, `api` and credentials."""

    def __init__(
        self, url: str, state: AirflowState, runner: web.AppRunner, api: int, auth: tuple[str, str]
    ) -> None:
        self.url = url
        self.state = state
        self.api = api
        self.username, self.password = auth
        self._runner = runner

    @property
    def api_url(self) -> str:
        return f"{self.url}/api/{'v1' if self.api == 2 else 'v2'}"

    async def stop(self) -> None:
        await self._runner.cleanup()


async def start_airflow_standin(
    *,
    api: int = 3,
    dags: Iterable[StandinDag] = (),
    clock: Callable[[], datetime] = system_clock,
    run_seconds: float = 0.3,
    completion_delay: float = 0.05,
    username: str = "admin",
    password: str = "admin",
    history: Iterable[HistoricRun] = (),
    host: str = "127.0.0.1",
    port: int = 0,
) -> AirflowStandin:
    """Start a stand-in on host:port (0 = an ephemeral port) and return it running."""
    state = AirflowState(
        dags, clock=clock, run_seconds=run_seconds, completion_delay=completion_delay,
        history=history,
    )  # fmt: skip
    app = create_app(state, api=api, username=username, password=password)
    url, runner = await start_app(app, host, port)
    return AirflowStandin(url, state, runner, api, (username, password))


@contextlib.asynccontextmanager
async def running_airflow_standin(
    *,
    api: int = 3,
    dags: Iterable[StandinDag] = (),
    clock: Callable[[], datetime] = system_clock,
    run_seconds: float = 0.3,
    completion_delay: float = 0.05,
    username: str = "admin",
    password: str = "admin",
    history: Iterable[HistoricRun] = (),
    host: str = "127.0.0.1",
    port: int = 0,
) -> AsyncIterator[AirflowStandin]:
    """Start a stand-in, yield it, and stop it on the way out.

    `run_seconds` is how long each run takes (StandinDag.run_seconds overrides it per DAG);
    `completion_delay` is how long after its last run a backfill gets `completed_at` (about 30 s
    on a real Airflow); `history` pre-creates finished runs (see `food_delivery_history`).
    """
    server = await start_airflow_standin(
        api=api, dags=dags, clock=clock, run_seconds=run_seconds,
        completion_delay=completion_delay, username=username, password=password,
        history=history, host=host, port=port,
    )  # fmt: skip
    try:
        yield server
    finally:
        await server.stop()


async def serve_forever(
    host: str = "127.0.0.1", port: int = 0, api: int = 3, run_seconds: float = 2.0
) -> None:
    """Run a stand-in with the food_delivery DAGs and history until cancelled (the demo)."""
    async with running_airflow_standin(
        api=api, dags=FOOD_DELIVERY_DAGS, history=food_delivery_history(), host=host, port=port,
        run_seconds=run_seconds,
    ) as server:  # fmt: skip
        print(f"Airflow {api} stand-in listening on {server.url}", flush=True)
        await asyncio.Event().wait()
