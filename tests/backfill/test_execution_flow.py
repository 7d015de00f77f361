"""Approved backfills run on Airflow (the stand-in speaking Airflow 3's and Airflow 2's REST
APIs), in lineage order, with progress in the Slack thread, Cancel, and restarts."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path

import pytest

from bot.config import BotConfig
from bot.slack.rules.ids import ActionId
from standins.airflow.dags import FOOD_DELIVERY_DAGS, food_delivery_history
from standins.airflow.server import AirflowStandin, running_airflow_standin
from standins.airflow.state import DagRun
from standins.marquez.server import StandInServer
from tests.support.e2e import CHANNEL, OWNER, REQUESTER, Bot, buttons, eventually, running_bot
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

PLANNED = {
    "example.etl_orders": 3,
    "example.etl_orders_7_days": 2,
    "example.etl_delivery_7_days": 2,
    "example.delivery_times_7_days": 2,
    "example.orders_popular_day_of_week": 2,
    "example.email_discounts": 14,
    "reporting.weekly_kpis": 3,
}


@asynccontextmanager
async def airflow(
    api: int = 3, run_seconds: float = 0.05, *, one_at_a_time: bool = False
) -> AsyncIterator[AirflowStandin]:
    # Airflow 2 has no backfill limit: a DAG's own max_active_runs holds its runs back.
    dags = [replace(d, max_active_runs=1) if one_at_a_time else d for d in FOOD_DELIVERY_DAGS]
    async with running_airflow_standin(
        api=api, dags=dags, run_seconds=run_seconds, history=food_delivery_history()
    ) as server:
        yield server


@asynccontextmanager
async def bot_on(
    tmp_path: Path, marquez: StandInServer, server: AirflowStandin, config: BotConfig
) -> AsyncIterator[Bot]:
    database = f"sqlite:///{tmp_path / 'bot.db'}"
    async with running_bot(database, marquez, config, env=airflow_env(server.url)) as bot:
        yield bot


def runs_by_dag(server: AirflowStandin, request_dags: list[str]) -> dict[str, list[DagRun]]:
    ours = {}
    for dag in request_dags:
        runs = server.state.runs_of(dag)
        if server.api == 3:
            ours[dag] = [r for r in runs if r.run_type == "backfill"]
        else:  # triggered by us, or an existing run of that interval that we cleared
            ours[dag] = [r for r in runs if r.run_id.startswith("backfill_bot__") or r.clear_number]
    return ours


@pytest.mark.parametrize("api", [3, 2])
async def test_an_approved_backfill_runs_every_dag_once_in_lineage_order(
    tmp_path: Path, food_delivery_marquez: StandInServer, api: int
) -> None:
    async with (
        airflow(api) as server,
        bot_on(tmp_path, food_delivery_marquez, server, execution_config()) as bot,
    ):
        preview = await request_backfill(bot)
        request_id = await approve(bot, preview)
        request = await finished(bot, request_id)

        assert request.state == "succeeded"
        assert {s.dag_id: len(s.intervals) for s in request.steps} == PLANNED
        ran = runs_by_dag(server, list(PLANNED))
        planned = planned_dates(request)
        for dag, runs in ran.items():
            # exactly the planned intervals, each once, each with its own data interval
            assert sorted(r.logical_date for r in runs) == sorted(planned[dag]), dag
            assert all(r.state == "success" for r in runs), dag
            assert all(r.data_interval_start == r.logical_date for r in runs), dag
        for dag, upstream in upstream_of(request).items():
            for parent in upstream:
                first_start = min(r.start_date for r in ran[dag])
                last_end = max(r.end_date for r in ran[parent])
                assert first_start >= last_end, f"{dag} started before {parent} finished"
        if api == 3:
            assert sorted(b.dag_id for b in server.state.backfills) == sorted(PLANNED)

        status = status_message(bot, request)
        assert "Succeeded" in status.text
        assert ActionId.CANCEL not in buttons(status)
        assert "3 runs: 3 succeeded" in json.dumps(status.blocks)
        thread = thread_text(bot, request)
        for dag in PLANNED:
            assert f"`{dag}` started" in thread
            assert f"`{dag}` succeeded" in thread
        assert "Backfill succeeded" in thread
        # no message failed, and updates went to the stored ts (no reposts of the status)
        statuses = [m for m in bot.slack.state.messages(CHANNEL) if "Backfill of" in m.text]
        assert len(statuses) == 1


async def test_a_failed_dag_stops_its_descendants_and_the_rest_finishes(
    tmp_path: Path, food_delivery_marquez: StandInServer
) -> None:
    async with (
        airflow() as server,
        bot_on(tmp_path, food_delivery_marquez, server, execution_config()) as bot,
    ):
        server.state.fail_always("example.etl_orders_7_days")
        request_id = await approve(bot, await request_backfill(bot))
        request = await finished(bot, request_id)

        states = {s.dag_id: s.state for s in request.steps}
        assert request.state == "failed"
        assert states["example.etl_orders"] == "succeeded"
        assert states["example.etl_orders_7_days"] == "failed"
        for dag in ("example.etl_delivery_7_days", "example.orders_popular_day_of_week"):
            assert states[dag] == "skipped"
        # email_discounts does not depend on the failed DAG only... it reads its output, so it
        # is skipped too; reporting.weekly_kpis reads delivery_7_days, skipped transitively.
        assert states["reporting.weekly_kpis"] == "skipped"
        skipped = next(s for s in request.steps if s.dag_id == "example.etl_delivery_7_days")
        assert "example.etl_orders_7_days" in (skipped.message or "")
        thread = thread_text(bot, request)
        assert "`example.etl_orders_7_days` failed" in thread
        assert "2 of 2 runs failed" in thread
        assert "Skipped `example.etl_delivery_7_days`" in thread
        assert "Backfill failed" in thread


async def handle_of(bot: Bot, request_id: str, dag_id: str) -> str | None:
    request = await load(bot, request_id)
    return next(s.executor_handle for s in request.steps if s.dag_id == dag_id)


@pytest.mark.parametrize("api", [3, 2])
async def test_cancel_mid_way_cancels_airflow_work_and_skips_the_rest(
    tmp_path: Path, food_delivery_marquez: StandInServer, api: int
) -> None:
    # One run at a time, so two of etl_orders' three runs are still queued when Cancel lands.
    config = execution_config(airflow={"max_active_runs": 1})
    async with (
        airflow(api, run_seconds=1.0, one_at_a_time=True) as server,
        bot_on(tmp_path, food_delivery_marquez, server, config) as bot,
    ):
        request_id = await approve(bot, await request_backfill(bot))
        await eventually(lambda: handle_of(bot, request_id, "example.etl_orders"), timeout_s=20)
        started = await load(bot, request_id)
        # The status message is posted by the outbox sender, which may not have run yet when
        # the step got its handle: read its ts only after the sender has settled.
        await bot.settle()
        status = status_message(bot, await load(bot, request_id))
        assert ActionId.CANCEL in buttons(status)
        reply = await bot.slack.click(
            channel_id=CHANNEL, message_ts=status.ts, action_id=ActionId.CANCEL, user_id=OWNER
        )
        assert reply.status == 200
        request = await finished(bot, request_id)

        assert started.state == "running"
        assert request.state == "cancelled"
        states = {s.dag_id: s.state for s in request.steps}
        assert states["example.etl_orders"] == "cancelled"
        assert all(states[d] == "skipped" for d in PLANNED if d != "example.etl_orders")
        # Airflow was told: queued runs failed, nothing downstream ran
        ran = runs_by_dag(server, list(PLANNED))
        assert "failed" in {r.state for r in ran["example.etl_orders"]}
        assert all(ran[d] == [] for d in PLANNED if d != "example.etl_orders")
        if api == 3:
            assert [b.dag_id for b in server.state.backfills] == ["example.etl_orders"]
            assert server.state.backfills[0].completed_at is not None
        thread = thread_text(bot, request)
        assert "Backfill cancelled" in thread
        assert "cancelled before this DAG started" in thread


async def test_a_second_overlapping_backfill_is_refused_with_the_running_ones_id(
    tmp_path: Path, food_delivery_marquez: StandInServer
) -> None:
    async with (
        airflow(run_seconds=2.0) as server,
        bot_on(tmp_path, food_delivery_marquez, server, execution_config()) as bot,
    ):
        request_id = await approve(bot, await request_backfill(bot))
        await eventually(lambda: server.state.backfills, timeout_s=20)
        await bot.settle()  # the running backfill's status message is posted by now
        before = len(bot.slack.state.messages(CHANNEL))
        await bot.slack.slash_command(
            "example.etl_orders 2021-06-05", user_id=REQUESTER, channel_id=CHANNEL
        )
        refusal = await eventually(
            lambda: [e for e in bot.slack.state.ephemerals if "already being backfilled" in e.text]
        )
        assert request_id in refusal[0].text
        assert len(bot.slack.state.messages(CHANNEL)) == before


async def test_a_paused_dag_is_named_in_the_preview_and_blocks_approval(
    tmp_path: Path, food_delivery_marquez: StandInServer
) -> None:
    async with (
        airflow() as server,
        bot_on(tmp_path, food_delivery_marquez, server, execution_config()) as bot,
    ):
        server.state.pause("example.etl_delivery_7_days")
        preview = await request_backfill(bot)
        text = json.dumps(preview.blocks)
        assert "paused in Airflow" in text
        assert ActionId.APPROVE not in buttons(preview)
        assert "cannot run as it is" in text


async def test_on_paused_unpause_unpauses_and_runs(
    tmp_path: Path, food_delivery_marquez: StandInServer
) -> None:
    config = execution_config(airflow={"on_paused": "unpause"})
    async with airflow() as server, bot_on(tmp_path, food_delivery_marquez, server, config) as bot:
        server.state.pause("example.etl_delivery_7_days")
        preview = await request_backfill(bot)
        assert "the bot will unpause it" in json.dumps(preview.blocks)
        request = await finished(bot, await approve(bot, preview))
        assert request.state == "succeeded"
        dag = server.state.dag("example.etl_delivery_7_days")
        assert dag is not None
        assert not dag.is_paused
