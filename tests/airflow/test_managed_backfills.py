"""A backfill's options, pause and schedule on a real Airflow 3.3.2 (see managed_story.py):
`--rerun failed` becomes a backfill with `reprocess_behavior: failed` that reruns only the failed
and missing intervals; a paused request pauses its backfill in Airflow (queued runs wait) and the
resume unpauses it; a request scheduled for later creates no backfill before its time; three
backfills under a budget of 4 never run more than 4 runs at once; Retry failed tasks reruns only
the failed task of the failed run. The same stories on Airflow 2.11 are test_airflow2_managed.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.airflow.harness import RealAirflow

pytest.register_assert_rewrite("tests.airflow.managed_story")  # its asserts explain failures
from tests.airflow.managed_story import (  # noqa: E402
    budget_caps_runs_across_backfills,
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
