"""Client for the Airflow 2 stable REST API (`/api/v1`); see `bot.clients.airflow`."""

from __future__ import annotations

import base64
from collections.abc import Collection
from datetime import datetime

from bot.clients.airflow_http import Query, clear_body, iso, seg
from bot.clients.airflow_models import (
    AssetConsumer,
    ClearedTasks,
    DagInfo,
    DagParam,
    DagRunInfo,
    Parser,
    TaskInstanceInfo,
)
from bot.clients.airflow_runs import DagRunWrites

__all__ = ["Airflow2Client"]


class Airflow2Client(DagRunWrites):
    """Airflow 2 stable REST API (`/api/v1`) with HTTP basic auth; it has no backfill endpoint.

    Backfill one interval with `trigger_dag_run` (explicit data interval), or rerun existing
    runs with `clear_dag_run` / `clear_task_instances` (which can rerun only their failed
    tasks).
    """

    api_version: int = 2
    api = "/api/v1"

    async def _auth_header(self) -> str | None:
        if self._username is None:
            return None
        self._check_login()
        pair = f"{self._username}:{self._password or ''}".encode()
        return "Basic " + base64.b64encode(pair).decode("ascii")

    async def version(self) -> str:
        reply = await self._request("GET", "/api/v1/version", retry_safe=True)
        return reply.parse.str_(reply.parse.obj(reply.data), "version")

    async def get_dag(self, dag_id: str) -> DagInfo:
        reply = await self._request("GET", f"/api/v1/dags/{seg(dag_id)}", retry_safe=True)
        return reply.parse.dag_v1(reply.data)

    async def get_dag_params(self, dag_id: str) -> dict[str, DagParam]:
        """The DAG's params (`GET /api/v1/dags/{dag_id}/details`), by name."""
        path = f"/api/v1/dags/{seg(dag_id)}/details"
        reply = await self._request("GET", path, retry_safe=True)
        return reply.parse.dag_params(reply.data)

    async def set_paused(self, dag_id: str, paused: bool) -> DagInfo:
        reply = await self._request(
            "PATCH",
            f"/api/v1/dags/{seg(dag_id)}",
            query=[("update_mask", "is_paused")],
            body={"is_paused": paused},
            retry_safe=True,
        )
        return reply.parse.dag_v1(reply.data)

    async def list_dag_runs(
        self,
        dag_id: str,
        *,
        run_type: str | None = None,
        logical_date_gte: datetime | None = None,
        logical_date_lte: datetime | None = None,
        state: Collection[str] | None = None,
    ) -> list[DagRunInfo]:
        """Runs matching the filters (`execution_date_gte/lte` in v1; run_type client-side);
        `state` keeps runs in any of those states (v1 repeats the `state` parameter)."""
        query: Query = []
        if logical_date_gte is not None:
            query = [*query, ("execution_date_gte", iso(logical_date_gte, "logical_date_gte"))]
        if logical_date_lte is not None:
            query = [*query, ("execution_date_lte", iso(logical_date_lte, "logical_date_lte"))]
        if state is not None:
            if isinstance(state, str) or not state:
                # A bare string would filter on its letters; none at all would list every run.
                raise ValueError(f"state must be a non-empty collection of states, got {state!r}")
            query = [*query, *(("state", s) for s in state)]
        path = f"/api/v1/dags/{seg(dag_id)}/dagRuns"
        items = await self._paged(path, "dag_runs", query)
        parser = Parser(f"GET {path}", 200)
        runs = [parser.dag_run(item) for item in items]
        return [run for run in runs if run_type is None or run.run_type == run_type]

    async def recent_dag_runs(
        self, dag_id: str, *, state: str = "success", limit: int = 10
    ) -> list[DagRunInfo]:
        """The DAG's last `limit` runs in `state`, the latest to end first (one request)."""
        path = f"/api/v1/dags/{seg(dag_id)}/dagRuns"
        query: Query = [("state", state), ("order_by", "-end_date"), ("limit", int(limit))]
        reply = await self._request("GET", path, query=query, retry_safe=True)
        return [reply.parse.dag_run(item) for item in reply.parse.objects(reply.data, "dag_runs")]

    async def get_dag_run(self, dag_id: str, run_id: str) -> DagRunInfo:
        path = f"/api/v1/dags/{seg(dag_id)}/dagRuns/{seg(run_id)}"
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
        only (the tasks that succeeded keep their state), `task_ids` narrowing it further.
        Their finished runs go back to queued.

        Airflow 2 converts `dag_run_id` to the run's logical date. Its answer names the task
        instances (no states); `count` is how many. A body Airflow refuses is 400
        (AirflowRequestError, Airflow's words). Not retried after a timeout or 5xx: the caller
        looks with `list_task_instances` before repeating it.
        """
        body = clear_body(
            dag_run_id=dag_run_id, start_date=start_date, end_date=end_date,
            only_failed=only_failed, task_ids=task_ids,
        )  # fmt: skip
        path = f"/api/v1/dags/{seg(dag_id)}/clearTaskInstances"
        reply = await self._request("POST", path, body=body, retry_safe=False)
        return reply.parse.cleared(reply.data)

    async def list_task_instances(self, dag_id: str, dag_run_id: str) -> list[TaskInstanceInfo]:
        """The run's task instances (Airflow 2 lists none, rather than a 404, for an unknown
        run)."""
        path = f"/api/v1/dags/{seg(dag_id)}/dagRuns/{seg(dag_run_id)}/taskInstances"
        items = await self._paged(path, "task_instances")
        parser = Parser(f"GET {path}", 200)
        return [parser.task_instance(item) for item in items]

    async def asset_consumers(self, dag_id: str) -> list[AssetConsumer]:
        """The DAGs scheduled on the datasets `dag_id` produces (itself left out), by dataset.

        `dag_ids` keeps datasets related to the DAG in any way, so the producer is checked
        here; and Airflow 2's `total_entries` counts every dataset, so the pages run until a
        short one.
        """
        path = "/api/v1/datasets"
        items = await self._paged(path, "datasets", [("dag_ids", dag_id)], trust_total=False)
        parser = Parser(f"GET {path}", 200)
        return [c for item in items for c in parser.asset_consumers(item, dag_id, "consuming_dags")]

    def ui_url(self, dag_id: str, run_id: str | None = None) -> str:
        """The Airflow 2 grid view of the DAG, focused on one run if given."""
        url = f"{self.shown_url}/dags/{seg(dag_id)}/grid"  # a link in Slack: no password
        return url if run_id is None else f"{url}?dag_run_id={seg(run_id)}"
