"""The Airflow backend: connects on first use, reads the version, and hands each step to the
Airflow 3 (backfill endpoint) or Airflow 2 (one DAG run per interval) way of running it.

What Airflow refuses for good becomes `StepRejected`, which fails the step with Airflow's reason:
credentials refused (401/403 even with a fresh token: wrong AIRFLOW_PASSWORD, a user without the
permission), 404 (no such DAG) and, when submitting, 400/422 (what was asked is refused, e.g.
`--backwards` for a DAG whose tasks depend on their past). Everything else (unreachable, 5xx,
429, timeouts) propagates for the runner to retry, with backoff and a limit.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from bot.backfill.rules.estimate import typical_run_s
from bot.backfill.rules.options import RunOptions, conf_problems
from bot.backfill.run.airflow2 import AIRFLOW_MAX_ACTIVE_RUNS, Airflow2Steps
from bot.backfill.run.airflow3 import Airflow3Steps
from bot.backfill.run.airflow_clear import ClearFailedSteps
from bot.backfill.run.backends import Finding, Progress, State, StepRejected, StepWork
from bot.clients.airflow import (
    Airflow2Client,
    Airflow3Client,
    AirflowAuthError,
    AirflowClient,
    AirflowNotFound,
    AirflowRequestError,
    RetryPolicy,
    connect_airflow,
)
from bot.config import AirflowExecution
from bot.core.model import DagRef, Interval

_CHECKS_AT_ONCE = 8
_PACE_RUNS = 10
"""A DAG's typical run: the median of its last this many successful runs."""


