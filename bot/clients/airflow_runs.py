"""Writes on one DAG run that both Airflow APIs take with the same bodies: trigger a run for an
interval, clear a run, set its state (Airflow 3.3.2 routes/public/dag_run.py: TriggerDAGRunPostBody,
DAGRunClearBody, DAGRunPatchBody; Airflow 2.11.2 api_connexion/endpoints/dag_run_endpoint.py).

Airflow 2 runs every backfill step this way (it has no backfill endpoint); Airflow 3 the steps it
cannot backfill: DAGs scheduled on assets, whose timetable never schedules anything."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from bot.clients.airflow_http import AirflowHttp, iso, seg
from bot.clients.airflow_models import DagRunInfo

RUN_STATES_SET = ("success", "failed", "queued")


class DagRunWrites(AirflowHttp):
    api = "/api/v2"
    """The API's path prefix (`/api/v1` on Airflow 2)."""

    def _run_path(self, dag_id: str, run_id: str | None = None) -> str:
        path = f"{self.api}/dags/{seg(dag_id)}/dagRuns"
        return path if run_id is None else f"{path}/{seg(run_id)}"

    async def trigger_dag_run(
        self,
        dag_id: str,
        run_id: str,
        *,
        logical_date: datetime,
        data_interval_start: datetime,
        data_interval_end: datetime,
        conf: Mapping[str, Any] | None = None,
        note: str | None = None,
    ) -> DagRunInfo:
        """Create one run covering [data_interval_start, data_interval_end).

        409 (AirflowConflict) if the run id or logical date exists. Not retried after a
        timeout or 5xx; a later `get_dag_run` tells whether it was created.
        """
        body: dict[str, Any] = {
            "dag_run_id": run_id,
            "logical_date": iso(logical_date, "logical_date"),
            "data_interval_start": iso(data_interval_start, "data_interval_start"),
            "data_interval_end": iso(data_interval_end, "data_interval_end"),
            "conf": dict(conf or {}),
        }
        if note is not None:
            body["note"] = note
        reply = await self._request("POST", self._run_path(dag_id), body=body, retry_safe=False)
        return reply.parse.dag_run(reply.data)

    async def clear_dag_run(self, dag_id: str, run_id: str) -> None:
        """Clear every task of an existing run so it runs again (not retried on timeout)."""
        path = f"{self._run_path(dag_id, run_id)}/clear"
        await self._request("POST", path, body={"dry_run": False}, retry_safe=False)

    async def set_dag_run_state(self, dag_id: str, run_id: str, state: str) -> DagRunInfo:
        """Set a run's state ("success", "failed" or "queued")."""
        if state not in RUN_STATES_SET:
            raise ValueError(f"state must be success, failed or queued, got {state!r}")
        path = self._run_path(dag_id, run_id)
        reply = await self._request("PATCH", path, body={"state": state}, retry_safe=True)
        return reply.parse.dag_run(reply.data)
