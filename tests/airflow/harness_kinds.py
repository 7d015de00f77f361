"""What differs between the Airflow versions tests/airflow/harness.py runs, their environment,
and installing them.

An `AirflowKind` says, for one Airflow version: what to install and where, which settings and
processes it needs, how its REST API is reached (prefix, auth, health) and what is done once to
a new metadata database before it becomes the template later starts copy.

- `AIRFLOW3` (3.3.2): `api-server`, `scheduler` and `dag-processor`; `/api/v2` with a JWT from
  `/auth/token` (the simple auth manager's users); the OpenLineage provider installed.
- `AIRFLOW2` (2.11.2): `webserver` and `scheduler` (which parses the DAG files itself);
  `/api/v1` with HTTP basic auth against a FAB user made by `airflow users create` in the
  template; only the postgres extra, pinned by constraints-airflow-2.11.2.txt.

Both are installed with uv (bootstrapped by pip into var/uv): about 5 s per venv where pip
needs about 40 s, which matters because CI starts from a clean clone and installs both.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from tests.airflow.harness_procs import REPO_ROOT, VAR_DIR, file_lock

OPENLINEAGE_NAMESPACE = "airflow-test"
"""The job namespace of every DAG and task when OpenLineage is on (`[openlineage] namespace`)."""
# Fixed and not secret (tests only): a template's encrypted rows must stay readable in copies.
FERNET_KEY = base64.urlsafe_b64encode(b"backfill-bot airflow tests only!").decode()
USERNAME = "admin"
PASSWORD = "admin"
INSTALL_TIMEOUT_S = 900.0
UV_REQUIREMENT = "uv==0.13.9"
UV_DIR = VAR_DIR / "uv"
FOOD_DELIVERY_DAGS = REPO_ROOT / "pipeline" / "food_delivery" / "dags"
TEST_DAGS = REPO_ROOT / "tests" / "airflow" / "dags"


class AirflowHarnessError(RuntimeError):
    """Airflow could not be installed or started; the message says why (with log tails)."""


Settings = Callable[[Path, int], dict[str, str]]
Processes = Callable[[int], list[tuple[str, list[str]]]]


@dataclass(frozen=True)
class AirflowKind:
    major: int
    version: str
    requirements: tuple[str, ...]
    venv_name: str
    api: str
    """The REST API's path prefix."""
    health_path: str
    health_parts: tuple[str, ...]
    """The components the health answer must call healthy."""
    token_auth: bool
    """JWT from `POST /auth/token` (Airflow 3), else HTTP basic auth (Airflow 2)."""
    default_dags: tuple[Path, ...]
    """DAG folders (or single files) copied into a home when the caller names none."""
    setup: tuple[tuple[str, ...], ...]
    """`airflow` commands run once on a new database, before it is kept as the template."""
    settings: Settings
    """Version-specific environment for a home and the API's port."""
    processes: Processes
    """(name, `airflow` arguments) of the long-running components, for the API's port."""
    openlineage: bool
    """Whether the OpenLineage provider is installed (`start_airflow(openlineage_url=...)`)."""
    constraints: Path | None = None

    @property
    def venv_dir(self) -> Path:
        return VAR_DIR / self.venv_name

    @property
    def executable(self) -> Path:
        return self.venv_dir / "bin" / "airflow"

    @property
    def stamp(self) -> Path:
        name = "+".join(r.replace("[", "-").replace("]", "") for r in self.requirements)
        if self.constraints is not None:
            digest = hashlib.sha256(self.constraints.read_bytes()).hexdigest()[:12]
            name += f"+constraints-{digest}"
        return self.venv_dir / f".installed-{name}"

    @property
    def template_db(self) -> str:
        # A migrated, never-started metadata DB kept on the server: each start copies it
        # (CREATE DATABASE ... TEMPLATE, well under a second) instead of running `setup`.
        return f"airflow_test_template_{self.version.replace('.', '_')}"

    @property
    def template_mark(self) -> str:
        done = " + ".join(" ".join(command[:2]) for command in self.setup)
        return f"apache-airflow {self.version} {done} done (backfill-bot tests)"

    def dag_listed(self, dag: Mapping[str, Any]) -> bool:
        """Whether a DAG the API answered for is a live one (not left from a removed file)."""
        if self.major >= 3:
            return not dag.get("is_stale", False)
        return dag.get("is_active") is not False


