"""bot.clients.airflow against tiny local HTTP servers: error mapping, retries, auth, encoding.

The contract with a real Airflow 3.3.2 is in tests/airflow/test_airflow_client.py; these cases
make the server misbehave in ways a real one rarely does on demand.
"""

from __future__ import annotations

import asyncio
import base64
import json
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from bot.clients.airflow import (
    Airflow2Client,
    Airflow3Client,
    AirflowAuthError,
    AirflowBadResponse,
    AirflowConflict,
    AirflowNotFound,
    AirflowRequestError,
    AirflowUnavailable,
    BackfillInfo,
    RetryPolicy,
    connect_airflow,
)

FAST = RetryPolicy(attempts=3, backoff_s=0.001, max_backoff_s=0.005)
D4, D6 = datetime(2021, 6, 4, tzinfo=UTC), datetime(2021, 6, 6, tzinfo=UTC)
Route = Callable[[web.Request], Awaitable[web.StreamResponse]]

BACKFILL = {
    "id": 7,
    "dag_id": "example.etl_orders",
    "from_date": "2021-06-04T00:00:00Z",
    "to_date": "2021-06-06T00:00:00Z",
    "dag_run_conf": None,
    "is_paused": False,
    "reprocess_behavior": "completed",
    "max_active_runs": 1,
    "created_at": "2026-11-22T07:20:38.924906Z",
    "completed_at": None,
    "updated_at": "2026-11-22T07:20:38.924913Z",
    "dag_display_name": "example.etl_orders",
}
DAG = {"dag_id": "example.etl_orders", "is_paused": False, "is_stale": False}


def run(day: int, run_type: str = "backfill", **extra: Any) -> dict[str, Any]:
    return {
        "dag_run_id": f"{run_type}__2021-06-{day + 1:02d}T00:00:00+00:00",
        "dag_id": "example.etl_orders",
        "logical_date": f"2021-06-{day:02d}T00:00:00Z",
        "data_interval_start": f"2021-06-{day:02d}T00:00:00Z",
        "data_interval_end": f"2021-06-{day + 1:02d}T00:00:00Z",
        "start_date": None,
        "end_date": None,
        "run_type": run_type,
        "state": "queued",
        **extra,
    }


@dataclass
class Seen:
    method: str
    raw_path: str
    headers: dict[str, str]
    body: bytes

    @property
    def path(self) -> str:
        return urlsplit(self.raw_path).path

    @property
    def query(self) -> dict[str, list[str]]:
        return parse_qs(urlsplit(self.raw_path).query)

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class FakeAirflow:
    """Routes `(method, path)` to handlers; records every request; issues tokens "t1", "t2"..."""

    routes: dict[tuple[str, str], Route] = field(default_factory=dict)
    seen: list[Seen] = field(default_factory=list)
    tokens: int = 0
    server: TestServer | None = None

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.seen.append(Seen(request.method, request.raw_path, dict(request.headers), body))
        if (request.method, request.path) == ("POST", "/auth/token") and (
            "POST",
            "/auth/token",
        ) not in self.routes:
            self.tokens += 1
            return web.json_response({"access_token": f"t{self.tokens}"}, status=201)
        route = self.routes.get((request.method, request.raw_path.split("?")[0]))
        if route is None:
            return web.json_response({"detail": "Not Found"}, status=404)
        return await route(request)

    @property
    def url(self) -> str:
        assert self.server is not None
        return str(self.server.make_url("")).rstrip("/")

    def calls(self, method: str, path: str) -> list[Seen]:
        return [s for s in self.seen if s.method == method and s.path == path]


@pytest.fixture
async def fake() -> AsyncIterator[FakeAirflow]:
    airflow = FakeAirflow()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", airflow._dispatch)
    airflow.server = TestServer(app, host="127.0.0.1", port=0)
    await airflow.server.start_server()
    yield airflow
    await airflow.server.close()


def answer(body: Any, status: int = 200) -> Route:
    async def handler(request: web.Request) -> web.StreamResponse:
        return web.json_response(body, status=status)

    return handler


