"""Contract tests: bot.clients.airflow against a real Airflow 3.3.2 (tests/airflow/harness.py).

The DAGs are in tests/airflow/dags/bot_test_dags.py: daily `CronDataIntervalTimetable`
("0 0 * * *", UTC), start 2021-05-01, catchup off; the scheduler makes no scheduled runs, so
every run here comes from a backfill. Facts these tests pin down (3.3.2):
- backfill from_date/to_date are inclusive bounds on logical dates; a from_date between two
  schedule points starts at the next one;
- logical_date == data_interval_start, data interval [D, D + 1 day), run id
  "backfill__<run_after>" where run_after == data_interval_end;
- a second backfill of a DAG with one still active answers 409;
- cancel fails queued runs at once, the running run finishes, and the backfill is completed
  (and paused) in the cancel answer; a second cancel answers 409;
- a corrupted token answers 403 "Invalid JWT token", which the client renews once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta, timezone

import aiohttp
import pytest

from bot.clients.airflow import (
    Airflow3Client,
    AirflowAuthError,
    AirflowConflict,
    AirflowNotFound,
    AirflowRequestError,
    DagRunInfo,
    connect_airflow,
)
from tests.airflow.harness import RealAirflow

pytestmark = pytest.mark.airflow
log = logging.getLogger(__name__)

QUICK = "bot_test.quick"
SLOW = "bot_test.slow"
IDLE = "bot_test.idle"
DAY = timedelta(days=1)


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


@pytest.fixture
async def airflow(real_airflow: RealAirflow) -> AsyncIterator[Airflow3Client]:
    async with Airflow3Client(
        real_airflow.url, real_airflow.username, real_airflow.password
    ) as client:
        yield client


async def wait_runs(
    client: Airflow3Client,
    dag_id: str,
    done: set[str],
    count: int,
    timeout_s: float = 90,
) -> list[DagRunInfo]:
    """Poll the DAG's backfill runs until `count` of them are in a state of `done`."""
    deadline = time.monotonic() + timeout_s
    while True:
        runs = await client.list_dag_runs(dag_id, run_type="backfill")
        if sum(run.state in done for run in runs) >= count:
            return runs
        if time.monotonic() > deadline:
            raise AssertionError(f"runs of {dag_id} not {done} in {timeout_s}s: {runs}")
        await asyncio.sleep(0.5)


async def test_connect_airflow_picks_the_v3_client(real_airflow: RealAirflow) -> None:
    client = await connect_airflow(real_airflow.url, real_airflow.username, real_airflow.password)
    async with client:
        assert isinstance(client, Airflow3Client)
        assert client.api_version == 3
        assert await client.version() == "3.3.2"


async def test_get_dag_and_unknown_dag(airflow: Airflow3Client) -> None:
    dag = await airflow.get_dag(QUICK)
    assert dag.dag_id == QUICK
    assert dag.is_paused is False  # DAGS_ARE_PAUSED_AT_CREATION=False
    assert dag.is_active is True
    assert dag.timetable_description == "At 00:00"
    with pytest.raises(AirflowNotFound) as caught:
        await airflow.get_dag("bot_test.no_such_dag")
    assert caught.value.status == 404
    assert "bot_test.no_such_dag" in caught.value.detail


async def test_set_paused_round_trip(airflow: Airflow3Client) -> None:
    paused = await airflow.set_paused(IDLE, True)
    assert paused.is_paused is True
    assert (await airflow.get_dag(IDLE)).is_paused is True
    unpaused = await airflow.set_paused(IDLE, False)
    assert unpaused.is_paused is False
    assert (await airflow.get_dag(IDLE)).is_paused is False
    with pytest.raises(AirflowNotFound):
        await airflow.set_paused("bot_test.no_such_dag", True)


async def test_dry_run_bounds_are_inclusive_logical_dates(airflow: Airflow3Client) -> None:
    days = [utc(2021, 6, 4), utc(2021, 6, 5), utc(2021, 6, 6)]
    assert await airflow.dry_run_backfill(IDLE, utc(2021, 6, 4), utc(2021, 6, 6)) == days
    # A from_date between schedule points starts at the next one; to_date just before a
    # schedule point excludes it.
    assert await airflow.dry_run_backfill(IDLE, utc(2021, 6, 3, 12), utc(2021, 6, 6)) == days
    assert await airflow.dry_run_backfill(IDLE, utc(2021, 6, 4), utc(2021, 6, 6, 23)) == days
    assert (
        await airflow.dry_run_backfill(IDLE, utc(2021, 6, 4), utc(2021, 6, 5, 23, 59)) == days[:2]
    )
    # Offsets other than UTC are converted, not misread.
    cest = datetime(2021, 6, 4, 2, tzinfo=timezone(timedelta(hours=2)))
    assert await airflow.dry_run_backfill(IDLE, cest, utc(2021, 6, 4)) == days[:1]


async def test_dry_run_errors(airflow: Airflow3Client) -> None:
    with pytest.raises(AirflowRequestError) as caught:
        await airflow.dry_run_backfill(IDLE, utc(2021, 6, 6), utc(2021, 6, 4))
    assert caught.value.status == 422
    assert "must not be after" in caught.value.detail
    with pytest.raises(AirflowNotFound):
        await airflow.dry_run_backfill("bot_test.no_such_dag", utc(2021, 6, 4), utc(2021, 6, 6))
    with pytest.raises(ValueError, match="timezone-aware"):
        await airflow.dry_run_backfill(IDLE, datetime(2021, 6, 4), utc(2021, 6, 6))