def _airflow3_settings(home: Path, port: int) -> dict[str, str]:
    passwords = home / "passwords.json"
    passwords.write_text(f'{{"{USERNAME}": "{PASSWORD}"}}')
    return {
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{USERNAME}:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}/",
        "AIRFLOW__API__SECRET_KEY": secrets.token_urlsafe(16),
        "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_urlsafe(32),
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
        "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "10",
        "AIRFLOW__DAG_PROCESSOR__BUNDLE_REFRESH_CHECK_INTERVAL": "5",
        "AIRFLOW__DAG_PROCESSOR__PARSING_PROCESSES": "2",
        "AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_STORAGE_PATH": str(home / "bundles"),
    }


def _airflow2_settings(home: Path, port: int) -> dict[str, str]:
    return {
        # The FAB provider's basic auth (the `airflow.api.auth.backend.basic_auth` of older 2.x
        # is a deprecated alias of it in 2.11); the session backend keeps the UI usable.
        "AIRFLOW__API__AUTH_BACKENDS": (
            "airflow.providers.fab.auth_manager.api.auth.backend.basic_auth,"
            "airflow.api.auth.backend.session"
        ),
        "AIRFLOW__WEBSERVER__BASE_URL": f"http://127.0.0.1:{port}",
        "AIRFLOW__WEBSERVER__SECRET_KEY": secrets.token_urlsafe(16),
        # Two gunicorn workers instead of four (each holds ~200 MB), never recycled mid-session.
        "AIRFLOW__WEBSERVER__WORKERS": "2",
        "AIRFLOW__WEBSERVER__WORKER_REFRESH_BATCH_SIZE": "0",
        "AIRFLOW__WEBSERVER__WARN_DEPLOYMENT_EXPOSURE": "False",
        # The scheduler's own DAG file processor: list new files every 5 s, not every 5 min.
        "AIRFLOW__SCHEDULER__DAG_DIR_LIST_INTERVAL": "5",
        "AIRFLOW__SCHEDULER__MIN_FILE_PROCESS_INTERVAL": "10",
        "AIRFLOW__SCHEDULER__PARSING_PROCESSES": "2",
        # A task notices that its run was set to failed (a cancel) at its next heartbeat.
        "AIRFLOW__SCHEDULER__JOB_HEARTBEAT_SEC": "2",
        "AIRFLOW__METRICS__TIMER_UNIT_CONSISTENCY": "True",  # silences a warning per process
    }


_ADMIN = ("--username", USERNAME, "--password", PASSWORD, "--role", "Admin", "--firstname",
          "Backfill", "--lastname", "Bot", "--email", "admin@example.invalid")  # fmt: skip

AIRFLOW3 = AirflowKind(
    major=3,
    version="3.3.2",
    # The newest OpenLineage provider that resolves with Airflow 3.3.2 (openlineage-python 1.54).
    requirements=(
        "apache-airflow[postgres]==3.3.2",
        "apache-airflow-providers-openlineage==2.20.3",
    ),
    venv_name="airflow-venv",
    api="/api/v2",
    health_path="/api/v2/monitor/health",
    health_parts=("metadatabase", "scheduler", "dag_processor"),
    token_auth=True,
    default_dags=(FOOD_DELIVERY_DAGS, TEST_DAGS),
    setup=(("db", "migrate"),),
    settings=_airflow3_settings,
    processes=lambda port: [
        ("api-server", ["api-server", "--host", "127.0.0.1", "--port", str(port)]),
        ("scheduler", ["scheduler", "--skip-serve-logs"]),
        ("dag-processor", ["dag-processor"]),
    ],
    openlineage=True,
)

AIRFLOW2 = AirflowKind(
    major=2,
    version="2.11.2",
    requirements=("apache-airflow[postgres]==2.11.2",),
    venv_name="airflow2-venv",
    api="/api/v1",
    health_path="/api/v1/health",
    health_parts=("metadatabase", "scheduler"),
    token_auth=False,
    # openlineage_dags.py needs Airflow 3's provider layout and the OpenLineage provider.
    default_dags=(FOOD_DELIVERY_DAGS, TEST_DAGS / "bot_test_dags.py"),
    setup=(("db", "migrate"), ("users", "create", *_ADMIN)),
    settings=_airflow2_settings,
    processes=lambda port: [
        ("webserver", ["webserver", "--hostname", "127.0.0.1", "--port", str(port)]),
        ("scheduler", ["scheduler", "--skip-serve-logs"]),
    ],
    openlineage=False,
    constraints=Path(__file__).resolve().parent / "constraints-airflow-2.11.2.txt",
)


# --- environment ------------------------------------------------------------------------


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


