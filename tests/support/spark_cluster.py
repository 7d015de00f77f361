"""A Spark standalone cluster on loopback for the tests: one master and two workers, started with
PySpark's own launcher (`bin/spark-class` of the installed pyspark package, which has no
`sbin/start-*.sh`), each in a process group of its own so that stopping it also stops the
executors and Python workers the worker forked.

The master's ports are free ones chosen at start, the workers' are picked by Spark itself; logs,
scratch space and the workers' directories live under one temporary directory. Each worker offers
1 core and 1 GB, what one executor with Spark's default memory needs: an application gets an
executor on each worker, so its tasks spread over both.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyspark

SPARK_HOME = Path(pyspark.__file__).parent
SPARK_CLASS = SPARK_HOME / "bin" / "spark-class"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
WORKERS = 2
READY_TIMEOUT_S = 120.0  # three JVMs starting on two cores beside the rest of the suite
STOP_TIMEOUT_S = 15.0
# The daemons log warnings only, to their own files (Spark's default is INFO on the console).
LOG4J2 = """\
rootLogger.level = warn
rootLogger.appenderRef.console.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n%ex
"""

# Read by a driver whose SPARK_CONF_DIR is this one (its spark-submit reads it): the executors,
# which run a few small jobs each, start sooner on the quick compiler alone.
SPARK_DEFAULTS = "spark.executor.defaultJavaOptions -XX:TieredStopAtLevel=1\n"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Daemon:
    name: str
    process: subprocess.Popen[bytes]
    log: Path

    def tail(self, lines: int = 30) -> str:
        text = self.log.read_text(errors="replace") if self.log.is_file() else ""
        return f"--- {self.name} ({self.log}) ---\n" + "\n".join(text.splitlines()[-lines:])


@dataclass
class Cluster:
    master_url: str  # spark://127.0.0.1:PORT
    ui_url: str  # the master's web UI: /json/ says what it knows
    root: Path
    work_dirs: list[Path]
    env: dict[str, str]
    daemons: list[Daemon] = field(default_factory=list)

    def state(self) -> dict[str, Any]:
        """The master's own view: its workers, and its active and completed applications."""
        with urllib.request.urlopen(f"{self.ui_url}/json/", timeout=10) as reply:
            found: dict[str, Any] = json.load(reply)
            return found

    def executor_dirs(self, app_id: str) -> list[Path]:
        """The directory of each executor the workers started for `app_id` (`WORK/APP/N`)."""
        return sorted(p for work in self.work_dirs for p in (work / app_id).glob("*") if p.is_dir())

    def logs(self) -> str:
        return "\n".join(daemon.tail() for daemon in self.daemons)


def cluster_env(root: Path, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """What the daemons (and the executors they fork) run with: loopback only, scratch space and
    logs under `root`, no Spark settings or Python path leaking in from the test's environment."""
    conf = root / "conf"
    conf.mkdir(parents=True, exist_ok=True)
    (conf / "log4j2.properties").write_text(LOG4J2)
    (conf / "spark-defaults.conf").write_text(SPARK_DEFAULTS)
    env = {
        k: v
        for k, v in (os.environ if base is None else base).items()
        if not k.startswith(("SPARK_", "PYSPARK_")) and k != "PYTHONPATH"
    }
    env.update(
        SPARK_HOME=str(SPARK_HOME),
        SPARK_CONF_DIR=str(conf),
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_LOCAL_DIRS=str(root / "local"),
        SPARK_LOG_DIR=str(root / "logs"),
        # The quick compiler alone: the daemons only schedule, and start sooner with it.
        SPARK_DAEMON_JAVA_OPTS="-XX:TieredStopAtLevel=1",
    )
    return env


def _start(name: str, args: list[str], env: dict[str, str], logs: Path) -> Daemon:
    log = logs / f"{name}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(SPARK_CLASS), *args],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: stop() reaches what it forks
        )
    return Daemon(name, process, log)


def _alive_workers(ui_url: str) -> int:
    try:
        with urllib.request.urlopen(f"{ui_url}/json/", timeout=5) as reply:
            state = json.load(reply)
    except (OSError, ValueError):  # not listening yet, or half started
        return -1
    return sum(1 for worker in state.get("workers", []) if worker.get("state") == "ALIVE")


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # the id was reused by someone else's group: ours is gone
        return False
    return True


def stop(daemons: list[Daemon]) -> None:
    """SIGTERM every daemon's process group (workers first, so the master sees them leave),
    then SIGKILL what is still there; returns once every group is gone."""
    for daemon in reversed(daemons):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(daemon.process.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    for daemon in daemons:
        with contextlib.suppress(subprocess.TimeoutExpired):
            daemon.process.wait(max(0.1, deadline - time.monotonic()))
    for daemon in daemons:
        # The daemon itself may be gone while an executor or Python worker it forked lingers.
        while _group_alive(daemon.process.pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(daemon.process.pid, signal.SIGKILL)
            time.sleep(0.05)
        daemon.process.wait()


@contextlib.contextmanager
def standalone_cluster(root: Path, workers: int = WORKERS) -> Iterator[Cluster]:
    """Start a master and `workers` workers, wait until the master lists them all ALIVE, and
    stop every process when the block ends, however it ends."""
    if not SPARK_CLASS.is_file():
        raise RuntimeError(f"no {SPARK_CLASS}: the installed pyspark cannot start a cluster")
    env = cluster_env(root)
    logs = root / "logs"
    logs.mkdir(exist_ok=True)
    port, ui_port = free_port(), free_port()
    cluster = Cluster(
        master_url=f"spark://127.0.0.1:{port}",
        ui_url=f"http://127.0.0.1:{ui_port}",
        root=root,
        work_dirs=[root / f"worker-{n}" for n in range(1, workers + 1)],
        env=env,
    )
    try:
        master_args = ["--host", "127.0.0.1", "--port", str(port), "--webui-port", str(ui_port)]
        cluster.daemons.append(_start("master", [MASTER_CLASS, *master_args], env, logs))
        for n, work in enumerate(cluster.work_dirs, start=1):
            worker_args = ["--host", "127.0.0.1", "--port", "0", "--webui-port", "0"]
            worker_args += ["--cores", "1", "--memory", "1g", "--work-dir", str(work)]
            cluster.daemons.append(
                _start(f"worker-{n}", [WORKER_CLASS, *worker_args, cluster.master_url], env, logs)
            )
        deadline = time.monotonic() + READY_TIMEOUT_S
        while _alive_workers(cluster.ui_url) < workers:
            exited = [d.name for d in cluster.daemons if d.process.poll() is not None]
            if exited or time.monotonic() > deadline:
                why = f"{', '.join(exited)} exited" if exited else f"{READY_TIMEOUT_S:.0f} s passed"
                raise RuntimeError(f"the Spark cluster did not start ({why}):\n{cluster.logs()}")
            time.sleep(0.2)
        yield cluster
    finally:
        stop(cluster.daemons)
