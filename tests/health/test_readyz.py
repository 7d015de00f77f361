"""`GET /readyz` and `GET /healthz` as a load balancer or Kubernetes probes them: ready only
when the database answers at the schema the code expects, Slack takes the token and Marquez
answers; otherwise 503 naming each check that failed, within a bounded time however dead a
dependency is, and never showing MARQUEZ_URL's password. A flood of probes costs Slack one
auth.test. On SQLite and on PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import psycopg
import pytest
from aiohttp import web
from sqlalchemy.engine import make_url

from bot.config import BotConfig, parse_config
from bot.core.db import downgrade, sync_url, upgrade
from bot.core.schema_state import head_revisions
from standins.marquez.server import StandInServer, start_standin
from tests.support.e2e import Bot, eventually, running_bot

QUIET = {"watch": {"poll": False}, "index": {"enabled": False}}


async def probe(bot: Bot, path: str = "/readyz") -> tuple[int, Any]:
    async with aiohttp.ClientSession() as http, http.get(f"{bot.url}{path}") as reply:
        assert reply.content_type == "application/json"
        return reply.status, await reply.json()


async def test_ready_when_every_dependency_answers(
    database_url: str, food_delivery_marquez: StandInServer, bot_config: BotConfig
) -> None:
    async with running_bot(database_url, food_delivery_marquez, bot_config) as bot:
        status, body = await probe(bot)
        alive = await probe(bot, "/healthz")
    assert status == 200
    assert body["status"] == "ready"
    index = body["checks"].pop("lineage_index")  # reported, never failing the probe
    assert index["ok"] is True
    assert index["state"] == "current"
    assert index["jobs_read"] == index["jobs_total"] > 0
    assert body["checks"] == {
        "database": {"ok": True},
        "migrations": {"ok": True, "revision": ", ".join(head_revisions())},
        "slack": {"ok": True},
        "marquez": {"ok": True},
    }
    assert alive == (200, {"ok": True, "status": "alive"})


async def test_a_flood_of_probes_asks_slack_once(
    database_url: str, food_delivery_marquez: StandInServer, bot_config: BotConfig
) -> None:
    async with running_bot(database_url, food_delivery_marquez, bot_config) as bot:
        together = await asyncio.gather(*(probe(bot) for _ in range(20)))
        after = [await probe(bot) for _ in range(20)]
    assert {status for status, _ in together + after} == {200}
    asked = [call for call in bot.slack.state.calls if call.method == "auth.test"]
    assert len(asked) == 1  # the port is public: a request loop must not spend Slack's limit


async def test_a_refused_token_and_marquez_down_are_each_named(database_url: str) -> None:
    marquez = await start_standin()

    class WithPassword:  # MARQUEZ_URL with credentials: the answer must not show them
        url = marquez.url.replace("http://", "http://bot:s3cret-pw@")

    env = {"BOT_EXECUTOR": "manual", "SLACK_BOT_TOKEN": "xoxb-revoked"}
    config = parse_config(QUIET)
    async with running_bot(database_url, WithPassword(), config, env=env) as bot:  # type: ignore[arg-type]
        await marquez.stop()
        status, body = await probe(bot)
    assert status == 503
    assert body["status"] == "not ready"
    checks = body["checks"]
    assert checks["database"] == {"ok": True}
    assert checks["migrations"]["ok"] is True
    assert checks["slack"] == {"ok": False, "error": "auth.test answered invalid_auth"}
    assert checks["marquez"]["ok"] is False
    assert "is unreachable" in checks["marquez"]["error"]
    assert marquez.url.removeprefix("http://") in checks["marquez"]["error"]
    assert "s3cret-pw" not in json.dumps(body)


async def test_a_percent_encoded_marquez_password_is_not_shown(database_url: str) -> None:
    with socket.socket() as held:  # a port nothing listens on once it is let go
        held.bind(("127.0.0.1", 0))
        port = held.getsockname()[1]

    class WithPassword:
        url = f"http://bot:p%40ss@127.0.0.1:{port}"

    async with running_bot(database_url, WithPassword(), parse_config(QUIET)) as bot:  # type: ignore[arg-type]
        status, body = await probe(bot)
    assert status == 503
    assert body["checks"]["marquez"]["ok"] is False
    shown = json.dumps(body)
    assert "p%40ss" not in shown  # as typed
    assert "p@ss" not in shown  # decoded


async def test_a_database_behind_the_code_is_not_ready(
    database_url: str, food_delivery_marquez: StandInServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An answer is reused for RESULT_TTL_S (5 s): a shorter reuse, the same fresh answer after it.
    monkeypatch.setattr("bot.health.readiness.RESULT_TTL_S", 0.5)
    async with running_bot(database_url, food_delivery_marquez, parse_config(QUIET)) as bot:
        await asyncio.to_thread(downgrade, database_url, "-1")
        try:
            status, body = await probe(bot)
        finally:
            await asyncio.to_thread(upgrade, database_url)
        # The answer is reused for a few seconds: the next fresh one is ready again.
        again = await eventually(lambda: ready(bot), timeout_s=30)
    assert status == 503
    check = body["checks"]["migrations"]
    assert check["ok"] is False
    [head] = head_revisions()
    assert check["error"].startswith("the database is at revision ")
    assert check["error"].endswith(f"the bot's migrations end at {head}")
    assert body["checks"]["database"] == {"ok": True}
    assert again


async def test_a_database_gone_away_is_not_ready(
    fresh_postgres_db: str, food_delivery_marquez: StandInServer
) -> None:
    config = parse_config(QUIET)
    async with running_bot(fresh_postgres_db, food_delivery_marquez, config) as bot:
        await postgres(fresh_postgres_db, "DROP DATABASE {} WITH (FORCE)")
        status, body = await probe(bot)
    assert status == 503
    for name in ("database", "migrations"):
        assert body["checks"][name]["ok"] is False
        assert "does not exist" in body["checks"][name]["error"]
    assert body["checks"]["slack"] == {"ok": True}


async def test_an_empty_database_is_not_migrated(
    database_url: str, food_delivery_marquez: StandInServer
) -> None:
    async with running_bot(database_url, food_delivery_marquez, parse_config(QUIET)) as bot:
        await asyncio.to_thread(downgrade, database_url, "base")  # every table gone
        status, body = await probe(bot)
    assert status == 503
    assert body["checks"]["database"] == {"ok": True}
    [head] = head_revisions()
    assert body["checks"]["migrations"] == {
        "ok": False,
        "error": f"the database is not migrated at all; the bot's migrations end at {head}",
    }


async def ready(bot: Bot) -> bool:
    status, _ = await probe(bot)
    return status == 200


async def postgres(database_url: str, statement: str) -> None:
    """Run `statement` on the server of `database_url` ({} is its database's name)."""
    url = make_url(sync_url(database_url))
    admin = url.set(database="postgres", drivername="postgresql").render_as_string(False)

    def run() -> None:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(statement.format(f'"{url.database}"'))  # type: ignore[arg-type]

    await asyncio.to_thread(run)


@pytest.fixture
async def silent_marquez() -> AsyncIterator[str]:
    """A Marquez that takes connections and never answers."""
    release = asyncio.Event()

    async def hang(_: web.Request) -> web.Response:
        await release.wait()
        return web.Response(status=503)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", hang)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    release.set()
    await runner.cleanup()


async def test_a_silent_marquez_makes_the_probe_answer_not_hang(
    database_url: str, silent_marquez: str
) -> None:
    class Silent:
        url = silent_marquez

    async with running_bot(database_url, Silent(), parse_config(QUIET)) as bot:  # type: ignore[arg-type]
        status, body = await probe(bot)
    assert status == 503
    assert body["checks"]["marquez"]["ok"] is False
    # Marquez's client gives up first, or the check's bound: either says it did not answer.
    assert "no answer within" in body["checks"]["marquez"]["error"]
    assert body["checks"]["database"] == {"ok": True}
