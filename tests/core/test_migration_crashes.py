"""Migrations as users run them (issue 24), in real OS processes on SQLite and PostgreSQL: a
process killed at any moment of the first migration leaves a database the next start migrates,
and two replicas starting together on a fresh database both start, migrating it once.

Each process runs `bot.core.db.upgrade` (what `serve` and `backfill-bot db upgrade` run) from
tests/support/migrating.py, which does its imports before the test releases it, so the test's
timing is the migration's. The next trial's processes are started while the current one runs:
Python's start-up, not the migrations, is what costs here. So the start after a kill, which
nothing interrupts, calls the same `upgrade` in the test's own process (`restart`): a process of
its own would cost a Python start-up per trial and test nothing more.

Where in the upgrade each kill lands (a share of how long an upgrade takes) comes from
`random.Random(seed)`; the seed is printed and in the kill test's failure messages, and
MIGRATION_CRASH_SEED=<seed> repeats a run's shares.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from alembic.script import ScriptDirectory

from bot.core.db import MIGRATIONS_DIR, upgrade
from tests.support.migrating import empty, finish, ready, schema, spawn

TRIALS = 20
SEED = int(os.environ.get("MIGRATION_CRASH_SEED") or random.SystemRandom().randrange(2**32))
Spawn = Callable[..., subprocess.Popen[str]]


@pytest.fixture
def spawned() -> Iterator[Spawn]:
    """`spawn`, with whatever a failed test leaves running killed and reaped at the end."""
    processes: list[subprocess.Popen[str]] = []

    def launch(url: str, barrier: Path | None = None) -> subprocess.Popen[str]:
        processes.append(spawn(url, barrier))
        return processes[-1]

    yield launch
    for process in processes:
        if process.poll() is None:
            process.kill()
        process.communicate()


def head() -> str | None:
    """The newest revision, read when asked (a revision added while tests run counts)."""
    return ScriptDirectory(str(MIGRATIONS_DIR)).get_current_head()


def trial_url(database_url: str, tmp_path: Path, name: str) -> str:
    """The database of one trial: a SQLite file of its own, or the test's PostgreSQL database
    (`empty` before each trial; a new database per trial would cost more than the trial)."""
    if database_url.startswith("sqlite"):
        return f"sqlite:///{tmp_path / f'{name}.db'}"
    return database_url


def clean_upgrade(url: str, launch: Spawn) -> tuple[dict[str, Any], float]:
    """The schema an uninterrupted upgrade of the empty database at `url` builds, and how long
    the upgrade took in its process (imports left out)."""
    empty(url)
    status, out, err = finish(ready(launch(url)))
    assert status == 0, err
    built = schema(url)
    assert built["versions"] == [head()]
    return built, float(out.split()[-1])


def restart(url: str) -> tuple[str | None, float]:
    """The next start after a kill: `upgrade(url)`, as `serve` and `db upgrade` call it; what
    went wrong (None: nothing) and how long the upgrade took."""
    began = time.monotonic()
    try:
        upgrade(url)
    except Exception as exc:  # a DatabaseError is the command's one line; anything else a bug
        return f"{type(exc).__name__}: {exc}", 0.0
    return None, time.monotonic() - began


def differences(expected: dict[str, Any], found: dict[str, Any]) -> str:
    """What differs between `found` and `expected`, in one line."""
    if found["versions"] != expected["versions"]:
        return f"alembic_version holds {found['versions']}, not {expected['versions']}"
    tables = sorted(set(expected["tables"]) | set(found["tables"]))
    changed = [t for t in tables if expected["tables"].get(t) != found["tables"].get(t)]
    return f"tables that differ from a clean upgrade: {changed}"


def test_a_kill_at_any_moment_of_the_first_migration_leaves_a_database_the_next_start_migrates(
    database_url: str, tmp_path: Path, spawned: Spawn
) -> None:
    rng = random.Random(SEED)
    print(f"seed {SEED}: MIGRATION_CRASH_SEED={SEED} repeats where in the upgrade the kills land")
    clean, span = clean_upgrade(trial_url(database_url, tmp_path, "clean"), spawned)

    def victim(trial: int) -> tuple[str, Path, subprocess.Popen[str]]:
        url, barrier = trial_url(database_url, tmp_path, f"trial-{trial}"), tmp_path / f"go-{trial}"
        return url, barrier, spawned(url, barrier)

    failures: list[str] = []
    killed = 0
    upcoming = victim(0)
    for trial in range(TRIALS):
        url, barrier, process = upcoming
        ready(process)
        empty(url)
        # Spread over the whole upgrade: the earliest kills find no table yet, the latest the
        # last revision under way. Nothing else of this test runs meanwhile.
        share = rng.random()
        when = f"kill at {share:.0%} of the upgrade ({share * span:.3f} s)"
        barrier.touch()
        time.sleep(share * span)
        process.send_signal(signal.SIGKILL)
        status, _, _ = finish(process)
        killed += status == -signal.SIGKILL

        if trial + 1 < TRIALS:
            upcoming = victim(trial + 1)
        error, took = restart(url)  # the next start, migrating what the kill left
        if error is not None:
            failures.append(f"{when}: {error}")
        elif (found := schema(url)) != clean:
            failures.append(f"{when}: {differences(clean, found)}")
        else:
            # The restart migrated the database from empty: how long an upgrade takes now, as
            # other processes load the machine more or less than during the clean one.
            span = took
    print(f"{killed}/{TRIALS} kills landed before the upgrade ended")

    assert not failures, (
        f"seed {SEED}: {len(failures)}/{TRIALS} restarts after a kill failed:\n"
        + "\n".join(failures)
    )
    # Had most kills come after the upgrade ended, the test would have proven little.
    assert killed >= TRIALS // 2, f"seed {SEED}: only {killed}/{TRIALS} kills mid-upgrade"


def test_replicas_starting_together_on_a_fresh_database_both_start_and_migrate_it_once(
    database_url: str, tmp_path: Path, spawned: Spawn
) -> None:
    clean, _ = clean_upgrade(trial_url(database_url, tmp_path, "clean"), spawned)

    def replicas(trial: int) -> tuple[str, Path, list[subprocess.Popen[str]]]:
        url, barrier = trial_url(database_url, tmp_path, f"trial-{trial}"), tmp_path / f"go-{trial}"
        return url, barrier, [spawned(url, barrier) for _ in range(2)]

    failures: list[str] = []
    upcoming = replicas(0)
    for trial in range(TRIALS):
        url, barrier, pair = upcoming
        for replica in pair:
            ready(replica)
        if trial + 1 < TRIALS:
            upcoming = replicas(trial + 1)
        empty(url)
        # Both have done their imports and poll for the barrier: released together, they race.
        barrier.touch()
        results = [finish(replica) for replica in pair]

        errors = [err.strip() for status, _, err in results if status != 0]
        if errors:
            failures.append(f"trial {trial}: {len(errors)} of 2 replicas failed: {errors}")
        elif (found := schema(url)) != clean:
            failures.append(f"trial {trial}: {differences(clean, found)}")

    assert not failures, (
        f"{len(failures)}/{TRIALS} races of two replicas went wrong:\n" + "\n".join(failures)
    )
