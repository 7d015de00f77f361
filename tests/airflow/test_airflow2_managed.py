"""A backfill's options, pause and schedule on a real Airflow 2.11.2, which has no backfill
endpoint (tests/airflow/managed_story.py): with `--rerun failed` the bot itself leaves the
succeeded intervals alone, clears the failed run and triggers the missing one; a paused request
triggers no more runs until it is resumed; a request scheduled for later triggers nothing before
its time; three backfills under a budget of 4 never run more than 4 runs at once; Retry failed
tasks clears only the failed task of the failed run. The same stories on Airflow 3 are
test_managed_backfills.py. (Named so that it runs
with the other Airflow 2 files: the shared Airflow is started once per version.)"""

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


async def test_rerun_failed_on_airflow2_reruns_only_the_failed_and_missing_intervals(
    tmp_path: Path, real_airflow2: RealAirflow
) -> None:
    await rerun_failed_redoes_only_failed_and_missing(tmp_path, real_airflow2)


async def test_pause_on_airflow2_triggers_nothing_more_until_resumed(
    tmp_path: Path, real_airflow2: RealAirflow
) -> None:
    await pause_holds_new_runs_and_resume_runs_the_rest(tmp_path, real_airflow2)


async def test_a_backfill_scheduled_for_later_on_airflow2_starts_only_at_its_time(
    tmp_path: Path, real_airflow2: RealAirflow
) -> None:
    await scheduled_backfill_waits_for_its_time(tmp_path, real_airflow2)


async def test_three_backfills_on_airflow2_under_a_budget_of_4_run_at_most_4(
    tmp_path: Path, real_airflow2: RealAirflow
) -> None:
    await budget_caps_runs_across_backfills(tmp_path, real_airflow2)


async def test_retry_failed_tasks_on_airflow2_reruns_only_the_failed_task(
    tmp_path: Path, real_airflow2: RealAirflow
) -> None:
    await retry_failed_tasks_reruns_only_the_failed_task(tmp_path, real_airflow2)
