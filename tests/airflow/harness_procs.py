"""Processes, databases and homes of the test Airflows (tests/airflow/harness.py), whatever the
version: each process in its own process group, stopped by group; each Airflow's PostgreSQL
database a copy of a migrated template; each home recording its owner (the pytest process), so
a later start cleans up after a run that was killed before its finalizers ran.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import psycopg

REPO_ROOT = Path(__file__).resolve().parents[2]
VAR_DIR = REPO_ROOT / "var"
HOMES_DIR = VAR_DIR / "airflow-test"
POSTGRES_ADMIN_URL = os.environ.get(
    "TEST_POSTGRES_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
STOP_TIMEOUT_S = 15.0


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


# --- processes ----------------------------------------------------------------------------


def _proc_start_ticks(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def pids_with_home(home: Path) -> list[int]:
    """Processes whose environment has AIRFLOW_HOME=<home> (the home paths are unique)."""
    marker = f"AIRFLOW_HOME={home}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if marker in environ.split(b"\0"):
            found.append(int(entry.name))
    return found


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _kill_home_processes(home: Path, pgids: Iterable[int], timeout_s: float) -> None:
    """SIGTERM the recorded groups, wait, then SIGKILL whatever still runs with this home."""
    pids = pids_with_home(home)
    groups = {_pgid(pid) for pid in pids}
    for pgid in pgids:
        if pgid in groups:  # the group still holds one of our processes, not a reused id
            _signal_group(pgid, signal.SIGTERM)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while pids_with_home(home) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in pids_with_home(home):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


try:
    _PRCTL: Any = ctypes.CDLL("libc.so.6", use_errno=True).prctl
except (OSError, AttributeError):  # not glibc Linux: rely on the finalizers and stale cleanup
    _PRCTL = None
_PR_SET_PDEATHSIG = 1


def _set_parent_death_signal() -> None:
    """In the child before exec: get SIGTERM when the test process dies (Linux only)."""
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, signal.SIGTERM)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# --- databases ----------------------------------------------------------------------------


def _admin_connect() -> psycopg.Connection[Any]:
    return psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True, connect_timeout=5)


def template_ready(template: str, mark: str) -> bool:
    """Whether `template` exists and carries `mark`: made by a start that finished its setup."""
    with _admin_connect() as conn:
        row = conn.execute(
            "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s",
            (template,),
        ).fetchone()
    return row is not None and row[0] == mark


def create_database(name: str, *, template: str | None = None) -> str:
    """Create `name` (a copy of `template` if given); its SQLAlchemy URL for Airflow."""
    with _admin_connect() as conn:
        suffix = f' TEMPLATE "{template}"' if template else ""
        conn.execute(f'CREATE DATABASE "{name}"{suffix}')
    parts = urllib.parse.urlsplit(POSTGRES_ADMIN_URL)
    # apache-airflow[postgres] brings psycopg2 (psycopg2-binary) as its sync driver.
    return urllib.parse.urlunsplit(("postgresql+psycopg2", parts.netloc, f"/{name}", "", ""))


def save_template(prepared: str, template: str, mark: str) -> None:
    """Keep a copy of a freshly set-up database, so later starts skip the setup commands."""
    with file_lock(VAR_DIR / "airflow-template-db.lock"), _admin_connect() as conn:
        if template_ready(template, mark):
            return
        try:
            conn.execute(f'DROP DATABASE IF EXISTS "{template}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{template}" TEMPLATE "{prepared}"')
            conn.execute(f"COMMENT ON DATABASE \"{template}\" IS '{mark}'")
        except psycopg.Error as exc:  # only an optimisation: the next start sets up again
            print(f"airflow harness: could not save {template}: {exc}", file=sys.stderr)


def _drop_database(name: str) -> None:
    with contextlib.suppress(psycopg.Error), _admin_connect() as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# --- homes and stale runs -------------------------------------------------------------------


def _write_record(home: Path, record: dict[str, Any]) -> None:
    tmp = home / "harness.json.tmp"
    tmp.write_text(json.dumps(record, indent=2))
    tmp.replace(home / "harness.json")


def _owner_alive(record: Mapping[str, Any]) -> bool:
    owner = record.get("owner_pid")
    return isinstance(owner, int) and _proc_start_ticks(owner) == record.get("owner_start")


def cleanup_stale_homes() -> list[str]:
    """Stop processes and drop databases of homes whose pytest process is gone; their names."""
    cleaned: list[str] = []
    if not HOMES_DIR.exists():
        return cleaned
    for home in sorted(HOMES_DIR.iterdir()):
        if not home.is_dir():
            continue
        try:
            record = json.loads((home / "harness.json").read_text())
        except (OSError, ValueError):
            record = {}
        if record and _owner_alive(record):
            continue
        if not record and time.time() - home.stat().st_mtime < 300:
            continue  # probably being set up right now by another process
        _kill_home_processes(home, record.get("pgids", []), timeout_s=5)
        if isinstance(record.get("database"), str):
            _drop_database(record["database"])
        shutil.rmtree(home, ignore_errors=True)
        cleaned.append(home.name)
    return cleaned


class Runner:
    """Owns one Airflow's processes, database and home; `stop()` is idempotent."""

    def __init__(self, home: Path, database: str, executable: Path) -> None:
        self.home = home
        self.database = database
        self.executable = executable
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.stopped = False
        self.record: dict[str, Any] = {
            "owner_pid": os.getpid(),
            "owner_start": _proc_start_ticks(os.getpid()),
            "database": database,
            "pgids": [],
        }
        _write_record(home, self.record)

    def spawn(
        self, name: str, args: Sequence[str], env: Mapping[str, str]
    ) -> subprocess.Popen[bytes]:
        log = (self.home / "logs" / f"{name}.log").open("ab")
        try:
            proc = subprocess.Popen(
                [str(self.executable), *args],
                env=dict(env),
                cwd=self.home,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_set_parent_death_signal,
            )
        finally:
            log.close()
        self.procs[name] = proc
        self.record["pgids"].append(proc.pid)
        _write_record(self.home, self.record)
        return proc

    def run_once(
        self, name: str, args: Sequence[str], env: Mapping[str, str], timeout_s: float
    ) -> int | None:
        """Run a command to its end (e.g. `db migrate`); its exit code, None if it timed out."""
        proc = self.spawn(name, args, env)
        try:
            code: int | None = proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            code = None
            _signal_group(proc.pid, signal.SIGKILL)
        self.procs.pop(name)
        return code

    def stop(self, *, keep_home: bool = False) -> None:
        if self.stopped:
            return
        self.stopped = True
        for proc in self.procs.values():
            if proc.poll() is None:
                _signal_group(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for proc in self.procs.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(max(0.0, deadline - time.monotonic()))
            if proc.poll() is None:
                _signal_group(proc.pid, signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(5)
            else:
                _signal_group(proc.pid, signal.SIGKILL)  # stragglers left in the group
        _kill_home_processes(self.home, (), timeout_s=2)
        _drop_database(self.database)
        if not keep_home:
            shutil.rmtree(self.home, ignore_errors=True)
        else:
            self.record["owner_pid"] = None
            _write_record(self.home, self.record)
