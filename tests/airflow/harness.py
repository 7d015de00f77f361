"""A real Apache Airflow 3.3.2 for tests: installed once, started fresh per test session.

`start_airflow()` installs `apache-airflow[postgres]` and `apache-airflow-providers-openlineage`
into `var/airflow-venv` (once, under a file lock, finished by a stamp file naming both pins; a
venv installed for other pins is brought to these in place) and makes a new PostgreSQL
database: a copy of a migrated template database kept on the server
(`airflow_test_template_<version>`, made by the first start with `airflow db migrate`). It then
starts `api-server`, `scheduler` and `dag-processor` as separate processes bound to 127.0.0.1 on
a free port, each in its own process group, with logs under `<home>/logs/`. On exit it stops
them by process group (SIGTERM, then SIGKILL), kills any task process left with the same
AIRFLOW_HOME, drops the database and removes the home.

Homes live under `var/airflow-test/`; each records its owner (the pytest process) and its
processes in `harness.json`, so a later start cleans up after a run that was killed before its
finalizers ran; the processes also get SIGTERM from the kernel when the test process dies.
Scheduled runs are off (`[scheduler] use_job_schedule = False`): only runs that a test triggers
or backfills run.

OpenLineage is off (`[openlineage] disabled = True`) unless `start_airflow(openlineage_url=...)`
names a receiver: then every DAG run and task reports to `<url>/api/v1/lineage` over HTTP (task
events are sent by the task's worker process, DAG run events by the scheduler).
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import ctypes
import fcntl
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

AIRFLOW_VERSION = "3.3.2"
AIRFLOW_REQUIREMENT = f"apache-airflow[postgres]=={AIRFLOW_VERSION}"
# The newest provider that resolves with Airflow 3.3.2 (it brings openlineage-python 1.54.0).
OPENLINEAGE_PROVIDER_VERSION = "2.20.3"
OPENLINEAGE_REQUIREMENT = f"apache-airflow-providers-openlineage=={OPENLINEAGE_PROVIDER_VERSION}"
REQUIREMENTS = (AIRFLOW_REQUIREMENT, OPENLINEAGE_REQUIREMENT)
REPO_ROOT = Path(__file__).resolve().parents[2]
VAR_DIR = REPO_ROOT / "var"
VENV_DIR = VAR_DIR / "airflow-venv"
HOMES_DIR = VAR_DIR / "airflow-test"
STAMP = VENV_DIR / (
    ".installed-" + "+".join(r.replace("[", "-").replace("]", "") for r in REQUIREMENTS)
)
OPENLINEAGE_NAMESPACE = "airflow-test"
"""The job namespace of every DAG and task when OpenLineage is on (`[openlineage] namespace`)."""
DEFAULT_DAGS_FOLDERS = (
    REPO_ROOT / "pipeline" / "food_delivery" / "dags",
    REPO_ROOT / "tests" / "airflow" / "dags",
)
POSTGRES_ADMIN_URL = os.environ.get(
    "TEST_POSTGRES_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
# A migrated, never-started metadata DB kept on the server: each start copies it (CREATE DATABASE
# ... TEMPLATE, well under a second) instead of running `airflow db migrate` (about 4 s).
TEMPLATE_DB = f"airflow_test_template_{AIRFLOW_VERSION.replace('.', '_')}"
TEMPLATE_MARK = f"apache-airflow {AIRFLOW_VERSION} db migrate done (backfill-bot tests)"
# Fixed and not secret (tests only): a template's encrypted rows must stay readable in copies.
FERNET_KEY = base64.urlsafe_b64encode(b"backfill-bot airflow tests only!").decode()
USERNAME = "admin"
PASSWORD = "admin"
INSTALL_TIMEOUT_S = 900.0
MIGRATE_TIMEOUT_S = 180.0
READY_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 15.0


class AirflowHarnessError(RuntimeError):
    """Airflow could not be installed or started; the message says why (with log tails)."""


@dataclass
class RealAirflow:
    """A running Airflow: its API at `url` (no trailing slash), admin credentials, paths."""

    url: str
    username: str
    password: str
    home: Path
    dags_folder: Path
    warehouse: Path
    env: dict[str, str]
    _procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict, repr=False)
    _token: str | None = field(default=None, repr=False)

    def wait_for_dags(self, dag_ids: Iterable[str], timeout_s: float = 90) -> None:
        """Block until the API lists every DAG id; fail at once on an import error."""
        wanted = set(dag_ids)
        deadline = time.monotonic() + timeout_s
        while True:
            self._check_alive()
            self._raise_import_errors()
            missing = {dag_id for dag_id in wanted if not self._dag_listed(dag_id)}
            if not missing:
                return
            if time.monotonic() > deadline:
                raise AirflowHarnessError(
                    f"DAGs {sorted(missing)} not listed by Airflow after {timeout_s:g}s; "
                    f"files in {self.dags_folder}: "
                    f"{sorted(p.name for p in self.dags_folder.glob('*.py'))}\n{self.log_tail()}"
                )
            time.sleep(0.5)

    def log_tail(self, lines: int = 50) -> str:
        """The last `lines` lines of each component's log, headed by the component name."""
        parts = []
        for log in sorted((self.home / "logs").glob("*.log")):
            text = log.read_text(errors="replace").splitlines()[-lines:]
            parts.append(f"--- {log.name} (last {len(text)} lines) ---\n" + "\n".join(text))
        return "\n".join(parts)

    # --- the small synchronous API client the harness needs -------------------------------

    def api(self, method: str, path: str, body: Any = None) -> Any:
        """Call the REST API with a token; returns the decoded JSON body (raises on >= 400)."""
        for attempt in (1, 2):
            headers = {"Authorization": f"Bearer {self._get_token()}"}
            try:
                return _http_json(method, self.url + path, body, headers)
            except urllib.error.HTTPError as exc:
                if exc.code in (401, 403) and attempt == 1:
                    self._token = None
                    continue
                raise
        raise AssertionError("unreachable")

    def _get_token(self) -> str:
        if self._token is None:
            data = _http_json(
                "POST",
                f"{self.url}/auth/token",
                {"username": self.username, "password": self.password},
            )
            self._token = str(data["access_token"])
        return self._token

    def _dag_listed(self, dag_id: str) -> bool:
        try:
            dag = self.api("GET", f"/api/v2/dags/{urllib.parse.quote(dag_id, safe='')}")
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return False
            raise
        return not dag.get("is_stale", False)

    def _listed_files(self) -> set[str]:
        files: set[str] = set()
        offset = 0
        while True:
            page = self.api("GET", f"/api/v2/dags?limit=100&offset={offset}")
            dags = page["dags"]
            files.update(Path(dag["fileloc"]).name for dag in dags)
            offset += len(dags)
            if len(dags) < 100:
                return files

    def _raise_import_errors(self) -> None:
        errors = self.api("GET", "/api/v2/importErrors?limit=100")["import_errors"]
        if errors:
            text = "\n".join(f"{e['filename']}:\n{e['stack_trace']}" for e in errors)
            raise AirflowHarnessError(f"Airflow could not import DAG files:\n{text}")

    def _check_alive(self) -> None:
        for name, proc in self._procs.items():
            if proc.poll() is not None:
                raise AirflowHarnessError(
                    f"airflow {name} exited with code {proc.returncode}\n{self.log_tail()}"
                )


