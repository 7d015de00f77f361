"""The local demo: the Marquez, Airflow and Slack stand-ins and the bot on loopback, with the
Slack stand-in's browser page.

`demo` plays the whole story (a failure, the alert, Approve backfill, progress, the incident
resolved, an SLA miss) and leaves the page running; `demo --headless` prints the workspace's
final transcript and exits; `chat` lets a person type `/backfill …` and click buttons by number
in the terminal. Outside events reach the bot as in production: OpenLineage events POSTed to
its receiver (standins/demo/world.py), Slack requests signed by the stand-in.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from aiohttp import web
from pydantic import SecretStr

from bot.app import build_services, create_bolt_app
from bot.app_services import Services
from bot.backfill.rules.states import RequestState
from bot.backfill.store import execution, repository
from bot.config import BotConfig, load_config
from bot.core.db import describe_url
from bot.core.resources import resource_dir
from bot.settings import DEFAULT_DATABASE_URL, Settings
from bot.slack.service.client import slack_client
from bot.web import create_web_app, is_slack_listener
from standins.airflow.dags import FOOD_DELIVERY_DAGS, food_delivery_history
from standins.airflow.server import running_airflow_standin
from standins.demo.world import DemoClock, DemoWorld, seed_workspace
from standins.marquez.server import running_standin
from standins.slack.server import SlackStandIn, running_slack_standin

EXAMPLE_CONFIG = resource_dir("bot.examples") / "bot-config.yml"
CHANNEL = "C0BACKFILL"
REQUESTER = "U0REQUEST1"
APPROVER = "U0ALICE001"  # a member of team "orders" in examples/bot-config.yml
SCRIPT = "/backfill example.etl_orders 2021-06-04..2021-06-06"
T = TypeVar("T")


@dataclass
class Demo:
    """The running demo: the stand-ins, the bot's services and the outside world."""

    slack: SlackStandIn
    services: Services
    world: DemoWorld
    out: Callable[[str], None]

    async def settle(self, *, quiet_s: float = 0.3, timeout_s: float = 30.0) -> None:
        """Return once the bot has answered: no listener at work, nothing owed to Slack, and
        the workspace quiet for `quiet_s` (or `timeout_s` passed, while a backfill runs)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        feed = self.slack.state.feed
        while loop.time() < deadline:
            seen = feed.revision  # a change while the bot works means: look again
            listeners = [t for t in asyncio.all_tasks() if is_slack_listener(t)]
            if listeners:
                await asyncio.wait(listeners, timeout=max(0.05, deadline - loop.time()))
                continue
            with contextlib.suppress(TimeoutError):
                left = max(0.1, deadline - loop.time())
                await asyncio.wait_for(self.services.incidents.settled(), left)
                await self.services.sender.drain(timeout_s=max(0.1, deadline - loop.time()))
            if feed.revision == seen and not await feed.changed(quiet_s):
                return

    async def wait_for(self, check: Callable[[], T | None], timeout_s: float = 60.0) -> T | None:
        """`check()`'s first answer that is not None, looked at after each workspace change."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while (found := check()) is None and loop.time() < deadline:
            await self.slack.state.feed.changed(min(1.0, max(0.01, deadline - loop.time())))
        return found

    async def until_finished(self, *, timeout_s: float) -> bool:
        """Wait until every backfill has finished (False if one still runs at `timeout_s`)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while loop.time() < deadline:
            async with self.services.sessions() as session:
                following = await execution.requests_to_follow(session)
                approved = await repository.list_requests(session, state=RequestState.APPROVED)
            if not following and not approved:
                await self.settle(timeout_s=10)
                return True
            await asyncio.sleep(0.3)
        return False


@asynccontextmanager
async def running_demo(
    settings: Settings, config: BotConfig, out: Callable[[str], None], *, slack_port: int = 0
) -> AsyncIterator[Demo]:
    """Everything on loopback; the bot is the same app `serve` runs."""
    scratch = tempfile.TemporaryDirectory(prefix="backfill-bot-demo-")
    database = settings.database_url
    if database == DEFAULT_DATABASE_URL:
        # The demo must never share (and drain) a real bot's outbox: it gets its own database.
        database = f"sqlite:///{Path(scratch.name) / 'demo.db'}"
    async with contextlib.AsyncExitStack() as stack:
        stack.callback(scratch.cleanup)
        marquez = await stack.enter_async_context(running_standin(seed="food_delivery"))
        try:
            slack = await stack.enter_async_context(running_slack_standin(port=slack_port))
        except OSError:  # the page's usual port is taken: any free one will do
            slack = await stack.enter_async_context(running_slack_standin(port=0))
        seed_workspace(slack.state, config, main_channel=CHANNEL)
        airflow_server = None
        airflow: dict[str, Any] = {}
        if settings.airflow_url is None and settings.bot_executor in ("auto", "airflow"):
            # No Airflow configured: the food_delivery DAGs on a stand-in of Airflow 3's API.
            airflow_server = await stack.enter_async_context(
                running_airflow_standin(
                    dags=FOOD_DELIVERY_DAGS, history=food_delivery_history(), run_seconds=0.4
                )
            )
            airflow = {
                "airflow_url": airflow_server.url,
                "airflow_username": airflow_server.username,
                "airflow_password": SecretStr(airflow_server.password),
                "bot_executor": "airflow",
            }
        local = settings.model_copy(
            update={
                "database_url": database,
                "marquez_url": marquez.url,
                "slack_bot_token": SecretStr(slack.bot_token),
                "slack_signing_secret": SecretStr(slack.signing_secret),
                "slack_api_url": f"{slack.url}/api/",
                "slack_app_token": None,
                **airflow,
            }
        )
        quick = config.execution.model_copy(update={"poll_interval_s": 0.5, "progress_update_s": 2})
        # Runs reach the bot as the Airflow provider sends them (DemoWorld), not by polling.
        watch = config.watch.model_copy(update={"poll": False})
        config = config.model_copy(update={"execution": quick, "watch": watch})
        services = build_services(local, config, slack_client(local))
        clock = DemoClock()
        services.sla.clock = clock.now  # the demo's SLA clock moves when a person moves it
        runner = web.AppRunner(
            create_web_app(create_bolt_app(services), services, sla_check_s=None)
        )
        await runner.setup()
        stack.push_async_callback(runner.cleanup)
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        bot_url = f"http://127.0.0.1:{runner.addresses[0][1]}"
        slack.set_events_url(f"{bot_url}/slack/events")
        world = DemoWorld(
            bot_url,
            airflow=airflow_server,
            clock=clock,
            check_sla=services.sla.check,
            changed=lambda: slack.state.feed.publish("demo"),
        )
        stack.push_async_callback(world.close)
        slack.demo = world
        follower = asyncio.create_task(world.follow_airflow(), name="demo-openlineage")
        stack.push_async_callback(_cancel, follower)
        parts = [f"Marquez stand-in {marquez.url}", f"Slack stand-in {slack.url}"]
        if airflow_server is not None:
            parts.append(f"Airflow stand-in {airflow_server.url}")
        parts += [f"backfill-bot {bot_url}", f"database {describe_url(database)}"]
        out(" · ".join(parts))
        await world.history()
        yield Demo(slack, services, world, out)


async def _cancel(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


def demo_config(settings: Settings, config: BotConfig) -> BotConfig:
    if settings.bot_config is None and EXAMPLE_CONFIG.is_file():
        return load_config(EXAMPLE_CONFIG)
    return config
