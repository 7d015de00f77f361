"""`bot.core.schema_state`, which `GET /readyz` and `backfill-bot doctor` both ask whether a
database is at the head of the migrations the bot ships, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from sqlalchemy import create_engine

from bot.core.db import downgrade, make_engine, sync_url, upgrade
from bot.core.schema_state import head_revisions, migrations_location, read_schema_state, schema_of

VERSIONS = Path(__file__).resolve().parents[2] / "migrations" / "versions"


def test_the_head_is_the_newest_shipped_migration() -> None:
    # Read from the repository's files, not from Alembic over migrations_location(): the
    # question is whether what the bot calls its head is the newest migration written.
    newest = max(VERSIONS.glob("[0-9]*.py"))
    found = re.search(r'^revision(?:: *str)? *= *"([^"]+)"', newest.read_text(), re.MULTILINE)
    assert found, newest
    assert head_revisions() == (found[1],)
    assert (migrations_location() / "env.py").is_file()


async def test_a_database_is_current_only_at_the_head(database_url: str) -> None:
    [head] = head_revisions()
    engine = make_engine(database_url)
    try:
        empty = await read_schema_state(engine)
        await asyncio.to_thread(upgrade, database_url)
        current = await read_schema_state(engine)
        await asyncio.to_thread(downgrade, database_url, "-1")
        behind = await read_schema_state(engine)
    finally:
        await engine.dispose()

    assert (empty.current, empty.is_current) == ((), False)
    ends = f"the bot's migrations end at {head}"
    assert empty.describe() == f"the database is not migrated at all; {ends}"
    assert (current.current, current.is_current) == ((head,), True)
    assert behind.is_current is False
    [previous] = behind.current
    assert previous != head
    assert behind.describe() == f"the database is at revision {previous}; {ends}"


def test_a_sync_connection_reads_the_same(database_url: str) -> None:
    upgrade(database_url)
    engine = create_engine(sync_url(database_url))
    try:
        with engine.connect() as connection:
            state = schema_of(connection)
    finally:
        engine.dispose()
    assert state.is_current
    assert state.current == head_revisions()