def sequence(*handlers: Route) -> Route:
    """Answer the n-th call with the n-th handler (the last one repeats)."""
    calls = 0

    async def handler(request: web.Request) -> web.StreamResponse:
        nonlocal calls
        calls += 1
        return await handlers[min(calls, len(handlers)) - 1](request)

    return handler


def v3(fake: FakeAirflow, **kw: Any) -> Airflow3Client:
    kw.setdefault("retry", FAST)
    return Airflow3Client(fake.url, "admin", "secret", **kw)


def v2(fake: FakeAirflow, **kw: Any) -> Airflow2Client:
    kw.setdefault("retry", FAST)
    return Airflow2Client(fake.url, "admin", "secret", **kw)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# --- connect_airflow --------------------------------------------------------------------


async def test_connect_picks_v3_without_a_token(fake: FakeAirflow) -> None:
    fake.routes["GET", "/api/v2/version"] = answer({"version": "3.3.2", "git_version": None})
    client = await connect_airflow(fake.url, "admin", "secret", retry=FAST)
    async with client:
        assert isinstance(client, Airflow3Client)
        assert client.api_version == 3
    assert "Authorization" not in fake.seen[0].headers
    assert fake.tokens == 0


async def test_connect_falls_back_to_v1_with_basic_auth(fake: FakeAirflow) -> None:
    fake.routes["GET", "/api/v1/version"] = answer({"version": "2.10.5", "git_version": None})
    client = await connect_airflow(fake.url + "/", "admin", "secret", retry=FAST)
    async with client:
        assert isinstance(client, Airflow2Client)
        assert client.api_version == 2
        assert await client.version() == "2.10.5"
    v1 = fake.calls("GET", "/api/v1/version")[0]
    assert v1.headers["Authorization"] == "Basic " + base64.b64encode(b"admin:secret").decode()


async def test_connect_to_something_else_is_a_bad_response(fake: FakeAirflow) -> None:
    with pytest.raises(AirflowBadResponse, match="does not look like Airflow"):
        await connect_airflow(fake.url, None, None, retry=FAST)


async def test_connect_unreachable_names_airflow_url() -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    with pytest.raises(AirflowUnavailable) as caught:
        await connect_airflow(url, "admin", "secret", retry=FAST)
    assert f"AIRFLOW_URL={url}" in caught.value.detail
    assert "Connection refused" in caught.value.detail
    assert "3 attempts" in caught.value.detail
    assert caught.value.status is None


# --- responses that are not what the spec promises -----------------------------------------


async def test_body_that_is_not_json_is_a_bad_response(fake: FakeAirflow) -> None:
    async def html(request: web.Request) -> web.StreamResponse:
        return web.Response(text="<html>proxy login</html>", content_type="text/html")

    fake.routes["GET", "/api/v2/dags/x"] = html
    async with v3(fake) as client:
        with pytest.raises(AirflowBadResponse, match="not JSON") as caught:
            await client.get_dag("x")
    assert caught.value.status == 200


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ({**BACKFILL, "id": "7"}, "'id' is missing or not an integer"),
        ({k: v for k, v in BACKFILL.items() if k != "dag_id"}, "'dag_id' is missing"),
        ({**BACKFILL, "from_date": "yesterday"}, "'from_date' is not an ISO-8601"),
        ({**BACKFILL, "to_date": "2021-06-06T00:00:00"}, "'to_date' has no UTC offset"),
        ({**BACKFILL, "is_paused": "false"}, "'is_paused' is missing or not a boolean"),
        ([BACKFILL], "a backfill is not a JSON object"),
    ],
)
async def test_missing_or_mistyped_fields_are_bad_responses(
    fake: FakeAirflow, body: Any, problem: str
) -> None:
    fake.routes["GET", "/api/v2/backfills/7"] = answer(body)
    async with v3(fake) as client:
        with pytest.raises(AirflowBadResponse, match=problem):
            await client.get_backfill(7)


