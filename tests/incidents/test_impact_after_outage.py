"""An alert raised while Marquez is down says its impact is unknown; once the watcher finds
Marquez answering again, the impact is worked out and edited into the alert, and the teams it
reaches are told in its thread. The "recovered" notice says how long Marquez was down."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from aiohttp import web

from bot.config import parse_config
from standins.http_server import start_app
from standins.marquez.server import StandInServer, create_app, seeded_state
from tests.incidents.test_incidents import CONFIG, ORDERS, event, store
from tests.support.e2e import running_bot

OPS = "C0OPS00001"


@dataclass
class Switch:
    down: bool = False


@pytest.fixture
async def flaky() -> AsyncIterator[tuple[StandInServer, Switch]]:
    """The food_delivery stand-in, answering 503 to everything while its switch is down."""
    switch = Switch()

    @web.middleware
    async def outage(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        if switch.down:
            return web.Response(status=503, text="upstream connect error")
        return await handler(request)

    state = seeded_state("food_delivery")
    app = create_app(state)
    app.middlewares.append(outage)
    url, runner = await start_app(app, "127.0.0.1", 0)
    server = StandInServer(url, state, runner)
    try:
        yield server, switch
    finally:
        await server.stop()


def shown(message: object) -> str:
    return f"{getattr(message, 'text', '')} {json.dumps(getattr(message, 'blocks', []))}"


async def test_an_alert_raised_while_marquez_was_down_gets_its_impact_when_it_is_back(
    tmp_path: Path, flaky: tuple[StandInServer, Switch]
) -> None:
    marquez, switch = flaky
    config = parse_config(
        {
            **CONFIG,
            "index": {"enabled": False},  # the impact is Marquez's to give
            # retries at once: the test needs no wait for the backoff; the alert and its edit
            # are sent at once (group_wait_s 0): how they are gathered is not this test's subject
            "watch": {
                **CONFIG["watch"],
                "ops_channel": OPS,
                "retry_max_s": 0.05,
                "group_wait_s": 0,
            },
        }
    )
    env = {"MARQUEZ_TIMEOUT_S": "1"}
    async with running_bot(f"sqlite:///{tmp_path / 'bot.db'}", marquez, config, env=env) as bot:
        switch.down = True
        assert await bot.services.poller.poll_once() == 0  # the watcher finds Marquez down
        await store(bot, event("example.etl_orders", error="disk full"))
        [alert] = bot.slack.state.messages(ORDERS)
        assert "Downstream:* unknown" in shown(alert)

        switch.down = False
        await asyncio.sleep(0.1)  # the backoff's wait
        await bot.services.poller.poll_once()
        await bot.services.incidents.settled()
        await bot.settle()

        [alert] = bot.slack.state.messages(ORDERS)
        text = shown(alert)
        assert "unknown" not in text
        for dag in ("example.etl_orders_7_days", "example.etl_delivery_7_days"):
            assert dag in text
        told = [shown(m) for m in bot.slack.state.thread(ORDERS, alert.ts)]
        assert any("<!subteam^S0ANALYTIC>" in t for t in told), told
        notices = [m.text for m in bot.slack.state.messages(OPS)]
        assert [n.split(":")[1].strip() for n in notices] == [
            "warning",
            "white_check_mark",
        ], notices
