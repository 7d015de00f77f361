"""Async clients for Airflow 3 (`/api/v2`, with backfills) and Airflow 2 (`/api/v1`).

`connect_airflow()` asks the server which one it is. Behaviour observed on a real Airflow 3.3.2
(see tests/airflow/test_airflow_client.py, which checks it):
- Backfill `from_date` and `to_date` are both inclusive bounds on logical dates; with
  `CronDataIntervalTimetable` a run's logical date is its data interval start, so a backfill
  from 2021-06-04 to 2021-06-06 runs the intervals starting on the 4th, 5th and 6th.
- Only one backfill per DAG is active: creating another answers 409 (`AirflowConflict`) until the
  scheduler marks the first completed, which happens on a 30 s timer after its last run ends.
- Cancelling fails the queued runs; runs already running go on to finish. The backfill is
  marked completed at once, so a new one can start while they are still running.
- An invalid or expired token gets 403 "Invalid JWT token" (401 only when none is sent); either
  renews the token once.
- Wrong credentials get 401 from `POST /auth/token`; they are not tried again for
  `login_retry_s` (see `bot.clients.airflow_http`).
- `clearTaskInstances` (tests/airflow/test_clear_failed_tasks.py): `dry_run` defaults to true,
  so a real clear says false. With `only_failed` it takes failed and upstream_failed tasks, not
  skipped ones; the failed run goes back to queued and only the cleared tasks run again (as try
  `try_number + 1`). `dag_run_id` with dates is a 422.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Mapping
from datetime import datetime
from typing import Any

import aiohttp

from bot.clients.airflow2 import Airflow2Client
from bot.clients.airflow_http import clear_body, iso, logger, seg
from bot.clients.airflow_models import (
    AirflowAuthError,
    AirflowBadResponse,
    AirflowConflict,
    AirflowError,
    AirflowNotFound,
    AirflowRequestError,
    AirflowUnavailable,
    AssetConsumer,
    BackfillInfo,
    ClearedTasks,
    DagInfo,
    DagParam,
    DagRunInfo,
    Parser,
    TaskInstanceInfo,
    error_detail,
)
from bot.clients.airflow_runs import DagRunWrites
from bot.core.http import RetryPolicy

__all__ = [
    "REPROCESS_BEHAVIORS",
    "Airflow2Client",
    "Airflow3Client",
    "AirflowAuthError",
    "AirflowBadResponse",
    "AirflowClient",
    "AirflowConflict",
    "AirflowError",
    "AirflowNotFound",
    "AirflowRequestError",
    "AirflowUnavailable",
    "AssetConsumer",
    "BackfillInfo",
    "ClearedTasks",
    "DagInfo",
    "DagParam",
    "DagRunInfo",
    "RetryPolicy",
    "TaskInstanceInfo",
    "connect_airflow",
]

REPROCESS_BEHAVIORS = frozenset({"none", "completed", "failed"})


def _check_backfill_args(reprocess_behavior: str, max_active_runs: int) -> None:
    if reprocess_behavior not in REPROCESS_BEHAVIORS:
        raise ValueError(
            f"reprocess_behavior must be one of {sorted(REPROCESS_BEHAVIORS)}, "
            f"got {reprocess_behavior!r}"
        )
    if max_active_runs < 1:
        raise ValueError("max_active_runs must be >= 1")


class Airflow3Client(DagRunWrites):
    """Airflow 3 REST API (`/api/v2`) with a JWT from `POST /auth/token`.

    The token is fetched on first use and renewed once when Airflow refuses it (401/403). A
    refused login is not tried again for `login_retry_s`.
    Use as `async with Airflow3Client(url, user, password) as airflow:`.
    """

    api_version: int = 3
    _renewable_auth = True

    def __init__(
        self,
        base_url: str,
        username: str | None,
        password: str | None,
        *,
        timeout_s: float = 15.0,
        retry: RetryPolicy | None = None,
        session: aiohttp.ClientSession | None = None,
    ) -> None:
        super().__init__(
            base_url, username, password, timeout_s=timeout_s, retry=retry, session=session
        )
        self._token: str | None = None
        self._token_lock = asyncio.Lock()

    async def _auth_header(self) -> str | None:
        if self._username is None:
            return None
        async with self._token_lock:
            if self._token is None:
                self._check_login()
                try:
                    self._token = await self._fetch_token()
                except AirflowAuthError as exc:
                    self._login_refused(exc)
                    raise
                self._login_accepted()
            return f"Bearer {self._token}"

    async def _renew_auth(self, used: str | None) -> None:
        async with self._token_lock:
            if used is not None and used == f"Bearer {self._token}":
                self._token = None

    async def _fetch_token(self) -> str:
        body = {"username": self._username, "password": self._password or ""}
        endpoint = "POST /auth/token"
        status, reason, raw = await self._send("POST", "/auth/token", (), body, True, None)
        if status in (401, 403):
            raise AirflowAuthError(
                f"Airflow at {self.shown_url} refused the login of {self._username!r}: "
                f"{error_detail(raw, reason)}; check AIRFLOW_USERNAME and AIRFLOW_PASSWORD",
                status=status,
                endpoint=endpoint,
            )
        reply = self._decode(endpoint, status, reason, raw, authenticated=False)
        return reply.parse.str_(reply.parse.obj(reply.data), "access_token")

    async def version(self) -> str:
        """Airflow's version, e.g. "3.3.2" (this endpoint needs no token)."""
        reply = await self._request("GET", "/api/v2/version", retry_safe=True, auth=False)
        return reply.parse.str_(reply.parse.obj(reply.data), "version")

    async def get_dag(self, dag_id: str) -> DagInfo:
        reply = await self._request("GET", f"/api/v2/dags/{seg(dag_id)}", retry_safe=True)
        return reply.parse.dag_v3(reply.data)

    async def get_dag_params(self, dag_id: str) -> dict[str, DagParam]:
        """The DAG's params (`GET /api/v2/dags/{dag_id}/details`), by name."""
        path = f"/api/v2/dags/{seg(dag_id)}/details"
        reply = await self._request("GET", path, retry_safe=True)
        return reply.parse.dag_params(reply.data)

    async def set_paused(self, dag_id: str, paused: bool) -> DagInfo:
        reply = await self._request(
            "PATCH",
            f"/api/v2/dags/{seg(dag_id)}",
            query=[("update_mask", "is_paused")],
            body={"is_paused": paused},
            retry_safe=True,
        )
        return reply.parse.dag_v3(reply.data)

    def _backfill_body(
        self,
        dag_id: str,
        from_date: datetime,
        to_date: datetime,
        reprocess_behavior: str,
        max_active_runs: int,
    ) -> dict[str, Any]:
        _check_backfill_args(reprocess_behavior, max_active_runs)
        return {
            "dag_id": dag_id,
            "from_date": iso(from_date, "from_date"),
            "to_date": iso(to_date, "to_date"),
            "reprocess_behavior": reprocess_behavior,
            "max_active_runs": max_active_runs,
        }

    async def dry_run_backfill(
        self,
        dag_id: str,
        from_date: datetime,
        to_date: datetime,
        *,
        reprocess_behavior: str = "completed",
        max_active_runs: int = 1,
    ) -> list[datetime]:
        """The logical dates a backfill would run (both bounds inclusive), in order."""
        body = self._backfill_body(dag_id, from_date, to_date, reprocess_behavior, max_active_runs)
        reply = await self._request("POST", "/api/v2/backfills/dry_run", body=body, retry_safe=True)
        dates = []
        for item in reply.parse.objects(reply.data, "backfills"):
            logical = reply.parse.opt_dt(item, "logical_date")
            if logical is None:
                raise reply.parse.bad("a dry-run entry has no logical_date (partitioned DAG?)")
            dates.append(logical)
        return dates

    async def create_backfill(
        self,
        dag_id: str,
        from_date: datetime,
        to_date: datetime,
        *,
        reprocess_behavior: str = "completed",
        max_active_runs: int = 1,
        run_backwards: bool = False,
        dag_run_conf: Mapping[str, Any] | None = None,
    ) -> BackfillInfo:
        """Start a backfill; AirflowConflict (409) if one of this DAG is still active.

        Not retried after a timeout or 5xx (it could start twice): AirflowUnavailable then
        means "unknown", and the caller should look with `list_backfills`.
        """
        body = self._backfill_body(dag_id, from_date, to_date, reprocess_behavior, max_active_runs)
        body["run_backwards"] = run_backwards
        if dag_run_conf is not None:
            body["dag_run_conf"] = dict(dag_run_conf)
        reply = await self._request("POST", "/api/v2/backfills", body=body, retry_safe=False)
        return reply.parse.backfill(reply.data)

    async def list_backfills(self, dag_id: str) -> list[BackfillInfo]:
        """Every backfill of the DAG, oldest first."""
        items = await self._paged(
            "/api/v2/backfills", "backfills", [("dag_id", dag_id), ("order_by", "id")]
        )
        return [Parser("GET /api/v2/backfills", 200).backfill(item) for item in items]

    async def get_backfill(self, backfill_id: int) -> BackfillInfo:
        reply = await self._request("GET", f"/api/v2/backfills/{int(backfill_id)}", retry_safe=True)
        return reply.parse.backfill(reply.data)

    async def cancel_backfill(self, backfill_id: int) -> BackfillInfo:
        """Cancel: queued runs fail, running ones finish. 409 if it had already completed."""
        reply = await self._request(
            "PUT", f"/api/v2/backfills/{int(backfill_id)}/cancel", retry_safe=True
        )
        return reply.parse.backfill(reply.data)

    async def set_backfill_paused(self, backfill_id: int, paused: bool) -> BackfillInfo:
        """Pause (its queued runs wait, running ones finish) or unpause a backfill; 409 once it
        has completed."""
        action = "pause" if paused else "unpause"
        reply = await self._request(
            "PUT", f"/api/v2/backfills/{int(backfill_id)}/{action}", retry_safe=True
        )
        return reply.parse.backfill(reply.data)

    async def list_dag_runs(
        self,
        dag_id: str,
        *,
        run_type: str | None = None,
        logical_date_gte: datetime | None = None,
        logical_date_lte: datetime | None = None,
        state: Collection[str] | None = None,
    ) -> list[DagRunInfo]:
        """Every run of the DAG matching the filters (inclusive bounds), in creation order;
        `state` keeps runs in any of those states (the parameter repeated)."""
        query: list[tuple[str, str | int | bool]] = [("order_by", "id")]
        if run_type is not None:
            query.append(("run_type", run_type))
        if state is not None:
            if isinstance(state, str) or not state:
                # A bare string would filter on its letters; none at all would list every run.
                raise ValueError(f"state must be a non-empty collection of states, got {state!r}")
            query += [("state", s) for s in state]
        if logical_date_gte is not None:
            query.append(("logical_date_gte", iso(logical_date_gte, "logical_date_gte")))
        if logical_date_lte is not None:
            query.append(("logical_date_lte", iso(logical_date_lte, "logical_date_lte")))
        path = f"/api/v2/dags/{seg(dag_id)}/dagRuns"
        items = await self._paged(path, "dag_runs", query)
        return [Parser(f"GET {path}", 200).dag_run(item) for item in items]

    async def recent_dag_runs(
        self, dag_id: str, *, state: str = "success", limit: int = 10
    ) -> list[DagRunInfo]:
        """The DAG's last `limit` runs in `state`, the latest to end first (one request: how
        long its runs take lately, whatever its history's length)."""
        path = f"/api/v2/dags/{seg(dag_id)}/dagRuns"
        query: list[tuple[str, str | int | bool]] = [
            ("state", state), ("order_by", "-end_date"), ("limit", int(limit)),
        ]  # fmt: skip
        reply = await self._request("GET", path, query=query, retry_safe=True)
        return [reply.parse.dag_run(item) for item in reply.parse.objects(reply.data, "dag_runs")]

    async def get_dag_run(self, dag_id: str, run_id: str) -> DagRunInfo:
        path = f"/api/v2/dags/{seg(dag_id)}/dagRuns/{seg(run_id)}"
        reply = await self._request("GET", path, retry_safe=True)
        return reply.parse.dag_run(reply.data)

    async def clear_task_instances(
        self,
        dag_id: str,
        *,
        dag_run_id: str | None = None,
        start_date: datetime | None = None,
        end_date: datetime | None = None,
        only_failed: bool = True,
        task_ids: Collection[str] | None = None,
    ) -> ClearedTasks:
        """Clear task instances of one run, or of the runs with logical dates in [start_date,
        end_date], so they run again: with `only_failed` the failed and upstream_failed ones
        only (skipped and succeeded tasks keep their state and try), `task_ids` narrowing it
        further. Their finished runs go back to queued, and the scheduler runs the cleared
        tasks alone.

        A body Airflow refuses (dag_run_id with dates, end before start) is 422
        (AirflowRequestError, Airflow's words); an unknown DAG or run 404. Not retried after a
        timeout or 5xx: the caller looks with `list_task_instances` before repeating it.
        """
        body = clear_body(
            dag_run_id=dag_run_id, start_date=start_date, end_date=end_date,
            only_failed=only_failed, task_ids=task_ids,
        )  # fmt: skip
        path = f"/api/v2/dags/{seg(dag_id)}/clearTaskInstances"
        reply = await self._request("POST", path, body=body, retry_safe=False)
        return reply.parse.cleared(reply.data)

    async def list_task_instances(self, dag_id: str, dag_run_id: str) -> list[TaskInstanceInfo]:
        """The run's task instances, in Airflow's order (404 for an unknown run)."""
        path = f"/api/v2/dags/{seg(dag_id)}/dagRuns/{seg(dag_run_id)}/taskInstances"
        items = await self._paged(path, "task_instances")
        parser = Parser(f"GET {path}", 200)
        return [parser.task_instance(item) for item in items]

    async def asset_consumers(self, dag_id: str) -> list[AssetConsumer]:
        """The DAGs scheduled on the assets `dag_id` produces (itself left out), by asset.

        `dag_ids` keeps assets related to the DAG in any way (consumed or read too), so the
        producer is checked here.
        """
        path = "/api/v2/assets"
        items = await self._paged(path, "assets", [("dag_ids", dag_id)])
        parser = Parser(f"GET {path}", 200)
        return [c for item in items for c in parser.asset_consumers(item, dag_id, "scheduled_dags")]

    def ui_url(self, dag_id: str, run_id: str | None = None) -> str:
        """The Airflow 3 UI page of the DAG (`/dags/<id>`) or of one run (`.../runs/<run id>`)."""
        url = f"{self.shown_url}/dags/{seg(dag_id)}"  # a link in Slack: no password
        return url if run_id is None else f"{url}/runs/{seg(run_id)}"


