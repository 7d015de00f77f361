"""Contract tests: bot.clients.airflow's Airflow2Client against a real Airflow 2.11.2
(tests/airflow/harness.py: webserver + scheduler, /api/v1 with basic auth, LocalExecutor).

The DAGs are in tests/airflow/dags/bot_test_dags.py (daily `CronDataIntervalTimetable`, start
2021-05-01, catchup off; no scheduled runs). Facts these tests pin down (2.11.2):
- a triggered run with an explicit data interval keeps it, with logical date = its start;
  run_type "manual"; a second run with the same run id or logical date answers 409;
- `max_active_runs` on GET /dags/{id} is the DAG's own, 16 (the config default) if it sets none;
- PATCH state=failed fails a running run at once; its running task instance is set failed and
  the task process is killed at its next heartbeat; a queued run's tasks are skipped;
- wrong or missing credentials answer 403 PermissionDenied (the spec documents 401; 2.11.2 with
  the FAB basic auth backend answers 403 either way, with no WWW-Authenticate header).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from bot.clients.airflow import (
    Airflow2Client,
    AirflowAuthError,
    AirflowConflict,
    AirflowNotFound,
    DagRunInfo,
    connect_airflow,
)
from tests.airflow.airflow2 import IDLE, LONG, QUICK, sleeping, until
from tests.airflow.harness import RealAirflow

pytestmark = pytest.mark.airflow

DAY = timedelta(days=1)


def utc(year: int, month: int, day: int) -> datetime:
    return datetime(year, month, day, tzinfo=UTC)


@pytest.fixture
async def airflow(real_airflow2: RealAirflow) -> AsyncIterator[Airflow2Client]:
    async with Airflow2Client(
        real_airflow2.url, real_airflow2.username, real_airflow2.password
    ) as client:
        yield client


async def trigger(client: Airflow2Client, dag_id: str, run_id: str, day: datetime) -> DagRunInfo:
    return await client.trigger_dag_run(
        dag_id, run_id, logical_date=day, data_interval_start=day, data_interval_end=day + DAY
    )


async def states(client: Airflow2Client, dag_id: str, *run_ids: str) -> list[str]:
    return [(await client.get_dag_run(dag_id, run_id)).state for run_id in run_ids]


def task_states(airflow: RealAirflow, dag_id: str, run_id: str) -> list[str | None]:
    path = f"/api/v1/dags/{dag_id}/dagRuns/{run_id}/taskInstances"
    return [ti["state"] for ti in airflow.api("GET", path)["task_instances"]]


async def test_connect_airflow_picks_the_v1_client(real_airflow2: RealAirflow) -> None:
    client = await connect_airflow(
        real_airflow2.url, real_airflow2.username, real_airflow2.password
    )
    async with client:
        assert isinstance(client, Airflow2Client)
        assert client.api_version == 2
        assert await client.version() == "2.11.2"


async def test_get_dag_reports_max_active_runs(airflow: Airflow2Client) -> None:
    quick = await airflow.get_dag(QUICK)
    assert (quick.dag_id, quick.is_paused, quick.is_active) == (QUICK, False, True)
    assert quick.timetable_description == "At 00:00"
    assert quick.max_active_runs == 16  # [core] max_active_runs_per_dag
    assert (await airflow.get_dag(LONG)).max_active_runs == 2
    with pytest.raises(AirflowNotFound) as caught:
        await airflow.get_dag("bot_test.no_such_dag")
    assert caught.value.status == 404
    paused = await airflow.set_paused(IDLE, True)
    assert paused.is_paused is True
    assert (await airflow.set_paused(IDLE, False)).is_paused is False


async def test_a_triggered_run_keeps_its_interval_and_conflicts_are_409(
    airflow: Airflow2Client,
) -> None:
    day = utc(2021, 6, 4)
    run = await trigger(airflow, QUICK, "contract__quick_0604", day)
    assert (run.run_type, run.logical_date) == ("manual", day)
    assert (run.data_interval_start, run.data_interval_end) == (day, day + DAY)
    with pytest.raises(AirflowConflict):
        await trigger(airflow, QUICK, "contract__quick_0604", utc(2021, 6, 9))
    with pytest.raises(AirflowConflict):
        await trigger(airflow, QUICK, "contract__other_0604", day)
    listed = await airflow.list_dag_runs(QUICK, logical_date_gte=day, logical_date_lte=day)
    assert [r.run_id for r in listed] == ["contract__quick_0604"]

    async def succeeded() -> bool:
        return await states(airflow, QUICK, run.run_id) == ["success"]

    await until(succeeded, "the run succeeded")
    done = await airflow.get_dag_run(QUICK, run.run_id)
    assert done.start_date is not None
    assert done.end_date is not None
    assert airflow.ui_url(QUICK).endswith(f"/dags/{QUICK}/grid")


async def test_failing_runs_kills_running_tasks_and_skips_queued_ones(
    airflow: Airflow2Client, real_airflow2: RealAirflow
) -> None:
    # bot_test.long allows two active runs: two run (sleeping), the third waits queued.
    ids = [f"contract__long_060{n}" for n in (4, 5, 6)]
    for run_id, n in zip(ids, (4, 5, 6), strict=True):
        await trigger(airflow, LONG, run_id, utc(2021, 6, n))

    async def two_sleeping() -> bool:
        return len(sleeping(real_airflow2)) == 2

    async def none_sleeping() -> bool:
        return not sleeping(real_airflow2)

    await until(two_sleeping, "two tasks sleeping")
    assert await states(airflow, LONG, *ids) == ["running", "running", "queued"]

    queued = await airflow.set_dag_run_state(LONG, ids[2], "failed")
    assert (queued.state, queued.start_date) == ("failed", None)
    for run_id in ids[:2]:
        stopped = await airflow.set_dag_run_state(LONG, run_id, "failed")
        assert stopped.state == "failed"
        assert stopped.end_date is not None
    assert task_states(real_airflow2, LONG, ids[0]) == ["failed"]
    await until(none_sleeping, "the task processes killed")
    assert await states(airflow, LONG, *ids) == ["failed", "failed", "failed"]
    assert task_states(real_airflow2, LONG, ids[2]) in ([], ["skipped"])
    with pytest.raises(AirflowNotFound):
        await airflow.set_dag_run_state(LONG, "contract__no_such_run", "failed")


async def test_wrong_credentials_are_an_auth_error(real_airflow2: RealAirflow) -> None:
    async with Airflow2Client(real_airflow2.url, real_airflow2.username, "wrong") as wrong:
        with pytest.raises(AirflowAuthError, match="AIRFLOW_PASSWORD") as caught:
            await wrong.get_dag(QUICK)
        assert caught.value.status == 403