async def test_backfill_runs_the_dry_run_dates(
    airflow: Airflow3Client, real_airflow: RealAirflow
) -> None:
    start, end = utc(2021, 6, 4), utc(2021, 6, 6)
    planned = await airflow.dry_run_backfill(QUICK, start, end)
    t0 = time.monotonic()
    backfill = await airflow.create_backfill(QUICK, start, end, dag_run_conf={"why": "test"})
    assert backfill.dag_id == QUICK
    assert (backfill.from_date, backfill.to_date) == (start, end)
    assert backfill.reprocess_behavior == "completed"
    assert backfill.max_active_runs == 1
    assert backfill.is_paused is False
    assert backfill.completed_at is None
    assert backfill.created_at is not None

    with pytest.raises(AirflowConflict) as caught:
        await airflow.create_backfill(QUICK, utc(2021, 6, 10), utc(2021, 6, 11))
    assert caught.value.status == 409
    assert "already a running backfill" in caught.value.detail

    assert [b.id for b in await airflow.list_backfills(QUICK)] == [backfill.id]
    assert await airflow.get_backfill(backfill.id) == backfill
    assert await airflow.list_backfills(IDLE) == []
    with pytest.raises(AirflowNotFound):
        await airflow.get_backfill(999_999)

    runs = await wait_runs(airflow, QUICK, {"success"}, len(planned))
    log.warning("3-day backfill of %s took %.1fs", QUICK, time.monotonic() - t0)
    assert sorted(run.logical_date for run in runs if run.logical_date) == planned
    for run in runs:
        assert run.state == "success"
        assert run.run_type == "backfill"
        assert run.logical_date is not None
        assert run.data_interval_start == run.logical_date
        assert run.data_interval_end == run.logical_date + DAY
        assert run.run_id == f"backfill__{(run.logical_date + DAY).isoformat()}"
        assert run.start_date is not None
        assert run.end_date is not None

    middle = await airflow.list_dag_runs(
        QUICK, run_type="backfill", logical_date_gte=planned[1], logical_date_lte=planned[1]
    )
    assert [run.logical_date for run in middle] == [planned[1]]
    assert await airflow.get_dag_run(QUICK, middle[0].run_id) == middle[0]
    assert await airflow.list_dag_runs(QUICK, run_type="manual") == []

    # The UI pages exist (the single-page app answers its routes with HTML).
    async with aiohttp.ClientSession() as session:
        for url in (airflow.ui_url(QUICK), airflow.ui_url(QUICK, middle[0].run_id)):
            assert url.startswith(f"{real_airflow.url}/dags/{QUICK}")
            async with session.get(url) as resp:
                assert resp.status == 200, url
                assert "text/html" in resp.headers["Content-Type"]


async def test_cancel_fails_queued_runs_and_lets_the_running_one_finish(
    airflow: Airflow3Client,
) -> None:
    backfill = await airflow.create_backfill(SLOW, utc(2021, 6, 4), utc(2021, 6, 6))
    runs = await wait_runs(airflow, SLOW, {"running"}, 1, timeout_s=60)
    running = next(run for run in runs if run.state == "running")

    cancelled = await airflow.cancel_backfill(backfill.id)
    assert cancelled.id == backfill.id
    assert cancelled.is_paused is True
    assert cancelled.completed_at is not None  # completed at once, not by the 30 s timer

    states = {run.run_id: run.state for run in await airflow.list_dag_runs(SLOW)}
    assert states.pop(running.run_id) == "running"
    assert sorted(states.values()) == ["failed", "failed"]

    await wait_runs(airflow, SLOW, {"success"}, 1, timeout_s=60)
    final = {run.run_id: run.state for run in await airflow.list_dag_runs(SLOW)}
    assert final[running.run_id] == "success"

    with pytest.raises(AirflowConflict) as caught:
        await airflow.cancel_backfill(backfill.id)
    assert "already completed" in caught.value.detail


async def test_token_is_renewed_once_when_airflow_refuses_it(
    airflow: Airflow3Client, real_airflow: RealAirflow
) -> None:
    await airflow.get_dag(IDLE)
    good = airflow._token
    assert good
    airflow._token = good[:-4] + "AAAA"  # a bad signature: Airflow answers 403
    assert (await airflow.get_dag(IDLE)).dag_id == IDLE
    assert airflow._token not in (None, good[:-4] + "AAAA")

    async with Airflow3Client(real_airflow.url, real_airflow.username, "wrong") as wrong:
        with pytest.raises(AirflowAuthError, match="AIRFLOW_PASSWORD"):
            await wrong.get_dag(IDLE)
    async with Airflow3Client(real_airflow.url, None, None) as anonymous:
        assert await anonymous.version() == "3.3.2"  # needs no token
        with pytest.raises(AirflowAuthError, match="set AIRFLOW_USERNAME") as caught:
            await anonymous.get_dag(IDLE)
        assert caught.value.status == 401
