"""The example story against `backfill-bot serve` run as a real OS process and killed with SIGKILL
at random moments: three failed days of `example.etl_orders` pushed as OpenLineage events, one
alert, **Approve backfill** clicked in it, seven DAGs backfilled on the Airflow stand-in, the
days completed and the alert resolved. Every kill is followed at once by a restart, as a process
supervisor would do; producers and people retry what the dead process did not answer, as they
would. Shared by tests/backfill/test_crash_story.py and bench/crash_bench.py, which print the
figures `crash_story` returns."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import socket
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.backfill.store.models import BackfillRequest
from bot.core.db import make_engine, session_factory
from bot.incidents.store.models import Incident
from bot.slack.rules.ids import ActionId
from bot.slack.service.posting import carried_ids
from bot.slack.store.models import OutboxMessage, OutboxState
from standins.airflow.dags import FOOD_DELIVERY_DAGS, food_delivery_history
from standins.airflow.server import AirflowStandin, running_airflow_standin
from standins.slack.server import SlackStandIn, running_slack_standin
from standins.slack.state import Message
from tests.support.e2e import buttons
from tests.support.story import (
    ANALYTICS,
    DAYS,
    LOGISTICS,
    ORDERS,
    OWNER,
    run_event,
    story_config_data,
)

Sessions = async_sessionmaker[AsyncSession]
CLICK_EFFECT_S = 20.0  # how long a person waits for an acked click to show before clicking again


@dataclass
class Figures:
    kills: int = 0
    restarts_failed: int = 0
    alerts: int = 0
    clicks_acked: int = 0
    clicks_unanswered: int = 0  # acked, and nothing came of them within CLICK_EFFECT_S
    lost_clicks: int = 0  # acked, and never answered at all
    duplicate_posts: int = 0
    posts: int = 0
    unsent: int = 0  # outbox rows left pending or given up at the end
    backfills_per_dag: dict[str, int] = field(default_factory=dict)
    runs_per_interval: dict[str, int] = field(default_factory=dict)
    resolved: bool = False
    alert_knew_its_backfill: bool = False  # no live Approve, not "resolved on its own"
    seconds: float = 0.0

    @property
    def each_dag_once(self) -> bool:
        return bool(self.backfills_per_dag) and set(self.backfills_per_dag.values()) == {1}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Serve:
    """`python -m bot serve` on a fixed port, started again after each kill."""

    def __init__(self, env: dict[str, str], port: int) -> None:
        self.env = {**env, "BOT_PORT": str(port)}
        self.url = f"http://127.0.0.1:{port}"
        self.process: asyncio.subprocess.Process | None = None

    async def start(self) -> bool:
        """Start and wait until it listens; False if it exited instead (a failed restart)."""
        self.process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot", "serve",
            env=self.env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
        assert self.process.stdout is not None
        while True:
            line = await asyncio.wait_for(self.process.stdout.readline(), timeout=90)
            if not line:
                await self.process.wait()
                return False
            if b"listening on" in line:
                asyncio.get_running_loop().create_task(self._drain(self.process))
                return True

    @staticmethod
    async def _drain(process: asyncio.subprocess.Process) -> None:
        assert process.stdout is not None
        while await process.stdout.readline():
            pass

    async def kill(self) -> None:
        if self.process is not None and self.process.returncode is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            await self.process.wait()

    async def stop(self) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.terminate()
            await asyncio.wait_for(self.process.wait(), timeout=60)


async def _push(serve: Serve, http: aiohttp.ClientSession, body: dict[str, Any]) -> None:
    """POST one event until the bot takes it (a producer retries a refused or dead endpoint)."""
    while True:
        try:
            async with http.post(f"{serve.url}/api/v1/lineage", json=body) as reply:
                if reply.status == 201:
                    return
        except aiohttp.ClientError:
            pass
        await asyncio.sleep(0.2)


async def _wait(check: Any, timeout_s: float, what: str) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = await check()
        if found:
            return found
        await asyncio.sleep(0.2)
    raise TimeoutError(f"gave up waiting for {what}")


def _answers(slack: SlackStandIn) -> int:
    """The answers the clicker got (an ephemeral reply per click, however it was sent)."""
    return sum(1 for e in slack.state.ephemerals if e.user == OWNER)


def _alerts(slack: SlackStandIn) -> list[Message]:
    return [m for m in slack.state.messages(ORDERS) if ActionId.INCIDENT_MARQUEZ in buttons(m)]


def _every_message(slack: SlackStandIn) -> list[Message]:
    found = []
    for channel in slack.state.channels:
        for message in slack.state.messages(channel):
            found.append(message)
            found.extend(slack.state.thread(channel, message.ts))
    return found


async def crash_story(
    tmp_path: Path, marquez_url: str, database_url: str, *, kills: int, seed: int
) -> Figures:
    """Run the story with `kills` SIGKILLs at random moments (seeded), and say what came of it."""
    rng = random.Random(seed)
    figures = Figures()
    config = tmp_path / "bot.yml"
    data = story_config_data(execution={"poll_interval_s": 0.2, "progress_update_s": 0.5})
    config.write_text(yaml.safe_dump(data))
    engine = make_engine(database_url)
    sessions = session_factory(engine)
    started = time.monotonic()

    async with (
        running_airflow_standin(
            api=3, dags=FOOD_DELIVERY_DAGS, run_seconds=0.6, history=food_delivery_history()
        ) as airflow,
        running_slack_standin() as slack,
        aiohttp.ClientSession() as http,
    ):
        env = {
            k: v for k, v in os.environ.items() if not k.startswith(("BOT_", "SLACK_", "AIRFLOW"))
        }
        env.update(
            MARQUEZ_URL=marquez_url, DATABASE_URL=database_url, BOT_CONFIG=str(config),
            SLACK_BOT_TOKEN=slack.bot_token, SLACK_SIGNING_SECRET=slack.signing_secret,
            SLACK_API_URL=f"{slack.url}/api/", AIRFLOW_URL=airflow.url,
            AIRFLOW_USERNAME="admin", AIRFLOW_PASSWORD="admin",
        )  # fmt: skip
        for channel, name in (
            (ORDERS, "orders"),
            (LOGISTICS, "logistics"),
            (ANALYTICS, "analytics"),
        ):
            # Invited, as `backfill-bot doctor` asks: a bot reads back only channels it is in.
            slack.state.add_channel(channel, name)
        serve = Serve(env, free_port())
        slack.set_events_url(f"{serve.url}/slack/events")
        while not await serve.start():
            figures.restarts_failed += 1
        done = asyncio.Event()

        async def killer() -> None:
            while figures.kills < kills and not done.is_set():
                await asyncio.sleep(rng.uniform(0.1, 1.5))
                if done.is_set():
                    return
                await serve.kill()
                figures.kills += 1
                while not await serve.start():
                    figures.restarts_failed += 1
                    if figures.restarts_failed > 3:
                        raise RuntimeError("serve does not start again after a kill")

        killing = asyncio.create_task(killer())
        try:
            await _story(serve, http, slack, figures, sessions)
            figures.resolved = True
            # Kills go on while what the bot still owes goes out (nothing to kill: done).
            await _wait(lambda: _settled(sessions), 120, "the outbox to empty")
            await asyncio.wait_for(asyncio.shield(killing), 120)
        finally:
            done.set()
            await killing
        await _wait(lambda: _settled(sessions), 120, "the outbox to empty")

        async def answered() -> bool:  # each acked click told the clicker something
            return _answers(slack) >= figures.clicks_acked

        with contextlib.suppress(TimeoutError):
            await _wait(answered, 150, "every acked click to be answered")
        figures.lost_clicks = max(0, figures.clicks_acked - _answers(slack))
        await serve.stop()
        figures.unsent = await _unsent(sessions)
        figures.alerts = len(_alerts(slack))
        final = _alerts(slack)[-1]
        shown = f"{final.text} {final.blocks}"
        figures.alert_knew_its_backfill = (
            ActionId.INCIDENT_APPROVE not in buttons(final) and "on its own" not in shown
        )
        carried = Counter(
            i
            for m in _every_message(slack)
            for i in carried_ids({"metadata": getattr(m, "metadata", None)})
        )
        figures.posts = len(carried)
        figures.duplicate_posts = sum(n - 1 for n in carried.values())
        figures.backfills_per_dag = dict(Counter(b.dag_id for b in airflow.state.backfills))
        figures.runs_per_interval = _runs(airflow)
    await engine.dispose()
    figures.seconds = time.monotonic() - started
    return figures


async def _story(
    serve: Serve,
    http: aiohttp.ClientSession,
    slack: SlackStandIn,
    figures: Figures,
    sessions: Sessions,
) -> None:
    async def incident() -> Incident | None:
        async with sessions() as session:
            return await session.scalar(select(Incident).where(Incident.root_id.is_(None)))

    async def linked() -> bool:
        found = await incident()
        return found is not None and found.backfill_request_id is not None

    async def finished() -> bool:
        found = await incident()
        if found is None or found.backfill_request_id is None:
            return False
        async with sessions() as session:
            request = await session.get(BackfillRequest, found.backfill_request_id)
            return request is not None and request.finished_at is not None

    async def resolved() -> bool:
        found = await incident()
        return found is not None and found.state == "resolved"

    for day in DAYS:
        await _push(serve, http, run_event("FAIL", day))
    alert = (await _wait(lambda: _approvable(slack), 180, "the alert"))[0]
    while True:  # click Approve backfill until something comes of it, as a person would
        reply = await slack.click(
            channel_id=ORDERS,
            message_ts=alert.ts,
            action_id=ActionId.INCIDENT_APPROVE,
            user_id=OWNER,
            value=str(buttons(alert)[ActionId.INCIDENT_APPROVE].get("value", "")),
        )
        if reply.status != 200:  # Slack told the person it failed: they click again
            await asyncio.sleep(0.5)
            continue
        figures.clicks_acked += 1
        try:
            await _wait(linked, CLICK_EFFECT_S, "the click's backfill")
            break
        except TimeoutError:  # a person clicks again (the bot answers "already under way")
            figures.clicks_unanswered += 1
    await _wait(finished, 300, "the backfill to finish")
    for day in DAYS:
        await _push(serve, http, run_event("COMPLETE", day))
    await _wait(resolved, 120, "the alert to resolve")


async def _approvable(slack: SlackStandIn) -> list[Message]:
    return [m for m in _alerts(slack) if ActionId.INCIDENT_APPROVE in buttons(m)]


async def _settled(sessions: Sessions) -> bool:
    async with sessions() as session:
        pending = await session.scalar(
            select(func.count())
            .select_from(OutboxMessage)
            .where(OutboxMessage.state == OutboxState.PENDING)
        )
        return pending == 0


async def _unsent(sessions: Sessions) -> int:
    async with sessions() as session:
        count = await session.scalar(
            select(func.count())
            .select_from(OutboxMessage)
            .where(OutboxMessage.state != OutboxState.SENT)
        )
        return int(count or 0)


def _runs(airflow: AirflowStandin) -> dict[str, int]:
    """How many times each (DAG, interval) ran for the backfill."""
    counted: Counter[str] = Counter()
    for dag_id in {b.dag_id for b in airflow.state.backfills}:
        for run in airflow.state.runs_of(dag_id):
            if run.run_type == "backfill":
                # A run from history is cleared once to run again; a new one never is.
                counted[f"{dag_id} {run.logical_date}"] += 1 + max(0, run.clear_number - 1)
    return dict(counted)
