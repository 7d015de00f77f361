"""Helpers for the end-to-end tests. The whole bot runs over real HTTP: its aiohttp app on a
port, the Slack stand-in acting as Slack and as users, the Marquez stand-in with the
food_delivery seed, and a real database."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from aiohttp import web

from bot.app import build_services, create_bolt_app
from bot.app_services import Services
from bot.config import BotConfig
from bot.core.db import upgrade
from bot.settings import load_settings
from bot.slack.service.client import slack_client
from bot.web import create_web_app
from standins.marquez.server import StandInServer
from standins.slack.server import SlackStandIn, running_slack_standin

T = TypeVar("T")
OWNER = "U0ORDERS01"
REQUESTER = "U0REQUEST1"
OUTSIDER = "U0OUTSIDE1"
CHANNEL = "C0BACKFILL"
# Slack gives up on an unanswered request after 3 s. The suite runs on two shared cores beside
# Spark's JVM and Chromium, where a starved event loop once took longer than that to answer a
# click it acks first thing; tests that are about the deadline pass SLACK_ACK_S themselves.
SLACK_ACK_S = 3.0
SUITE_ACK_S = 10.0

CONFIG = {
    "teams": [
        {"name": "orders", "channel": CHANNEL, "members": [OWNER, REQUESTER]},
        {"name": "analytics", "members": ["U0ANALYST1"]},
    ],
    "ownership": [{"pattern": "example.etl_orders*", "team": "orders"}],
}


@dataclass
class Bot:
    url: str
    services: Services
    slack: SlackStandIn
    marquez: StandInServer

    async def settle(self) -> None:
        """Let the bot finish what it does after acking, and deliver what it owes Slack."""
        await asyncio.sleep(0)
        # Listeners bolt runs after acking (over HTTP or Socket Mode), still at work.
        listeners = [
            task
            for task in asyncio.all_tasks()
            if getattr(task.get_coro(), "__qualname__", "").endswith(
                "run_ack_function_asynchronously"
            )
        ]
        await asyncio.gather(*listeners, return_exceptions=True)
        await self.services.incidents.settled()  # impacts edited into alerts posted without
        await self.services.sender.drain(timeout_s=20)


async def eventually(check: Callable[[], Awaitable[T] | T], *, timeout_s: float = 15.0) -> T:
    """Poll until `check` returns something truthy (the bot works after acking)."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        result = check()
        value = await result if asyncio.iscoroutine(result) else result
        if value:
            return value  # type: ignore[return-value]
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.05)


async def start_bot(
    database_url: str,
    slack: SlackStandIn,
    marquez: StandInServer,
    config: BotConfig,
    env: Mapping[str, str] | None = None,
    *,
    wait_for_index: bool = True,
) -> tuple[Services, web.AppRunner, str]:
    """The bot's web app on a free port; `env` adds settings (default: manual executor).
    Unless `wait_for_index` is False, returns once the lineage index holds a full reconcile
    (plans then come from it alone, as in a bot that has been up a while)."""
    settings = load_settings(
        {
            "MARQUEZ_URL": marquez.url,
            "DATABASE_URL": database_url,
            "SLACK_BOT_TOKEN": slack.bot_token,
            "SLACK_SIGNING_SECRET": slack.signing_secret,
            "SLACK_API_URL": f"{slack.url}/api/",
            **(env if env is not None else {"BOT_EXECUTOR": "manual"}),
        }
    )
    await asyncio.to_thread(upgrade, database_url)
    if "impact_wait_s" not in config.watch.model_fields_set:
        # Alerts carry their impact when first posted (a loaded test machine must not make
        # them arrive in two steps), unless a test is about exactly that.
        watch = config.watch.model_copy(update={"impact_wait_s": 30.0})
        config = config.model_copy(update={"watch": watch})
    services = build_services(settings, config, slack_client(settings))
    app = create_web_app(create_bolt_app(services), services)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    reconciler = services.reconciler
    if reconciler is not None and wait_for_index:  # the whole index loaded in this process
        await eventually(reconciler.index.ready.is_set, timeout_s=30)
    return services, runner, f"http://127.0.0.1:{port}"


def buttons(message: Any) -> dict[str, dict[str, Any]]:
    """Buttons of a stored Slack message by action id."""
    found: dict[str, dict[str, Any]] = {}
    for block in message.blocks or []:
        for element in block.get("elements", []) if block.get("type") == "actions" else []:
            found[element["action_id"]] = element
        accessory = block.get("accessory")
        if accessory and accessory.get("type") == "button":
            found[accessory["action_id"]] = accessory
    return found


@asynccontextmanager
async def running_bot(
    database_url: str,
    marquez: StandInServer,
    config: BotConfig,
    groups: Mapping[str, list[str]] | None = None,
    env: Mapping[str, str] | None = None,
    *,
    ack_timeout: float = SUITE_ACK_S,
    wait_for_index: bool = True,
) -> AsyncIterator[Bot]:
    """A Slack stand-in (with these user groups) and the bot wired to it and to Marquez."""
    async with running_slack_standin(ack_timeout=ack_timeout) as slack:
        for group, members in (groups or {}).items():
            slack.state.add_usergroup(group, members)
        services, runner, url = await start_bot(
            database_url, slack, marquez, config, env, wait_for_index=wait_for_index
        )
        slack.set_events_url(f"{url}/slack/events")
        try:
            yield Bot(url, services, slack, marquez)
        finally:
            await runner.cleanup()
