"""The Airflow 2 backend (bot/backfill/run/airflow2.py through AirflowBackend) on a real Airflow
2.11.2: a step's active runs stay within the cap (BOT_CONFIG's `max_active_runs_per_dag`, else
the DAG's own `max_active_runs`), later intervals start as earlier runs end, and Cancel stops
the running runs (their task processes are killed) while untriggered intervals never run.
The DAGs are tests/airflow/dags/bot_test_dags.py's."""

from __future__ import annotations

import asyncio
import itertools
import time
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from bot.backfill.run.airflow import AirflowBackend
from bot.backfill.run.backends import Progress, StepWork
from bot.clients.airflow import Airflow2Client
from bot.config import AirflowExecution
from bot.core.model import DagRef, Interval
from tests.airflow.airflow2 import LONG, QUICK, sleeping, until
from tests.airflow.harness import RealAirflow

pytestmark = pytest.mark.airflow


def step(dag_id: str, first: datetime, count: int) -> StepWork:
    days = [first + timedelta(days=n) for n in range(count + 1)]
    return StepWork(
        request_id="real-airflow2",
        step_id=uuid.uuid4().hex,
        dag=DagRef("bot_test", dag_id),
        intervals=tuple(Interval(a, b) for a, b in itertools.pairwise(days)),
    )


def backend(airflow: RealAirflow, settings: AirflowExecution) -> AirflowBackend:
    return AirflowBackend(airflow.url, airflow.username, airflow.password, settings)


async def follow(
    airflow: AirflowBackend, work: StepWork, timeout_s: float = 120
) -> tuple[Progress, StepWork]:
    """Poll as the runner does (new state merged in) until the step is done."""
    deadline = time.monotonic() + timeout_s
    while True:
        progress = await airflow.poll(work)
        work = replace(work, state={**work.state, **(progress.state or {})})
        if progress.done:
            return progress, work
        if time.monotonic() > deadline:
            raise AssertionError(f"step not done in {timeout_s:g}s: {progress}")
        await asyncio.sleep(0.5)


async def test_a_cap_of_one_runs_the_intervals_one_after_another(
    real_airflow2: RealAirflow,
) -> None:
    work = step(QUICK, datetime(2021, 6, 10, tzinfo=UTC), 3)
    airflow = backend(real_airflow2, AirflowExecution(max_active_runs_per_dag=1))
    try:
        state = await airflow.submit(work)
        assert (state["cap"], state["triggered"]) == (1, ["2021-06-10T00:00:00Z"])
        progress, work = await follow(airflow, replace(work, state=state))
    finally:
        await airflow.close()

    assert (progress.ok, progress.counts.succeeded) == (True, 3)
    async with Airflow2Client(
        real_airflow2.url, real_airflow2.username, real_airflow2.password
    ) as client:
        runs = await client.list_dag_runs(QUICK, logical_date_gte=work.intervals[0].start)
    ours = sorted((r for r in runs if work.step_id[:12] in r.run_id), key=lambda r: r.run_id)
    assert [r.logical_date for r in ours] == [i.start for i in work.intervals]
    assert {r.state for r in ours} == {"success"}
    for earlier, later in itertools.pairwise(ours):
        assert earlier.end_date is not None
        assert later.start_date is not None
        assert later.start_date >= earlier.end_date, "two runs of the step were active at once"


async def test_cancel_stops_the_running_runs_and_leaves_the_rest_untriggered(
    real_airflow2: RealAirflow,
) -> None:
    work = step(LONG, datetime(2021, 6, 20, tzinfo=UTC), 3)

    async def two_sleeping() -> bool:
        return len(sleeping(real_airflow2)) == 2

    async def none_sleeping() -> bool:
        return not sleeping(real_airflow2)

    airflow = backend(real_airflow2, AirflowExecution())  # the cap: bot_test.long's own, 2
    try:
        state = await airflow.submit(work)
        assert (state["cap"], len(state["triggered"])) == (2, 2)

        await until(two_sleeping, "both runs' tasks sleeping")
        work = replace(work, state=state, cancelling=True)
        await airflow.cancel(work)
        progress, work = await follow(airflow, work)
    finally:
        await airflow.close()

    assert progress.done
    assert not progress.ok
    assert progress.message == "2 of 2 runs failed or were stopped, 1 interval never triggered"
    await until(none_sleeping, "the task processes killed")
    async with Airflow2Client(
        real_airflow2.url, real_airflow2.username, real_airflow2.password
    ) as client:
        runs = await client.list_dag_runs(LONG, logical_date_gte=work.intervals[0].start)
    ours = [r for r in runs if work.step_id[:12] in r.run_id]
    assert sorted((r.logical_date, r.state) for r in ours) == [
        (work.intervals[0].start, "failed"),
        (work.intervals[1].start, "failed"),
    ]
