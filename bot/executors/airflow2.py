"""Steps on Airflow 2, which has no backfill endpoint: one DAG run per planned interval.

Each run is triggered with its data interval spelled out (a run triggered for logical date D
otherwise covers the interval ending at D) and a run id derived from the step and the interval,
so triggering again after a crash answers 409 for our own run instead of running it twice. An
interval that already has a run (scheduled, or an earlier backfill) is cleared, which reruns it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from bot.clients.airflow import Airflow2Client, AirflowConflict, DagRunInfo
from bot.config import AirflowExecution
from bot.domain.model import Interval, iso
from bot.domain.progress import Counts
from bot.executors.airflow3 import ready
from bot.executors.backends import Progress, State, StepWork


def run_id_for(work: StepWork, interval: Interval) -> str:
    return f"backfill_bot__{work.step_id[:12]}__{interval.start.strftime('%Y%m%dT%H%M%S')}"


class Airflow2Steps:
    def __init__(self, client: Airflow2Client, settings: AirflowExecution) -> None:
        self.client = client
        self.settings = settings

    async def submit(self, work: StepWork) -> State:
        dag_id = self.settings.dag_id_for(work.dag)
        await ready(self.client, dag_id, self.settings)
        adopted: dict[str, str] = dict(work.state.get("adopted", {}))
        for interval in work.intervals:
            key = iso(interval.start)
            if key in adopted:
                continue
            run_id = run_id_for(work, interval)
            try:
                await self.client.trigger_dag_run(
                    dag_id,
                    run_id,
                    logical_date=interval.start,
                    data_interval_start=interval.start,
                    data_interval_end=interval.end,
                    note=f"backfill-bot request {work.request_id}",
                )
            except AirflowConflict:
                other = await self._existing(dag_id, interval, run_id)
                if other is None or other.run_id == run_id:
                    continue  # ours, triggered before a crash
                adopted[key] = other.run_id
                if not self._rerun_since(other, work.since):
                    await self.client.clear_dag_run(dag_id, other.run_id)
        return {"adopted": adopted, "handle": f"{len(work.intervals)} DAG runs"}

    @staticmethod
    def _rerun_since(run: DagRunInfo, since: datetime | None) -> bool:
        """Already cleared for us by a process that died before recording it: rerunning now,
        or started after we claimed the step. Clearing it again would run it twice."""
        if run.state in ("queued", "running"):
            return True
        return since is not None and run.start_date is not None and run.start_date >= since

    async def _existing(self, dag_id: str, interval: Interval, run_id: str) -> DagRunInfo | None:
        runs = await self.client.list_dag_runs(
            dag_id, logical_date_gte=interval.start, logical_date_lte=interval.start
        )
        ours = [r for r in runs if r.run_id == run_id]
        return ours[0] if ours else (runs[0] if runs else None)

    async def _runs(self, work: StepWork) -> dict[datetime, DagRunInfo]:
        dag_id = self.settings.dag_id_for(work.dag)
        adopted: dict[str, Any] = dict(work.state.get("adopted", {}))
        wanted = {adopted.get(iso(i.start), run_id_for(work, i)): i.start for i in work.intervals}
        runs = await self.client.list_dag_runs(
            dag_id,
            logical_date_gte=work.intervals[0].start,
            logical_date_lte=work.intervals[-1].start,
        )
        return {wanted[r.run_id]: r for r in runs if r.run_id in wanted}

    async def poll(self, work: StepWork) -> Progress:
        runs = await self._runs(work)
        counts = Counts.of([r.state for r in runs.values()], expected=len(work.intervals))
        if not counts.finished:
            return Progress(counts)
        if counts.failed:
            message = f"{counts.failed} of {counts.total} runs failed"
            return Progress(counts, done=True, message=message)
        return Progress(counts, done=True, ok=True)

    async def cancel(self, work: StepWork) -> State | None:
        dag_id = self.settings.dag_id_for(work.dag)
        for run in (await self._runs(work)).values():
            if run.state == "queued":
                await self.client.set_dag_run_state(dag_id, run.run_id, "failed")
        return None

    def link(self, work: StepWork) -> str | None:
        return self.client.ui_url(self.settings.dag_id_for(work.dag))
