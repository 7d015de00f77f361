"""Contract tests: rerunning only the failed tasks of a run, and the DAGs scheduled on a DAG's
assets, with bot.clients.airflow against a real Airflow 3.3.2 (tests/airflow/harness.py).

The DAGs are in tests/airflow/dags/clear_failed_dags.py. Facts these tests pin down (3.3.2),
which the stand-in (standins/airflow) follows:
- `clearTaskInstances` with a `dag_run_id` and `only_failed` clears the failed task alone and
  answers it with state None and its try unchanged; the failed run goes back to queued, and the
  task that succeeded is not run again (same try, same dates) while the cleared one runs as try 2;
- `dag_run_id` with a `start_date` is a 422 whose message names the rule;
- `GET /api/v2/assets?dag_ids=` answers the producer's assets, with their scheduled DAGs.

Run with: ./dev test tests/airflow/test_clear_failed_tasks.py (installs and starts Airflow on
first use; skipped without PostgreSQL or network unless CI=true).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest

from bot.clients.airflow import (
    Airflow3Client,
    AirflowRequestError,
    AssetConsumer,
    DagRunInfo,
    TaskInstanceInfo,
)
from tests.airflow.harness import RealAirflow

pytestmark = pytest.mark.airflow

DAG_ID = "bot_test.clear_failed"
LOGICAL = datetime(2021, 6, 4, tzinfo=UTC)


@pytest.fixture
async def airflow(real_airflow: RealAirflow) -> AsyncIterator[Airflow3Client]:
    async with Airflow3Client(
        real_airflow.url, real_airflow.username, real_airflow.password
    ) as client:
        yield client


async def wait_finished(client: Airflow3Client, run_id: str, timeout_s: float = 120) -> DagRunInfo:
    deadline = time.monotonic() + timeout_s
    while True:
        run = await client.get_dag_run(DAG_ID, run_id)
        if run.state in ("success", "failed"):
            return run
        if time.monotonic() > deadline:
            raise AssertionError(f"run {run_id} still {run.state} after {timeout_s}s")
        await asyncio.sleep(1)


def by_task(tasks: list[TaskInstanceInfo]) -> dict[str, tuple[str | None, int]]:
    return {t.task_id: (t.state, t.try_number) for t in tasks}


async def test_clearing_the_failed_task_reruns_it_alone(
    real_airflow: RealAirflow, airflow: Airflow3Client
) -> None:
    run_id = "bot_test_clear__1"
    body = {"dag_run_id": run_id, "logical_date": LOGICAL.isoformat(), "conf": {"fail_load": True}}
    path = f"/api/v2/dags/{DAG_ID}/dagRuns"
    await asyncio.to_thread(real_airflow.api, "POST", path, body)
    assert (await wait_finished(airflow, run_id)).state == "failed"
    before = await airflow.list_task_instances(DAG_ID, run_id)
    assert by_task(before) == {"extract": ("success", 1), "load": ("failed", 1)}

    with pytest.raises(AirflowRequestError) as caught:
        await airflow.clear_task_instances(DAG_ID, dag_run_id=run_id, start_date=LOGICAL)
    assert caught.value.status == 422
    assert "Exactly one of dag_run_id or start_date must be provided" in caught.value.detail

    cleared = await airflow.clear_task_instances(DAG_ID, dag_run_id=run_id)
    assert (cleared.tasks, cleared.count) == (((run_id, "load"),), 1)
    assert (await wait_finished(airflow, run_id)).state == "success"
    after = await airflow.list_task_instances(DAG_ID, run_id)
    assert by_task(after) == {"extract": ("success", 1), "load": ("success", 2)}
    extract_before = next(t for t in before if t.task_id == "extract")
    assert next(t for t in after if t.task_id == "extract") == extract_before


async def test_asset_consumers_of_a_producer(airflow: Airflow3Client) -> None:
    assert await airflow.asset_consumers("bot_test.asset_producer") == [
        AssetConsumer("x-bot-test://orders", "bot_test.orders", "bot_test.asset_consumer")
    ]
    assert await airflow.asset_consumers("bot_test.asset_consumer") == []
