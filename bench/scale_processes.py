"""What bench/scale_bench.py runs and watches: the DAGs it previews and fails (picked from the
synthetic catalog), the Marquez stand-in in a process of its own (holding N synthetic jobs,
logging every request it receives), `backfill-bot serve` as a subprocess (its RSS read from
/proc, its log tailed), and a fresh database per run."""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import gc
import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections import Counter, defaultdict, deque
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import islice
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import aiohttp
from alert_latency_bench import Failure, synthetic_failures
from lineage_fetch_bench import events

from standins.http_server import start_app
from standins.marquez.middleware import REQUESTS
from standins.marquez.server import create_app
from standins.marquez.state import MarquezState

POSTGRES_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
WIDTH = 100  # jobs per layer in lineage_fetch_bench.events
_OURS = ("SLACK_", "MARQUEZ_", "AIRFLOW_", "BOT_", "OPENLINEAGE_", "SPARK_", "LOG_FORMAT")


@dataclass(frozen=True)
class Pick:
    index: int
    dags: int  # in its plan: the DAG and everything downstream

    @property
    def name(self) -> str:
        return f"job{self.index:05d}"

    @property
    def layer(self) -> int:
        return 0 if self.index == 0 else (self.index - 1) // WIDTH + 1


Picks = tuple[list[Pick], list[Pick], list[Failure]]  # cold previews, warm ones, FAIL events


