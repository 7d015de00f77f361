"""Alembic environment: migrate the database named by the Config, or by DATABASE_URL from the CLI.

`bot.core.db.upgrade(url)` passes the URL in the Config. Only the `alembic` command line (which
sets `cmd_opts`) falls back to the DATABASE_URL environment variable, so the app never migrates a
database other than the one it was given.
"""

from __future__ import annotations

import os
from logging.config import fileConfig
from typing import Any, Literal

from alembic import context
from alembic.autogenerate.api import AutogenContext
from sqlalchemy import create_engine, pool

from bot.core.db import ensure_sqlite_directory, reported, sync_url
from bot.core.tables import UTCDateTime
from bot.schema import metadata

config = context.config
target_metadata = metadata
run_from_cli = config.cmd_opts is not None

if run_from_cli and config.config_file_name is not None:
    fileConfig(config.config_file_name, disable_existing_loggers=False)


def render_item(kind: str, obj: Any, autogen_context: AutogenContext) -> str | Literal[False]:
    """Autogenerate renders our UTC type as the portable type it stores, keeping revisions
    independent of the models module."""
    if kind == "type" and isinstance(obj, UTCDateTime):
        return "sa.DateTime(timezone=True)"
    return False


def database_url() -> str:
    """The sync SQLAlchemy URL to migrate."""
    url = config.get_main_option("sqlalchemy.url")
    if not url and run_from_cli:
        url = os.environ.get("DATABASE_URL")
    if not url:
        raise RuntimeError(
            "no database to migrate: set DATABASE_URL (e.g. sqlite:///./var/backfill-bot.db) "
            "for the alembic CLI, or call bot.core.db.upgrade(url)"
        )
    return sync_url(url)


def run_migrations_offline() -> None:
    """Emit the SQL for the migrations without connecting (`alembic upgrade head --sql`)."""
    url = database_url()
    context.configure(
        url=url,
        target_metadata=target_metadata,
        literal_binds=True,
        dialect_opts={"paramstyle": "named"},
        render_as_batch=url.startswith("sqlite"),
        render_item=render_item,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    """Run the migrations on a connection of a short-lived engine."""
    url = database_url()
    ensure_sqlite_directory(url)
    engine = create_engine(url, poolclass=pool.NullPool)
    try:
        # A refused or failed connection is one line naming the database without its password
        # (also for the alembic CLI, which would print SQLAlchemy's text as it is).
        with reported(url, "connect to the database"):
            connection = engine.connect()
        with connection:
            context.configure(
                connection=connection,
                target_metadata=target_metadata,
                # SQLite cannot ALTER most things in place; batch mode copies the table instead.
                render_as_batch=connection.dialect.name == "sqlite",
                render_item=render_item,
            )
            with context.begin_transaction():
                context.run_migrations()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