def _http_json(
    method: str, url: str, body: Any = None, headers: Mapping[str, str] | None = None
) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("Accept", "application/json")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    for key, value in (headers or {}).items():
        request.add_header(key, value)
    with urllib.request.urlopen(request, timeout=10) as resp:
        raw = resp.read()
    return json.loads(raw) if raw else None


# --- installation -------------------------------------------------------------------------


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def airflow_executable() -> Path:
    return VENV_DIR / "bin" / "airflow"


def ensure_installed() -> Path:
    """Install `REQUIREMENTS` into `var/airflow-venv` unless a finished install is there.

    A venv finished for other pins (an older stamp) is brought to these in place by pip, which
    leaves an Airflow started from it by another test run working; a missing or unfinished venv,
    or one pip cannot update, is made afresh. Returns the `airflow` binary.
    """
    with _file_lock(VAR_DIR / "airflow-venv.lock"):
        if STAMP.exists() and airflow_executable().exists():
            return airflow_executable()
        log = VAR_DIR / "airflow-venv-install.log"
        started = time.monotonic()
        old_stamps = list(VENV_DIR.glob(".installed-*"))
        how = f"updated in place from {', '.join(s.name for s in old_stamps)}"
        with log.open("w") as out:
            updated = bool(old_stamps) and airflow_executable().exists()
            if updated:
                updated = _run_install_step(_pip_install(), out, log, fail=False)
            if not updated:
                if VENV_DIR.exists():
                    shutil.rmtree(VENV_DIR)
                _run_install_step([sys.executable, "-m", "venv", str(VENV_DIR)], out, log)
                _run_install_step(_pip_install(), out, log)
                how = "installed"
        for old in old_stamps:
            old.unlink(missing_ok=True)
        STAMP.write_text(
            "\n".join([*REQUIREMENTS, f"{how} in {time.monotonic() - started:.1f}s\n"])
        )
        return airflow_executable()


