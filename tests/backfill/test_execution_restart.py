"""Killing the bot (SIGKILL, mid-backfill) and starting it again finishes the backfill with each
interval run once on Airflow, and the progress thread carries on under the same message."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import yaml

from bot.backfill.store import repository
from bot.backfill.store.models import BackfillRequest
from bot.core.db import make_engine, session_factory
from bot.slack.rules.ids import ActionId
from standins.airflow.dags import FOOD_DELIVERY_DAGS, food_delivery_history
from standins.airflow.server import running_airflow_standin
from standins.marquez.server import StandInServer
from standins.slack.server import SlackStandIn, running_slack_standin
from tests.support.e2e import CHANNEL, CONFIG, OWNER, REQUESTER, buttons, eventually


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@asynccontextmanager
async def serve(
    env: dict[str, str], slack: SlackStandIn
) -> AsyncIterator[asyncio.subprocess.Process]:
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", "serve",
        env={**env, "BOT_PORT": str(port)},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        line = (await asyncio.wait_for(process.stdout.readline(), timeout=60)).decode()
        assert "listening on" in line, line
        slack.set_events_url(f"http://127.0.0.1:{port}/slack/events")
        yield process
    finally:
        if process.returncode is None:
            process.terminate()
            await asyncio.wait_for(process.wait(), timeout=30)


async def load(database_url: str, request_id: str) -> BackfillRequest:
    engine = make_engine(database_url)
    try:
        async with session_factory(engine)() as session:
            return await repository.get_request(session, request_id)
    finally:
        await engine.dispose()


async def test_sigkill_mid_backfill_then_restart_runs_each_interval_once(
    tmp_path: Path, food_delivery_marquez: StandInServer
) -> None:
    config = tmp_path / "bot.yml"
    config.write_text(
        yaml.safe_dump({**CONFIG, "execution": {"poll_interval_s": 0.2, "progress_update_s": 0.5}})
    )
    database = f"sqlite:///{tmp_path / 'bot.db'}"
    async with (
        running_airflow_standin(
            dags=FOOD_DELIVERY_DAGS, run_seconds=0.4, history=food_delivery_history()
        ) as airflow,
        running_slack_standin() as slack,
    ):
        env = {
            k: v for k, v in os.environ.items() if not k.startswith(("BOT_", "SLACK_", "AIRFLOW"))
        }
        env.update(
            MARQUEZ_URL=food_delivery_marquez.url,
            DATABASE_URL=database,
            BOT_CONFIG=str(config),
            SLACK_BOT_TOKEN=slack.bot_token,
            SLACK_SIGNING_SECRET=slack.signing_secret,
            SLACK_API_URL=f"{slack.url}/api/",
            AIRFLOW_URL=airflow.url,
            AIRFLOW_USERNAME="admin",
            AIRFLOW_PASSWORD="admin",
        )
        async with serve(env, slack) as first:
            await slack.slash_command(
                "example.etl_orders 2021-06-04..2021-06-06", user_id=REQUESTER, channel_id=CHANNEL
            )
            preview = (await eventually(lambda: slack.state.messages(CHANNEL), timeout_s=30))[-1]
            request_id = buttons(preview)[ActionId.APPROVE]["value"]
            await slack.click(
                channel_id=CHANNEL, message_ts=preview.ts, action_id=ActionId.APPROVE, user_id=OWNER
            )
            # mid-way: the root is done and a downstream backfill is under way
            await eventually(lambda: len(airflow.state.backfills) >= 2, timeout_s=60)
            os.killpg(first.pid, signal.SIGKILL)
            await first.wait()
        status_ts = (await load(database, request_id)).status_message_ts
        assert status_ts

        async with serve(env, slack):

            async def done() -> BackfillRequest | None:
                request = await load(database, request_id)
                return request if request.finished_at else None

            request = await eventually(done, timeout_s=90)
            # A reply the killed process had claimed waits out its lease (10 s) first, and is
            # looked for in the thread before it is posted again.
            await eventually(
                lambda: any(
                    "Backfill succeeded" in json.dumps(m.blocks)
                    for m in slack.state.thread(CHANNEL, status_ts)
                ),
                timeout_s=90,
            )

    assert request.state == "succeeded"
    assert request.status_message_ts == status_ts
    by_dag: dict[str, list[int]] = {}
    for backfill in airflow.state.backfills:
        by_dag.setdefault(backfill.dag_id, []).append(backfill.id)
    assert sorted(by_dag) == sorted(s.dag_id for s in request.steps)
    assert all(len(ids) == 1 for ids in by_dag.values()), by_dag  # one backfill per DAG
    for step in request.steps:
        runs = [r for r in airflow.state.runs_of(step.dag_id) if r.run_type == "backfill"]
        assert len(runs) == len(step.intervals), step.dag_id
        # each interval ran once: reused runs were cleared once, new runs never
        assert all(r.clear_number <= 1 for r in runs), step.dag_id
    thread = [m.text + json.dumps(m.blocks) for m in slack.state.thread(CHANNEL, status_ts)]
    # A post Slack took just before the kill is found in the thread, not posted again.
    for step in request.steps:
        assert sum(f"`{step.dag_id}` started" in t for t in thread) == 1, step.dag_id
        assert sum(f"`{step.dag_id}` succeeded" in t for t in thread) == 1, step.dag_id
    assert "Backfill succeeded" in thread[-1], "the summary is the thread's last reply"
