"""Fixtures for the end-to-end tests (helpers live in e2e_support)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from e2e_support import CONFIG, Bot, running_bot

from bot.config import BotConfig, parse_config
from standins.marquez.server import StandInServer


@pytest.fixture
def bot_config() -> BotConfig:
    return parse_config(CONFIG)


@pytest.fixture
async def bot(
    tmp_path: Path, food_delivery_marquez: StandInServer, bot_config: BotConfig
) -> AsyncIterator[Bot]:
    async with running_bot(
        f"sqlite:///{tmp_path / 'bot.db'}", food_delivery_marquez, bot_config
    ) as running:
        yield running