def _pip_install() -> list[str]:
    return [str(VENV_DIR / "bin" / "python"), "-m", "pip", "install", *REQUIREMENTS]


def _run_install_step(command: list[str], out: Any, log: Path, *, fail: bool = True) -> bool:
    """Run one install command with its output in `log`; False (or raise, with `fail`) if it
    fails."""
    what = " and ".join(REQUIREMENTS)
    try:
        result = subprocess.run(
            command,
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=INSTALL_TIMEOUT_S,
            check=False,
            env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
        )
    except subprocess.TimeoutExpired as exc:
        if not fail:
            return False
        raise AirflowHarnessError(f"installing {what} took over {INSTALL_TIMEOUT_S:g}s") from exc
    if result.returncode == 0:
        return True
    if not fail:
        return False
    raise AirflowHarnessError(
        f"installing {what} failed ({' '.join(command[:3])}...):\n"
        + _tail_file(log, 30, skip="is ignored: it is neither a file")
    )


def _tail_file(path: Path, lines: int, *, skip: str | None = None) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    if skip:
        text = [line for line in text if skip not in line]
    return "\n".join(text[-lines:])


# --- processes ----------------------------------------------------------------------------


def _proc_start_ticks(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def _pids_with_home(home: Path) -> list[int]:
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
    pids = _pids_with_home(home)
    groups = {_pgid(pid) for pid in pids}
    for pgid in pgids:
        if pgid in groups:  # the group still holds one of our processes, not a reused id
            _signal_group(pgid, signal.SIGTERM)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while _pids_with_home(home) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in _pids_with_home(home):
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


# --- databases ----------------------------------------------------------------------------


def _admin_connect() -> psycopg.Connection[Any]:
    return psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True, connect_timeout=5)


def _template_ready() -> bool:
    with _admin_connect() as conn:
        row = conn.execute(
            "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s",
            (TEMPLATE_DB,),
        ).fetchone()
    return row is not None and row[0] == TEMPLATE_MARK


def _create_database(name: str, *, template: str | None = None) -> str:
    """Create `name` (a copy of `template` if given); its SQLAlchemy URL for Airflow."""
    with _admin_connect() as conn:
        suffix = f' TEMPLATE "{template}"' if template else ""
        conn.execute(f'CREATE DATABASE "{name}"{suffix}')
    parts = urllib.parse.urlsplit(POSTGRES_ADMIN_URL)
    # apache-airflow[postgres] brings psycopg2 (psycopg2-binary) as its sync driver.
    return urllib.parse.urlunsplit(("postgresql+psycopg2", parts.netloc, f"/{name}", "", ""))


def _save_template(migrated: str) -> None:
    """Keep a copy of a freshly migrated database, so later starts skip `airflow db migrate`."""
    with _file_lock(VAR_DIR / "airflow-template-db.lock"), _admin_connect() as conn:
        if _template_ready():
            return
        try:
            conn.execute(f'DROP DATABASE IF EXISTS "{TEMPLATE_DB}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{TEMPLATE_DB}" TEMPLATE "{migrated}"')
            conn.execute(f"COMMENT ON DATABASE \"{TEMPLATE_DB}\" IS '{TEMPLATE_MARK}'")
        except psycopg.Error as exc:  # only an optimisation: the next start migrates again
            print(f"airflow harness: could not save {TEMPLATE_DB}: {exc}", file=sys.stderr)


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
    cleaned = []
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


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _copy_dags(folders: Sequence[Path], target: Path) -> list[Path]:
    target.mkdir(parents=True)
    copied: list[Path] = []
    for folder in folders:
        for source in sorted(folder.glob("*.py")):
            destination = target / source.name
            if destination.exists():
                raise AirflowHarnessError(f"two DAG folders both have {source.name}: {folders}")
            shutil.copy2(source, destination)
            copied.append(destination)
    return copied


