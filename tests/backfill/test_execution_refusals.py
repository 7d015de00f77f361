"""Approved backfills when Airflow refuses the bot or is briefly unavailable, through the whole
bot: a wrong AIRFLOW_PASSWORD fails the first step with the reason, in the thread and the status
message, after one login (not one per pass, forever); a few 503s are ridden out."""

from __future__ import annotations

import json
from pathlib import Path

from standins.airflow.dags import FOOD_DELIVERY_DAGS, food_delivery_history
from standins.airflow.server import running_airflow_standin
from standins.marquez.server import StandInServer
from tests.support.e2e import running_bot
from tests.support.execution import (
    airflow_env,
    approve,
    execution_config,
    finished,
    request_backfill,
    status_message,
    thread_text,
)

ROOT = "example.etl_orders"


async def test_a_wrong_password_fails_the_backfill_with_the_reason_after_one_login(
    tmp_path: Path, food_delivery_marquez: StandInServer
) -> None:
    async with running_airflow_standin(
        dags=FOOD_DELIVERY_DAGS, history=food_delivery_history(), run_seconds=0.05
    ) as server:
        env = airflow_env(server.url, password="not-the-password")
        database = f"sqlite:///{tmp_path / 'bot.db'}"
        async with running_bot(database, food_delivery_marquez, execution_config(), env=env) as bot:
            preview = await request_backfill(bot)
            assert "could not check" in json.dumps(preview.blocks)  # said, but not blocking
            request = await finished(bot, await approve(bot, preview))

            assert request.state == "failed"
            states = {s.dag_id: s.state for s in request.steps}
            assert states[ROOT] == "failed"
            assert all(state == "skipped" for dag, state in states.items() if dag != ROOT)
            root = next(s for s in request.steps if s.dag_id == ROOT)
            assert root.message is not None
            assert "refused the login of 'admin': Invalid credentials" in root.message
            assert "AIRFLOW_PASSWORD" in root.message
            thread = thread_text(bot, request)
            assert f"`{ROOT}` failed" in thread
            assert "refused the login" in thread
            assert "Backfill failed" in thread
            assert "Failed" in status_message(bot, request).text
        logins = [r for r in server.state.requests if r[1] == "/auth/token"]
        assert 1 <= len(logins) <= 3  # the preview's check, and nothing per pass after it
        assert not server.state.backfills


async def test_a_few_503s_are_ridden_out_and_the_backfill_succeeds(
    tmp_path: Path, food_delivery_marquez: StandInServer
) -> None:
    async with running_airflow_standin(
        dags=FOOD_DELIVERY_DAGS, history=food_delivery_history(), run_seconds=0.05
    ) as server:
        database = f"sqlite:///{tmp_path / 'bot.db'}"
        env = airflow_env(server.url)
        async with running_bot(database, food_delivery_marquez, execution_config(), env=env) as bot:
            preview = await request_backfill(bot)
            server.state.outage(503, times=6)  # two submissions' worth (3 tries each)
            request = await finished(bot, await approve(bot, preview))

            assert request.state == "succeeded", [(s.dag_id, s.message) for s in request.steps]
            assert "Backfill succeeded" in thread_text(bot, request)
        statuses = [status for _, _, status in server.state.requests]
        assert statuses.count(503) == 6