@pytest.mark.parametrize(
    ("api", "dag"),
    [
        (3, DAG | {"max_active_runs": "3"}),
        (2, {"dag_id": "example.etl_orders", "is_paused": False, "max_active_runs": 2.5}),
    ],
)
async def test_a_mistyped_max_active_runs_is_a_bad_response(
    fake: FakeAirflow, api: int, dag: dict[str, Any]
) -> None:
    fake.routes["GET", f"/api/v{api - 1}/dags/example.etl_orders"] = answer(dag)
    async with v3(fake) if api == 3 else v2(fake) as client:
        with pytest.raises(AirflowBadResponse, match="'max_active_runs' is missing or not an"):
            await client.get_dag("example.etl_orders")


async def test_backfill_is_parsed_to_utc(fake: FakeAirflow) -> None:
    fake.routes["GET", "/api/v2/backfills/7"] = answer(
        {**BACKFILL, "from_date": "2021-06-04T02:00:00+02:00"}
    )
    async with v3(fake) as client:
        backfill = await client.get_backfill(7)
    assert backfill == BackfillInfo(
        id=7,
        dag_id="example.etl_orders",
        from_date=D4,
        to_date=D6,
        reprocess_behavior="completed",
        max_active_runs=1,
        is_paused=False,
        created_at=datetime(2026, 11, 22, 7, 20, 38, 924906, tzinfo=UTC),
        completed_at=None,
    )
    assert backfill.from_date.tzinfo is UTC


async def test_dry_run_entry_without_logical_date_is_a_bad_response(fake: FakeAirflow) -> None:
    fake.routes["POST", "/api/v2/backfills/dry_run"] = answer(
        {"backfills": [{"logical_date": None, "partition_key": "k"}], "total_entries": 1}
    )
    async with v3(fake) as client:
        with pytest.raises(AirflowBadResponse, match="no logical_date"):
            await client.dry_run_backfill("example.etl_orders", D4, D6)


# --- retries ------------------------------------------------------------------------------


async def test_get_500_then_success_is_retried(fake: FakeAirflow) -> None:
    fake.routes["GET", "/api/v2/dags/x"] = sequence(
        answer({"detail": "boom"}, 500), answer({"detail": "gateway"}, 502), answer(DAG)
    )
    async with v3(fake) as client:
        assert (await client.get_dag("x")).dag_id == "example.etl_orders"
    assert len(fake.calls("GET", "/api/v2/dags/x")) == 3


async def test_get_5xx_exhausted_is_unavailable(fake: FakeAirflow) -> None:
    fake.routes["GET", "/api/v2/dags/x"] = answer({"detail": "database down"}, 503)
    async with v3(fake) as client:
        with pytest.raises(AirflowUnavailable) as caught:
            await client.get_dag("x")
    assert caught.value.status == 503
    assert "database down" in caught.value.detail
    assert "3 attempts" in caught.value.detail


async def test_create_backfill_is_not_retried_after_a_500(fake: FakeAirflow) -> None:
    fake.routes["POST", "/api/v2/backfills"] = sequence(
        answer({"detail": "boom"}, 500), answer(BACKFILL)
    )
    async with v3(fake) as client:
        with pytest.raises(AirflowUnavailable, match="may have been carried out") as caught:
            await client.create_backfill("example.etl_orders", D4, D6)
    assert caught.value.status == 500
    assert len(fake.calls("POST", "/api/v2/backfills")) == 1