class AirflowBackend:
    name = "airflow"

    def __init__(
        self,
        url: str,
        username: str | None,
        password: str | None,
        settings: AirflowExecution,
        *,
        timeout_s: float = 15.0,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.url = url
        self.username = username
        self.password = password
        self.settings = settings
        self.timeout_s = timeout_s
        self.retry = retry
        self._client: AirflowClient | None = None
        self._steps: Airflow3Steps | Airflow2Steps | None = None
        self._lock = asyncio.Lock()

    @property
    def version(self) -> int:
        """Airflow's major version once connected (3 until then: the current line)."""
        return 2 if isinstance(self._client, Airflow2Client) else 3

    async def steps(self) -> Airflow3Steps | Airflow2Steps:
        async with self._lock:
            if self._steps is None:
                client = await connect_airflow(
                    self.url,
                    self.username,
                    self.password,
                    timeout_s=self.timeout_s,
                    retry=self.retry,
                )
                self._client = client
                if isinstance(client, Airflow3Client):
                    self._steps = Airflow3Steps(client, self.settings)
                else:
                    assert isinstance(client, Airflow2Client)
                    self._steps = Airflow2Steps(client, self.settings)
            return self._steps

    async def check(self, dags: Sequence[DagRef]) -> dict[DagRef, Finding]:
        steps = await self.steps()
        client = steps.client
        limit = asyncio.Semaphore(_CHECKS_AT_ONCE)

        async def one(dag: DagRef) -> Finding | None:
            dag_id = self.settings.dag_id_for(dag)
            async with limit:
                try:
                    info = await client.get_dag(dag_id)
                except AirflowNotFound:
                    return Finding(f"no DAG `{dag_id}` in Airflow", blocking=True)
            if not info.is_paused:
                return None
            if self.settings.on_paused == "unpause":
                return Finding("paused in Airflow: the bot will unpause it", blocking=False)
            return Finding(
                "paused in Airflow: unpause it (or set execution.airflow.on_paused: unpause)",
                blocking=True,
            )

        found = await asyncio.gather(*(one(d) for d in dags))
        return {dag: f for dag, f in zip(dags, found, strict=True) if f is not None}

    async def _steps_for(self, work: StepWork) -> Airflow3Steps | Airflow2Steps | ClearFailedSteps:
        steps = await self.steps()
        if work.dag.dag_id in work.options.clear_failed:
            return ClearFailedSteps(steps.client, self.settings)
        if isinstance(steps, Airflow3Steps) and work.dag.dag_id in work.options.asset_triggered:
            # Scheduled on assets: Airflow 3 would create no backfill runs for it.
            return Airflow2Steps(steps.client, self.settings)
        return steps

    async def submit(self, work: StepWork) -> State:
        try:
            return await (await self._steps_for(work)).submit(work)
        except (AirflowAuthError, AirflowNotFound, AirflowRequestError) as exc:
            # 400/422 too: Airflow refuses what was asked (a DAG that depends on its past run
            # backwards, a conf its params refuse), and will again.
            raise StepRejected(str(exc)) from exc

    async def poll(self, work: StepWork) -> Progress:
        try:
            return await (await self._steps_for(work)).poll(work)
        except (AirflowAuthError, AirflowNotFound) as exc:
            # Airflow will not say how the runs went: they may still go on there.
            raise StepRejected(f"{exc}; cannot follow the runs any more") from exc

    async def cancel(self, work: StepWork) -> State | None:
        return await (await self._steps_for(work)).cancel(work)

    async def pause(self, work: StepWork, paused: bool) -> State | None:
        return await (await self._steps_for(work)).pause(work, paused)

    async def history(self, dag: DagRef, intervals: Sequence[Interval]) -> list[str | None] | None:
        if not intervals:
            return []
        client = (await self.steps()).client
        try:
            runs = await client.list_dag_runs(
                self.settings.dag_id_for(dag),
                logical_date_gte=min(i.start for i in intervals),
                logical_date_lte=max(i.start for i in intervals),
            )
        except AirflowNotFound:
            return [None] * len(intervals)  # the preview's check says the DAG is missing
        latest = {run.logical_date: run.state for run in runs if run.logical_date is not None}
        return [latest.get(i.start) for i in intervals]

    async def asset_consumers(self, dag: DagRef) -> list[tuple[str, str]]:
        client = (await self.steps()).client
        try:
            found = await client.asset_consumers(self.settings.dag_id_for(dag))
        except AirflowNotFound:
            return []
        return [(c.name, c.dag_id) for c in found]

    async def run_seconds(self, dag: DagRef) -> float | None:
        """The median of the DAG's last successful runs, start to end."""
        client = (await self.steps()).client
        try:
            runs = await client.recent_dag_runs(self.settings.dag_id_for(dag), limit=_PACE_RUNS)
        except AirflowNotFound:
            return None
        return typical_run_s(
            (r.end_date - r.start_date).total_seconds()
            for r in runs
            if r.start_date is not None and r.end_date is not None
        )

    async def check_conf(
        self, dags: Sequence[DagRef], conf: Mapping[str, Any]
    ) -> dict[DagRef, Finding]:
        client = (await self.steps()).client
        limit = asyncio.Semaphore(_CHECKS_AT_ONCE)

        async def one(dag: DagRef) -> Finding | None:
            async with limit:
                try:
                    params = await client.get_dag_params(self.settings.dag_id_for(dag))
                except AirflowNotFound:
                    return None  # the preview's check says the DAG is missing
            unknown, wrong = conf_problems(conf, {p.name: p.types for p in params.values()})
            if wrong:
                key, allowed, given = wrong[0]
                return Finding(
                    f"--conf gives `{key}` a{'n' if given[0] in 'aeiou' else ''} {given}; "
                    f"this DAG's param takes {allowed} (Airflow would refuse the runs)",
                    blocking=True,
                )
            if unknown:
                known = ", ".join(sorted(params)) or "none"
                return Finding(
                    f"--conf sets {', '.join(unknown)}, which this DAG has no param for "
                    f"(its params: {known}); its tasks see it in dag_run.conf only",
                    blocking=False,
                )
            return None

        found = await asyncio.gather(*(one(d) for d in dags))
        return {dag: f for dag, f in zip(dags, found, strict=True) if f is not None}

    def unhonoured(self, options: RunOptions) -> tuple[str, ...]:
        if self.version == 2 and options.conf:
            return (
                "Airflow 2 clears an interval that already has a run, and a cleared run keeps "
                "the conf it had: --conf reaches only the runs the bot triggers anew",
            )
        return ()

    def runs_at_once(self, work: StepWork) -> int:
        if work.options.max_active is not None:
            wanted = work.options.max_active
        elif self.version == 3 and work.dag.dag_id not in work.options.asset_triggered:
            wanted = self.settings.max_active_runs
        else:  # a DAG's own max_active_runs may lower it further (read at submit)
            wanted = self.settings.max_active_runs_per_dag or AIRFLOW_MAX_ACTIVE_RUNS
        return max(1, min(wanted, len(work.intervals)))

    def link(self, work: StepWork) -> str | None:
        if self._steps is None:
            return None
        url = self._steps.link(work)
        if url and self.settings.ui_url:
            url = self.settings.ui_url.rstrip("/") + url.removeprefix(self._steps.client.shown_url)
        return url

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
