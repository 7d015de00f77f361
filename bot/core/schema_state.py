"""Whether a database's schema is the one this bot's code expects: the Alembic revision the
database records against the head of the migrations shipped with the bot. `GET /readyz` and
`backfill-bot doctor` both ask it, so they can never disagree about "migrations current".
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

__all__ = ["SchemaState", "database_revisions", "head_revisions", "read_schema_state", "schema_of"]


@dataclass(frozen=True)
class SchemaState:
    """The revisions the database is at (none before the first migration) and the head(s)."""

    current: tuple[str, ...]
    head: tuple[str, ...]

    @property
    def is_current(self) -> bool:
        return set(self.current) == set(self.head)

    def describe(self) -> str:
        """One line for an operator, e.g. "the database is at revision 0003_execution; the
        bot's migrations end at 0004_watch"."""
        head = ", ".join(self.head) or "nothing"
        if self.is_current:
            return f"the database is at the bot's newest revision ({head})"
        at = f"at revision {', '.join(self.current)}" if self.current else "not migrated at all"
        return f"the database is {at}; the bot's migrations end at {head}"


def migrations_location() -> Path:
    """Where the migrations are, as `bot.core.db` finds them for `upgrade` (asked at call time:
    db.py owns that decision, a value or a function)."""
    from bot.core import db

    location = db.MIGRATIONS_DIR
    return Path(location() if callable(location) else location)


def head_revisions() -> tuple[str, ...]:
    """The head revision(s) of the shipped migrations (one, unless a branch was left open)."""
    return _heads(str(migrations_location()))


@cache
def _heads(location: str) -> tuple[str, ...]:
    # Alembic loads every revision script to find the heads; they do not change while the
    # process runs, and a readiness probe asks every few seconds.
    return tuple(sorted(ScriptDirectory(location).get_heads()))


def database_revisions(connection: Connection) -> tuple[str, ...]:
    """The revision(s) a database records in `alembic_version` (empty before any migration)."""
    context = MigrationContext.configure(connection)
    return tuple(sorted(context.get_current_heads()))


def schema_of(connection: Connection) -> SchemaState:
    """The schema state over a (sync) connection, e.g. for a command that is not async."""
    return SchemaState(current=database_revisions(connection), head=head_revisions())


async def read_schema_state(engine: AsyncEngine) -> SchemaState:
    """The schema state of the database behind `engine` (raises what connecting raises)."""
    async with engine.connect() as connection:
        current = await connection.run_sync(database_revisions)
    return SchemaState(current=current, head=head_revisions())
