"""Shared fixtures: the Marquez stand-in over real HTTP, and databases (SQLite and PostgreSQL).

PostgreSQL runs on 127.0.0.1:5432 on our machines and in CI. Tests that need it use the
`database_url` fixture, parametrized over both backends; without a reachable server the
PostgreSQL cases are skipped locally but fail under CI=true, so CI can never go green by
silently skipping them.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from bot.config import BotConfig, parse_config
from standins.marquez.server import StandInServer, running_standin
from tests.support.e2e import CONFIG, Bot, running_bot

REPO_ROOT = Path(__file__).resolve().parent.parent
POSTGRES_ADMIN_URL = os.environ.get(
    "TEST_POSTGRES_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)


@pytest.fixture
async def marquez_standin() -> AsyncIterator[StandInServer]:
    """An empty Marquez stand-in listening on an ephemeral port."""
    async with running_standin() as server:
        yield server


@pytest.fixture
async def food_delivery_marquez() -> AsyncIterator[StandInServer]:
    """The stand-in seeded with the food_delivery sample (real HTTP, ephemeral port)."""
    async with running_standin(seed="food_delivery") as server:
        yield server


def _postgres_available() -> str | None:
    try:
        with psycopg.connect(POSTGRES_ADMIN_URL, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        return str(exc)
    return None


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """The admin URL of a reachable PostgreSQL server (skips locally, fails in CI)."""
    problem = _postgres_available()
    if problem is not None:
        if os.environ.get("CI"):
            pytest.fail(f"PostgreSQL at {POSTGRES_ADMIN_URL} is required in CI: {problem}")
        pytest.skip(f"PostgreSQL not reachable at {POSTGRES_ADMIN_URL}: {problem}")
    return POSTGRES_ADMIN_URL


@pytest.fixture
def fresh_postgres_db(postgres_server: str) -> Iterator[str]:
    """A new, empty PostgreSQL database for one test, dropped afterwards (a SQLAlchemy URL)."""
    name = f"bfb_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base = postgres_server.rsplit("/", 1)[0]
    try:
        yield f"{base}/{name}".replace("postgresql://", "postgresql+psycopg://", 1)
    finally:
        with psycopg.connect(postgres_server, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A SQLAlchemy URL of an empty database, once on SQLite and once on PostgreSQL."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'bot.db'}"
    url: Any = request.getfixturevalue("fresh_postgres_db")
    return str(url)


@pytest.fixture
def bot_config() -> BotConfig:
    """The end-to-end tests' BOT_CONFIG (tests/support/e2e.py)."""
    return parse_config(CONFIG)


@pytest.fixture
async def bot(
    tmp_path: Path, food_delivery_marquez: StandInServer, bot_config: BotConfig
) -> AsyncIterator[Bot]:
    """The whole bot on loopback against the seeded Marquez stand-in and the Slack stand-in."""
    async with running_bot(
        f"sqlite:///{tmp_path / 'bot.db'}", food_delivery_marquez, bot_config
    ) as running:
        yield running
