"""A backfill's options, pause and schedule on a real Airflow 3.3.2 (see managed_story.py):
`--rerun failed` becomes a backfill with `reprocess_behavior: failed` that reruns only the failed
and missing intervals; a paused request pauses its backfill in Airflow (queued runs wait) and the
resume unpauses it; a request scheduled for later creates no backfill before its time; three
backfills under a budget of 4 never run more than 4 runs at once; Retry failed tasks reruns only
the failed task of the failed run; a DAG scheduled on assets runs once per interval after its
producer. The same stories on Airflow 2.11 are test_airflow2_managed.py (but the last: Airflow 2
runs every step so)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.backfill.rules.assets import with_consumers
from bot.backfill.rules.states import RequestState
from bot.backfill.run.airflow2 import RUN_ID_PREFIX
from bot.backfill.run.preview import asset_consumers
from bot.core.run_options import RunOptions
from bot.lineage.rules.planner import plan_from_json
from tests.airflow.harness import RealAirflow

pytest.register_assert_rewrite("tests.airflow.managed_story")  # its asserts explain failures
from tests.airflow.managed_story import (  # noqa: E402
    budget_caps_runs_across_backfills,
    days,
    managed,
    one_dag_plan,
    pause_holds_new_runs_and_resume_runs_the_rest,
    rerun_failed_redoes_only_failed_and_missing,
    retry_failed_tasks_reruns_only_the_failed_task,
    scheduled_backfill_waits_for_its_time,
)

pytestmark = pytest.mark.airflow


async def test_rerun_failed_reruns_only_the_failed_and_missing_intervals(
    tmp_path: Path, real_airflow: RealAirflow
) -> None:
    await rerun_failed_redoes_only_failed_and_missing(tmp_path, real_airflow)


async def test_pause_holds_the_backfill_and_resume_runs_the_rest(
    tmp_path: Path, real_airflow: RealAirflow
) -> None:
    await pause_holds_new_runs_and_resume_runs_the_rest(tmp_path, real_airflow)


async def test_a_backfill_scheduled_for_later_starts_only_at_its_time(
    tmp_path: Path, real_airflow: RealAirflow
) -> None:
    await scheduled_backfill_waits_for_its_time(tmp_path, real_airflow)


async def test_three_backfills_under_a_budget_of_4_never_run_more_than_4_at_once(
    tmp_path: Path, real_airflow: RealAirflow
) -> None:
    await budget_caps_runs_across_backfills(tmp_path, real_airflow)


async def test_retry_failed_tasks_reruns_only_the_failed_task_of_the_run(
    tmp_path: Path, real_airflow: RealAirflow
) -> None:
    await retry_failed_tasks_reruns_only_the_failed_task(tmp_path, real_airflow)


PRODUCER, CONSUMER = "bot_test.asset_producer", "bot_test.asset_consumer"


async def test_asset_consumers_run_once_per_interval_after_their_producer(
    tmp_path: Path, real_airflow: RealAirflow
) -> None:
    """`--with-asset-consumers` (Airflow 3 only: tests/airflow/dags/clear_failed_dags.py): the
    plan gets the DAG scheduled on the producer's asset from what Airflow says of its assets;
    Airflow backfills the producer, and the consumer, which it cannot backfill, runs one
    triggered run per interval with the interval's dates, after the producer's runs."""
    dates = days(datetime(2021, 7, 5, tzinfo=UTC), 2)
    async with managed(tmp_path, real_airflow) as bot:
        plan = plan_from_json(one_dag_plan(PRODUCER, dates))
        plan, added = with_consumers(plan, await asset_consumers(bot.backend, plan))
        assert added == (CONSUMER,)
        options = RunOptions(rerun="all", with_asset_consumers=True, asset_triggered=added)
        request = await bot.finished(await bot.approve_plan(plan.to_json(), options), 200)
        assert request.state == RequestState.SUCCEEDED, [
            (s.state, s.message) for s in request.steps
        ]

        produced = [r for runs in (await bot.runs(PRODUCER, dates)).values() for r in runs]
        assert {r.run_type for r in produced} == {"backfill"}
        ended = max(r.end_date for r in produced if r.end_date is not None)
        for interval, runs in (await bot.runs(CONSUMER, dates)).items():
            [run] = runs  # Airflow's own asset-triggered runs have no logical date
            assert run.run_id.startswith(RUN_ID_PREFIX), run
            assert run.state == "success", run
            assert (run.data_interval_start, run.data_interval_end) == (
                interval, interval + timedelta(days=1)
            )  # fmt: skip
            assert run.start_date is not None
            assert run.start_date >= ended