AirflowClient = Airflow3Client | Airflow2Client


async def connect_airflow(
    base_url: str,
    username: str | None,
    password: str | None,
    *,
    timeout_s: float = 15.0,
    retry: RetryPolicy | None = None,
    session: aiohttp.ClientSession | None = None,
) -> AirflowClient:
    """The client matching the server: `/api/v2/version` (Airflow 3), else `/api/v1/version`.

    The returned client is ready (use `async with` or `close()` it). Raises AirflowUnavailable
    naming AIRFLOW_URL when nothing answers there.
    """
    v3 = Airflow3Client(
        base_url, username, password, timeout_s=timeout_s, retry=retry, session=session
    )
    try:
        version = await v3.version()
    except AirflowNotFound:
        await v3.close()
    except AirflowUnavailable as exc:
        await v3.close()
        if exc.status is not None:  # it answered (5xx, 429): its own words say it all
            raise
        raise AirflowUnavailable(
            f"Cannot reach Airflow at AIRFLOW_URL={v3.shown_url}: {exc.detail}",
            status=exc.status,
            endpoint=exc.endpoint,
        ) from exc
    except BaseException:
        await v3.close()
        raise
    else:
        logger.info("Airflow at %s is version %s (API v2)", v3.shown_url, version)
        return v3
    v2 = Airflow2Client(
        base_url, username, password, timeout_s=timeout_s, retry=retry, session=session
    )
    try:
        await v2.version()
    except AirflowNotFound as exc:
        await v2.close()
        raise AirflowBadResponse(
            f"AIRFLOW_URL={v2.shown_url} does not look like Airflow: neither /api/v2/version "
            "nor /api/v1/version exists",
            status=exc.status,
            endpoint=exc.endpoint,
        ) from exc
    except BaseException:
        await v2.close()
        raise
    return v2