def _looks_like_dag_file(path: Path) -> bool:
    # Airflow's own "safe mode" heuristic: only files mentioning both words are parsed.
    text = path.read_text(errors="replace").lower()
    return "airflow" in text and "dag" in text


def openlineage_env(url: str | None, *, api_key: str | None = None) -> dict[str, str]:
    """`[openlineage]` settings: off without `url`, else HTTP to `<url>/api/v1/lineage`.

    The provider's defaults stay otherwise (all operators, source code facets, a 10 s
    `execution_timeout` for the worker's forked emitter). Task events are sent from the task's
    worker process, DAG run events from a process pool of the scheduler.
    """
    if url is None:
        return {"AIRFLOW__OPENLINEAGE__DISABLED": "True"}
    transport: dict[str, Any] = {
        "type": "http",
        "url": url.rstrip("/"),
        "endpoint": "api/v1/lineage",
        "timeout": 5,
    }
    if api_key is not None:
        transport["auth"] = {"type": "api_key", "apiKey": api_key}
    return {
        "AIRFLOW__OPENLINEAGE__DISABLED": "False",
        "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(transport),
        "AIRFLOW__OPENLINEAGE__NAMESPACE": OPENLINEAGE_NAMESPACE,
    }


def _base_env(
    home: Path, port: int, db_url: str, dags: Path, extra: Mapping[str, str]
) -> dict[str, str]:
    keep = ("PATH", "LANG", "LC_ALL", "TZ", "TMPDIR", "JAVA_HOME", "SPARK_HOME", "USER", "HOME")
    env = {key: os.environ[key] for key in keep if key in os.environ}
    env["PATH"] = f"{VENV_DIR / 'bin'}{os.pathsep}{env.get('PATH', '/usr/bin:/bin')}"
    passwords = home / "passwords.json"
    passwords.write_text(json.dumps({USERNAME: PASSWORD}))
    warehouse = home / "warehouse"
    warehouse.mkdir()
    env.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__CORE__PARALLELISM": "4",
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{USERNAME}:admin",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
            "AIRFLOW__CORE__FERNET_KEY": FERNET_KEY,
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": db_url,
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(port),
            "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}/",
            "AIRFLOW__API__SECRET_KEY": secrets.token_urlsafe(16),
            "AIRFLOW__API__EXPOSE_STACKTRACE": "True",
            "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_urlsafe(32),
            "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "False",
            "AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK": "False",
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
            "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "10",
            "AIRFLOW__DAG_PROCESSOR__BUNDLE_REFRESH_CHECK_INTERVAL": "5",
            "AIRFLOW__DAG_PROCESSOR__PARSING_PROCESSES": "2",
            "AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_STORAGE_PATH": str(home / "bundles"),
            "AIRFLOW__LOGGING__COLORED_CONSOLE_LOG": "False",
            "AIRFLOW__METRICS__STATSD_ON": "False",
            "FOOD_DELIVERY_PYTHON": str(REPO_ROOT / ".venv" / "bin" / "python"),
            "FOOD_DELIVERY_PYTHONPATH": str(REPO_ROOT),
            "FOOD_DELIVERY_WAREHOUSE": str(warehouse),
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.update(extra)
    return env


class _Runner:
    """Owns one Airflow's processes, database and home; `stop()` is idempotent."""

    def __init__(self, home: Path, database: str) -> None:
        self.home = home
        self.database = database
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
                [str(airflow_executable()), *args],
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


def _wait_healthy(airflow: RealAirflow, deadline: float) -> None:
    last = "no answer yet"
    while time.monotonic() < deadline:
        airflow._check_alive()
        try:
            health = _http_json("GET", f"{airflow.url}/api/v2/monitor/health")
        except (OSError, ValueError) as exc:
            last = str(exc)
        else:
            statuses = {
                part: (health.get(part) or {}).get("status")
                for part in ("metadatabase", "scheduler", "dag_processor")
            }
            if all(status == "healthy" for status in statuses.values()):
                return
            last = json.dumps(statuses)
        time.sleep(0.25)
    raise AirflowHarnessError(f"Airflow not healthy in time (last: {last})\n{airflow.log_tail()}")


def _wait_files_parsed(airflow: RealAirflow, files: Sequence[Path], deadline: float) -> None:
    wanted = {path.name for path in files if _looks_like_dag_file(path)}
    while True:
        airflow._check_alive()
        airflow._raise_import_errors()
        missing = wanted - airflow._listed_files()
        if not missing:
            return
        if time.monotonic() > deadline:
            raise AirflowHarnessError(
                f"no DAG from {sorted(missing)} listed in time\n{airflow.log_tail()}"
            )
        time.sleep(0.5)


