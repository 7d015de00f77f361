"""Helpers for tests that run approved backfills: a bot wired to an Airflow stand-in (or a real
Airflow), the request/approve clicks, and readers of what Airflow and Slack ended up with."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

from bot.backfill.store import repository
from bot.backfill.store.models import BackfillRequest
from bot.config import BotConfig, parse_config
from bot.slack.rules.ids import ActionId
from standins.airflow.server import AirflowStandin
from standins.marquez.server import StandInServer
from standins.slack.server import SlackStandIn
from tests.support.e2e import (
    CHANNEL,
    CONFIG,
    OWNER,
    REQUESTER,
    Bot,
    buttons,
    eventually,
    start_bot,
)

COMMAND = "example.etl_orders 2021-06-04..2021-06-06"


def execution_config(**execution: Any) -> BotConfig:
    settings = {"poll_interval_s": 0.1, "progress_update_s": 0.3, **execution}
    return parse_config({**CONFIG, "execution": settings})


def airflow_env(url: str, username: str = "admin", password: str = "admin") -> dict[str, str]:
    return {"AIRFLOW_URL": url, "AIRFLOW_USERNAME": username, "AIRFLOW_PASSWORD": password}


@asynccontextmanager
async def bot_on(
    slack: SlackStandIn, database: str, marquez: StandInServer, airflow: AirflowStandin,
    config: BotConfig,
) -> AsyncIterator[Bot]:  # fmt: skip
    """The bot on a Slack stand-in and an Airflow stand-in that outlive it: run it again on
    the same database for a restart."""
    services, runner, url = await start_bot(
        database, slack, marquez, config, airflow_env(airflow.url)
    )
    slack.set_events_url(f"{url}/slack/events")
    try:
        yield Bot(url, services, slack, marquez)
    finally:
        await runner.cleanup()


async def request_backfill(bot: Bot, command: str = COMMAND, user: str = REQUESTER) -> Any:
    """Type the command; return the preview message."""
    before = len(bot.slack.state.messages(CHANNEL))
    reply = await bot.slack.slash_command(command, user_id=user, channel_id=CHANNEL)
    assert reply.status == 200
    await eventually(lambda: len(bot.slack.state.messages(CHANNEL)) > before, timeout_s=30)
    await bot.settle()
    return bot.slack.state.messages(CHANNEL)[-1]


async def approve(bot: Bot, preview: Any, user: str = OWNER) -> str:
    request_id = str(buttons(preview)[ActionId.APPROVE]["value"])
    reply = await bot.slack.click(
        channel_id=CHANNEL, message_ts=preview.ts, action_id=ActionId.APPROVE, user_id=user
    )
    assert reply.status == 200
    return request_id


async def load(bot: Bot, request_id: str) -> BackfillRequest:
    async with bot.services.sessions() as session:
        return await repository.get_request(session, request_id)


async def finished(bot: Bot, request_id: str, *, timeout_s: float = 60) -> BackfillRequest:
    async def done() -> BackfillRequest | None:
        request = await load(bot, request_id)
        return request if request.finished_at is not None else None

    await eventually(done, timeout_s=timeout_s)
    await bot.settle()
    return await load(bot, request_id)  # after the sender ran: its message ts are recorded


def status_message(bot: Bot, request: BackfillRequest) -> Any:
    assert request.status_message_ts
    return bot.slack.state.find_message(CHANNEL, request.status_message_ts)


def thread_text(bot: Bot, request: BackfillRequest) -> str:
    assert request.status_message_ts
    replies = bot.slack.state.thread(CHANNEL, request.status_message_ts)
    return "\n".join(json.dumps(m.blocks) + m.text for m in replies)


def planned_dates(request: BackfillRequest) -> dict[str, list[datetime]]:
    return {
        step.dag_id: [datetime.fromisoformat(i["start"]) for i in step.intervals]
        for step in request.steps
    }


def upstream_of(request: BackfillRequest) -> Mapping[str, list[str]]:
    return {step.dag_id: list(step.upstream) for step in request.steps}