def choose(jobs: int, cap: int, cold: int, warm: int, fails: int) -> Picks:
    """DAGs to preview (plans of 2..cap DAGs, spread over the layers where they are) and the
    FAIL events, from the catalog the stand-in holds."""
    catalog = events(jobs)
    failures = synthetic_failures(catalog, jobs, fails)
    readers: dict[int, set[int]] = defaultdict(set)
    for event in catalog:
        for dataset in event["inputs"]:
            readers[int(dataset["name"][2:])].add(int(event["job"]["name"][3:]))
    del catalog

    def downstream(start: int) -> int:  # stops counting past the cap
        seen, todo = {start}, [start]
        while todo and len(seen) <= cap:
            for reader in readers.get(todo.pop(), ()):
                if reader not in seen:
                    seen.add(reader)
                    todo.append(reader)
        return len(seen)

    sampled = [Pick(i, downstream(i)) for i in range(0, jobs, max(1, jobs // 3000))]
    fits = [p for p in sampled if 2 <= p.dags <= cap] or [p for p in sampled if p.dags <= cap]
    # Most DAGs that fit plan 2-5 DAGs: half the picks are spread over the layers, half over
    # the bigger plans (10 DAGs or more; the biggest first, then the middle one, when cold).
    big = sorted((p for p in fits if p.dags >= 10), key=lambda p: -p.dags) or fits
    first = list(dict.fromkeys([big[0], big[len(big) // 2], fits[len(fits) // 2]]))[:cold]
    rest = [p for p in fits if p not in first]
    later = spread(rest, warm // 2) + spread([p for p in big if p not in first], warm - warm // 2)
    return first, sorted(set(later), key=lambda p: p.index), failures


def spread(items: list[Pick], count: int) -> list[Pick]:
    if len(items) <= count:
        return list(items)
    return [items[round(n * (len(items) - 1) / max(1, count - 1))] for n in range(count)]


async def readyz(http: aiohttp.ClientSession, url: str) -> dict[str, Any] | None:
    try:
        async with http.get(f"{url}/readyz") as reply:
            body = await reply.json(content_type=None)
    except (aiohttp.ClientError, TimeoutError, ValueError):
        return None
    found = (body.get("checks") or {}).get("lineage_index") if isinstance(body, dict) else None
    return found if isinstance(found, dict) else None


def route(request: str) -> str:
    """`GET /api/v1/jobs?limit=100` → `GET /api/v1/jobs`; a job's own path → `…/jobs/{job}`."""
    method, _, path = request.partition(" ")
    parts = path.split("?", 1)[0].split("/")
    if len(parts) > 4 and parts[3] == "namespaces":  # /api/v1/namespaces/{ns}/…
        parts[4] = "{ns}"
        if len(parts) > 6:
            parts[6] = "{name}"
    if len(parts) > 5 and parts[3:5] == ["jobs", "runs"]:
        parts[5] = "{id}"
    return f"{method} {'/'.join(parts)}"


# -- the Marquez stand-in, in its own process -------------------------------------------------


def _marquez_main(jobs: int, latency: dict[str, float], conn: Connection) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the bench's to handle
    asyncio.run(_marquez(jobs, latency, conn))


async def _marquez(jobs: int, latency: dict[str, float], conn: Connection) -> None:
    began = time.perf_counter()
    gc.disable()  # ~40 objects per event: collections would only slow the load down
    state = MarquezState()
    for item in events(jobs):
        state.ingest(item)
    gc.enable()
    gc.freeze()
    app = create_app(state, latency)
    log: deque[str] = deque()  # every request, not the latest 100,000: counts stay exact
    app[REQUESTS] = log
    url, runner = await start_app(app, "127.0.0.1", 0)
    try:
        conn.send((url, len(state.datasets), time.perf_counter() - began))
        loop = asyncio.get_running_loop()
        while (ask := await loop.run_in_executor(None, conn.recv)) is not None:
            conn.send((len(log), list(islice(log, ask, None))))
    except EOFError:  # the bench went away
        pass
    finally:
        await runner.cleanup()


@dataclass
class Marquez:
    """The running stand-in: its URL, what it holds, and the requests it received."""

    url: str
    datasets: int
    load_s: float
    _conn: Connection
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def requests(self, since: int = 0) -> tuple[int, list[str]]:
        """(requests received so far, those from `since` on) as `METHOD /path?query`."""
        async with self._lock:
            self._conn.send(since)
            answer: tuple[int, list[str]] = await asyncio.to_thread(self._conn.recv)
            return answer


@contextlib.asynccontextmanager
async def marquez_process(jobs: int, latency: Mapping[str, float]) -> AsyncIterator[Marquez]:
    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    process = context.Process(
        target=_marquez_main, args=(jobs, dict(latency), child), daemon=True, name="marquez"
    )
    process.start()
    child.close()
    try:
        url, datasets, load_s = await asyncio.to_thread(parent.recv)
        yield Marquez(url, datasets, load_s, parent)
    finally:
        with contextlib.suppress(OSError):
            parent.send(None)
        await asyncio.to_thread(process.join, 30)
        if process.is_alive():
            process.kill()
            await asyncio.to_thread(process.join, 10)
        parent.close()


# -- `backfill-bot serve` -----------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def serve_command() -> list[str]:
    script = Path(sys.executable).with_name("backfill-bot")
    if script.exists():
        return [str(script), "serve"]
    return [sys.executable, "-m", "bot", "serve"]


def status_mb(pid: int, field_name: str) -> float | None:
    """`VmRSS` (now) or `VmHWM` (peak) of `pid` in MB; None once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith(f"{field_name}:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


class Serve:
    """`backfill-bot serve` in a session of its own (Ctrl-C in the terminal is not its), with
    stdout and stderr in `log`; `stop()` ends it (SIGTERM, then SIGKILL)."""

    def __init__(self, env: Mapping[str, str], log: Path) -> None:
        clean = {k: v for k, v in os.environ.items() if not k.startswith(_OURS)}
        clean.pop("DATABASE_URL", None)
        clean.pop("PORT", None)
        self.log = log
        self._out = log.open("wb")
        self.started = time.perf_counter()
        self.process = subprocess.Popen(
            serve_command(),
            env={**clean, **env},
            stdout=self._out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.pid = self.process.pid
        self._read = 0
        atexit.register(self._kill)  # should the bench die before stop()

    async def answering(self, url: str, timeout_s: float = 300.0) -> None:
        """Once `GET /healthz` answers 200 (the process is up and listening)."""
        deadline = time.perf_counter() + timeout_s
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as http:
            while time.perf_counter() < deadline:
                if self.process.poll() is not None:
                    raise RuntimeError(f"serve exited ({self.process.returncode}): {self.log}")
                with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                    async with http.get(f"{url}/healthz") as reply:
                        if reply.status == 200:
                            return
                await asyncio.sleep(0.02)
        raise RuntimeError(f"serve did not answer /healthz within {timeout_s:g} s")

    def rss_mb(self) -> float | None:
        return status_mb(self.pid, "VmRSS")

    def peak_mb(self) -> float | None:
        return status_mb(self.pid, "VmHWM")

    def new_log_lines(self) -> list[str]:
        with self.log.open("rb") as log:
            log.seek(self._read)
            chunk = log.read()
        end = chunk.rfind(b"\n") + 1
        self._read += end
        return chunk[:end].decode(errors="replace").splitlines()

    def stop(self, timeout_s: float = 30.0) -> int | None:
        """SIGTERM and wait (serve finishes what it does), SIGKILL past `timeout_s`."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._out.close()
        atexit.unregister(self._kill)
        return self.process.returncode

    def _kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()


# -- the database ------------------------------------------------------------------------------


@contextlib.contextmanager
def fresh_database(kind: str, scratch: Path) -> Iterator[str]:
    """An empty database: a new SQLite file, or a new PostgreSQL database (dropped after)."""
    if kind == "sqlite":
        yield f"sqlite:///{scratch / 'bot.db'}"
        return
    import psycopg

    name = f"scale_bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"{POSTGRES_ADMIN_URL.rsplit('/', 1)[0]}/{name}"
    finally:
        with psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def by_route(requests: list[str], leave_out: frozenset[str] = frozenset()) -> Counter[str]:
    return Counter(r for r in map(route, requests) if r not in leave_out)
