"""The Airflow stand-in over real HTTP with every request and answer validated against the
published specs in tests/fixtures/airflow (v2-rest-api-generated.yaml from apache-airflow 3.3.2,
v1.yaml from 2.10.5, which 2.11.2 serves unchanged but for one description): the `Api` that
checks both directions, the spec fixtures, and stand-ins of either version on a ManualClock.

The specs are used as shipped, with two adjustments for openapi-core, not for the stand-in: it
cannot check oauth2 security schemes (they only warn), so v2 operations keep their equivalent
`HTTPBearer` alternative and v1's unused OpenID/Kerberos schemes are dropped; and it matches
content types exactly, so Airflow 2's `application/problem+json` errors are checked against the
spec's `application/json` error schema. Time is a ManualClock: nothing sleeps.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import aiohttp
import pytest
import yaml
from openapi_core import Config, OpenAPI
from openapi_core.datatypes import RequestParameters
from werkzeug.datastructures import Headers, ImmutableMultiDict
from yarl import URL

from standins.airflow.server import AirflowStandin, ManualClock, StandinDag, running_airflow_standin
from tests.support.openapi import SpecResponse, spec_errors
from tests.support.paths import AIRFLOW_SPECS

SPECS = AIRFLOW_SPECS
V1_SPEC, V2_SPEC = SPECS / "v1.yaml", SPECS / "v2-rest-api-generated.yaml"

T0 = datetime(2024, 1, 10, tzinfo=UTC)  # a Wednesday
RUN_SECONDS = 10.0
COMPLETION_DELAY = 5.0
DAGS = (
    StandinDag("etl.daily", "0 0 * * *"),
    StandinDag(
        "etl.weekly",
        "0 0 * * 0",
        tasks=("extract", "load"),
        params=(("full_refresh", False, "boolean"), ("region", "eu", None)),
    ),
    StandinDag("etl.paused", is_paused=True),
    StandinDag("etl.serial", max_active_runs=1),
    StandinDag("etl.no_limit", max_active_runs=None),  # a DAG row without max_active_runs
)
NO_BODY = object()


def day(n: int) -> datetime:
    return datetime(2024, 1, n, tzinfo=UTC)


def z(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def _load(path: Path) -> dict[str, Any]:
    with path.open(encoding="utf-8") as handle:
        loaded: dict[str, Any] = yaml.load(
            handle, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        )
    return loaded


@pytest.fixture(scope="module")
def v2_openapi() -> OpenAPI:
    spec = _load(V2_SPEC)
    for operations in spec["paths"].values():
        for operation in operations.values():
            if "security" in operation:
                operation["security"] = [{"HTTPBearer": []}]
    # The unmodified document is Airflow's own; validating it would only cost ~5 s per run.
    return OpenAPI.from_dict(spec, config=Config(spec_validator_cls=None))


@pytest.fixture(scope="module")
def v1_openapi() -> OpenAPI:
    spec = _load(V1_SPEC)
    schemes = spec["components"]["securitySchemes"]
    spec["components"]["securitySchemes"] = {"Basic": schemes["Basic"]}
    return OpenAPI.from_dict(spec)


@dataclass
class SpecRequest:
    """openapi-core's Request protocol for a request this test sent."""

    path: str
    parameters: RequestParameters
    method: str
    body: bytes | None
    content_type: str = "application/json"
    host_url: str = "http://localhost:8080"


@dataclass
class Api:
    """Sends requests to a stand-in and checks both directions against the spec."""

    base: str
    session: aiohttp.ClientSession
    openapi: OpenAPI
    headers: dict[str, str] = field(default_factory=dict)
    last_headers: dict[str, str] = field(default_factory=dict)

    async def call(
        self,
        method: str,
        path: str,
        body: Any = NO_BODY,
        *,
        params: Iterable[tuple[str, str]] = (),
        headers: dict[str, str] | None = None,
        check_request: bool = True,
        string_422: bool = False,
        in_spec: bool = True,
    ) -> tuple[int, Any]:
        """`path` is sent as written (callers percent-encode run ids). `string_422`: real Airflow
        answers this 422 with a string `detail`, where the spec documents a list."""
        sent = {**self.headers, **(headers or {})}
        data = None if body is NO_BODY else json.dumps(body).encode()
        if data is not None:
            sent["Content-Type"] = "application/json"
        query = list(params)
        url = URL(self.base + path, encoded=True)
        async with self.session.request(method, url, params=query, data=data, headers=sent) as resp:
            raw, status, content_type = await resp.read(), resp.status, resp.content_type
            self.last_headers = dict(resp.headers)
        parsed = json.loads(raw) if raw and "json" in content_type else raw.decode()
        if string_422:
            assert status == 422, parsed
            assert isinstance(parsed["detail"], str), parsed
            return status, parsed
        if in_spec:
            parameters = RequestParameters(query=ImmutableMultiDict(query), header=Headers(sent))
            request = SpecRequest(unquote(path), parameters, method.lower(), data)
            response_type = "application/json" if "json" in content_type else content_type
            response = SpecResponse(status, raw, response_type, Headers(dict(resp.headers)))
            try:
                if check_request:
                    self.openapi.validate_request(request)
                self.openapi.validate_response(request, response)
            except Exception as exc:  # openapi-core raises one of many error types
                raise AssertionError(f"{method} {path} -> {status}: {spec_errors(exc)}") from exc
        return status, parsed

    async def ok(self, method: str, path: str, body: Any = NO_BODY, **kw: Any) -> Any:
        status, parsed = await self.call(method, path, body, **kw)
        assert status == 200, parsed
        return parsed


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
async def airflow3(clock: ManualClock) -> AsyncIterator[AirflowStandin]:
    async with running_airflow_standin(
        api=3, dags=DAGS, clock=clock, run_seconds=RUN_SECONDS, completion_delay=COMPLETION_DELAY
    ) as server:
        yield server


@pytest.fixture
async def airflow2(clock: ManualClock) -> AsyncIterator[AirflowStandin]:
    async with running_airflow_standin(
        api=2, dags=DAGS, clock=clock, run_seconds=RUN_SECONDS, username="ops", password="s3cret"
    ) as server:
        yield server


async def login(session: aiohttp.ClientSession, base: str, user: str, password: str) -> str:
    body = {"username": user, "password": password}
    async with session.post(f"{base}/auth/token", json=body) as resp:
        assert resp.status == 201
        token: str = (await resp.json())["access_token"]
    return token


@pytest.fixture
async def v2(airflow3: AirflowStandin, v2_openapi: OpenAPI) -> AsyncIterator[Api]:
    async with aiohttp.ClientSession() as session:
        token = await login(session, airflow3.url, "admin", "admin")
        yield Api(airflow3.url, session, v2_openapi, {"Authorization": f"Bearer {token}"})


@pytest.fixture
async def v1(airflow2: AirflowStandin, v1_openapi: OpenAPI) -> AsyncIterator[Api]:
    async with aiohttp.ClientSession() as session:
        yield Api(airflow2.url, session, v1_openapi, {"Authorization": basic("ops", "s3cret")})


def assert_problem(body: dict[str, Any], status: int) -> None:
    """Airflow 2's Problem JSON, for errors its spec does not list for the operation."""
    assert body["status"] == status
    assert body["type"].endswith("#section/Errors/BadRequest")
    assert isinstance(body["title"], str)
    assert isinstance(body["detail"], str)


def states(runs: list[dict[str, Any]]) -> list[str]:
    return [r["state"] for r in runs]
