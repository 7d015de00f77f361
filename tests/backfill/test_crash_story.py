"""`backfill-bot serve` killed with SIGKILL at random moments of the example story (alert →
Approve backfill → seven DAGs on Airflow → resolved) and started again each time: one alert,
each DAG backfilled once, no post twice, no click lost, nothing owed left unsent. On SQLite and
PostgreSQL. bench/crash_bench.py runs more kills and prints the figures."""

from __future__ import annotations

import os
from pathlib import Path

from standins.marquez.server import StandInServer
from tests.support.crash_story import crash_story

KILLS = 6
SEED = int(os.environ.get("CRASH_SEED", "24"))


async def test_serve_killed_at_random_through_the_story_loses_and_doubles_nothing(
    tmp_path: Path, food_delivery_marquez: StandInServer, database_url: str
) -> None:
    figures = await crash_story(
        tmp_path, food_delivery_marquez.url, database_url, kills=KILLS, seed=SEED
    )
    print(f"seed {SEED}: {figures}")
    assert figures.kills == KILLS
    assert figures.restarts_failed == 0
    assert figures.resolved
    assert figures.alerts == 1
    assert figures.alert_knew_its_backfill
    assert figures.each_dag_once, figures.backfills_per_dag
    assert set(figures.runs_per_interval.values()) == {1}, figures.runs_per_interval
    assert figures.lost_clicks == 0
    assert figures.posts > 0  # posts carry their outbox rows' ids, or nothing is proven
    assert figures.duplicate_posts == 0
    assert figures.unsent == 0
