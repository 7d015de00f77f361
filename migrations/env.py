"""Alembic environment: migrate the database named by the Config, or by DATABASE_URL from the CLI.

`bot.core.db.upgrade(url)` passes the URL in the Config. Only the `alembic` command line (which
sets `cmd_opts`) falls back to the DATABASE_URL environment variable, so the app never migrates a
database other than the one it was given.

A run is one transaction on SQLite as on PostgreSQL, holding a lock on the database from its
first statement (issue 24): a process killed at any moment leaves the database as it was before
the run, and processes migrating together queue up, the later ones finding the database at head.
"""

from __future__ import annotations

import os
from logging.config import fileConfig
from typing import Any, Literal

from alembic import context
from alembic.autogenerate.api import AutogenContext

from bot.core.db import (
    ensure_sqlite_directory,
    migration_engine,
    migration_lock_statement,
    reported,
    sync_url,
)
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


def run_in_one_locked_transaction() -> None:
    """Run the migrations in one transaction that first takes the database's migration lock.

    Alembic's `configure(transactional_ddl=…)` "Force[s] the usage of 'transactional' DDL on or
    off; this otherwise defaults to whether or not the dialect in use supports it", and with
    `transaction_per_migration` off `begin_transaction()` is then one real transaction around
    "the full series of migrations to run" (EnvironmentContext.configure's docs). Its SQLite
    impl says no transactional DDL, because of sqlite3's legacy autocommit, and so used to run
    each revision's statements as they came; `bot.core.db.migration_engine` takes that autocommit
    away, so `transactional_ddl=True` holds for SQLite as it does for PostgreSQL. One transaction
    for the run rather than one per revision keeps the lock from before alembic_version is read
    until the last revision commits; a failed revision rolls back the run (nothing half-done)."""
    with context.begin_transaction():
        lock = migration_lock_statement(context.get_context().dialect.name)
        if lock is not None:
            context.execute(lock)
        context.run_migrations()


def run_migrations_offline() -> None:
    """Emit the SQL for the migrations without connecting (`alembic upgrade head --sql`): one
    BEGIN … COMMIT around them, after the lock, as the app runs them."""
    url = database_url()
    context.configure(
        url=url,
        target_metadata=target_metadata,
        literal_binds=True,
        dialect_opts={"paramstyle": "named"},
        render_as_batch=url.startswith("sqlite"),
        render_item=render_item,
        transactional_ddl=True,
        transaction_per_migration=False,
    )
    run_in_one_locked_transaction()


def run_migrations_online() -> None:
    """Run the migrations on a connection of a short-lived engine."""
    url = database_url()
    ensure_sqlite_directory(url)
    engine = migration_engine(url)
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
                transactional_ddl=True,
                transaction_per_migration=False,
            )
            run_in_one_locked_transaction()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
