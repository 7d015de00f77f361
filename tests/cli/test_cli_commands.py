"""`backfill-bot demo`, `standin marquez` and `db upgrade` as real processes."""

from __future__ import annotations

import asyncio
import os
import socket
import sqlite3
import sys
from pathlib import Path

import aiohttp

DEMO_DAG = "example.etl_orders"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def clean_env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("MARQUEZ_", "BOT_", "DATABASE_", "SLACK_", "AIRFLOW_", "SPARK_"))
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


async def test_standin_latency_makes_marquez_as_slow_as_asked() -> None:
    # A big Marquez takes seconds on /lineage (Marquez issue #3058): the stand-in can too.
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", "standin", "marquez", "--port", str(port),
        "--seed", "food_delivery", "--latency", "lineage=1.5",
        env=clean_env(), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        await asyncio.wait_for(process.stdout.readline(), timeout=30)
        base = f"http://127.0.0.1:{port}/api/v1"
        node = {"nodeId": f"job:food_delivery:{DEMO_DAG}"}
        async with aiohttp.ClientSession() as session:
            started = asyncio.get_running_loop().time()
            async with session.get(f"{base}/lineage", params=node) as reply:
                assert reply.status == 200
            slow = asyncio.get_running_loop().time() - started
            started = asyncio.get_running_loop().time()
            async with session.get(f"{base}/namespaces") as reply:
                assert reply.status == 200
            fast = asyncio.get_running_loop().time() - started
        assert slow >= 1.5 > fast
    finally:
        process.terminate()
        await asyncio.wait_for(process.wait(), timeout=30)


async def test_standin_latency_of_an_unknown_route_is_one_clear_line() -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", "standin", "marquez", "--latency", "lineages=2",
        env=clean_env(), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _out, err = await asyncio.wait_for(process.communicate(), timeout=30)
    assert process.returncode == 2
    lines = err.decode().strip().splitlines()
    assert len(lines) == 1, lines
    assert "unknown route 'lineages'" in lines[0]


async def test_demo_headless_prints_the_whole_story_once_in_its_final_form(
    tmp_path: Path,
) -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", "demo", "--headless",
        env=clean_env(DATABASE_URL=f"sqlite:///{tmp_path / 'demo.db'}"),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), timeout=120)
    assert process.returncode == 0, out.decode() + err.decode()
    text = out.decode()
    story, _, transcript = text.partition("\n#orders\n")
    assert "Airflow stand-in http://127.0.0.1:" in story
    assert "▸ @alice (orders) clicks Approve backfill in the alert and confirms" in story
    # the alert, once, in its final form: resolved, naming the backfill that fixed it
    assert transcript.count("failed, now resolved for 2021-06-04 to 2021-06-06") == 1
    assert "failed for 2021-06-04 to 2021-06-06 ·" not in transcript  # no earlier copy
    assert "(edited)" in transcript
    # progress in the alert's thread, with emoji and formatting rendered for a terminal
    assert "│   🟢 Succeeded · backfill of `example.etl_orders` 2021-06-04..2021-06-06" in text
    assert text.index("│   ▶️ `example.etl_orders` started") < text.index(
        "`example.etl_orders_7_days` started"
    )
    assert ":large_green_circle:" not in text
    assert "*Succeeded*" not in text
    assert "BACKFILL PLAN" not in text  # headers are not shouted
    # the other teams told, and the SLA miss reaching the owners of the reports downstream
    logistics = transcript.split("\n#logistics\n")[1].split("\n#analytics\n")[0]
    assert "reruns your DAGs" in logistics
    assert "Weekly delivery times will be late" in logistics
    assert "Weekly KPIs will be late" in transcript.split("\n#analytics\n")[1]
    assert "Only visible to @alice:" in transcript  # the second-person rule, told to her
    assert "\x1b[" not in text  # not a terminal: no colour codes


async def test_chat_answers_each_command_as_soon_as_the_bot_has(tmp_path: Path) -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", "chat",
        env=clean_env(DATABASE_URL=f"sqlite:///{tmp_path / 'chat.db'}"),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    # Two commands answered by an ephemeral alone: each used to wait ~33 s for a channel post
    # that never came, so this script took over a minute.
    script = (
        b"/backfill help\n/backfill status\n"
        b"/backfill example.etl_orders 2021-06-04 --only\nas U0ALICE001\nclick 3\nquit\n"
    )
    out, err = await asyncio.wait_for(process.communicate(script), timeout=50)
    assert process.returncode == 0, err.decode()
    text = out.decode()
    assert "The same workspace in a browser: http://127.0.0.1:" in text
    assert text.count("(only @riley sees this)") >= 2
    assert "1 DAG" in text
    assert "@U0ALICE001 clicks [Cancel]" in text
    assert "🚫" in text or "Cancelled backfill" in text


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


async def test_serve_runs_the_bot_as_its_own_process(tmp_path: Path) -> None:
    from standins.marquez.server import running_standin
    from standins.slack.server import running_slack_standin

    port = free_port()
    async with running_standin(seed="food_delivery") as marquez, running_slack_standin() as slack:
        env = clean_env(
            MARQUEZ_URL=marquez.url,
            DATABASE_URL=f"sqlite:///{tmp_path / 'serve.db'}",
            SLACK_BOT_TOKEN=slack.bot_token,
            SLACK_SIGNING_SECRET=slack.signing_secret,
            SLACK_API_URL=f"{slack.url}/api/",
            BOT_PORT=str(port),
        )
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot", "serve",
            env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        try:
            assert process.stdout is not None
            line = (await asyncio.wait_for(process.stdout.readline(), timeout=30)).decode()
            assert f"listening on http://127.0.0.1:{port}" in line
            slack.set_events_url(f"http://127.0.0.1:{port}/slack/events")
            reply = await slack.slash_command(
                "example.etl_orders 2021-06-04", channel_id="C0SERVE001"
            )
            assert reply.status == 200
            for _ in range(200):
                if slack.state.messages("C0SERVE001"):
                    break
                await asyncio.sleep(0.05)
            [preview] = slack.state.messages("C0SERVE001")
            assert "example.etl_orders" in preview.text
        finally:
            process.terminate()
            await asyncio.wait_for(process.wait(), timeout=30)


async def test_serve_without_a_slack_token_says_what_to_set() -> None:
    # serve checks its port first: a free one, so this is only about the token
    env = clean_env(BOT_PORT=str(free_port()))
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", "serve",
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await asyncio.wait_for(process.communicate(), timeout=30)
    assert process.returncode == 4
    assert err.decode().strip() == (
        "backfill-bot: error: SLACK_BOT_TOKEN is not set: the bot needs its xoxb- token"
    )