def base_env(
    kind: AirflowKind, home: Path, port: int, db_url: str, dags: Path, extra: Mapping[str, str]
) -> dict[str, str]:
    """The environment of every process of one Airflow: what all versions share, then the
    kind's own settings, then `extra`."""
    keep = ("PATH", "LANG", "LC_ALL", "TZ", "TMPDIR", "JAVA_HOME", "SPARK_HOME", "USER", "HOME")
    env = {key: os.environ[key] for key in keep if key in os.environ}
    env["PATH"] = f"{kind.venv_dir / 'bin'}{os.pathsep}{env.get('PATH', '/usr/bin:/bin')}"
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
            "AIRFLOW__CORE__FERNET_KEY": FERNET_KEY,
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": db_url,
            "AIRFLOW__API__EXPOSE_STACKTRACE": "True",
            "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "False",
            "AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK": "False",
            "AIRFLOW__LOGGING__COLORED_CONSOLE_LOG": "False",
            "AIRFLOW__METRICS__STATSD_ON": "False",
            "FOOD_DELIVERY_PYTHON": str(REPO_ROOT / ".venv" / "bin" / "python"),
            "FOOD_DELIVERY_PYTHONPATH": str(REPO_ROOT),
            "FOOD_DELIVERY_WAREHOUSE": str(warehouse),
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.update(kind.settings(home, port))
    env.update(extra)
    return env


# --- installation -------------------------------------------------------------------------


def _run_step(command: Sequence[str], out: TextIO, log: Path, what: str) -> None:
    """Run one install command with its output in `log`; raise if it fails."""
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "UV_PYTHON_DOWNLOADS": "never"}
    try:
        result = subprocess.run(
            list(command),
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=INSTALL_TIMEOUT_S,
            check=False,
            env=env,
        )
    except subprocess.TimeoutExpired as exc:
        raise AirflowHarnessError(f"installing {what} took over {INSTALL_TIMEOUT_S:g}s") from exc
    if result.returncode != 0:
        lines = log.read_text(errors="replace").splitlines()
        lines = [line for line in lines if "is ignored: it is neither a file" not in line]
        tail = "\n".join(lines[-30:])
        raise AirflowHarnessError(f"installing {what} failed ({' '.join(command[:3])}...):\n{tail}")


def _uv(out: TextIO, log: Path) -> Path:
    """The uv binary, installed by pip into var/uv on first use."""
    binary, stamp = UV_DIR / "bin" / "uv", UV_DIR / f".installed-{UV_REQUIREMENT}"
    with file_lock(VAR_DIR / "uv.lock"):
        if not (stamp.exists() and binary.exists()):
            shutil.rmtree(UV_DIR, ignore_errors=True)
            pip = [sys.executable, "-m", "pip", "install", "--quiet", "--target", str(UV_DIR)]
            _run_step([*pip, UV_REQUIREMENT], out, log, UV_REQUIREMENT)
            stamp.write_text(UV_REQUIREMENT + "\n")
    return binary


def ensure_installed(kind: AirflowKind) -> Path:
    """Install `kind.requirements` into its venv under var/ unless a finished install is there.

    A venv finished for other pins (an older stamp) is brought to these in place, which leaves
    an Airflow started from it by another test run working; a missing or unfinished venv, or one
    that cannot be updated, is made afresh. Returns the `airflow` binary.
    """
    with file_lock(VAR_DIR / f"{kind.venv_name}.lock"):
        if kind.stamp.exists() and kind.executable.exists():
            return kind.executable
        log = VAR_DIR / f"{kind.venv_name}-install.log"
        started = time.monotonic()
        old_stamps = list(kind.venv_dir.glob(".installed-*"))
        what = " and ".join(kind.requirements)
        with log.open("w") as out:
            uv = _uv(out, log)
            install = [str(uv), "pip", "install", "--python", str(kind.venv_dir / "bin" / "python")]
            if kind.constraints is not None:
                install += ["--constraints", str(kind.constraints)]
            install += kind.requirements
            how = f"updated in place from {', '.join(s.name for s in old_stamps)}"
            try:
                if not (old_stamps and kind.executable.exists()):
                    raise AirflowHarnessError("no venv to update")
                _run_step(install, out, log, what)
            except AirflowHarnessError:
                shutil.rmtree(kind.venv_dir, ignore_errors=True)
                venv = [str(uv), "venv", "--quiet", "--python", sys.executable]
                _run_step([*venv, str(kind.venv_dir)], out, log, what)
                _run_step(install, out, log, what)
                how = "installed"
        for old in old_stamps:
            old.unlink(missing_ok=True)
        kind.stamp.write_text(
            "\n".join([*kind.requirements, f"{how} in {time.monotonic() - started:.1f}s\n"])
        )
        return kind.executable
