"""The whole loop on a real Airflow 3.3.2: `/backfill example.etl_orders 2021-06-04..2021-06-06`
is planned from the pipeline's lineage, approved in Slack (the stand-in), and run by Airflow as
backfills of the food_delivery DAGs, whose tasks run the real PySpark jobs. A second request is
cancelled mid-way."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from datetime import date, datetime
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))

from e2e_support import CHANNEL, OWNER, Bot, buttons, eventually, running_bot
from execution_support import (
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
from harness import RealAirflow

from bot.clients.airflow import Airflow3Client, DagRunInfo
from bot.slack_ids import ActionId
from bot.standins.marquez import StandInServer, running_standin
from pipeline.food_delivery.lineage import history_events

pytestmark = pytest.mark.airflow

PIPELINE = {
    "example.etl_orders": 3,
    "example.etl_orders_7_days": 2,
    "example.etl_delivery_7_days": 2,
    "example.delivery_times_7_days": 2,
    "example.orders_popular_day_of_week": 2,
}
FAILED = [date(2021, 6, 4), date(2021, 6, 5), date(2021, 6, 6)]


@pytest.fixture
async def pipeline_marquez() -> AsyncIterator[StandInServer]:
    """Marquez holding what the pipeline reported for three weeks, with the failed days."""
    async with running_standin() as server:
        for event in history_events(date(2021, 5, 24), date(2021, 6, 13), fail_dates=FAILED):
            server.state.ingest(event)
        yield server


async def backfill_runs(airflow: RealAirflow, dag_id: str, since: datetime) -> list[DagRunInfo]:
    async with Airflow3Client(airflow.url, airflow.username, airflow.password) as client:
        runs = await client.list_dag_runs(dag_id, run_type="backfill")
    return [r for r in runs if r.start_date is None or r.start_date >= since]


def bot_env(airflow: RealAirflow) -> dict[str, str]:
    return airflow_env(airflow.url, airflow.username, airflow.password)


async def test_the_bot_runs_a_planned_backfill_on_real_airflow(
    tmp_path: Path, real_airflow: RealAirflow, pipeline_marquez: StandInServer
) -> None:
    config = execution_config(poll_interval_s=1.0, progress_update_s=2.0)
    database = f"sqlite:///{tmp_path / 'bot.db'}"
    async with running_bot(database, pipeline_marquez, config, env=bot_env(real_airflow)) as bot:
        preview = await request_backfill(bot)
        assert ActionId.APPROVE in buttons(preview), json.dumps(preview.blocks)
        request_id = await approve(bot, preview)
        begun = (await eventually(lambda: load(bot, request_id), timeout_s=30)).created_at
        request = await finished(bot, request_id, timeout_s=600)

        assert request.state == "succeeded", [(s.dag_id, s.state, s.message) for s in request.steps]
        assert {s.dag_id: len(s.intervals) for s in request.steps} == PIPELINE
        planned = planned_dates(request)
        ran = {dag: await backfill_runs(real_airflow, dag, begun) for dag in PIPELINE}
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
        assert f"{real_airflow.url}/dags/example.etl_orders" in thread
        assert "Backfill succeeded" in thread
        # the weekly report was recomputed from the repaired orders
        report = real_airflow.warehouse / "popular_orders_day_of_week"
        assert any(report.rglob("*.parquet"))


async def test_cancel_on_real_airflow_fails_queued_runs_and_skips_the_rest(
    tmp_path: Path, real_airflow: RealAirflow, pipeline_marquez: StandInServer
) -> None:
    # one run at a time, so Cancel finds queued runs of etl_orders
    config = execution_config(poll_interval_s=1.0, airflow={"max_active_runs": 1})
    database = f"sqlite:///{tmp_path / 'bot.db'}"
    async with running_bot(database, pipeline_marquez, config, env=bot_env(real_airflow)) as bot:
        request_id = await approve(
            bot, await request_backfill(bot, "example.etl_orders 2021-06-08..2021-06-10")
        )
        await eventually(lambda: _has_handle(bot, request_id, "example.etl_orders"), timeout_s=120)
        request = await load(bot, request_id)
        status = status_message(bot, request)
        reply = await bot.slack.click(
            channel_id=CHANNEL, message_ts=status.ts, action_id=ActionId.CANCEL, user_id=OWNER
        )
        assert reply.status == 200
        request = await finished(bot, request_id, timeout_s=300)

        assert request.state == "cancelled"
        states = {s.dag_id: s.state for s in request.steps}
        assert states["example.etl_orders"] in {"cancelled", "succeeded"}
        assert all(states[d] == "skipped" for d in states if d != "example.etl_orders")
        runs = await backfill_runs(real_airflow, "example.etl_orders", request.created_at)
        assert "failed" in {r.state for r in runs}  # the queued ones, failed by the cancel
        for dag in states:
            if dag != "example.etl_orders":
                later = await backfill_runs(real_airflow, dag, request.created_at)
                assert later == [], f"{dag} ran after the cancel"
        assert "Backfill cancelled" in thread_text(bot, request)


async def _has_handle(bot: Bot, request_id: str, dag_id: str) -> bool:
    request = await load(bot, request_id)
    step = next(s for s in request.steps if s.dag_id == dag_id)
    return bool(step.executor_handle)
