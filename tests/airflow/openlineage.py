"""OpenLineage from a real Airflow: a recording (and optionally forwarding) receiver, and the
REST calls that trigger a DAG run and wait for it to end.

`LineageRecorder` listens on 127.0.0.1 in a thread of its own (with its own event loop), so it
outlives the per-test event loops of pytest-asyncio: one Airflow, started once with
`start_airflow(openlineage_url=recorder.url)`, can report to a new bot in every test by
`recorder.forward_to = f"{bot.url}/api/v1/lineage"`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import aiohttp
from aiohttp import web

from tests.airflow.harness import AirflowHarnessError, RealAirflow

PATH = "/api/v1/lineage"
TERMINAL_RUN_STATES = frozenset({"success", "failed"})
TERMINAL_EVENTS = frozenset({"COMPLETE", "FAIL", "ABORT"})


class LineageRecorder:
    """`POST /api/v1/lineage` on 127.0.0.1: keeps every JSON body in arrival order.

    With `forward_to` set, each body is also POSTed there (with its Content-Type and
    Authorization) and the sender gets that answer; an unreachable target answers 503, which
    OpenLineage's HTTP transport retries. Without it, the answer is 201 (as Marquez's).
    """

    def __init__(self) -> None:
        self.forward_to: str | None = None
        self._events: list[dict[str, Any]] = []
        self._answers: list[int] = []
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None
        self._client: aiohttp.ClientSession | None = None
        self.url = ""

    # --- life cycle -----------------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()
        self.url = self._call(self._start())

    def stop(self) -> None:
        if not self._thread.is_alive():
            return
        with contextlib.suppress(Exception):
            self._call(self._stop())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    def _call(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(30)

    async def _start(self) -> str:
        app = web.Application(client_max_size=8 * 1024 * 1024)
        app.router.add_post(PATH, self._receive)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self._client = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10))
        return f"http://127.0.0.1:{self._runner.addresses[0][1]}"

    async def _stop(self) -> None:
        if self._client is not None:
            await self._client.close()
        if self._runner is not None:
            await self._runner.cleanup()

    # --- receiving ------------------------------------------------------------------------

    async def _receive(self, request: web.Request) -> web.Response:
        raw = await request.read()
        try:
            body = json.loads(raw)
        except ValueError:
            return web.json_response({"error": "not JSON"}, status=400)
        with self._lock:
            self._events.append(body)
        answer = await self._forward(request, raw)
        with self._lock:
            self._answers.append(answer.status)
        return answer

    async def _forward(self, request: web.Request, raw: bytes) -> web.Response:
        target = self.forward_to
        if target is None or self._client is None:
            return web.Response(status=201)
        headers = {"Content-Type": request.headers.get("Content-Type", "application/json")}
        if "Authorization" in request.headers:
            headers["Authorization"] = request.headers["Authorization"]
        try:
            async with self._client.post(target, data=raw, headers=headers) as reply:
                return web.Response(
                    status=reply.status,
                    body=await reply.read(),
                    content_type=reply.content_type,
                )
        except (aiohttp.ClientError, TimeoutError) as exc:
            return web.json_response({"error": f"forwarding failed: {exc}"}, status=503)

    # --- reading --------------------------------------------------------------------------

    def events(self) -> list[dict[str, Any]]:
        """Every event received so far, in arrival order (copies of the list, not the bodies)."""
        with self._lock:
            return list(self._events)

    def answers(self) -> list[int]:
        """The HTTP status each event got (the forward target's, else 201), in arrival order."""
        with self._lock:
            return list(self._answers)

    def clear(self) -> None:
        with self._lock:
            self._events.clear()
            self._answers.clear()

    def wait_for(
        self,
        check: Callable[[list[dict[str, Any]]], bool],
        *,
        timeout_s: float = 60,
        quiet_s: float = 0.0,
        what: str = "events",
    ) -> list[dict[str, Any]]:
        """Block until `check(events)` holds and no new event came for `quiet_s`; the events."""
        deadline = time.monotonic() + timeout_s
        while True:
            events = self.events()
            if check(events):
                if quiet_s <= 0:
                    return events
                time.sleep(quiet_s)
                if len(self.events()) == len(events):
                    return events
                continue
            if time.monotonic() > deadline:
                names = [(e.get("eventType"), e.get("job", {}).get("name")) for e in events]
                raise AssertionError(f"{what} not received in {timeout_s:g}s; got {names}")
            time.sleep(0.2)


@dataclass
class OpenLineageAirflow:
    """What the `openlineage_airflow` fixture gives: an Airflow reporting to `recorder`."""

    airflow: RealAirflow
    recorder: LineageRecorder
    """Gets every OpenLineage event the Airflow sends; set its `forward_to` to pass them on."""


@contextlib.contextmanager
def running_recorder() -> Iterator[LineageRecorder]:
    recorder = LineageRecorder()
    recorder.start()
    try:
        yield recorder
    finally:
        recorder.stop()


# --- what the events say -------------------------------------------------------------------


def job_name(event: dict[str, Any]) -> str:
    return str((event.get("job") or {}).get("name", ""))


def dag_of(event: dict[str, Any], dag_ids: set[str] | frozenset[str]) -> str | None:
    """The DAG (of `dag_ids`) an event's job is, or is a task of (`<dag_id>.<task_id>`)."""
    name = job_name(event)
    found = [d for d in dag_ids if name == d or name.startswith(d + ".")]
    return max(found, key=len) if found else None


def dag_run_ended(events: list[dict[str, Any]], dag_id: str) -> bool:
    """Whether the DAG's own COMPLETE/FAIL/ABORT (sent by the scheduler) is among `events`."""
    return any(e.get("eventType") in TERMINAL_EVENTS and job_name(e) == dag_id for e in events)


def run_reported(events: list[dict[str, Any]], dag_id: str, task_ids: list[str]) -> bool:
    """Whether the DAG run's terminal event and each task's are among `events`.

    The scheduler's DAG event may come before the last task's (the worker sends a task's event
    after the task's state is stored, and the scheduler may end the run in between)."""
    ended = {job_name(e) for e in events if e.get("eventType") in TERMINAL_EVENTS}
    return {dag_id, *(f"{dag_id}.{task}" for task in task_ids)} <= ended


# --- Airflow's REST API ------------------------------------------------------------------------


def _iso(value: datetime) -> str:
    return value.isoformat().replace("+00:00", "Z")


def trigger(
    airflow: RealAirflow,
    dag_id: str,
    *,
    logical_date: datetime | None,
    interval: tuple[datetime, datetime] | None = None,
    run_id: str | None = None,
) -> str:
    """Trigger a DAG run (POST /api/v2/dags/{dag_id}/dagRuns); its run id.

    Without `interval`, Airflow infers the data interval from the DAG's timetable and the
    logical date (for "@daily", a CronTriggerTimetable, start == end == logical date).
    """
    body: dict[str, Any] = {"logical_date": _iso(logical_date) if logical_date else None}
    if interval is not None:
        body["data_interval_start"] = _iso(interval[0])
        body["data_interval_end"] = _iso(interval[1])
    if run_id is not None:
        body["dag_run_id"] = run_id
    created = airflow.api("POST", f"/api/v2/dags/{_quoted(dag_id)}/dagRuns", body)
    return str(created["dag_run_id"])


def dag_runs(airflow: RealAirflow, dag_id: str) -> list[dict[str, Any]]:
    page = airflow.api("GET", f"/api/v2/dags/{_quoted(dag_id)}/dagRuns?limit=100")
    return list(page["dag_runs"])


def wait_for_run(
    airflow: RealAirflow, dag_id: str, run_id: str, *, timeout_s: float = 90
) -> dict[str, Any]:
    """Block until the DAG run is success or failed; the run as the API returns it."""
    deadline = time.monotonic() + timeout_s
    path = f"/api/v2/dags/{_quoted(dag_id)}/dagRuns/{_quoted(run_id)}"
    while True:
        airflow._check_alive()
        run: dict[str, Any] = airflow.api("GET", path)
        if run["state"] in TERMINAL_RUN_STATES:
            return run
        if time.monotonic() > deadline:
            raise AirflowHarnessError(
                f"{dag_id} run {run_id} still {run['state']} after {timeout_s:g}s\n"
                + airflow.log_tail()
            )
        time.sleep(0.5)


def wait_for_first_run(airflow: RealAirflow, dag_id: str, *, timeout_s: float = 60) -> str:
    """The run id of the DAG's first run (e.g. one another DAG triggered), once there is one."""
    deadline = time.monotonic() + timeout_s
    while True:
        runs = dag_runs(airflow, dag_id)
        if runs:
            return str(runs[0]["dag_run_id"])
        if time.monotonic() > deadline:
            raise AirflowHarnessError(f"no run of {dag_id} after {timeout_s:g}s")
        time.sleep(0.5)


def task_instances(airflow: RealAirflow, dag_id: str, run_id: str) -> list[dict[str, Any]]:
    path = f"/api/v2/dags/{_quoted(dag_id)}/dagRuns/{_quoted(run_id)}/taskInstances"
    return list(airflow.api("GET", path)["task_instances"])


def _quoted(value: str) -> str:
    return urllib.parse.quote(value, safe="")
