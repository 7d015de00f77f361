"""Retry failed tasks, end to end over signed Slack requests with the Airflow stand-in (both
APIs): a backfill whose run fails in its last task offers "Retry failed tasks"; the retry's
preview says so, and once approved the bot clears only the failed task of the failed run
(clearTaskInstances): the same run runs again, the tasks that succeeded keep their try, and the
progress and the summary land in the same thread."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.slack.rules.ids import ActionId
from standins.airflow.dags import FOOD_DELIVERY_DAGS
from standins.airflow.server import running_airflow_standin
from standins.marquez.server import StandInServer
from tests.support.e2e import CHANNEL, OWNER, buttons, eventually, running_bot
from tests.support.execution import (
    airflow_env,
    approve,
    execution_config,
    finished,
    load,
    request_backfill,
    status_message,
)

ROOT = "example.etl_orders"
TASKS = ("extract", "transform", "load")
DAY = datetime(2021, 6, 5, tzinfo=UTC)


@pytest.mark.parametrize("api", [3, 2])
async def test_retry_failed_tasks_reruns_only_the_failed_task_of_the_same_run(
    tmp_path: Path, food_delivery_marquez: StandInServer, api: int
) -> None:
    dags = [replace(d, tasks=TASKS) if d.dag_id == ROOT else d for d in FOOD_DELIVERY_DAGS]
    async with (
        running_airflow_standin(api=api, dags=dags, run_seconds=0.05) as airflow,
        running_bot(
            f"sqlite:///{tmp_path / 'bot.db'}", food_delivery_marquez, execution_config(),
            env=airflow_env(airflow.url),
        ) as bot,
    ):  # fmt: skip
        airflow.state.fail_on(ROOT, DAY, times=1, task_id="load")
        first = await approve(
            bot, await request_backfill(bot, f"{ROOT} 2021-06-04..2021-06-06 --only")
        )
        failed = await finished(bot, first)
        assert failed.state == "failed"
        [run] = [r for r in airflow.state.all_runs(ROOT) if r.logical_date == DAY]
        assert run.state == "failed"
        tries = {t.task_id: t.try_number for t in run.tasks.values()}
        assert buttons(status_message(bot, failed))[ActionId.RETRY_TASKS]

        reply = await bot.slack.click(
            channel_id=CHANNEL, message_ts=failed.status_message_ts or "",
            action_id=ActionId.RETRY_TASKS, user_id=OWNER,
        )  # fmt: skip
        assert reply.status == 200

        def retry_preview() -> object:
            thread = bot.slack.state.thread(CHANNEL, failed.status_message_ts or "")
            return next((m for m in thread if ActionId.APPROVE in buttons(m)), None)

        preview = await eventually(retry_preview)
        assert "clears only the failed tasks of the failed runs of 1 DAG" in json.dumps(
            preview.blocks  # type: ignore[attr-defined]
        )
        retry_id = await approve(bot, preview)
        retried = await finished(bot, retry_id)
        assert retried.state == "succeeded", [(s.dag_id, s.message) for s in retried.steps]
        [step] = retried.steps
        assert "1 failed task cleared and run again" in (step.message or "")

        # The same run, run again: only `load` had another try; no new run of the day.
        [again] = [r for r in airflow.state.all_runs(ROOT) if r.logical_date == DAY]
        assert again.run_id == run.run_id
        assert again.state == "success"
        after = {t.task_id: t.try_number for t in again.tasks.values()}
        assert after == {**tries, "load": tries["load"] + 1}
        assert len(airflow.state.all_runs(ROOT)) == 3  # one per day, none added by the retry
        request = await load(bot, retry_id)
        assert request.retry_of == first
        thread = json.dumps(
            [m.blocks for m in bot.slack.state.thread(CHANNEL, failed.status_message_ts or "")]
        )
        assert "succeeded" in thread.lower()
