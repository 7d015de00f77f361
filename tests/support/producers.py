"""Run events delivered the two ways real producers' events reach the bot: pushed to its
receiver (as OpenLineage's composite transport does, Marquez getting the same events) or read
by its poller from the Marquez stand-in; and a bot over an empty stand-in to deliver them to."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
from sqlalchemy import select

from bot.config import BotConfig
from bot.incidents.store.models import Incident
from standins.marquez.server import running_standin
from tests.support.e2e import Bot, running_bot

Events = list[dict[str, Any]]
Deliver = Callable[[Bot, Events], Any]


async def post(url: str, events: Events) -> None:
    async with aiohttp.ClientSession() as http:
        for event in events:
            async with http.post(f"{url}/api/v1/lineage", json=event) as reply:
                assert reply.status == 201, await reply.text()


async def via_receiver(bot: Bot, events: Events) -> None:
    await post(bot.marquez.url, events)  # Marquez accepts every real event, as the bot does
    await post(bot.url, events)


async def via_poller(bot: Bot, events: Events) -> None:
    await post(bot.marquez.url, events)
    await bot.services.poller.poll_once()


def delivery(name: str) -> Deliver:
    """`via_receiver` or `via_poller`, by the name a parametrized fixture gives."""
    return via_receiver if name == "receiver" else via_poller


@asynccontextmanager
async def bot_over_empty_marquez(
    tmp_path: Path, config: BotConfig, database: str | None = None
) -> AsyncIterator[Bot]:
    """The bot on a database (default: SQLite under `tmp_path`) and an empty Marquez."""
    database = database or f"sqlite:///{tmp_path / 'bot.db'}"
    async with (
        running_standin(seed=None) as marquez,
        running_bot(database, marquez, config) as running,
    ):
        yield running


async def settled(bot: Bot, channel: str) -> list[Any]:
    """Every event handled and every Slack call made: the channel's messages."""
    while await bot.services.incidents.process():
        pass
    await bot.settle()
    return bot.slack.state.messages(channel)


def shown(message: Any) -> str:
    """A message's text and blocks, as one string to look for words in."""
    return message.text + json.dumps(message.blocks, ensure_ascii=False)


async def incidents(bot: Bot) -> list[Incident]:
    async with bot.services.sessions() as session:
        return list(await session.scalars(select(Incident).order_by(Incident.opened_at)))