async def test_create_backfill_is_not_retried_after_a_timeout(fake: FakeAirflow) -> None:
    async def slow(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(1)
        return web.json_response(BACKFILL)

    fake.routes["POST", "/api/v2/backfills"] = slow
    async with v3(fake, timeout_s=0.2) as client:
        with pytest.raises(AirflowUnavailable, match=r"no answer within 0\.2s") as caught:
            await client.create_backfill("example.etl_orders", D4, D6)
    assert "may have been carried out" in caught.value.detail
    assert len(fake.calls("POST", "/api/v2/backfills")) == 1


async def test_get_timeout_is_retried(fake: FakeAirflow) -> None:
    async def slow(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(1)
        return web.json_response(DAG)

    fake.routes["GET", "/api/v2/dags/x"] = sequence(slow, answer(DAG))
    async with v3(fake, timeout_s=0.2) as client:
        assert (await client.get_dag("x")).is_paused is False
    assert len(fake.calls("GET", "/api/v2/dags/x")) == 2


async def test_connection_refused_is_unavailable() -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    async with Airflow3Client(url, None, None, retry=RetryPolicy(2, 0.001, 0.001)) as client:
        with pytest.raises(AirflowUnavailable) as caught:
            await client.create_backfill("x", D4, D6)
    # Refused means never sent: retried even for a POST, and no "may have been carried out".
    assert "is unreachable: Connection refused (2 attempts, POST /api/v2/backfills)" in str(
        caught.value
    )
    assert "carried out" not in caught.value.detail


# --- 4xx mapping --------------------------------------------------------------------------


async def test_409_is_a_conflict_with_airflows_text(fake: FakeAirflow) -> None:
    detail = "There is already a running backfill for dag example.etl_orders"
    fake.routes["POST", "/api/v2/backfills"] = answer({"detail": detail}, 409)
    async with v3(fake) as client:
        with pytest.raises(AirflowConflict) as caught:
            await client.create_backfill("example.etl_orders", D4, D6)
    assert caught.value.detail == detail
    assert caught.value.status == 409
    assert str(caught.value) == f"{detail} (HTTP 409 from POST /api/v2/backfills)"


async def test_422_validation_list_is_readable(fake: FakeAirflow) -> None:
    fake.routes["POST", "/api/v2/backfills/dry_run"] = answer(
        {
            "detail": [
                {"type": "x", "loc": ["body", "from_date"], "msg": "Input should be a datetime"},
                {"type": "y", "loc": ["body", "max_active_runs"], "msg": "Field required"},
            ]
        },
        422,
    )
    async with v3(fake) as client:
        with pytest.raises(AirflowRequestError) as caught:
            await client.dry_run_backfill("example.etl_orders", D4, D6)
    assert caught.value.detail == (
        "from_date: Input should be a datetime; max_active_runs: Field required"
    )
    assert len(fake.calls("POST", "/api/v2/backfills/dry_run")) == 1


async def test_404_and_v1_problem_details(fake: FakeAirflow) -> None:
    fake.routes["GET", "/api/v1/dags/x/dagRuns/r"] = answer(
        {
            "detail": "DAGRun with DAG ID: 'x' and DagRun ID: 'r' not found",
            "status": 404,
            "title": "DAGRun not found",
            "type": "about:blank",
        },
        404,
    )
    async with v2(fake) as client:
        with pytest.raises(AirflowNotFound, match="DagRun ID: 'r' not found"):
            await client.get_dag_run("x", "r")


# --- auth ---------------------------------------------------------------------------------


async def test_token_is_fetched_once_and_sent(fake: FakeAirflow) -> None:
    fake.routes["GET", "/api/v2/dags/x"] = answer(DAG)
    async with v3(fake) as client:
        await asyncio.gather(*(client.get_dag("x") for _ in range(5)))
    assert fake.tokens == 1
    assert fake.calls("POST", "/auth/token")[0].json() == {
        "username": "admin",
        "password": "secret",
    }
    assert {s.headers["Authorization"] for s in fake.calls("GET", "/api/v2/dags/x")} == {
        "Bearer t1"
    }


@pytest.mark.parametrize("status", [401, 403])
async def test_refused_token_is_renewed_once_even_for_a_post(
    fake: FakeAirflow, status: int
) -> None:
    async def needs_t2(request: web.Request) -> web.StreamResponse:
        if request.headers.get("Authorization") != "Bearer t2":
            return web.json_response({"detail": "Invalid JWT token"}, status=status)
        return web.json_response(BACKFILL)

    fake.routes["POST", "/api/v2/backfills"] = needs_t2
    async with v3(fake) as client:
        assert (await client.create_backfill("example.etl_orders", D4, D6)).id == 7
    assert fake.tokens == 2
    assert len(fake.calls("POST", "/api/v2/backfills")) == 2


async def test_refused_twice_is_an_auth_error(fake: FakeAirflow) -> None:
    fake.routes["GET", "/api/v2/dags/x"] = answer({"detail": "Forbidden"}, 403)
    async with v3(fake) as client:
        with pytest.raises(AirflowAuthError, match="permissions") as caught:
            await client.get_dag("x")
    assert caught.value.status == 403
    assert fake.tokens == 2


async def test_bad_password_is_an_auth_error_naming_the_settings(fake: FakeAirflow) -> None:
    fake.routes["POST", "/auth/token"] = answer({"detail": "Invalid credentials"}, 401)
    async with v3(fake) as client:
        with pytest.raises(AirflowAuthError, match="AIRFLOW_PASSWORD") as caught:
            await client.get_dag("x")
    assert "Invalid credentials" in caught.value.detail
    assert fake.calls("GET", "/api/v2/dags/x") == []


async def test_a_refused_login_is_not_tried_again_for_a_while(fake: FakeAirflow) -> None:
    fake.routes["POST", "/auth/token"] = answer({"detail": "Invalid credentials"}, 401)
    fake.routes["GET", "/api/v2/dags/x"] = answer(DAG)
    async with v3(fake) as client:
        for _ in range(5):
            with pytest.raises(AirflowAuthError, match="refused the login of 'admin'") as caught:
                await client.get_dag("x")
            assert caught.value.status == 401
            assert caught.value.endpoint == "POST /auth/token"
        await asyncio.gather(*(client.get_dag("x") for _ in range(5)), return_exceptions=True)
        assert len(fake.calls("POST", "/auth/token")) == 1
        assert str(caught.value) == (
            f"Airflow at {fake.url} refused the login of 'admin': Invalid credentials; check "
            "AIRFLOW_USERNAME and AIRFLOW_PASSWORD (HTTP 401 from POST /auth/token)"
        )

        client.login_retry_s = 0  # the while has passed: the (fixed) password is tried again
        del fake.routes["POST", "/auth/token"]
        assert (await client.get_dag("x")).dag_id == "example.etl_orders"
    assert len(fake.calls("POST", "/auth/token")) == 2
    assert fake.calls("GET", "/api/v2/dags/x")[0].headers["Authorization"] == "Bearer t1"


async def test_v1_a_401_is_not_sent_again_for_a_while_but_a_403_is(fake: FakeAirflow) -> None:
    fake.routes["GET", "/api/v1/dags/forbidden"] = answer({"title": "Forbidden"}, 403)
    fake.routes["GET", "/api/v1/dags/x"] = answer({"title": "Unauthorized"}, 401)
    async with v2(fake) as client:
        for _ in range(2):  # a permission this call lacks says nothing of the password
            with pytest.raises(AirflowAuthError, match="permissions"):
                await client.get_dag("forbidden")
        for _ in range(3):
            with pytest.raises(AirflowAuthError, match="AIRFLOW_PASSWORD") as caught:
                await client.get_dag("x")
            assert caught.value.status == 401
        with pytest.raises(AirflowAuthError, match="Unauthorized"):
            await client.get_dag("forbidden")  # not sent either: the password was refused
    assert len(fake.calls("GET", "/api/v1/dags/forbidden")) == 2
    assert len(fake.calls("GET", "/api/v1/dags/x")) == 1


async def test_429_is_unavailable_for_now_and_not_sent_again_at_once(fake: FakeAirflow) -> None:
    fake.routes["GET", "/api/v2/dags/x"] = answer({"detail": "Rate limit exceeded"}, 429)
    async with v3(fake) as client:
        with pytest.raises(AirflowUnavailable) as caught:
            await client.get_dag("x")
    assert caught.value.status == 429
    assert str(caught.value) == (
        f"Airflow at {fake.url} is rate-limiting requests: Rate limit exceeded "
        "(HTTP 429 from GET /api/v2/dags/x)"
    )
    assert len(fake.calls("GET", "/api/v2/dags/x")) == 1


async def test_connect_to_an_airflow_answering_503_keeps_its_words(fake: FakeAirflow) -> None:
    fake.routes["GET", "/api/v2/version"] = answer({"detail": "restarting"}, 503)
    with pytest.raises(AirflowUnavailable) as caught:
        await connect_airflow(fake.url, "admin", "secret", retry=FAST)
    assert caught.value.detail == (
        f"Airflow at {fake.url} is unavailable: HTTP 503: restarting "
        "(3 attempts, GET /api/v2/version)"
    )


# --- encoding and request shapes ------------------------------------------------------------


async def test_paths_and_queries_are_percent_encoded_and_paged(fake: FakeAirflow) -> None:
    runs = [run(day) for day in range(1, 26)]

    async def paged(request: web.Request) -> web.StreamResponse:
        limit, offset = int(request.query["limit"]), int(request.query["offset"])
        limit = min(limit, 10)  # like [api] maximum_page_limit
        return web.json_response(
            {"dag_runs": runs[offset : offset + limit], "total_entries": len(runs)}
        )

    fake.routes["GET", "/api/v2/dags/a.b%2Fc/dagRuns"] = paged
    async with v3(fake) as client:
        found = await client.list_dag_runs(
            "a.b/c", run_type="backfill", logical_date_gte=D4, logical_date_lte=D6
        )
    assert len(found) == 25
    seen = fake.calls("GET", "/api/v2/dags/a.b%2Fc/dagRuns")
    assert [s.query["offset"] for s in seen] == [["0"], ["10"], ["20"]]
    assert "logical_date_gte=2021-06-04T00%3A00%3A00%2B00%3A00" in seen[0].raw_path
    assert seen[0].query["run_type"] == ["backfill"]
    assert found[0].data_interval_end == datetime(2021, 6, 2, tzinfo=UTC)


async def test_backfill_body_follows_the_spec(fake: FakeAirflow) -> None:
    fake.routes["POST", "/api/v2/backfills"] = answer(BACKFILL)
    async with v3(fake) as client:
        await client.create_backfill(
            "example.etl_orders",
            D4,
            D6,
            reprocess_behavior="failed",
            max_active_runs=2,
            run_backwards=True,
            dag_run_conf={"k": 1},
        )
        with pytest.raises(ValueError, match="reprocess_behavior"):
            await client.create_backfill("example.etl_orders", D4, D6, reprocess_behavior="all")
        with pytest.raises(ValueError, match="timezone-aware"):
            await client.create_backfill("example.etl_orders", datetime(2021, 6, 4), D6)
    assert fake.calls("POST", "/api/v2/backfills")[0].json() == {
        "dag_id": "example.etl_orders",
        "from_date": "2021-06-04T00:00:00+00:00",
        "to_date": "2021-06-06T00:00:00+00:00",
        "reprocess_behavior": "failed",
        "max_active_runs": 2,
        "run_backwards": True,
        "dag_run_conf": {"k": 1},
    }


async def test_set_paused_uses_an_update_mask(fake: FakeAirflow) -> None:
    fake.routes["PATCH", "/api/v2/dags/example.etl_orders"] = answer({**DAG, "is_paused": True})
    async with v3(fake) as client:
        assert (await client.set_paused("example.etl_orders", True)).is_paused is True
    patch = fake.calls("PATCH", "/api/v2/dags/example.etl_orders")[0]
    assert patch.query == {"update_mask": ["is_paused"]}
    assert patch.json() == {"is_paused": True}


def test_ui_urls() -> None:
    v3_client = Airflow3Client("http://af:8080/base/", None, None)
    assert v3_client.ui_url("example.etl_orders") == "http://af:8080/base/dags/example.etl_orders"
    assert v3_client.ui_url("a", "backfill__2021-06-05T00:00:00+00:00") == (
        "http://af:8080/base/dags/a/runs/backfill__2021-06-05T00%3A00%3A00%2B00%3A00"
    )
    v2_client = Airflow2Client("http://af:8080", None, None)
    assert v2_client.ui_url("a.b") == "http://af:8080/dags/a.b/grid"
    assert v2_client.ui_url("a.b", "manual__x+1") == (
        "http://af:8080/dags/a.b/grid?dag_run_id=manual__x%2B1"
    )


def test_ui_urls_posted_to_slack_never_carry_the_password_of_airflow_url() -> None:
    v3_client = Airflow3Client("http://bot:p%40ss@af:8080", None, None)
    v2_client = Airflow2Client("http://bot:s3cret@af:8080", None, None)
    assert v3_client.ui_url("a") == "http://af:8080/dags/a"
    assert v2_client.ui_url("a", "r") == "http://af:8080/dags/a/grid?dag_run_id=r"


async def test_v1_trigger_list_clear_and_state(fake: FakeAirflow) -> None:
    path = "/api/v1/dags/example.etl_orders/dagRuns"
    fake.routes["POST", path] = sequence(
        answer(run(4, "manual")),
        answer({"detail": "DAGRun with DAG ID ... already exists", "status": 409}, 409),
    )
    fake.routes["GET", path] = answer(
        {"dag_runs": [run(4, "manual"), run(5, "scheduled")], "total_entries": 2}
    )
    run_path = f"{path}/manual__2021-06-05T00%3A00%3A00%2B00%3A00"
    fake.routes["POST", f"{run_path}/clear"] = answer(run(4, "manual"))
    fake.routes["PATCH", run_path] = answer(run(4, "manual", state="failed"))
    refs = [
        {"task_id": "spark_job", "dag_id": "example.etl_orders", "dag_run_id": f"scheduled__{d}",
         "execution_date": f"{d}T00:00:00+00:00"}
        for d in ("2021-06-04", "2021-06-05")
    ]  # fmt: skip
    fake.routes["POST", "/api/v1/dags/example.etl_orders/clearTaskInstances"] = answer(
        {"task_instances": refs}
    )
    async with v2(fake) as client:
        created = await client.trigger_dag_run(
            "example.etl_orders",
            "manual__2021-06-05T00:00:00+00:00",
            logical_date=D4,
            data_interval_start=D4,
            data_interval_end=datetime(2021, 6, 5, tzinfo=UTC),
            conf={"why": "backfill"},
            note="bot",
        )
        assert created.logical_date == D4
        with pytest.raises(AirflowConflict):
            await client.trigger_dag_run(
                "example.etl_orders",
                "x",
                logical_date=D4,
                data_interval_start=D4,
                data_interval_end=D6,
            )
        manual = await client.list_dag_runs(
            "example.etl_orders", run_type="manual", logical_date_gte=D4, logical_date_lte=D6
        )
        assert [r.run_type for r in manual] == ["manual"]
        await client.clear_dag_run("example.etl_orders", created.run_id)
        failed = await client.set_dag_run_state("example.etl_orders", created.run_id, "failed")
        assert failed.state == "failed"
        cleared = await client.clear_task_instances(
            "example.etl_orders", start_date=D4, end_date=D6, only_failed=True
        )
        assert cleared.count == 2
        assert cleared.tasks == (
            ("scheduled__2021-06-04", "spark_job"),
            ("scheduled__2021-06-05", "spark_job"),
        )
    body = fake.calls("POST", path)[0].json()
    assert body == {
        "dag_run_id": "manual__2021-06-05T00:00:00+00:00",
        "logical_date": "2021-06-04T00:00:00+00:00",
        "data_interval_start": "2021-06-04T00:00:00+00:00",
        "data_interval_end": "2021-06-05T00:00:00+00:00",
        "conf": {"why": "backfill"},
        "note": "bot",
    }
    listed = fake.calls("GET", path)[0]
    assert listed.query["execution_date_gte"] == ["2021-06-04T00:00:00+00:00"]
    assert listed.query["execution_date_lte"] == ["2021-06-06T00:00:00+00:00"]
    assert "run_type" not in listed.query
    assert fake.calls("POST", f"{run_path}/clear")[0].json() == {"dry_run": False}
    assert fake.calls("PATCH", run_path)[0].json() == {"state": "failed"}
    clear = fake.calls("POST", "/api/v1/dags/example.etl_orders/clearTaskInstances")[0].json()
    assert clear == {
        "dry_run": False,
        "start_date": "2021-06-04T00:00:00+00:00",
        "end_date": "2021-06-06T00:00:00+00:00",
        "only_failed": True,
        "reset_dag_runs": True,
    }
    assert len(fake.calls("POST", path)) == 2  # the 409 was not retried


async def test_v1_execution_date_is_read_when_logical_date_is_absent(fake: FakeAirflow) -> None:
    old = run(4)
    old["execution_date"] = old.pop("logical_date")
    fake.routes["GET", "/api/v1/dags/x/dagRuns/r"] = answer(old)
    async with v2(fake) as client:
        assert (await client.get_dag_run("x", "r")).logical_date == D4


async def test_clear_task_instances_bodies_say_every_default_that_differs(
    fake: FakeAirflow,
) -> None:
    """dry_run defaults to true in both APIs and reset_dag_runs to false in Airflow 2: both are
    always sent, with only_failed; Airflow 3 answers whole task instances and a total."""
    v3_path = "/api/v2/dags/example.etl_orders/clearTaskInstances"
    v1_path = "/api/v1/dags/example.etl_orders/clearTaskInstances"
    ti = {"task_id": "load", "dag_run_id": "manual__1", "state": None, "try_number": 1}
    fake.routes["POST", v3_path] = answer(
        {"task_instances": [ti, ti | {"task_id": "report"}, ti], "total_entries": 3}
    )
    fake.routes["POST", v1_path] = answer({"task_instances": []})
    async with v3(fake) as client:
        cleared = await client.clear_task_instances("example.etl_orders", dag_run_id="manual__1")
        assert cleared.tasks == (("manual__1", "load"), ("manual__1", "report"))
        assert (cleared.count, cleared.run_ids) == (3, ("manual__1",))  # a mapped task: 2 TIs
        await client.clear_task_instances(
            "example.etl_orders", start_date=D4, only_failed=False, task_ids=("load",)
        )
        with pytest.raises(ValueError, match="dag_run_id, or start_date"):
            await client.clear_task_instances("example.etl_orders")
        with pytest.raises(ValueError, match="task_ids"):
            await client.clear_task_instances("example.etl_orders", dag_run_id="r", task_ids="x")
        with pytest.raises(ValueError, match="naive"):
            await client.clear_task_instances("example.etl_orders", end_date=datetime(2021, 6, 4))
    async with v2(fake) as client:
        assert (await client.clear_task_instances("example.etl_orders", dag_run_id="m")).count == 0
    assert [c.json() for c in fake.calls("POST", v3_path)] == [
        {"dry_run": False, "only_failed": True, "reset_dag_runs": True, "dag_run_id": "manual__1"},
        {
            "dry_run": False,
            "only_failed": False,
            "reset_dag_runs": True,
            "start_date": "2021-06-04T00:00:00+00:00",
            "task_ids": ["load"],
        },
    ]
    assert fake.calls("POST", v1_path)[0].json() == {
        "dry_run": False,
        "only_failed": True,
        "reset_dag_runs": True,
        "dag_run_id": "m",
    }


async def test_a_clear_is_not_retried_after_a_500(fake: FakeAirflow) -> None:
    path = "/api/v2/dags/x/clearTaskInstances"
    fake.routes["POST", path] = answer({"detail": "boom"}, 500)
    async with v3(fake) as client:
        with pytest.raises(AirflowUnavailable, match="may have been carried out"):
            await client.clear_task_instances("x", dag_run_id="r")
    assert len(fake.calls("POST", path)) == 1


async def test_task_instances_and_assets_are_parsed_defensively(fake: FakeAirflow) -> None:
    tis = "/api/v2/dags/x/dagRuns/r/taskInstances"
    fake.routes["GET", tis] = answer(
        {"task_instances": [{"task_id": "t", "state": "success", "try_number": "1"}]}
    )
    fake.routes["GET", "/api/v2/assets"] = answer(
        {"assets": [{"uri": "s3://a", "producing_tasks": "x", "scheduled_dags": []}]}
    )
    fake.routes["GET", "/api/v1/dags/x/dagRuns/r/taskInstances"] = answer(
        {"task_instances": [{"task_id": "t", "state": "none", "try_number": 0}], "total_entries": 1}
    )
    async with v3(fake) as client:
        with pytest.raises(AirflowBadResponse, match="'try_number' is missing or not an integer"):
            await client.list_task_instances("x", "r")
        with pytest.raises(AirflowBadResponse, match="'producing_tasks' is not a list"):
            await client.asset_consumers("x")
    async with v2(fake) as client:
        [old] = await client.list_task_instances("x", "r")
        assert (old.state, old.try_number, old.start_date) == (None, 0, None)
