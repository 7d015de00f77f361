"""A real Apache Airflow for tests, 3.3.2 or 2.11.2: installed once, started fresh per session.

`start_airflow(kind=AIRFLOW3 | AIRFLOW2)` installs the version's requirements into its own venv
under var/ (`airflow-venv`, `airflow2-venv`; once, under a file lock, finished by a stamp file
naming the pins; a venv installed for other pins is brought to these in place) and makes a new
PostgreSQL database: a copy of a template database kept on the server
(`airflow_test_template_<version>`, made by the first start with the version's setup commands:
`airflow db migrate`, and for Airflow 2 `airflow users create`). It then starts the version's
components (Airflow 3: `api-server`, `scheduler`, `dag-processor`; Airflow 2: `webserver`,
`scheduler`) as separate processes bound to 127.0.0.1 on a free port, each in its own process
group, with logs under `<home>/logs/`. On exit it stops them by process group (SIGTERM, then
SIGKILL), kills any task process left with the same AIRFLOW_HOME, drops the database and removes
the home. What differs by version is in harness_kinds.py; processes and databases in
harness_procs.py.

Homes live under `var/airflow-test/`; each records its owner (the pytest process) and its
processes in `harness.json`, so a later start cleans up after a run that was killed before its
finalizers ran; the processes also get SIGTERM from the kernel when the test process dies.
Scheduled runs are off (`[scheduler] use_job_schedule = False`): only runs that a test triggers
or backfills run.

OpenLineage (Airflow 3 only) is off (`[openlineage] disabled = True`) unless
`start_airflow(openlineage_url=...)` names a receiver: then every DAG run and task reports to
`<url>/api/v1/lineage` over HTTP (task events are sent by the task's worker process, DAG run
events by the scheduler).
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.airflow.harness_kinds import (
    AIRFLOW2,
    AIRFLOW3,
    OPENLINEAGE_NAMESPACE,
    PASSWORD,
    USERNAME,
    AirflowHarnessError,
    AirflowKind,
    base_env,
    ensure_installed,
    openlineage_env,
)
from tests.airflow.harness_procs import (
    HOMES_DIR,
    REPO_ROOT,
    VAR_DIR,
    Runner,
    cleanup_stale_homes,
    create_database,
    file_lock,
    free_port,
    save_template,
    template_ready,
)

__all__ = [
    "AIRFLOW2",
    "AIRFLOW3",
    "AIRFLOW_VERSION",
    "OPENLINEAGE_NAMESPACE",
    "REPO_ROOT",
    "VENV_DIR",
    "AirflowHarnessError",
    "AirflowKind",
    "RealAirflow",
    "cleanup_stale_homes",
    "ensure_installed",
    "openlineage_env",
    "start_airflow",
]

AIRFLOW_VERSION = AIRFLOW3.version
VENV_DIR = AIRFLOW3.venv_dir
SETUP_TIMEOUT_S = 180.0
READY_TIMEOUT_S = 120.0


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
    kind: AirflowKind = AIRFLOW3
    _procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict, repr=False)
    _token: str | None = field(default=None, repr=False)

    @property
    def version(self) -> str:
        return self.kind.version

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
        """Call the REST API as the admin (a token on Airflow 3, basic auth on Airflow 2);
        returns the decoded JSON body (raises on >= 400)."""
        if not self.kind.token_auth:
            pair = base64.b64encode(f"{self.username}:{self.password}".encode()).decode()
            return _http_json(method, self.url + path, body, {"Authorization": f"Basic {pair}"})
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
            dag = self.api("GET", f"{self.kind.api}/dags/{urllib.parse.quote(dag_id, safe='')}")
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return False
            raise
        return self.kind.dag_listed(dag)

    def _listed_files(self) -> set[str]:
        files: set[str] = set()
        offset = 0
        while True:
            page = self.api("GET", f"{self.kind.api}/dags?limit=100&offset={offset}")
            dags = page["dags"]
            files.update(Path(dag["fileloc"]).name for dag in dags)
            offset += len(dags)
            if len(dags) < 100:
                return files

    def _raise_import_errors(self) -> None:
        errors = self.api("GET", f"{self.kind.api}/importErrors?limit=100")["import_errors"]
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


# --- homes ----------------------------------------------------------------------------------


def _copy_dags(sources: Sequence[Path], target: Path) -> list[Path]:
    """Copy DAG files (each source a folder of them, or one file) flat into `target`."""
    target.mkdir(parents=True)
    copied: list[Path] = []
    for source in sources:
        for path in [source] if source.is_file() else sorted(source.glob("*.py")):
            destination = target / path.name
            if destination.exists():
                raise AirflowHarnessError(f"two DAG folders both have {path.name}: {sources}")
            shutil.copy2(path, destination)
            copied.append(destination)
    return copied


def _looks_like_dag_file(path: Path) -> bool:
    # Airflow's own "safe mode" heuristic: only files mentioning both words are parsed.
    text = path.read_text(errors="replace").lower()
    return "airflow" in text and "dag" in text


def _wait_healthy(airflow: RealAirflow, deadline: float) -> None:
    last = "no answer yet"
    while time.monotonic() < deadline:
        airflow._check_alive()
        try:
            health = _http_json("GET", airflow.url + airflow.kind.health_path)
        except (OSError, ValueError) as exc:
            last = str(exc)
        else:
            statuses = {
                part: (health.get(part) or {}).get("status") for part in airflow.kind.health_parts
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


def _dag_sources(kind: AirflowKind, dags_folders: Sequence[Path] | None) -> list[Path]:
    if dags_folders is None:
        return [path for path in kind.default_dags if path.exists()]
    for folder in dags_folders:
        if not Path(folder).exists():
            raise AirflowHarnessError(f"DAG folder {folder} does not exist")
    return [Path(folder) for folder in dags_folders]


def _set_up(runner: Runner, airflow: RealAirflow) -> None:
    """Run the version's setup commands on a new database (it becomes the template after)."""
    for index, command in enumerate(airflow.kind.setup):
        code = runner.run_once(f"setup-{index}-{command[0]}", command, airflow.env, SETUP_TIMEOUT_S)
        if code != 0:
            how = "timed out" if code is None else f"exited {code}"
            raise AirflowHarnessError(
                f"airflow {' '.join(command[:2])} {how}\n{airflow.log_tail()}"
            )


