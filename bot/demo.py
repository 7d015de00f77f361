"""The local demo: the Marquez stand-in (food_delivery seed), the Slack stand-in and the bot on
loopback, with a scripted conversation, or an interactive one where a person types `/backfill …`
and clicks buttons by number."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from bot import resource_dir
from bot.app import build_services, create_bolt_app, create_web_app, slack_client
from bot.app_services import Services
from bot.config import BotConfig, load_config
from bot.settings import DEFAULT_DATABASE_URL, Settings
from bot.standins.airflow import running_airflow_standin
from bot.standins.airflow_dags import FOOD_DELIVERY_DAGS, food_delivery_history
from bot.standins.marquez import running_standin
from bot.standins.slack import SlackStandIn, running_slack_standin
from bot.standins.slack_transcript import render
from bot.store import execution, repository
from bot.store.db import describe_url
from bot.store.models import RequestState

EXAMPLE_CONFIG = resource_dir("bot.examples") / "bot-config.yml"
CHANNEL = "C0BACKFILL"
REQUESTER = "U0REQUEST1"
APPROVER = "U0ALICE001"  # a member of team "orders" in examples/bot-config.yml
SCRIPT = "/backfill example.etl_orders 2021-06-04..2021-06-06"


@dataclass
class Conversation:
    """The running demo: what was shown so far, and the buttons a person can click."""

    slack: SlackStandIn
    services: Services
    out: Callable[[str], None]
    shown_messages: dict[str, str] = field(default_factory=dict)
    shown_ephemerals: int = 0
    buttons: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)

    async def settle(self) -> None:
        await asyncio.sleep(0.3)  # the bot keeps working after it acked
        await self.services.sender.drain(timeout_s=30)
        self.show_new()

    def show_new(self) -> None:
        state = self.slack.state
        for item in state.ephemerals[self.shown_ephemerals :]:
            text, _ = render(item.blocks, item.text)
            self.out(f"\n(only @{item.user} sees this)\n{text}")
        self.shown_ephemerals = len(state.ephemerals)
        for message in state.messages(CHANNEL):
            thread = state.thread(CHANNEL, message.ts)
            for shown in [message, *thread]:
                text, found = render(shown.blocks, shown.text, first_button=len(self.buttons) + 1)
                key = f"{shown.ts}:{hash(text)}"
                if self.shown_messages.get(shown.ts) == key:
                    continue
                edited = " (edited)" if shown.ts in self.shown_messages else ""
                where = "  ↳ in thread: " if shown is not message else ""
                self.shown_messages[shown.ts] = key
                self.buttons += [(CHANNEL, shown.ts, b) for b in found]
                self.out(f"\n#backfill · backfill-bot{edited}\n{where}{text}")

    async def until_finished(self, *, timeout_s: float) -> None:
        """Show progress until every backfill the demo started has finished."""
        deadline = asyncio.get_running_loop().time() + timeout_s
        while asyncio.get_running_loop().time() < deadline:
            async with self.services.sessions() as session:
                following = await execution.requests_to_follow(session)
                approved = await repository.list_requests(session, state=RequestState.APPROVED)
            await self.settle()
            if not following and not approved:
                return
            await asyncio.sleep(0.5)
        self.out("\nThe backfill is still running; stopping the demo anyway.")

    async def type(self, user: str, line: str) -> None:
        command, _, text = line.strip().partition(" ")
        self.out(f"\n@{user}: {line.strip()}")
        state = self.slack.state
        before = (len(state.messages(CHANNEL)), len(state.ephemerals))
        await self.slack.slash_command(text, command=command, user_id=user, channel_id=CHANNEL)
        # The bot acks at once and answers when the plan is made (a reply or a refusal).
        for _ in range(600):
            await self.services.sender.drain(timeout_s=30)
            now = (len(state.messages(CHANNEL)), len(state.ephemerals))
            if now[0] > before[0] or now[1] > before[1] + 1:
                break
            await asyncio.sleep(0.05)
        await self.settle()

    async def click(self, user: str, number: int) -> None:
        if not 1 <= number <= len(self.buttons):
            self.out(f"There is no button {number}.")
            return
        channel, ts, button = self.buttons[number - 1]
        self.out(f"\n@{user} clicks [{button['text']['text']}]")
        await self.slack.click(
            channel_id=channel,
            message_ts=ts,
            action_id=button["action_id"],
            user_id=user,
            value=button.get("value"),
        )
        await self.settle()


@asynccontextmanager
async def running_demo(
    settings: Settings, config: BotConfig, out: Callable[[str], None]
) -> AsyncIterator[Conversation]:
    """Everything on loopback ports; the bot is the same app `serve` runs."""
    scratch = tempfile.TemporaryDirectory(prefix="backfill-bot-demo-")
    database = settings.database_url
    if database == DEFAULT_DATABASE_URL:
        # The demo must never share (and drain) a real bot's outbox: it gets its own database.
        database = f"sqlite:///{Path(scratch.name) / 'demo.db'}"
    async with contextlib.AsyncExitStack() as stack:
        marquez = await stack.enter_async_context(running_standin(seed="food_delivery"))
        slack = await stack.enter_async_context(running_slack_standin())
        airflow: dict[str, Any] = {}
        if settings.airflow_url is None and settings.bot_executor in ("auto", "airflow"):
            # No Airflow configured: the food_delivery DAGs on a stand-in of Airflow 3's API.
            server = await stack.enter_async_context(
                running_airflow_standin(
                    dags=FOOD_DELIVERY_DAGS, history=food_delivery_history(), run_seconds=0.4
                )
            )
            airflow = {
                "airflow_url": server.url,
                "airflow_username": server.username,
                "airflow_password": _secret(server.password),
                "bot_executor": "airflow",
            }
            out(f"Airflow stand-in {server.url}")
        local = settings.model_copy(
            update={
                "database_url": database,
                "marquez_url": marquez.url,
                "slack_bot_token": _secret(slack.bot_token),
                "slack_signing_secret": _secret(slack.signing_secret),
                "slack_api_url": f"{slack.url}/api/",
                "slack_app_token": None,
                **airflow,
            }
        )
        quick = config.execution.model_copy(update={"poll_interval_s": 0.5, "progress_update_s": 2})
        config = config.model_copy(update={"execution": quick})
        services = build_services(local, config, slack_client(local))
        runner = web.AppRunner(create_web_app(create_bolt_app(services), services))
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        slack.set_events_url(f"http://127.0.0.1:{port}/slack/events")
        out(
            f"Marquez stand-in {marquez.url} · Slack stand-in {slack.url} · "
            f"backfill-bot http://127.0.0.1:{port} · database {describe_url(database)}"
        )
        try:
            yield Conversation(slack, services, out)
        finally:
            await runner.cleanup()
            scratch.cleanup()


def _secret(value: str) -> Any:
    from pydantic import SecretStr

    return SecretStr(value)


def demo_config(settings: Settings, config: BotConfig) -> BotConfig:
    if settings.bot_config is None and EXAMPLE_CONFIG.is_file():
        return load_config(EXAMPLE_CONFIG)
    return config


async def scripted(settings: Settings, config: BotConfig, out: Callable[[str], None]) -> None:
    """The main job on embedded defaults: a backfill requested, previewed, approved."""
    async with running_demo(settings, demo_config(settings, config), out) as talk:
        await talk.type(REQUESTER, SCRIPT)
        approve = next(
            (i for i, (_, _, b) in enumerate(talk.buttons, 1) if b["text"]["text"] == "Approve"),
            None,
        )
        if approve is None:
            out("\nThe preview has no Approve button; see the messages above.")
            return
        await talk.click(APPROVER, approve)
        await talk.until_finished(timeout_s=180)


HELP = (
    "Type a slash command as in Slack (e.g. /backfill example.etl_orders 2021-06-04..2021-06-06),"
    " 'click N' to click button N, 'as USER' to act as another user (e.g. as U0ALICE001),"
    " or 'quit'."
)


async def interactive(settings: Settings, config: BotConfig, out: Callable[[str], None]) -> None:
    """A terminal Slack: type `/backfill …`, click buttons by number."""
    async with running_demo(settings, demo_config(settings, config), out) as talk:
        user = REQUESTER
        out(HELP)
        while True:
            out(f"\n[{user}] > ")
            line = await asyncio.to_thread(sys.stdin.readline)
            if not line or line.strip() in {"quit", "exit"}:
                return
            words = line.split()
            if not words:
                continue
            if words[0] == "click" and len(words) == 2 and words[1].isdigit():
                await talk.click(user, int(words[1]))
            elif words[0] == "as" and len(words) == 2:
                user = words[1]
            elif words[0].startswith("/"):
                await talk.type(user, line)
            else:
                out(HELP)
