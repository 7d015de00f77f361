"""DATABASE_URL's user and password never reach the terminal: `backfill-bot db upgrade` and the
settings error as real processes, and the helper that shows a database URL."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from dataclasses import dataclass

import pytest
from sqlalchemy.engine import make_url

from bot.core.db import describe_url, redact

PASSWORD = "Hunter2-s3cret"


@dataclass
class Result:
    code: int
    out: str
    err: str


async def backfill_bot(*args: str, database_url: str) -> Result:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("MARQUEZ_", "BOT_", "DATABASE_", "SLACK_", "AIRFLOW_", "SPARK_"))
    }
    env["DATABASE_URL"] = database_url
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", *args,
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode is not None
    return Result(process.returncode, out.decode(), err.decode())


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def error_line(result: Result) -> str:
    """The one line a failing command prints; nothing of the password anywhere."""
    assert PASSWORD not in result.out + result.err
    assert "alice" not in result.out + result.err
    assert result.out == ""
    lines = result.err.strip().splitlines()
    assert len(lines) == 1, result.err
    assert lines[0].startswith("backfill-bot: error: "), result.err
    return lines[0]


async def test_db_upgrade_against_an_unreachable_server_names_host_not_password() -> None:
    port = closed_port()
    result = await backfill_bot(
        "db", "upgrade", database_url=f"postgresql://alice:{PASSWORD}@127.0.0.1:{port}/bot"
    )
    assert result.code == 1
    line = error_line(result)
    assert f"cannot connect to the database at postgresql+psycopg://127.0.0.1:{port}/…" in line
    assert "Connection refused" in line
    assert "unexpected" not in line


async def test_db_upgrade_with_debug_shows_no_password_either() -> None:
    port = closed_port()
    result = await backfill_bot(
        "--debug", "db", "upgrade",
        database_url=f"postgresql://alice:{PASSWORD}@127.0.0.1:{port}/bot?sslmode=disable",
    )  # fmt: skip
    assert result.code == 1
    assert PASSWORD not in result.out + result.err
    assert f"127.0.0.1:{port}" in result.err


@pytest.mark.parametrize(
    ("database_url", "shown"),
    [
        (f"mysql://alice:{PASSWORD}@db.example.com:3306/bot", "'mysql://db.example.com:3306/…'"),
        (f"postgresql://alice:{PASSWORD}@db.example.com:port/bot", "'postgresql://…'"),
        (f"postgresql://alice:{PASSWORD}", "'postgresql://…'"),  # `@host` forgotten
    ],
)
async def test_an_invalid_database_url_is_a_settings_error_without_the_password(
    database_url: str, shown: str
) -> None:
    result = await backfill_bot("db", "upgrade", database_url=database_url)
    assert result.code == 4
    line = error_line(result)
    assert line.startswith(f"backfill-bot: error: DATABASE_URL: {shown} is not ")


async def test_a_successful_upgrade_names_the_database_without_credentials(
    fresh_postgres_db: str,
) -> None:
    url = make_url(fresh_postgres_db).set(drivername="postgresql")
    if url.password is None:  # the test server trusts loopback: any password is accepted
        url = url.set(username=url.username or "postgres", password=PASSWORD)
    secret = str(url.password)
    result = await backfill_bot(
        "db", "upgrade", database_url=url.render_as_string(hide_password=False)
    )
    assert result.code == 0, result.err
    assert secret not in result.out + result.err
    where = f"{url.host}:{url.port}" if url.port else url.host
    assert result.out.strip() == f"Database at postgresql://{where}/… is at the latest migration."


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql+asyncpg://u:pw@db.example.com:5432/bot?sslmode=require",
         "postgresql+asyncpg://db.example.com:5432/…"),
        ("postgres://u@db.example.com/bot", "postgres://db.example.com/…"),
        ("postgresql://u:p%40ss@[::1]:5433/bot", "postgresql://[::1]:5433/…"),
        ("postgresql://u:pw@/bot?host=/var/run/postgresql&password=pw", "postgresql:///…"),
        ("sqlite:///./var/backfill-bot.db", "sqlite:///./var/backfill-bot.db"),
        ("sqlite+aiosqlite:///:memory:", "sqlite+aiosqlite:///:memory:"),
        ("just-a-path.db", "(not a URL)"),
    ],
)  # fmt: skip
def test_describe_url_shows_scheme_and_host_only(url: str, shown: str) -> None:
    assert describe_url(url) == shown


def test_redact_blanks_the_password_in_every_spelling() -> None:
    url = "postgresql://u:p%40ss@h/bot?password=q-word"
    text = "failed for p@ss, p%40ss and q-word"
    assert redact(text, url) == "failed for ***, *** and ***"
    assert redact("nothing to hide", "postgresql://u@h/bot") == "nothing to hide"
