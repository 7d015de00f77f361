"""The Spark check of `backfill-bot doctor`: what SPARK_MASTER names, and whether that master
answers and has workers.

Doctor starts no Spark (PySpark is an optional extra, and a JVM costs seconds). For a
`spark://HOST:PORT` master it checks what can be checked from outside: the URL's form, that
something accepts a TCP connection on each HOST:PORT, and, when the master's web UI answers (at
SPARK_MASTER_UI_URL, else port 8080 of a single master's host), the master's own account of
itself in `/json/`: its status and its ALIVE workers. Without an alive worker an application
waits for executors forever, so a backfill would hang rather than fail. The row says which of
these it checked.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from dataclasses import dataclass
from typing import Any

import aiohttp

from bot.core.urls import display_url
from bot.doctor.checks import Result, Row
from bot.settings import Settings

CHECK = "Spark"
CONNECT_TIMEOUT_S = 5.0
UI_TIMEOUT_S = 10.0
DEFAULT_UI_PORT = 8080  # the standalone master's spark.master.ui.port
_LOCAL = re.compile(r"local(\[(\d+|\*)(,\d+)?\])?|local-cluster\[\d+,\d+,\d+\]")
_HOST_PORT = re.compile(r"(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):(?P<port>\d{1,5})")
NOT_CHECKED = ("yarn", "k8s://")  # valid masters doctor has no look at
MASTER_FIX = (
    "set SPARK_MASTER to local[*] (Spark inside the bot) or spark://HOST:PORT (a standalone "
    "master, port 7077 by default)"
)
START_FIX = (
    "start the master (`spark-class org.apache.spark.deploy.master.Master`, or Spark's "
    "sbin/start-master.sh) or fix SPARK_MASTER"
)
UI_FIX = "set SPARK_MASTER_UI_URL to the master's web UI (spark.master.ui.port, 8080 by default)"
ACTIVE_UI_FIX = "set SPARK_MASTER_UI_URL to the active master's web UI"
WORKER_FIX = (
    "start a worker against it (`spark-class org.apache.spark.deploy.worker.Worker "
    "{master}`, or Spark's sbin/start-worker.sh)"
)


@dataclass(frozen=True)
class Address:
    host: str
    port: int

    def __str__(self) -> str:
        return f"{_url_host(self.host)}:{self.port}"


def parse_master(master: str) -> list[Address] | None:
    """The HOST:PORTs of a `spark://` URL (several for a standby master setup), or None when it
    is not one that Spark would accept."""
    if not master.startswith("spark://"):
        return None
    found: list[Address] = []
    for part in master.removeprefix("spark://").split(","):
        match = _HOST_PORT.fullmatch(part)
        if match is None or not 1 <= int(match["port"]) <= 65535:
            return None
        found.append(Address(match["host"].strip("[]"), int(match["port"])))
    return found


async def spark_rows(settings: Settings) -> list[Row]:
    master = settings.spark_master
    if master is None:
        if settings.executor_kind != "spark":
            return []  # neither set nor used: nothing to say
        detail = "SPARK_MASTER is not set: backfills run on Spark inside the bot (local[*])"
        return [Row(CHECK, Result.OK, detail)]
    if settings.executor_kind != "spark":
        detail = (
            f"SPARK_MASTER is {master}, but backfills run on {settings.executor_kind}: "
            "the bot starts no Spark"
        )
        return [Row(CHECK, Result.SKIP, detail)]
    if _LOCAL.fullmatch(master):
        return [Row(CHECK, Result.OK, f"{master}: local mode, Spark runs inside the bot")]
    if master.startswith(NOT_CHECKED):
        detail = f"{master}: not checked (doctor looks at local and spark:// masters only)"
        return [Row(CHECK, Result.SKIP, detail)]
    addresses = parse_master(master)
    if addresses is None:
        detail = (
            f"SPARK_MASTER {master!r} is not a Spark master URL "
            "(local, local[N], local[*] or spark://HOST:PORT[,HOST:PORT])"
        )
        return [Row(CHECK, Result.FAIL, detail, MASTER_FIX)]
    return [await _standalone_row(settings, master, addresses)]


async def _refused(address: Address) -> str | None:
    """Why nothing accepts a connection at `address`, or None when something does."""
    try:
        _, writer = await asyncio.wait_for(
            asyncio.open_connection(address.host, address.port), CONNECT_TIMEOUT_S
        )
    except TimeoutError:
        return f"{address}: no answer within {CONNECT_TIMEOUT_S:.0f} s"
    except OSError as exc:
        return f"{address}: {exc.strerror or exc}"
    writer.close()
    # The master may drop a connection that says nothing: it did accept it.
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return None


async def _standalone_row(settings: Settings, master: str, addresses: list[Address]) -> Row:
    refused = [r for r in await asyncio.gather(*map(_refused, addresses)) if r is not None]
    if len(refused) == len(addresses):
        return Row(CHECK, Result.FAIL, f"nothing answers at {'; '.join(refused)}", START_FIX)
    answering = f"{master} accepts connections"
    if refused:  # standby masters: one down is worth knowing, not fatal
        detail = f"{answering} on some addresses only, not at {'; '.join(refused)}"
        return Row(CHECK, Result.WARN, detail, START_FIX)
    ui = settings.spark_master_ui_url
    if ui is None and len(addresses) > 1:
        detail = f"{answering}; with several masters doctor counts no workers"
        return Row(CHECK, Result.WARN, detail, ACTIVE_UI_FIX)
    ui = ui or f"http://{_url_host(addresses[0].host)}:{DEFAULT_UI_PORT}"
    shown = display_url(ui)
    try:
        state = await _master_state(ui)
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        why = str(exc) or type(exc).__name__
        detail = f"{answering}; its web UI at {shown} did not answer ({why}): workers not counted"
        return Row(CHECK, Result.WARN, detail, UI_FIX)
    return _state_row(master, addresses, shown, state)


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


async def _master_state(ui: str) -> dict[str, Any]:
    timeout = aiohttp.ClientTimeout(total=UI_TIMEOUT_S)
    async with (
        aiohttp.ClientSession(timeout=timeout) as http,
        http.get(f"{ui}/json/") as reply,
    ):
        reply.raise_for_status()
        state = await reply.json(content_type=None)
    if not isinstance(state, dict) or not isinstance(state.get("workers"), list):
        raise ValueError("not a Spark master's /json/")
    return state


def _state_row(master: str, addresses: list[Address], ui: str, state: dict[str, Any]) -> Row:
    url = str(state.get("url", ""))
    owner = parse_master(url) or []
    if not {a.port for a in owner} & {a.port for a in addresses}:
        detail = f"the web UI at {ui} belongs to {url or 'another master'}, not to {master}"
        return Row(CHECK, Result.WARN, detail, UI_FIX)
    status = state.get("status")
    if status != "ALIVE":
        detail = f"{master}'s web UI at {ui} says the master is {status}, not ALIVE"
        return Row(CHECK, Result.WARN, detail, "check the active master of the cluster")
    alive = [w for w in state["workers"] if isinstance(w, dict) and w.get("state") == "ALIVE"]
    if not alive:
        detail = f"{master} answers but has no ALIVE worker (its web UI: {ui}): nothing can run"
        return Row(CHECK, Result.FAIL, detail, WORKER_FIX.format(master=master))
    cores = sum(int(w.get("cores", 0)) for w in alive)
    memory = sum(int(w.get("memory", 0)) for w in alive)
    workers = "1 ALIVE worker" if len(alive) == 1 else f"{len(alive)} ALIVE workers"
    detail = f"{master} answers; its web UI ({ui}) shows {workers}: {cores} cores, {memory} MB"
    return Row(CHECK, Result.OK, detail)
