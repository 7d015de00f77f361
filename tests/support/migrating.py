"""Migrations in real OS processes, for the tests that kill one mid-upgrade or race two.

Run as `python -m tests.support.migrating URL [BARRIER]`, the process imports what
`bot.core.db.upgrade` needs, prints "ready", waits for the file BARRIER to exist (when given),
calls `upgrade(URL)` (the code path of `backfill-bot db upgrade` and `serve`) and prints
"done SECONDS". The imports come first so that a test's kill lands in the upgrade itself, not in
Python's start-up; a `DatabaseError` is its one line on stderr and exit status 1.

Imported by a test, it starts those processes (`spawn`, `ready`, `finish`: a test can start the
next one while the last one migrates) and describes the schema they leave behind.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, inspect, pool, text

import bot.schema  # noqa: F401  (migrations/env.py imports every model: not part of the timing)
from bot.core.db import DatabaseError, sync_url, upgrade
from tests.support.paths import REPO

READY, DONE = "ready", "done"
BARRIER_TIMEOUT_S = 60.0


def spawn(url: str, barrier: Path | None = None) -> subprocess.Popen[str]:
    """A new process that will migrate `url` (once BARRIER exists, when given); `ready` waits
    for its imports."""
    command = [sys.executable, "-m", "tests.support.migrating", url]
    if barrier is not None:
        command.append(str(barrier))
    return subprocess.Popen(
        command,
        cwd=REPO,
        env={k: v for k, v in os.environ.items() if not k.startswith("DATABASE_")},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def ready(process: subprocess.Popen[str]) -> subprocess.Popen[str]:
    """`process` once it has printed "ready": what follows is its migration."""
    assert process.stdout is not None
    line = process.stdout.readline().strip()
    if line != READY:
        _, err = process.communicate(timeout=30)
        raise AssertionError(f"the migrating process did not start: {line!r} {err}")
    return process


def finish(process: subprocess.Popen[str], timeout: float = 60.0) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of `process`, once it has ended (`ready` read its first
    line)."""
    out, err = process.communicate(timeout=timeout)
    return process.returncode, out, err


def empty(url: str) -> None:
    """Make the database at `url` empty: a PostgreSQL database gets a new public schema; a
    SQLite file is removed."""
    target = sync_url(url)
    if target.startswith("sqlite"):
        database = Path(target.split(":///", 1)[1])
        for leftover in (database, database.with_name(f"{database.name}-journal")):
            leftover.unlink(missing_ok=True)
        return
    engine = create_engine(target, poolclass=pool.NullPool)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql("DROP SCHEMA public CASCADE")
            conn.exec_driver_sql("CREATE SCHEMA public")
    finally:
        engine.dispose()


def schema(url: str) -> dict[str, Any]:
    """What the migrations built at `url`: each table's columns (name, type, nullable), indexes,
    unique constraints and foreign keys, and the rows of alembic_version."""
    engine = create_engine(sync_url(url), poolclass=pool.NullPool)
    try:
        with engine.connect() as conn:
            inspector = inspect(conn)
            tables: dict[str, Any] = {}
            for table in sorted(inspector.get_table_names()):
                tables[table] = {
                    "columns": sorted(
                        (c["name"], str(c["type"]), c["nullable"])
                        for c in inspector.get_columns(table)
                    ),
                    "indexes": sorted(str(ix["name"]) for ix in inspector.get_indexes(table)),
                    "uniques": sorted(
                        str(uq["name"]) for uq in inspector.get_unique_constraints(table)
                    ),
                    "fks": sorted(str(fk["name"]) for fk in inspector.get_foreign_keys(table)),
                }
            versions = (
                sorted(conn.scalars(text("SELECT version_num FROM alembic_version")))
                if "alembic_version" in tables
                else []
            )
    finally:
        engine.dispose()
    return {"tables": tables, "versions": versions}


def main(argv: list[str]) -> None:
    url, barrier = argv[0], Path(argv[1]) if len(argv) > 1 else None
    print(READY, flush=True)
    if barrier is not None:
        deadline = time.monotonic() + BARRIER_TIMEOUT_S
        while not barrier.exists():
            if time.monotonic() > deadline:
                sys.exit(f"no barrier {barrier} after {BARRIER_TIMEOUT_S} s")
            time.sleep(0.001)
    began = time.monotonic()
    try:
        upgrade(url)
    except DatabaseError as exc:
        sys.exit(str(exc))
    print(f"{DONE} {time.monotonic() - began:.4f}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