@contextlib.contextmanager
def start_airflow(
    *,
    kind: AirflowKind = AIRFLOW3,
    dags_folders: Sequence[Path] | None = None,
    extra_env: Mapping[str, str] | None = None,
    dag_ids: Iterable[str] | None = None,
    ready_timeout_s: float = READY_TIMEOUT_S,
    openlineage_url: str | None = None,
    openlineage_api_key: str | None = None,
) -> Iterator[RealAirflow]:
    """Install (once) and start a fresh Airflow of `kind`; stop it and drop its database on exit.

    Ready means healthy and every DAG-looking file copied from `dags_folders` (folders or single
    files; default: the kind's, e.g. the food_delivery DAGs and tests/airflow/dags) listed by
    the API, plus `dag_ids`. With `openlineage_url` (e.g. `http://127.0.0.1:PORT`; Airflow 3
    only), the OpenLineage provider sends every run's events to `<openlineage_url>/api/v1/lineage`
    (with `openlineage_api_key` as a Bearer token if given); without it, OpenLineage is
    disabled. `extra_env` overrides either.
    """
    if openlineage_url is not None and not kind.openlineage:
        raise AirflowHarnessError(f"Airflow {kind.version} is installed without OpenLineage")
    executable = ensure_installed(kind)
    sources = _dag_sources(kind, dags_folders)
    cleanup_stale_homes()
    HOMES_DIR.mkdir(parents=True, exist_ok=True)
    home = HOMES_DIR / f"af{kind.major}_{os.getpid()}_{secrets.token_hex(3)}"
    (home / "logs").mkdir(parents=True)
    database = f"airflow_test_{os.getpid()}_{secrets.token_hex(3)}"
    runner = Runner(home, database, executable)
    atexit.register(runner.stop)
    ok = False
    try:
        with file_lock(VAR_DIR / "airflow-template-db.lock"):
            from_template = template_ready(kind.template_db, kind.template_mark)
            db_url = create_database(database, template=kind.template_db if from_template else None)
        dags = home / "dags"
        copied = _copy_dags(sources, dags)
        port = free_port()
        extra = dict(extra_env or {})
        if kind.openlineage:
            extra = {**openlineage_env(openlineage_url, api_key=openlineage_api_key), **extra}
        env = base_env(kind, home, port, db_url, dags, extra)
        airflow = RealAirflow(
            url=f"http://127.0.0.1:{port}",
            username=USERNAME,
            password=PASSWORD,
            home=home,
            dags_folder=dags,
            warehouse=Path(env["FOOD_DELIVERY_WAREHOUSE"]),
            env=env,
            kind=kind,
        )
        if not from_template:
            _set_up(runner, airflow)
            save_template(database, kind.template_db, kind.template_mark)
        deadline = time.monotonic() + ready_timeout_s
        for name, args in kind.processes(port):
            runner.spawn(name, args, env)
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
    # Manual use: `python tests/airflow/harness.py [2]` starts Airflow 3 (or 2) and waits for
    # Ctrl-C/SIGTERM.
    import sys

    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)
    chosen = AIRFLOW2 if sys.argv[1:] == ["2"] else AIRFLOW3
    t0 = time.monotonic()
    ensure_installed(chosen)
    t1 = time.monotonic()
    with start_airflow(kind=chosen) as af:
        t2 = time.monotonic()
        print(f"install check {t1 - t0:.1f}s, start-to-ready {t2 - t1:.1f}s")
        print(f"Airflow {chosen.version} at {af.url} (admin/admin), home {af.home}")
        with contextlib.suppress(KeyboardInterrupt):
            signal.pause()
