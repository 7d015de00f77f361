"""The seed's story end to end on the local Spark executor: the order loads of 2021-06-04..06
failed (their partitions are missing and the weekly tables were computed without them); the bot
plans `/backfill example.etl_orders 2021-06-04..2021-06-06` from Marquez, runs it on the shared
SparkSession once approved, and every table then equals a clean full recompute."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import aiohttp
import pytest
from pyspark.sql import SparkSession

from bot.slack.rules.ids import ActionId
from pipeline.food_delivery.lineage import history_events
from standins.marquez.server import running_standin
from tests.spark.support import (
    FAILED_DAYS,
    FIRST_DAY,
    LAST_DAY,
    ORDERS_PER_DAY,
    PLANNED,
    Story,
    snapshot,
)
from tests.support.e2e import buttons, running_bot
from tests.support.execution import (
    approve,
    execution_config,
    finished,
    request_backfill,
    status_message,
    thread_text,
)

pytestmark = pytest.mark.spark


async def test_the_bot_repairs_the_seed_story_on_local_spark(
    tmp_path: Path, spark: SparkSession, story: Story
) -> None:
    # The story's run with the order loads of those days failing (`play_story`), copied: the
    # same broken warehouse this test once computed again for itself.
    warehouse = tmp_path / "warehouse"
    await asyncio.to_thread(shutil.copytree, story.broken_copy, warehouse)
    failed = sorted(o.run.start.date() for o in story.broken_outcomes if not o.ok)
    assert failed == sorted(FAILED_DAYS)
    broken = snapshot(spark, warehouse)
    assert broken == story.broken != story.clean
    assert not {r.order_date for r in broken["orders"]} & FAILED_DAYS

    config = execution_config(
        poll_interval_s=0.2,
        spark={"warehouse": str(warehouse), "options": {"orders_per_day": ORDERS_PER_DAY}},
    )
    async with running_standin() as marquez:
        for event in history_events(FIRST_DAY, LAST_DAY, fail_dates=FAILED_DAYS):
            marquez.state.ingest(event)
        database = f"sqlite:///{tmp_path / 'bot.db'}"
        async with running_bot(database, marquez, config, env={"BOT_EXECUTOR": "spark"}) as bot:
            preview = await request_backfill(bot)
            assert ActionId.APPROVE in buttons_of(preview), json.dumps(preview.blocks)
            request = await finished(bot, await approve(bot, preview), timeout_s=300)

            assert request.state == "succeeded", [(s.dag_id, s.message) for s in request.steps]
            assert {s.dag_id: len(s.intervals) for s in request.steps} == PLANNED
            assert snapshot(spark, warehouse) == story.clean
            thread = thread_text(bot, request)
            for dag in PLANNED:
                assert f"`{dag}` succeeded" in thread
            assert "Airflow" not in thread  # no UI to link to
            assert "Succeeded" in status_message(bot, request).text

            # the rerun reported itself: Marquez now has a completed run for each failed day
            url = f"{marquez.url}/api/v1/namespaces/food_delivery/jobs/example.etl_orders/runs"
            async with aiohttp.ClientSession() as http, http.get(url, params={"limit": 100}) as r:
                runs = (await r.json())["runs"]
            completed = {
                run["nominalStartTime"][:10] for run in runs if run["state"] == "COMPLETED"
            }
            assert {d.isoformat() for d in FAILED_DAYS} <= completed


def buttons_of(message: object) -> set[str]:
    return set(buttons(message))


async def test_dags_the_local_executor_cannot_run_block_the_preview(tmp_path: Path) -> None:
    """With the bot's seed (which has DAGs beyond the example pipeline) the preview says which
    DAGs have no local job and offers no Approve."""
    async with running_standin(seed="food_delivery") as marquez:
        database = f"sqlite:///{tmp_path / 'bot.db'}"
        async with running_bot(
            database, marquez, execution_config(), env={"BOT_EXECUTOR": "spark"}
        ) as bot:
            preview = await request_backfill(bot)
            text = json.dumps(preview.blocks)
            assert "no local Spark job" in text
            assert "example.email_discounts" in text
            assert ActionId.APPROVE not in buttons_of(preview)
