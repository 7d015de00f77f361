"""`backfill-bot demo`, `standin marquez` and `db upgrade` as real processes."""

from __future__ import annotations

import asyncio
import os
import socket
import sqlite3
import sys
from pathlib import Path

import aiohttp

from bot.cli import DEMO_DAG


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def clean_env(**extra: str) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("MARQUEZ_", "BOT_", "DATABASE_"))
    }
    env.update(extra)
    return env


async def test_standin_command_serves_the_seed_until_stopped() -> None:
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        "standin",
        "marquez",
        "--port",
        str(port),
        "--seed",
        "food_delivery",
        env=clean_env(),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert process.stdout is not None
        line = (await asyncio.wait_for(process.stdout.readline(), timeout=30)).decode()
        assert f"Marquez stand-in listening on http://127.0.0.1:{port}" in line
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://127.0.0.1:{port}/api/v1/namespaces/food_delivery/jobs") as reply,
        ):
            assert reply.status == 200
            names = {job["name"] for job in (await reply.json())["jobs"]}
        assert DEMO_DAG in names
    finally:
        process.terminate()
        await asyncio.wait_for(process.wait(), timeout=30)


async def test_demo_plans_the_example_against_a_seeded_standin() -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        "demo",
        env=clean_env(),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode == 0, err.decode()
    text = out.decode()
    assert f"Backfill plan for {DEMO_DAG} (food_delivery), 2021-06-04..2021-06-06" in text
    assert "example.delivery_times_7_days" in text
    assert f"Impact of {DEMO_DAG}" in text
    # with no BOT_CONFIG the demo uses examples/bot-config.yml, so reports and owners show
    assert "Weekly delivery times (logistics) reads food_delivery:public.top_delivery_times" in text
    assert "Teams to notify: analytics, logistics, orders" in text


async def test_db_upgrade_creates_the_schema(tmp_path: Path) -> None:
    database = tmp_path / "nested" / "bot.db"
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        "db",
        "upgrade",
        env=clean_env(DATABASE_URL=f"sqlite:///{database}"),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode == 0, err.decode()
    assert "latest migration" in out.decode()
    with sqlite3.connect(database) as conn:
        tables = {
            row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
        }
    assert {"backfill_requests", "backfill_steps", "audit_log"} <= tables
