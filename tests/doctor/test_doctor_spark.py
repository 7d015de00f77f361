"""The Spark row of `backfill-bot doctor`: what SPARK_MASTER names, whether that master answers,
and how many workers its web UI lists.

A fake master stands in here: a TCP listener for the master's port and a web server answering
`/json/` as a standalone master's web UI does (tests/spark/test_spark_standalone.py runs doctor
against a real cluster). Doctor runs the way bot/cli.py runs it, `doctor.main(settings)` in a
thread, and one test runs the `backfill-bot` command itself.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from bot import doctor
from bot.settings import SettingsError, load_settings
from standins.marquez.server import running_standin
from tests.doctor.test_doctor import Shown, parse


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def worker(state: str = "ALIVE") -> dict[str, Any]:
    return {"id": "worker-1", "host": "127.0.0.1", "cores": 1, "memory": 1024, "state": state}


@dataclass
class FakeMaster:
    port: int
    ui_url: str
    state: dict[str, Any] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"


@pytest.fixture
async def master() -> AsyncIterator[FakeMaster]:
    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()  # a real master waits for its RPC handshake; doctor sends none

    listener = await asyncio.start_server(accept, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    fake = FakeMaster(port, "")

    async def json_state(request: web.Request) -> web.Response:
        return web.json_response(fake.state)

    app = web.Application()
    app.router.add_get("/json/", json_state)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    fake.ui_url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    fake.state = {
        "url": fake.url,
        "status": "ALIVE",
        "workers": [worker(), worker(), worker("DEAD")],
        "aliveworkers": 2,
    }
    try:
        yield fake
    finally:
        await runner.cleanup()
        listener.close()
        await listener.wait_closed()


async def spark_row(tmp_path: Path, **env: str) -> Shown:
    """Doctor's Spark row with these settings. Marquez is an empty stand-in (a closed port
    would cost each run the Marquez client's retries, 0.6 s) and the database points at
    nothing; only the Spark row matters here."""
    async with running_standin() as marquez:
        settings = load_settings(
            {
                "MARQUEZ_URL": marquez.url,
                "DATABASE_URL": f"sqlite:///{tmp_path / 'absent.db'}",
                "BOT_EXECUTOR": "spark",
                **env,
            }
        )
        out = StringIO()
        await asyncio.to_thread(doctor.main, settings, out)
    [row] = parse(out.getvalue()).get("Spark", [Shown("", "no Spark row", "")])
    return row


async def test_a_master_with_alive_workers_is_ok(master: FakeMaster, tmp_path: Path) -> None:
    row = await spark_row(tmp_path, SPARK_MASTER=master.url, SPARK_MASTER_UI_URL=master.ui_url)
    assert row == Shown(
        "OK",
        f"{master.url} answers; its web UI ({master.ui_url}) shows 2 ALIVE workers: "
        "2 cores, 2048 MB",
        "",
    )


async def test_a_master_without_alive_workers_fails(master: FakeMaster, tmp_path: Path) -> None:
    master.state["workers"] = [worker("DEAD")]
    row = await spark_row(tmp_path, SPARK_MASTER=master.url, SPARK_MASTER_UI_URL=master.ui_url)
    assert row.result == "FAIL"
    assert "has no ALIVE worker" in row.detail
    assert row.fix.startswith("start a worker against it")
    assert master.url in row.fix


async def test_nothing_listening_at_the_master_fails_naming_the_address(tmp_path: Path) -> None:
    port = closed_port()
    row = await spark_row(tmp_path, SPARK_MASTER=f"spark://127.0.0.1:{port}")
    assert row.result == "FAIL"
    assert row.detail.startswith(f"nothing answers at 127.0.0.1:{port}: "), row.detail
    assert "start the master" in row.fix


async def test_a_master_whose_web_ui_is_not_found_is_a_warning_saying_so(
    master: FakeMaster, tmp_path: Path
) -> None:
    ui = f"http://127.0.0.1:{closed_port()}"
    row = await spark_row(tmp_path, SPARK_MASTER=master.url, SPARK_MASTER_UI_URL=ui)
    assert row.result == "WARN"
    assert row.detail.startswith(f"{master.url} accepts connections; its web UI at {ui} did not")
    assert row.detail.endswith("workers not counted")
    assert "SPARK_MASTER_UI_URL" in row.fix


async def test_the_default_web_ui_is_port_8080_of_the_masters_host(
    master: FakeMaster, tmp_path: Path
) -> None:
    row = await spark_row(tmp_path, SPARK_MASTER=f"spark://localhost:{master.port}")
    # Not the fake's UI, whatever may listen on 8080 here: never an OK row.
    assert row.result == "WARN"
    assert "web UI at http://localhost:8080 " in row.detail, row.detail


async def test_a_standby_master_is_a_warning(master: FakeMaster, tmp_path: Path) -> None:
    master.state["status"] = "STANDBY"
    row = await spark_row(tmp_path, SPARK_MASTER=master.url, SPARK_MASTER_UI_URL=master.ui_url)
    assert row.result == "WARN"
    assert row.detail.endswith("says the master is STANDBY, not ALIVE")


async def test_standby_masters_are_each_reached(master: FakeMaster, tmp_path: Path) -> None:
    closed = closed_port()
    both = f"{master.url},127.0.0.1:{master.port}"
    row = await spark_row(tmp_path, SPARK_MASTER=both)
    assert row == Shown(
        "WARN", f"{both} accepts connections; with several masters doctor counts no workers",
        "set SPARK_MASTER_UI_URL to the active master's web UI",
    )  # fmt: skip
    one_down = f"{master.url},[::1]:{closed}"
    row = await spark_row(tmp_path, SPARK_MASTER=one_down, SPARK_MASTER_UI_URL=master.ui_url)
    assert row.result == "WARN"
    assert row.detail.startswith(f"{one_down} accepts connections on some addresses only, not at ")
    assert f"[::1]:{closed}: " in row.detail


async def test_a_web_ui_of_another_master_is_a_warning(master: FakeMaster, tmp_path: Path) -> None:
    master.state["url"] = "spark://elsewhere:7077"
    row = await spark_row(tmp_path, SPARK_MASTER=master.url, SPARK_MASTER_UI_URL=master.ui_url)
    assert row.result == "WARN"
    assert "belongs to spark://elsewhere:7077, not to" in row.detail


@pytest.mark.parametrize(
    ("value", "result", "detail"),
    [
        ("local[4]", "OK", "local[4]: local mode, Spark runs inside the bot"),
        ("local[*]", "OK", "local[*]: local mode, Spark runs inside the bot"),
        ("yarn", "SKIP", "yarn: not checked (doctor looks at local and spark:// masters only)"),
        ("", "OK", "SPARK_MASTER is not set: backfills run on Spark inside the bot (local[*])"),
    ],
)
async def test_local_masters_say_so_and_others_are_not_checked(
    tmp_path: Path, value: str, result: str, detail: str
) -> None:
    assert await spark_row(tmp_path, SPARK_MASTER=value) == Shown(result, detail, "")


async def test_a_master_the_bot_does_not_use_is_skipped(tmp_path: Path) -> None:
    row = await spark_row(
        tmp_path, SPARK_MASTER="spark://nowhere:7077", BOT_EXECUTOR="airflow",
        AIRFLOW_URL=f"http://127.0.0.1:{closed_port()}",
    )  # fmt: skip
    assert row == Shown(
        "SKIP", "SPARK_MASTER is spark://nowhere:7077, but backfills run on airflow: "
        "the bot starts no Spark", "",
    )  # fmt: skip
    unused = await spark_row(tmp_path, BOT_EXECUTOR="manual")
    assert unused.detail == "no Spark row"


@pytest.mark.parametrize(
    "value", ["spark://127.0.0.1", "spark://host:99999", "spark//host:7077", "sparky", "local[x]"]
)
async def test_a_value_that_is_no_master_url_fails_with_the_forms_spark_takes(
    tmp_path: Path, value: str
) -> None:
    row = await spark_row(tmp_path, SPARK_MASTER=value)
    assert row.result == "FAIL"
    assert row.detail == (
        f"SPARK_MASTER {value!r} is not a Spark master URL "
        "(local, local[N], local[*] or spark://HOST:PORT[,HOST:PORT])"
    )
    assert row.fix.startswith("set SPARK_MASTER to local[*] (Spark inside the bot) or spark://")


async def test_the_command_prints_the_spark_row_and_fails_on_a_bad_master(tmp_path: Path) -> None:
    """`backfill-bot doctor` itself: the row in its table, exit code 1, no traceback."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BOT_", "SPARK_", "AIRFLOW"))}
    env.update(
        MARQUEZ_URL=f"http://127.0.0.1:{closed_port()}",
        DATABASE_URL=f"sqlite:///{tmp_path / 'absent.db'}",
        BOT_EXECUTOR="spark",
        SPARK_MASTER="spark://master",
    )
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", "doctor", env=env, cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), timeout=120)
    text = out.decode()
    assert process.returncode == 1, text + err.decode()
    assert "Traceback" not in text + err.decode()
    [row] = parse(text)["Spark"]
    assert row.result == "FAIL"
    assert row.detail.startswith("SPARK_MASTER 'spark://master' is not a Spark master URL")
    assert "fix: set SPARK_MASTER to local[*]" in text


def test_a_web_ui_url_that_is_no_http_url_is_a_settings_error() -> None:
    with pytest.raises(SettingsError) as error:
        load_settings({"SPARK_MASTER_UI_URL": "spark-master:8080"})
    assert str(error.value) == (
        "SPARK_MASTER_UI_URL: 'spark-master:8080' is not an http(s) URL such as "
        "http://spark-master:8080"
    )
    assert load_settings({"SPARK_MASTER_UI_URL": "http://m:8080/"}).spark_master_ui_url == (
        "http://m:8080"
    )
