"""The bot driven end to end against a real Airflow of either version (tests/airflow/harness.py):
`/backfill example.etl_orders 2021-06-04..2021-06-06` planned from the pipeline's lineage,
approved in Slack (the stand-in) and run by Airflow, whose tasks run the real PySpark jobs; and a
request cancelled mid-way. test_bot_on_airflow.py runs these on Airflow 3, test_airflow2_bot.py
on Airflow 2.11.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from bot.backfill.store.models import BackfillRequest
from bot.clients.airflow import Airflow3Client, DagRunInfo, connect_airflow
from bot.slack.rules.ids import ActionId
from standins.marquez.server import StandInServer
from tests.airflow.harness import RealAirflow
from tests.support.e2e import CHANNEL, OWNER, Bot, buttons, eventually, running_bot
from tests.support.execution import (
    airflow_env,
    approve,
    execution_config,
    finished,
    load,
    planned_dates,
    request_backfill,
    status_message,
    thread_text,
    upstream_of,
)

PIPELINE = {
    "example.etl_orders": 3,
    "example.etl_orders_7_days": 2,
    "example.etl_delivery_7_days": 2,
    "example.delivery_times_7_days": 2,
    "example.orders_popular_day_of_week": 2,
}
ROOT = "example.etl_orders"


async def bot_runs(airflow: RealAirflow, dag_id: str, since: datetime) -> list[DagRunInfo]:
    """The runs of `dag_id` the bot made since `since`: backfill runs on Airflow 3, the runs it
    triggered (run ids `backfill_bot__...`) on Airflow 2."""
    client = await connect_airflow(airflow.url, airflow.username, airflow.password)
    async with client:
        if isinstance(client, Airflow3Client):
            runs = await client.list_dag_runs(dag_id, run_type="backfill")
        else:
            runs = await client.list_dag_runs(dag_id)
            runs = [r for r in runs if r.run_id.startswith("backfill_bot__")]
    return [r for r in runs if r.start_date is None or r.start_date >= since]


def bot_env(airflow: RealAirflow) -> dict[str, str]:
    return airflow_env(airflow.url, airflow.username, airflow.password)


async def run_the_planned_backfill(
    tmp_path: Path, airflow: RealAirflow, marquez: StandInServer
) -> None:
    """The whole story: every DAG of the plan reruns its intervals once, in lineage order, all
    succeed, the thread tells it, and the weekly report is recomputed."""
    config = execution_config(poll_interval_s=1.0, progress_update_s=2.0)
    database = f"sqlite:///{tmp_path / 'bot.db'}"
    async with running_bot(database, marquez, config, env=bot_env(airflow)) as bot:
        preview = await request_backfill(bot)
        assert ActionId.APPROVE in buttons(preview), json.dumps(preview.blocks)
        request_id = await approve(bot, preview)
        begun = (await eventually(lambda: load(bot, request_id), timeout_s=30)).created_at
        request = await finished(bot, request_id, timeout_s=600)

        assert request.state == "succeeded", [(s.dag_id, s.state, s.message) for s in request.steps]
        assert {s.dag_id: len(s.intervals) for s in request.steps} == PIPELINE
        planned = planned_dates(request)
        ran = {dag: await bot_runs(airflow, dag, begun) for dag in PIPELINE}
        for dag, runs in ran.items():
            assert sorted(r.logical_date for r in runs) == sorted(planned[dag]), dag
            assert {r.state for r in runs} == {"success"}, dag
            assert all(r.data_interval_start == r.logical_date for r in runs), dag
        for dag, upstream in upstream_of(request).items():
            for parent in upstream:
                first_start = min(r.start_date for r in ran[dag] if r.start_date)
                last_end = max(r.end_date for r in ran[parent] if r.end_date)
                assert first_start >= last_end, f"{dag} started before {parent} finished"

        status = status_message(bot, request)
        assert "Succeeded" in status.text
        thread = thread_text(bot, request)
        for dag in PIPELINE:
            assert f"`{dag}` started" in thread
            assert f"`{dag}` succeeded" in thread
        assert f"{airflow.url}/dags/{ROOT}" in thread
        assert "Backfill succeeded" in thread
        # the weekly report was recomputed from the repaired orders
        report = airflow.warehouse / "popular_orders_day_of_week"
        assert any(report.rglob("*.parquet"))


async def cancel_mid_way(
    tmp_path: Path,
    airflow: RealAirflow,
    marquez: StandInServer,
    settings: Mapping[str, Any],
) -> BackfillRequest:
    """Approve `example.etl_orders 2021-06-08..2021-06-10` with these `execution.airflow`
    settings, click Cancel as soon as its first step is under way, and return the request once
    it has ended: cancelled, the rest skipped, nothing downstream run, the thread telling it."""
    config = execution_config(poll_interval_s=1.0, airflow=dict(settings))
    database = f"sqlite:///{tmp_path / 'bot.db'}"
    async with running_bot(database, marquez, config, env=bot_env(airflow)) as bot:
        request_id = await approve(
            bot, await request_backfill(bot, f"{ROOT} 2021-06-08..2021-06-10")
        )
        await eventually(lambda: _has_handle(bot, request_id, ROOT), timeout_s=120)
        status = status_message(bot, await load(bot, request_id))
        reply = await bot.slack.click(
            channel_id=CHANNEL, message_ts=status.ts, action_id=ActionId.CANCEL, user_id=OWNER
        )
        assert reply.status == 200
        request = await finished(bot, request_id, timeout_s=300)

        assert request.state == "cancelled"
        states = {s.dag_id: s.state for s in request.steps}
        assert all(states[d] == "skipped" for d in states if d != ROOT)
        for dag in states:
            if dag != ROOT:
                later = await bot_runs(airflow, dag, request.created_at)
                assert later == [], f"{dag} ran after the cancel"
        assert "Backfill cancelled" in thread_text(bot, request)
        return request


async def _has_handle(bot: Bot, request_id: str, dag_id: str) -> bool:
    request = await load(bot, request_id)
    step = next(s for s in request.steps if s.dag_id == dag_id)
    return bool(step.executor_handle)
