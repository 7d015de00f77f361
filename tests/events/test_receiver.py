"""The OpenLineage receiver on a real aiohttp server: what it stores, and how it refuses.

Every refusal is a JSON `{"error": reason}` with a 4xx status; nothing a client sends makes a
500. Storage runs on SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import gzip
import io
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.core.after_commit import wake_on_commit
from bot.core.db import make_engine, session_factory, upgrade
from bot.core.metrics import Metrics
from bot.events.service.receiver import MAX_BODY_BYTES, PATH, add_receiver
from bot.events.store import run_events
from bot.events.store.models import RunEvent
from pipeline.food_delivery.lineage import history_events
from standins.seeds.food_delivery import food_delivery_events

Sessions = async_sessionmaker[AsyncSession]
KEY = "ol-secret-key"
RUN = "5f2b8c1e-3d4a-4b6c-9e8f-0a1b2c3d4e5f"
OTHER_RUN = "5f2b8c1e-3d4a-4b6c-9e8f-0a1b2c3d4e60"


@dataclass
class Receiver:
    url: str
    http: aiohttp.ClientSession
    sessions: Sessions
    woken: list[int] = field(default_factory=list)

    async def post(
        self,
        body: Any = None,
        *,
        raw: bytes | None = None,
        key: str | None = KEY,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, Any]:
        sent = {"Content-Type": "application/json", **(headers or {})}
        if key is not None:
            sent["Authorization"] = f"Bearer {key}"
        # A file-like body: aiohttp warns about large raw bytes (and pytest makes that an error).
        data = io.BytesIO(raw if raw is not None else json.dumps(body).encode())
        async with self.http.post(self.url + PATH, data=data, headers=sent) as resp:
            text = await resp.text()
            return resp.status, json.loads(text) if text else None

    async def stored(self) -> list[RunEvent]:
        async with self.sessions() as session:
            return list(await session.scalars(select(RunEvent).order_by(RunEvent.id)))


async def start(sessions: Sessions, api_key: str | None = KEY) -> AsyncIterator[Receiver]:
    app = web.Application()
    woken: list[int] = []
    add_receiver(app, sessions=sessions, api_key=api_key, metrics=Metrics())
    # what a new run event wakes (the incident watcher, in the bot)
    wake_on_commit(sessions, run_events.OWED, lambda: woken.append(1))
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        async with aiohttp.ClientSession() as http:
            yield Receiver(str(server.make_url("")).rstrip("/"), http, sessions, woken)
    finally:
        await server.close()


@pytest.fixture
async def receiver(database_url: str) -> AsyncIterator[Receiver]:
    """The receiver over a migrated database (SQLite, then PostgreSQL)."""
    upgrade(database_url)
    engine = make_engine(database_url)
    try:
        async for running in start(session_factory(engine)):
            yield running
    finally:
        await engine.dispose()


@pytest.fixture
async def sqlite_receiver(tmp_path: Path) -> AsyncIterator[Receiver]:
    """The receiver over a migrated SQLite database, for what does not depend on the dialect."""
    url = f"sqlite:///{tmp_path / 'bot.db'}"
    upgrade(url)
    engine = make_engine(url)
    try:
        async for running in start(session_factory(engine)):
            yield running
    finally:
        await engine.dispose()


@pytest.fixture
async def gate(tmp_path: Path) -> AsyncIterator[Receiver]:
    """The receiver over an empty database: for requests that must never reach storage."""
    engine = make_engine(f"sqlite:///{tmp_path / 'untouched.db'}")
    try:
        async for running in start(session_factory(engine)):
            yield running
    finally:
        await engine.dispose()


def seed_failure() -> dict[str, Any]:
    return next(e for e in food_delivery_events() if e["eventType"] == "FAIL")


def real_airflow_failure() -> list[dict[str, Any]]:
    fixture = Path(__file__).resolve().parents[1] / "fixtures/openlineage/airflow-3.3.2"
    events: list[dict[str, Any]] = json.loads((fixture / "failure.json").read_text())
    return events


def event(**changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "eventType": "START",
        "eventTime": "2024-03-01T10:00:00Z",
        "run": {"runId": RUN},
        "job": {"namespace": "food_delivery", "name": "example.etl_orders"},
        "producer": "https://example.com/tests",
    }
    return {**body, **changes}


# -- storing ------------------------------------------------------------------------------------


async def test_a_seed_failure_is_stored_once_and_wakes_the_processor(receiver: Receiver) -> None:
    failure = seed_failure()
    assert await receiver.post(failure) == (201, None)
    assert await receiver.post(failure) == (201, None)  # a retry of the same event
    (row,) = await receiver.stored()
    assert (row.event_type, row.dag_namespace, row.dag_id) == (
        "FAIL",
        "food_delivery",
        "example.etl_orders",
    )
    assert row.error_message == 'relation "tmp_orders" does not exist'
    assert row.event_time == datetime(2021, 6, 5, 0, 13, tzinfo=UTC)
    assert (row.source, row.processed_at) == ("receiver", None)
    assert receiver.woken == [1]  # a duplicate wakes nobody


async def test_an_event_type_in_any_case_is_what_marquez_reads(receiver: Receiver) -> None:
    # Marquez upper-cases it (OpenLineageDao.getRunState): `fail` is a failure there too, and
    # its feed returns `fail` as sent, so the pushed and polled copies must be one event.
    assert await receiver.post(event(eventType="fail")) == (201, None)
    assert await receiver.post(event(eventType="FAIL")) == (201, None)
    (row,) = await receiver.stored()
    assert row.event_type == "FAIL"


async def test_a_parent_run_facet_is_the_parent_as_marquez_takes_it(receiver: Receiver) -> None:
    # Marquez binds `parentRun` (the old openlineage-airflow name) as `parent`
    # (`@JsonAlias("parentRun")`, LineageEvent.java#L93-L94 at 0.51.1).
    parent = {"run": {"runId": OTHER_RUN}, "job": {"namespace": "af", "name": "etl_dag"}}
    body = event(
        eventType="FAIL",
        job={"namespace": "af", "name": "etl_dag.load"},
        run={"runId": RUN, "facets": {"parentRun": parent}},
    )
    assert await receiver.post(body) == (201, None)
    (row,) = await receiver.stored()
    assert (row.dag_id, row.dag_run_id) == ("etl_dag", OTHER_RUN)


async def test_a_task_failure_rolls_up_to_its_dag_with_interval(
    sqlite_receiver: Receiver,
) -> None:
    receiver = sqlite_receiver
    bodies = history_events(date(2021, 6, 2), date(2021, 6, 2), fail_dates=[date(2021, 6, 2)])
    task_fail = next(
        b for b in bodies if b["eventType"] == "FAIL" and b["job"]["name"].endswith(".spark_job")
    )
    assert (await receiver.post(task_fail))[0] == 201
    (row,) = await receiver.stored()
    assert (row.job_name, row.dag_id) == ("example.etl_orders.spark_job", "example.etl_orders")
    assert (row.nominal_start, row.nominal_end) == (
        datetime(2021, 6, 2, tzinfo=UTC),
        datetime(2021, 6, 3, tzinfo=UTC),
    )
    assert row.error_message is not None


async def test_a_real_airflow_task_failure_keeps_its_run_task_and_try(
    sqlite_receiver: Receiver,
) -> None:
    # as a real Airflow 3.3.2's provider POSTs it (tests/fixtures/openlineage/airflow-3.3.2)
    task_fail = next(e for e in real_airflow_failure() if e["eventType"] == "FAIL")
    assert (await sqlite_receiver.post(task_fail))[0] == 201
    (row,) = await sqlite_receiver.stored()
    assert (row.dag_id, row.airflow_run_id, row.task_id, row.try_number) == (
        "ol_test.failing",
        "manual__2026-11-24T01:09:59.421277+00:00",
        "load",
        1,
    )


async def test_concurrent_copies_of_one_event_make_one_row(receiver: Receiver) -> None:
    bodies = [event(), event(), event(eventType="COMPLETE")] * 8
    answers = await asyncio.gather(*(receiver.post(body) for body in bodies))
    assert {status for status, _ in answers} == {201}
    assert sorted(r.event_type for r in await receiver.stored()) == ["COMPLETE", "START"]
    assert len(receiver.woken) == 2


async def test_dataset_and_job_events_are_accepted_not_stored(sqlite_receiver: Receiver) -> None:
    receiver = sqlite_receiver
    for name in ("DatasetEvent", "JobEvent"):
        url = f"https://openlineage.io/spec/2-0-2/OpenLineage.json#/definitions/{name}"
        assert await receiver.post({"schemaURL": url, "eventTime": "2024-03-01T10:00:00Z"}) == (
            201,
            None,
        )
    assert await receiver.stored() == []
    assert receiver.woken == []


async def test_gzip_bodies_are_read(sqlite_receiver: Receiver) -> None:
    receiver = sqlite_receiver
    raw = gzip.compress(json.dumps(event()).encode())
    assert (await receiver.post(raw=raw, headers={"Content-Encoding": "gzip"}))[0] == 201
    assert len(await receiver.stored()) == 1


async def test_without_an_api_key_no_authorization_is_needed(
    sqlite_receiver: Receiver,
) -> None:
    async for running in start(sqlite_receiver.sessions, api_key=None):
        assert await running.post(event(), key=None) == (201, None)
        assert len(await running.stored()) == 1


async def test_a_database_failure_is_503_so_the_sender_retries(gate: Receiver) -> None:
    status, body = await gate.post(event())  # the gate's database has no tables
    assert (status, body) == (503, {"error": "the event could not be stored; try again"})
    assert gate.woken == []


# -- refusing -----------------------------------------------------------------------------------

BIG = b'{"pad": "' + b"x" * MAX_BODY_BYTES + b'"}'


@pytest.mark.parametrize(
    ("request_args", "status", "reason"),
    [
        ({"key": None}, 401, "a valid 'Authorization: Bearer"),
        ({"key": "wrong"}, 401, "a valid 'Authorization: Bearer"),
        ({"key": KEY + "x"}, 401, "a valid 'Authorization: Bearer"),
        ({"key": None, "headers": {"Authorization": f"Basic {KEY}"}}, 401, "a valid"),
        ({"headers": {"Content-Type": "text/plain"}}, 415, "the body must be application/json"),
        ({"raw": b"{not json"}, 400, "the body is not valid JSON"),
        ({"raw": b"\xff\xfe{}"}, 400, "the body is not valid JSON"),
        ({"raw": b"[" * 200_000 + b"]" * 200_000}, 400, "the body is not valid JSON"),
        ({"raw": b""}, 400, "the body is not valid JSON"),
        ({"raw": b"[{}]"}, 400, "the body must be one OpenLineage event"),
        ({"raw": b'"event"'}, 400, "the body must be one OpenLineage event"),
        ({"raw": BIG}, 413, f"the body is larger than {MAX_BODY_BYTES} bytes"),
        (
            {"raw": gzip.compress(BIG), "headers": {"Content-Encoding": "gzip"}},
            413,
            "the body is larger than",
        ),
        (
            {"raw": b"not gzip at all", "headers": {"Content-Encoding": "gzip"}},
            400,
            "the body could not be read",
        ),
        ({"body": event(eventTime="2021-11-03")}, 422, "eventTime is not an ISO-8601 date-time"),
        ({"body": event(run={"runId": "r1"})}, 422, "run.runId must be a UUID"),
        ({"body": event(job={"name": "x"})}, 422, "job.namespace is required"),
        ({"body": event(eventType="DONE")}, 422, "eventType must be one of"),
    ],
)
async def test_bad_requests_get_a_reason_and_store_nothing(
    gate: Receiver, request_args: dict[str, Any], status: int, reason: str
) -> None:
    answer_status, answer = await gate.post(**request_args)
    assert answer_status == status
    assert answer["error"].startswith(reason)
    assert gate.woken == []


async def test_a_chunked_body_past_the_limit_is_cut_off(gate: Receiver) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"pad": "'
        for _ in range(MAX_BODY_BYTES // 65536 + 2):
            yield b"x" * 65536
        yield b'"}'

    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {KEY}"}
    async with gate.http.post(gate.url + PATH, data=chunks(), headers=headers) as resp:
        assert resp.status == 413
        assert (await resp.json())["error"].startswith("the body is larger than")


async def test_the_401_names_the_scheme(gate: Receiver) -> None:
    async with gate.http.post(gate.url + PATH, json=event()) as resp:
        assert resp.status == 401
        assert resp.headers["WWW-Authenticate"].startswith("Bearer")


async def test_the_bearer_scheme_is_case_insensitive(sqlite_receiver: Receiver) -> None:
    receiver = sqlite_receiver
    headers = {"Authorization": f"bearer {KEY}"}
    assert (await receiver.post(event(), key=None, headers=headers))[0] == 201
