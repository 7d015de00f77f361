"""The seed's story repaired on a real Spark standalone cluster: a master and two workers on
loopback (tests/support/spark_cluster.py), `backfill-bot serve` run as its own process with
SPARK_MASTER=spark://…, the backfill of `example.etl_orders 2021-06-04..2021-06-06` requested and
approved through Slack, and every table then equal to a clean full recompute on `local[*]`.

The bot runs in a process of its own because a Python process holds one Spark driver, and this
one's is the suite's `local[*]` session (which reads the tables back). The master's own account
and the workers' directories show that the executors ran on the workers; their Python is the
base interpreter without this venv, so the workers need none of the pipeline's code.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import pytest
import yaml
from pyspark.sql import SparkSession

from bot.backfill.store import repository
from bot.backfill.store.models import BackfillRequest
from bot.core.db import make_engine, session_factory
from bot.slack.rules.ids import ActionId
from pipeline.food_delivery.lineage import history_events
from standins.marquez.server import running_standin
from standins.slack.server import SlackStandIn, running_slack_standin
from tests.doctor.test_doctor import parse
from tests.spark.support import (
    FAILED_DAYS,
    FIRST_DAY,
    LAST_DAY,
    ORDERS_PER_DAY,
    PLANNED,
    Story,
    snapshot,
)
from tests.support.e2e import CHANNEL, CONFIG, OWNER, REQUESTER, buttons
from tests.support.execution import COMMAND
from tests.support.spark_cluster import Cluster, Daemon, free_port, standalone_cluster, stop

pytestmark = pytest.mark.spark

# The workers' Python: the interpreter this venv was made from, which cannot import the
# pipeline (checked below), of the driver's version, as PySpark requires.
BASE_PYTHON = Path(sys.base_prefix) / "bin" / f"python{sys.version_info[0]}.{sys.version_info[1]}"


@pytest.fixture
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with standalone_cluster(tmp_path_factory.mktemp("cluster")) as started:
        yield started


def bot_env(cluster: Cluster, marquez_url: str, slack: SlackStandIn, tmp: Path) -> dict[str, str]:
    config = tmp / "bot.yml"
    execution = {
        "poll_interval_s": 0.2,
        "progress_update_s": 0.5,
        "spark": {
            "warehouse": str(tmp / "warehouse"),
            "options": {"orders_per_day": ORDERS_PER_DAY},
        },
    }
    config.write_text(yaml.safe_dump({**CONFIG, "execution": execution}))
    dropped = ("BOT_", "SLACK_", "AIRFLOW", "MARQUEZ_", "SPARK_", "PYSPARK_", "DATABASE_URL")
    env = {k: v for k, v in os.environ.items() if not k.startswith(dropped)}
    env.update(
        MARQUEZ_URL=marquez_url, DATABASE_URL=f"sqlite:///{tmp / 'bot.db'}",
        BOT_CONFIG=str(config), BOT_PORT=str(free_port()), BOT_EXECUTOR="spark",
        SLACK_BOT_TOKEN=slack.bot_token, SLACK_SIGNING_SECRET=slack.signing_secret,
        SLACK_API_URL=f"{slack.url}/api/",
        SPARK_MASTER=cluster.master_url, SPARK_MASTER_UI_URL=cluster.ui_url,
        # The driver's address, as the executors reach it (Spark's own variable).
        SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=str(BASE_PYTHON),
        SPARK_CONF_DIR=cluster.env["SPARK_CONF_DIR"],  # its spark-defaults.conf
    )  # fmt: skip
    return env


@asynccontextmanager
async def serving(env: dict[str, str], log: Path) -> AsyncIterator[str]:
    """`python -m bot serve` until the block ends; yields its URL once it listens."""
    # A Popen, not an asyncio process: spark_cluster.stop() ends it and its group like a daemon.
    with log.open("wb") as out:
        process = await asyncio.to_thread(
            subprocess.Popen, [sys.executable, "-m", "bot", "serve"], env=env,
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    serve = Daemon("serve", process, log)
    try:
        deadline = time.monotonic() + 90
        while b"listening on" not in await asyncio.to_thread(log.read_bytes):
            assert process.poll() is None, serve.tail()
            assert time.monotonic() < deadline, serve.tail()
            await asyncio.sleep(0.1)
        yield f"http://127.0.0.1:{env['BOT_PORT']}"
    finally:
        # Its Spark driver (a JVM child) goes with its process group.
        await asyncio.to_thread(stop, [serve])


async def doctor_row(env: dict[str, str]) -> str:
    """The Spark row `backfill-bot doctor` prints with the bot's settings."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", "doctor", env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), timeout=120)
    [row] = parse(out.decode())["Spark"]
    assert row.result == "OK", out.decode() + err.decode()
    return row.detail


