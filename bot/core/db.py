"""Database plumbing: DATABASE_URL normalisation, engines and sessions, Alembic up/downgrades."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

from alembic import command
from alembic.config import Config
from sqlalchemy import Connection, Engine, create_engine, event, pool
from sqlalchemy.engine import make_url
from sqlalchemy.engine.interfaces import DBAPIConnection
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)
from sqlalchemy.pool import ConnectionPoolEntry

from bot.core.after_commit import WAKERS
from bot.core.resources import resource_dir

MIGRATIONS_DIR = resource_dir("bot.migrations")  # the repository's migrations/, as installed

_SQLITE_SCHEMES = frozenset({"sqlite", "sqlite+aiosqlite"})
_POSTGRES_SCHEMES = frozenset({"postgres", "postgresql", "postgresql+psycopg"})
_SUPPORTED = (
    "sqlite:///PATH, sqlite+aiosqlite:///PATH, postgres://…, postgresql://… "
    "or postgresql+psycopg://…"
)
_SQLITE_BUSY_TIMEOUT_S = 15.0
# A SQLite migration waits this long for another process's whole upgrade (the write lock) before
# failing with "database is locked"; longer than the app's wait, as table copies take a while.
_MIGRATION_BUSY_TIMEOUT_S = 120.0
# The key of the PostgreSQL advisory lock every process migrating a database takes: "bfb-migr"
# in ASCII. Advisory locks belong to one database, so other databases on the server never wait.
MIGRATION_LOCK_KEY = 0x6266_622D_6D69_6772


class DatabaseError(RuntimeError):
    """The database could not be reached or migrated. The message is one line and names the
    database by `describe_url` only: never its user or password."""


def describe_url(url: str) -> str:
    """The database URL as it may be printed or logged: the scheme and host only.

    `postgresql://alice:pw@db.example.com:5432/bot?sslmode=require` →
    `postgresql://db.example.com:5432/…`; a SQLite URL keeps its file path (there is no secret in
    it): `sqlite:///./var/backfill-bot.db`. Never raises; a value that does not parse shows at
    most its scheme.
    """
    scheme, sep, rest = url.strip().partition("://")
    if not sep or not scheme or any(not (c.isalnum() or c in "+-.") for c in scheme):
        return "(not a URL)"
    if scheme.lower() in _SQLITE_SCHEMES:
        # A file path or :memory:; only the query (connection options) is left out.
        path = rest.split("?", 1)[0]
        return f"{scheme}://{path}" + ("?…" if "?" in rest else "")
    try:
        parsed = make_url(url.strip())
    except Exception:  # garbled (e.g. `user:password` without `@host`): the scheme only
        return f"{scheme}://…"
    host, port = parsed.host or "", parsed.port
    if ":" in host:
        host = f"[{host}]"  # IPv6
    return f"{scheme}://{host}{f':{port}' if port is not None else ''}/…"


def _secrets(url: str) -> set[str]:
    """The password of `url`, as given and as URL-encoded, to blank out of messages."""
    found: set[str] = set()
    authority = url.strip().partition("://")[2].split("/", 1)[0]
    if "@" in authority:
        userinfo = authority.rpartition("@")[0]
        if ":" in userinfo:
            found.add(userinfo.partition(":")[2])
    try:
        parsed = make_url(url.strip())
    except Exception:
        if "@" not in authority and ":" in authority:
            found.add(authority.rpartition(":")[2])  # `user:password` with `@host` left out
    else:
        for value in (parsed.password, parsed.query.get("password")):
            for item in (value,) if isinstance(value, str) else value or ():
                found.add(str(item))
    found.update({quote(s, safe="") for s in found} | {quote_plus(s) for s in found})
    return {s for s in found if s}


def redact(text: str, url: str) -> str:
    """`text` with the password of `url` (in any spelling the URL allows) replaced by ***."""
    for secret in sorted(_secrets(url), key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def describe_error(error: BaseException, url: str) -> str:
    """One line saying what went wrong with the database at `url`, without its password.

    For a driver error the driver's own words (SQLAlchemy adds a class prefix and a link)."""
    cause: BaseException = error
    if isinstance(error, DBAPIError) and error.orig is not None:
        cause = error.orig
    text = " ".join(str(cause).split()) or type(cause).__name__
    return redact(text, url)


