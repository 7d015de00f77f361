"""`backfill-bot serve` as a real process: where it listens (BOT_PORT, a PaaS's PORT, `::`
beside a held IPv4 port), a taken port, SIGTERM; Socket Mode against the Slack stand-in (a bot
token refused in one line, a failing Slack waited out, a connection /readyz reports); and what
`--version`, `serve --help` and LOG_FORMAT promise."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
import tomllib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from bot.settings import Settings
from standins.slack.server import SlackStandIn, running_slack_standin

REPO = Path(__file__).resolve().parents[2]
APP_VARIABLES = (
    "MARQUEZ_", "DATABASE_", "BOT_", "SLACK_", "AIRFLOW_", "SPARK_", "OPENLINEAGE_", "LOG_FORMAT",
)  # fmt: skip


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(APP_VARIABLES) and k != "PORT"}
    env.update(extra)
    return env


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def held_port() -> Iterator[int]:
    """A port another process is listening on."""
    with socket.create_server(("127.0.0.1", 0)) as holder:
        yield int(holder.getsockname()[1])


@pytest.fixture
async def slack() -> AsyncIterator[SlackStandIn]:
    async with running_slack_standin() as standin:
        yield standin


@pytest.fixture
async def socket_slack() -> AsyncIterator[SlackStandIn]:
    async with running_slack_standin(socket_mode=True) as standin:
        yield standin


def serve_env(slack: SlackStandIn, tmp_path: Path, **extra: str) -> dict[str, str]:
    return clean_env(
        MARQUEZ_URL="http://127.0.0.1:9",  # nothing listens there; serve starts all the same
        DATABASE_URL=f"sqlite:///{tmp_path / 'serve.db'}",
        SLACK_BOT_TOKEN=slack.bot_token,
        SLACK_SIGNING_SECRET=slack.signing_secret,
        SLACK_API_URL=f"{slack.url}/api/",
        BOT_EXECUTOR="manual",
        **extra,
    )


async def cli(*args: str, env: dict[str, str]) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", *args,
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


@asynccontextmanager
async def serving(
    env: dict[str, str], log: Path
) -> AsyncIterator[tuple[asyncio.subprocess.Process, str]]:
    """`serve` and the line saying where it listens; stderr goes to `log` (it logs at INFO)."""
    with log.open("wb") as stderr:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot", "serve",
            env=env, stdout=asyncio.subprocess.PIPE, stderr=stderr,
        )  # fmt: skip
        try:
            assert process.stdout is not None
            line = (await asyncio.wait_for(process.stdout.readline(), timeout=60)).decode()
            yield process, line
        finally:
            with contextlib.suppress(ProcessLookupError):  # it may have exited already
                process.terminate()
            await asyncio.wait_for(process.wait(), timeout=30)


async def test_serve_with_its_port_taken_says_so_in_one_line(
    slack: SlackStandIn, tmp_path: Path, held_port: int
) -> None:
    code, out, err = await cli("serve", env=serve_env(slack, tmp_path, BOT_PORT=str(held_port)))
    assert (code, out) == (4, "")
    assert err == (
        f"backfill-bot: error: port {held_port} on 127.0.0.1 is in use "
        "(set BOT_PORT to a free port)\n"
    )
    assert not (tmp_path / "serve.db").exists()  # it stopped before migrating anything


async def test_serve_listens_on_a_paas_port_and_stops_cleanly_on_sigterm(
    slack: SlackStandIn, tmp_path: Path
) -> None:
    port = free_port()
    log = tmp_path / "serve.log"
    async with serving(serve_env(slack, tmp_path, PORT=str(port)), log) as (bot, line):
        assert line == f"backfill-bot listening on http://127.0.0.1:{port}\n"
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://127.0.0.1:{port}/healthz") as reply,
        ):
            assert reply.status == 200
        bot.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(bot.wait(), timeout=60)
    errors = await asyncio.to_thread(log.read_text)
    assert code == 0, errors
    assert "Traceback" not in errors


async def test_bot_port_wins_over_port(slack: SlackStandIn, tmp_path: Path) -> None:
    port = free_port()
    env = serve_env(slack, tmp_path, BOT_PORT=str(port), PORT="1")
    async with serving(env, tmp_path / "serve.log") as (_, line):
        assert line == f"backfill-bot listening on http://127.0.0.1:{port}\n"


async def test_a_bad_log_format_is_one_line_before_anything_runs(tmp_path: Path) -> None:
    database = tmp_path / "bot.db"
    env = clean_env(LOG_FORMAT="xml", DATABASE_URL=f"sqlite:///{database}")
    code, out, err = await cli("db", "upgrade", env=env)
    assert (code, out) == (4, "")
    assert err == "backfill-bot: error: LOG_FORMAT: Input should be 'text' or 'json'\n"
    assert not database.exists()


async def test_version_is_the_installed_one() -> None:
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert await cli("--version", env=clean_env()) == (0, f"backfill-bot {version}\n", "")


async def test_serve_help_lists_every_environment_variable_with_default_and_meaning() -> None:
    code, out, _ = await cli("serve", "--help", env=clean_env())
    assert code == 0
    lines = out.splitlines()
    for name in Settings.model_fields:
        [entry] = [i for i, line in enumerate(lines) if line.startswith(f"  {name.upper()} (")]
        meaning = lines[entry + 1]
        assert meaning.startswith("      "), name
        assert meaning.strip(), name
    for variable, default in [
        ("LOG_FORMAT", "text"),
        ("BOT_PORT", "3000"),
        ("PORT", "unset"),
        ("BOT_HOST", "127.0.0.1"),
        ("DATABASE_URL", "sqlite:///./var/backfill-bot.db"),
    ]:
        assert f"  {variable} (default: {default})" in lines
    assert "one JSON object" in out  # LOG_FORMAT's meaning
    for endpoint in ("POST /slack/events", "GET /healthz", "GET /readyz", "GET /metrics"):
        assert endpoint in out


async def test_the_procfile_listens_where_a_paas_router_reaches_it(
    slack: SlackStandIn, tmp_path: Path
) -> None:
    command = (REPO / "Procfile").read_text().split("web:", 1)[1].strip()
    port = free_port()
    env = serve_env(slack, tmp_path, PORT=str(port))
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    with (tmp_path / "serve.log").open("wb") as stderr:
        process = await asyncio.create_subprocess_exec(
            "bash", "-c", command,  # as Heroku runs it; bash execs a lone command in place
            env=env, stdout=asyncio.subprocess.PIPE, stderr=stderr,
        )  # fmt: skip
        try:
            assert process.stdout is not None
            line = (await asyncio.wait_for(process.stdout.readline(), timeout=60)).decode()
            log = await asyncio.to_thread((tmp_path / "serve.log").read_text)
            assert line == f"backfill-bot listening on http://0.0.0.0:{port}\n", log
        finally:
            with contextlib.suppress(ProcessLookupError):  # it may have exited already
                process.terminate()
            await asyncio.wait_for(process.wait(), timeout=30)


async def test_serve_on_ipv6_any_is_not_blocked_by_a_held_ipv4_port(
    slack: SlackStandIn, tmp_path: Path
) -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6 on this machine")
    with socket.create_server(("0.0.0.0", 0)) as holder:  # the IPv4 port only
        port = int(holder.getsockname()[1])
        env = serve_env(slack, tmp_path, BOT_HOST="::", BOT_PORT=str(port))
        async with serving(env, tmp_path / "serve.log") as (_, line):
            log = await asyncio.to_thread((tmp_path / "serve.log").read_text)
            assert line == f"backfill-bot listening on http://:::{port}\n", log


def socket_env(slack: SlackStandIn, tmp_path: Path, app_token: str) -> dict[str, str]:
    """Socket Mode: an app-level token and no signing secret (blank is unset)."""
    env = serve_env(slack, tmp_path, SLACK_APP_TOKEN=app_token, BOT_PORT=str(free_port()))
    env["SLACK_SIGNING_SECRET"] = ""
    return env


async def until(check: Callable[[], Awaitable[bool]]) -> None:
    """Poll `check` until it holds (the process works on its own schedule)."""
    for _ in range(600):
        if await check():
            return
        await asyncio.sleep(0.1)
    raise AssertionError("condition not met in time")


async def readyz(env: dict[str, str]) -> dict[str, dict[str, object]]:
    url = f"http://127.0.0.1:{env['BOT_PORT']}/readyz"
    async with aiohttp.ClientSession() as session, session.get(url) as reply:
        checks: dict[str, dict[str, object]] = (await reply.json())["checks"]
        return checks


async def test_serve_with_a_bot_token_as_the_app_token_says_why_in_one_line(
    socket_slack: SlackStandIn, tmp_path: Path
) -> None:
    env = socket_env(socket_slack, tmp_path, socket_slack.bot_token)  # xoxb-…, not xapp-…
    code, _, err = await cli("serve", env=env)
    assert code == 4, err
    [error] = [line for line in err.splitlines() if "error" in line.lower()]
    assert error.startswith("backfill-bot: error: SLACK_APP_TOKEN was refused by Slack")
    assert "not_allowed_token_type" in error
    assert "Traceback" not in err
    assert socket_slack.socket.connections == []


async def test_serve_in_socket_mode_connects_and_stops_cleanly_on_sigterm(
    socket_slack: SlackStandIn, tmp_path: Path
) -> None:
    env = socket_env(socket_slack, tmp_path, socket_slack.app_token)
    log = tmp_path / "serve.log"
    async with serving(env, log) as (bot, _):
        await socket_slack.socket.wait_connected(timeout_s=60)

        async def connected() -> bool:
            return (await readyz(env))["socket_mode"] == {"ok": True}

        await until(connected)  # once `serve` has the connection (a probe's answer may linger)
        bot.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(bot.wait(), timeout=60)
    errors = await asyncio.to_thread(log.read_text)
    assert code == 0, errors
    assert "Traceback" not in errors
    assert [c.id for c in socket_slack.socket.connections] == [1]
    assert not socket_slack.socket.connections[0].open  # closed on the way out


class FlakySlack:
    """Slack's Web API answering HTTP 500 `internal_error` until `recover()`, then passing
    each call on to the stand-in."""

    def __init__(self, standin: SlackStandIn) -> None:
        self.standin, self.recovered, self.url = standin, False, ""

    async def handle(self, request: web.Request) -> web.Response:
        if not self.recovered:
            return web.json_response({"ok": False, "error": "internal_error"}, status=500)
        url = f"{self.standin.url}/api/{request.match_info['method']}"
        passed = ("Authorization", "Content-Type")
        headers = {name: request.headers[name] for name in passed if name in request.headers}
        async with (
            aiohttp.ClientSession() as session,
            session.post(url, data=await request.read(), headers=headers) as reply,
        ):
            return web.json_response(await reply.json(), status=reply.status)


@pytest.fixture
async def flaky_slack(socket_slack: SlackStandIn) -> AsyncIterator[FlakySlack]:
    flaky = FlakySlack(socket_slack)
    app = web.Application()
    app.router.add_route("*", "/api/{method}", flaky.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    flaky.url = f"http://127.0.0.1:{runner.addresses[0][1]}/api/"
    yield flaky
    await runner.cleanup()


@asynccontextmanager
async def serving_through(
    flaky: FlakySlack, tmp_path: Path
) -> AsyncIterator[tuple[asyncio.subprocess.Process, dict[str, str], Path]]:
    """`serve` in Socket Mode through `flaky`, once it has failed to open a connection."""
    env = socket_env(flaky.standin, tmp_path, flaky.standin.app_token)
    env["SLACK_API_URL"] = flaky.url
    log = tmp_path / "serve.log"
    async with serving(env, log) as (bot, _):

        async def tried_or_gone() -> bool:
            text = await asyncio.to_thread(log.read_text)
            return bot.returncode is not None or "apps.connections.open failed" in text

        await until(tried_or_gone)
        assert bot.returncode is None, await asyncio.to_thread(log.read_text)  # still serving
        yield bot, env, log


async def test_serve_stops_cleanly_on_sigterm_while_slack_fails(
    flaky_slack: FlakySlack, tmp_path: Path
) -> None:
    async with serving_through(flaky_slack, tmp_path) as (bot, env, log):
        assert (await readyz(env))["socket_mode"] == {
            "ok": False,
            "error": "Socket Mode: not connected to Slack yet",
        }
        bot.send_signal(signal.SIGTERM)  # while it is retrying
        code = await asyncio.wait_for(bot.wait(), timeout=60)
    errors = await asyncio.to_thread(log.read_text)
    assert code == 0, errors
    assert "apps.connections.open failed (HTTP 500, internal_error); retrying in 1s" in errors
    assert "Traceback" not in errors
    assert "Unclosed client session" not in errors  # the handler was closed on SIGTERM


async def test_serve_connects_once_a_failing_slack_recovers(
    flaky_slack: FlakySlack, tmp_path: Path
) -> None:
    async with serving_through(flaky_slack, tmp_path) as (bot, _, log):
        flaky_slack.recovered = True
        await flaky_slack.standin.socket.wait_connected(timeout_s=60)
        bot.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(bot.wait(), timeout=60)
    errors = await asyncio.to_thread(log.read_text)
    assert code == 0, errors
    assert "Traceback" not in errors
