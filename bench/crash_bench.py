"""`backfill-bot serve` killed with SIGKILL at random moments of the example story.

    .venv/bin/python bench/crash_bench.py [--runs 5] [--kills 20] [--seed 1]

Each run is the story of tests/support/crash_story.py (three failed days, one alert, Approve
backfill, seven DAGs on the Airflow stand-in, the days completed, the alert resolved) with
`--kills` SIGKILLs of the real `serve` process, each followed at once by a restart, on SQLite and
on PostgreSQL (TEST_POSTGRES_ADMIN_URL, default postgresql://postgres@127.0.0.1:5432/postgres).
Prints one line per run and the totals; the target is 0 for every column but kills, alerts (1),
posts and clicks (acked clicks: a person clicks Approve again when nothing shows within 20 s;
"lost" counts acked clicks never answered).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import uuid
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from standins.marquez.server import running_standin  # noqa: E402
from tests.support.crash_story import Figures, crash_story  # noqa: E402

ADMIN = os.environ.get("TEST_POSTGRES_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres")


async def one_run(database: str, kills: int, seed: int) -> Figures:
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'bot.db'}"
        name = ""
        if database == "postgresql":
            name = f"bfb_crash_{uuid.uuid4().hex[:10]}"
            with psycopg.connect(ADMIN, autocommit=True) as conn:
                conn.execute(f'CREATE DATABASE "{name}"')
            url = f"{ADMIN.rsplit('/', 1)[0]}/{name}".replace(
                "postgresql://", "postgresql+psycopg://", 1
            )
        try:
            async with running_standin(seed="food_delivery") as marquez:
                return await crash_story(Path(tmp), marquez.url, url, kills=kills, seed=seed)
        finally:
            if name:
                with psycopg.connect(ADMIN, autocommit=True) as conn:
                    conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def line(database: str, seed: int, f: Figures) -> str:
    twice = sum(1 for n in f.backfills_per_dag.values() if n != 1)
    reruns = sum(n - 1 for n in f.runs_per_interval.values() if n > 1)
    return (
        f"{database:<10} {seed:>5} {f.kills:>5} {f.restarts_failed:>8} {f.alerts:>6} "
        f"{twice:>9} {reruns:>7} {f.duplicate_posts:>5}/{f.posts:<4} {f.clicks_acked:>6} "
        f"{f.lost_clicks:>5} {f.unsent:>6} {f.seconds:>6.0f}"
    )


async def main(runs: int, kills: int, first_seed: int) -> None:
    print(
        f"{'database':<10} {'seed':>5} {'kills':>5} {'restart!':>8} {'alerts':>6} "
        f"{'dag twice':>9} {'reruns':>7} {'dup/posts':>10} {'clicks':>6} {'lost':>5} "
        f"{'unsent':>6} {'s':>6}"
    )
    bad = 0
    for database in ("sqlite", "postgresql"):
        for seed in range(first_seed, first_seed + runs):
            figures = await one_run(database, kills, seed)
            print(line(database, seed, figures), flush=True)
            bad += int(
                figures.restarts_failed > 0 or figures.alerts != 1 or not figures.each_dag_once
                or not figures.alert_knew_its_backfill
                or figures.duplicate_posts > 0 or figures.lost_clicks > 0 or figures.unsent > 0
            )  # fmt: skip
    print(f"{2 * runs} runs of {kills} kills: {bad} with something lost, doubled or failed")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    options = parser.parse_args()
    asyncio.run(main(options.runs, options.kills, options.seed))