@contextmanager
def reported(url: str, doing: str) -> Iterator[None]:
    """Turn a SQLAlchemy or OS error raised inside into a one-line `DatabaseError`:
    "cannot {doing} at {describe_url(url)}: {describe_error}"."""
    try:
        yield
    except DatabaseError:
        raise
    except (SQLAlchemyError, OSError) as exc:
        message = f"cannot {doing} at {describe_url(url)}: {describe_error(exc, url)}"
        # Keep the cause for --debug tracebacks unless its own text carries the password.
        leaks = any(secret in str(exc) for secret in _secrets(url))
        raise DatabaseError(message) from (None if leaks else exc)


def _split(url: str) -> tuple[str, str]:
    """('sqlite' | 'postgresql', the rest after '://'), or ValueError naming only the scheme."""
    scheme, sep, rest = url.partition("://")
    scheme = scheme.strip().lower()
    if sep and scheme in _SQLITE_SCHEMES:
        return "sqlite", rest
    if sep and scheme in _POSTGRES_SCHEMES:
        return "postgresql", rest
    # Only the scheme goes into the message: the rest may hold a password.
    shown = repr(scheme) if sep else "a value without '://'"
    raise ValueError(f"DATABASE_URL has unsupported scheme {shown}; use {_SUPPORTED}")


def async_url(url: str) -> str:
    """The SQLAlchemy async URL for a user-given DATABASE_URL.

    `sqlite:///path` → `sqlite+aiosqlite:///path`; `postgres://`, `postgresql://` and
    `postgresql+psycopg://` → `postgresql+psycopg://` (psycopg 3 is async too).
    Raises ValueError for any other scheme.
    """
    kind, rest = _split(url)
    return f"{'sqlite+aiosqlite' if kind == 'sqlite' else 'postgresql+psycopg'}://{rest}"


def sync_url(url: str) -> str:
    """The SQLAlchemy sync URL (for Alembic) for a user-given DATABASE_URL.

    `sqlite+aiosqlite:///path` → `sqlite:///path`; PostgreSQL URLs → `postgresql+psycopg://`.
    Raises ValueError for any other scheme.
    """
    kind, rest = _split(url)
    return f"{'sqlite' if kind == 'sqlite' else 'postgresql+psycopg'}://{rest}"


def ensure_sqlite_directory(url: str) -> None:
    """Create the folder of a file-backed SQLite database if it is missing; no-op otherwise."""
    kind, _ = _split(url)
    if kind != "sqlite":
        return
    database = make_url(sync_url(url)).database
    if not database or database == ":memory:" or database.startswith("file:"):
        return
    Path(database).parent.mkdir(parents=True, exist_ok=True)