@contextlib.contextmanager
def start_airflow(
    *,
    dags_folders: Sequence[Path] | None = None,
    extra_env: Mapping[str, str] | None = None,
    dag_ids: Iterable[str] | None = None,
    ready_timeout_s: float = READY_TIMEOUT_S,
    openlineage_url: str | None = None,
    openlineage_api_key: str | None = None,
) -> Iterator[RealAirflow]:
    """Install (once) and start a fresh Airflow 3.3.2; stop it and drop its database on exit.

    Ready means healthy and every DAG-looking file copied from `dags_folders` (default: the
    food_delivery DAGs if present, and tests/airflow/dags) listed by the API, plus `dag_ids`.
    With `openlineage_url` (e.g. `http://127.0.0.1:PORT`), the OpenLineage provider sends every
    run's events to `<openlineage_url>/api/v1/lineage` (with `openlineage_api_key` as a Bearer
    token if given); without it, OpenLineage is disabled. `extra_env` overrides either.
    """
    ensure_installed()
    folders = [
        Path(f) for f in (dags_folders if dags_folders is not None else DEFAULT_DAGS_FOLDERS)
    ]
    if dags_folders is None:
        folders = [f for f in folders if f.is_dir()]
    else:
        for folder in folders:
            if not folder.is_dir():
                raise AirflowHarnessError(f"DAG folder {folder} does not exist")
    cleanup_stale_homes()
    HOMES_DIR.mkdir(parents=True, exist_ok=True)
    name = f"af_{os.getpid()}_{secrets.token_hex(3)}"
    home = HOMES_DIR / name
    (home / "logs").mkdir(parents=True)
    database = f"airflow_test_{os.getpid()}_{secrets.token_hex(3)}"
    runner = _Runner(home, database)
    atexit.register(runner.stop)
    ok = False
    try:
        with _file_lock(VAR_DIR / "airflow-template-db.lock"):
            from_template = _template_ready()
            db_url = _create_database(database, template=TEMPLATE_DB if from_template else None)
        dags = home / "dags"
        copied = _copy_dags(folders, dags)
        port = _free_port()
        extra = {
            **openlineage_env(openlineage_url, api_key=openlineage_api_key),
            **(extra_env or {}),
        }
        env = _base_env(home, port, db_url, dags, extra)
        airflow = RealAirflow(
            url=f"http://127.0.0.1:{port}",
            username=USERNAME,
            password=PASSWORD,
            home=home,
            dags_folder=dags,
            warehouse=Path(env["FOOD_DELIVERY_WAREHOUSE"]),
            env=env,
        )
        if not from_template:
            migrate = runner.spawn("db-migrate", ["db", "migrate"], env)
            try:
                code = migrate.wait(MIGRATE_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                code = None
            runner.procs.pop("db-migrate")
            if code != 0:
                raise AirflowHarnessError(
                    f"airflow db migrate {'timed out' if code is None else f'exited {code}'}\n"
                    + airflow.log_tail()
                )
            _save_template(database)
        deadline = time.monotonic() + ready_timeout_s
        runner.spawn("api-server", ["api-server", "--host", "127.0.0.1", "--port", str(port)], env)
        runner.spawn("scheduler", ["scheduler", "--skip-serve-logs"], env)
        runner.spawn("dag-processor", ["dag-processor"], env)
        airflow._procs = runner.procs
        _wait_healthy(airflow, deadline)
        _wait_files_parsed(airflow, copied, deadline)
        if dag_ids is not None:
            airflow.wait_for_dags(dag_ids, timeout_s=max(1.0, deadline - time.monotonic()))
        ok = True
        yield airflow
    finally:
        runner.stop(keep_home=not ok)  # a failed start keeps its logs until the next start
        atexit.unregister(runner.stop)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    # Manual use: `python tests/airflow/harness.py` starts Airflow and waits for Ctrl-C/SIGTERM.
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)
    t0 = time.monotonic()
    ensure_installed()
    t1 = time.monotonic()
    with start_airflow() as af:
        t2 = time.monotonic()
        print(f"install check {t1 - t0:.1f}s, start-to-ready {t2 - t1:.1f}s")
        print(f"Airflow at {af.url} (admin/admin), home {af.home}")
        with contextlib.suppress(KeyboardInterrupt):
            signal.pause()
