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
from sqlalchemy import event
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