async def index_current(url: str, log: Path, timeout_s: float = 90) -> None:
    """Until /readyz says the lineage index holds a full reconcile (as in a bot up a while):
    before it, a plan walks Marquez within a time budget that a loaded machine can outrun,
    and the preview would say it planned from a partial walk."""
    deadline = time.monotonic() + timeout_s
    async with aiohttp.ClientSession() as session:
        while time.monotonic() < deadline:
            async with session.get(f"{url}/readyz") as reply:
                checks = (await reply.json())["checks"]
            if checks.get("lineage_index", {}).get("state") == "current":
                return
            await asyncio.sleep(0.2)
    text = await asyncio.to_thread(log.read_text, errors="replace")
    raise AssertionError(f"the lineage index did not load: {checks}\n{text}")


async def approvable_preview(slack: SlackStandIn, log: Path) -> tuple[str, str]:
    """(message ts, request id) of the preview the slash command brought."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for message in slack.state.messages(CHANNEL):
            approve = buttons(message).get(ActionId.APPROVE)
            if approve is not None:
                return message.ts, str(approve["value"])
        await asyncio.sleep(0.2)
    shown = [m.text for m in slack.state.messages(CHANNEL)]
    text = await asyncio.to_thread(log.read_text, errors="replace")
    raise AssertionError(f"no preview with Approve: {shown}\n{text}")


async def finished(
    database_url: str, request_id: str, timeout_s: float, log: Path
) -> BackfillRequest:
    engine = make_engine(database_url)
    sessions = session_factory(engine)
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            async with sessions() as session:
                request = await repository.get_request(session, request_id)
            if request.finished_at is not None:
                return request
            await asyncio.sleep(0.5)
        text = await asyncio.to_thread(log.read_text, errors="replace")
        raise AssertionError(f"backfill {request_id} did not finish in {timeout_s:.0f} s\n{text}")
    finally:
        await engine.dispose()


async def test_the_bot_repairs_the_seed_story_on_a_standalone_cluster(
    tmp_path: Path, spark: SparkSession, story: Story, cluster: Cluster
) -> None:
    # Where the executors start it: in a worker's directory, with the workers' environment.
    workers_python = await asyncio.create_subprocess_exec(
        BASE_PYTHON, "-c", "import pipeline", env=cluster.env, cwd=cluster.work_dirs[0],
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    assert await workers_python.wait() != 0, "the workers' Python must not see the pipeline"
    warehouse = tmp_path / "warehouse"
    shutil.copytree(story.broken_copy, warehouse)
    assert snapshot(spark, warehouse) == story.broken != story.clean

    async with running_standin() as marquez, running_slack_standin() as slack:
        for event in history_events(FIRST_DAY, LAST_DAY, fail_dates=FAILED_DAYS):
            marquez.state.ingest(event)
        slack.state.add_channel(CHANNEL, "backfills")
        env = bot_env(cluster, marquez.url, slack, tmp_path)
        # What an operator runs first: doctor finds the master and both workers.
        assert await doctor_row(env) == (
            f"{cluster.master_url} answers; its web UI ({cluster.ui_url}) shows "
            "2 ALIVE workers: 2 cores, 2048 MB"
        )
        log = tmp_path / "serve.log"
        async with serving(env, log) as url:
            slack.set_events_url(f"{url}/slack/events")
            await index_current(url, log)
            reply = await slack.slash_command(COMMAND, user_id=REQUESTER, channel_id=CHANNEL)
            assert reply.status == 200
            ts, request_id = await approvable_preview(slack, log)
            reply = await slack.click(
                channel_id=CHANNEL, message_ts=ts, action_id=ActionId.APPROVE, user_id=OWNER
            )
            assert reply.status == 200
            request = await finished(env["DATABASE_URL"], request_id, 300, log)
            # Still serving: the bot's driver is the master's active application.
            [app] = cluster.state()["activeapps"]
            executors = cluster.executor_dirs(app["id"])

        assert request.state == "succeeded", [(s.dag_id, s.message) for s in request.steps]
        assert {s.dag_id: len(s.intervals) for s in request.steps} == PLANNED
        assert {s.executor_handle for s in request.steps} == {f"Spark {cluster.master_url}"}
    assert app["name"] == "food_delivery"
    assert app["cores"] == 2, app  # an executor on each worker, one core each
    assert [d.parent.parent for d in executors] == cluster.work_dirs, executors
    assert snapshot(spark, warehouse) == story.clean