def _alembic_config(url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    # Config values go through ConfigParser interpolation: a %-escaped password needs %%.
    config.set_main_option("sqlalchemy.url", sync_url(url).replace("%", "%%"))
    return config


def upgrade(url: str, revision: str = "head") -> None:
    """Migrate the database at `url` up to `revision` (blocking: from async code, run it in a
    thread). For SQLite, the database file's folder is created if missing (by migrations/env.py,
    so that the `alembic` CLI does the same). A database that cannot be reached or migrated
    raises `DatabaseError`, whose one-line message shows no password."""
    config = _alembic_config(url)
    with reported(url, "migrate the database"):
        command.upgrade(config, revision)


def migration_engine(url: str) -> Engine:
    """The sync engine Alembic migrates `url` with (migrations/env.py), one connection at a time.

    Its transactions are real on SQLite too, and hold the database's write lock from their
    first statement. Python's sqlite3 (before 3.16, in its default legacy transaction control)
    emits no BEGIN before DDL, so each CREATE or ALTER used to commit on its own: a process
    killed mid-revision left it half-applied, with alembic_version not advanced (issue 24).
    SQLAlchemy's SQLite dialect docs ("Transactions with SQLite and the sqlite3 driver",
    formerly pysqlite's "Serializable isolation / Savepoints / Transactional DDL") give the fix
    used here, the one for every Python the bot runs on (3.11 has no `autocommit` attribute):
    `isolation_level = None` on each DBAPI connection so sqlite3 never begins a transaction by
    itself, and a `begin` listener that emits BEGIN (sqlite3 still commits). SQLite's DDL is
    transactional, so a revision, batch-mode table copies included, then commits or rolls back
    with its alembic_version update. BEGIN IMMEDIATE takes the write lock at once: a second
    process migrating the same file waits (busy timeout) before it reads alembic_version, and
    then finds the first one's work committed. PostgreSQL needs none of this (its DDL is
    transactional and psycopg begins before any statement); its lock is
    `migration_lock_statement`."""
    target = sync_url(url)
    if not target.startswith("sqlite"):
        return create_engine(target, poolclass=pool.NullPool)
    engine = create_engine(
        target,
        poolclass=pool.NullPool,
        connect_args={"timeout": _MIGRATION_BUSY_TIMEOUT_S},
    )
    event.listen(engine, "connect", _sqlite_manual_transactions)
    event.listen(engine, "begin", _sqlite_begin_immediate)
    return engine


def _sqlite_manual_transactions(
    dbapi_connection: DBAPIConnection, connection_record: ConnectionPoolEntry
) -> None:
    # sqlite3 stops beginning transactions (and skipping DDL); SQLAlchemy's BEGIN takes over.
    dbapi_connection.isolation_level = None


def _sqlite_begin_immediate(connection: Connection) -> None:
    # IMMEDIATE: the write lock now, not at the first write, so migrations queue up here.
    connection.exec_driver_sql("BEGIN IMMEDIATE")


def migration_lock_statement(dialect: str) -> str | None:
    """The statement that, first in a migration's transaction, makes every other migration of
    the same database wait until that transaction ends, or None when the transaction's BEGIN
    already does (SQLite: see `migration_engine`).

    On PostgreSQL, a transaction-level advisory lock: the whole upgrade is one transaction
    (migrations/env.py), so the lock is held until it commits or rolls back, also when the
    process is killed and the server ends its session. Replicas starting together thus migrate
    one after the other: the second reads alembic_version after the first committed, finds the
    database at head and has nothing to do, where both used to create alembic_version."""
    if dialect == "postgresql":
        return f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK_KEY})"
    return None


def downgrade(url: str, revision: str = "base") -> None:
    """Migrate the database at `url` down to `revision` (blocking, like `upgrade`)."""
    config = _alembic_config(url)
    with reported(url, "migrate the database"):
        command.downgrade(config, revision)


def _json_dumps(value: Any) -> str:
    # Keep DAG names readable in the database; the round trip is the same either way.
    return json.dumps(value, ensure_ascii=False)


def _enable_sqlite_foreign_keys(
    dbapi_connection: DBAPIConnection, connection_record: ConnectionPoolEntry
) -> None:
    # SQLite ignores ON DELETE CASCADE / SET NULL unless each connection turns this on.
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA foreign_keys=ON")
    finally:
        cursor.close()


def make_engine(url: str, *, echo: bool = False) -> AsyncEngine:
    """An async engine for a user-given DATABASE_URL (see `async_url`).

    SQLite connections enforce foreign keys and wait up to 15 s for a competing writer;
    PostgreSQL connections are pre-pinged and recycled so a restarted server is survived.
    The caller disposes the engine (`await engine.dispose()`).
    """
    target = async_url(url)
    if target.startswith("sqlite"):
        engine = create_async_engine(
            target,
            echo=echo,
            json_serializer=_json_dumps,
            connect_args={"timeout": _SQLITE_BUSY_TIMEOUT_S},
        )
        event.listen(engine.sync_engine, "connect", _enable_sqlite_foreign_keys)
        return engine
    return create_async_engine(
        target,
        echo=echo,
        json_serializer=_json_dumps,
        pool_size=5,
        max_overflow=5,
        pool_pre_ping=True,
        pool_recycle=1800,
    )


def session_factory(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    """Sessions on `engine` whose objects stay readable after commit (expire_on_commit=False),
    with the registry of what to wake after a commit (`bot.core.after_commit.wake_on_commit`)."""
    return async_sessionmaker(engine, expire_on_commit=False, info={WAKERS: {}})
