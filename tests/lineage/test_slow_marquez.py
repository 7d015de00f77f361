"""A Marquez that takes its time on a deep `/lineage` (10-15 s on big deployments: Marquez issue
#3058): plans still come, the person is told the bot is still asking, and nothing reports
Marquez as unreachable because one heavy read outlasted the ordinary request timeout."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from aiohttp import web

from bot.config import parse_config
from standins.http_server import start_app
from standins.marquez.server import StandInServer, create_app, seeded_state
from tests.cli.test_cli import cli
from tests.support.e2e import CHANNEL, REQUESTER, SLACK_ACK_S, eventually, running_bot

LINEAGE_S = 3.0  # longer than the ordinary timeout the tests set (MARQUEZ_TIMEOUT_S=1)


@pytest.fixture
async def slow_lineage() -> AsyncIterator[StandInServer]:
    """The food_delivery stand-in whose `/lineage` around example.etl_orders takes LINEAGE_S
    every time it is asked (a slow query stays slow when retried)."""

    @web.middleware
    async def delay(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        node = request.query.get("nodeId", "")
        if request.path == "/api/v1/lineage" and node.endswith(":example.etl_orders"):
            await asyncio.sleep(LINEAGE_S)
        return await handler(request)

    state = seeded_state("food_delivery")
    app = create_app(state)
    app.middlewares.append(delay)
    url, runner = await start_app(app, "127.0.0.1", 0)
    server = StandInServer(url, state, runner)
    try:
        yield server
    finally:
        await server.stop()


async def test_plan_waits_for_a_slow_lineage_and_says_so(
    tmp_path: Path, slow_lineage: StandInServer
) -> None:
    config = tmp_path / "bot.yaml"
    config.write_text(json.dumps({"limits": {"still_planning_s": 0.5}}))
    result = await cli(
        "plan", "example.etl_orders", "2021-06-04", "--json",
        env={"MARQUEZ_URL": slow_lineage.url, "MARQUEZ_TIMEOUT_S": "1", "BOT_CONFIG": str(config)},
    )  # fmt: skip
    assert result.code == 0, result.err
    assert result.json()["steps"][0]["dag_id"] == "example.etl_orders"
    assert "still asking Marquez about example.etl_orders" in result.err


async def test_a_slash_command_on_a_slow_marquez_says_it_is_still_asking(
    tmp_path: Path, slow_lineage: StandInServer
) -> None:
    # No index: every plan asks Marquez (as serve does before its first full reconcile).
    config = parse_config(
        {
            "teams": [{"name": "orders", "channel": CHANNEL, "members": [REQUESTER]}],
            "index": {"enabled": False},
            "limits": {"still_planning_s": 0.5},
        }
    )
    env = {"BOT_EXECUTOR": "manual", "MARQUEZ_TIMEOUT_S": "1"}
    # Slack's own deadline: the command is acked before the plan, which takes LINEAGE_S.
    async with running_bot(
        f"sqlite:///{tmp_path / 'bot.db'}", slow_lineage, config, env=env, ack_timeout=SLACK_ACK_S
    ) as bot:
        reply = await bot.slack.slash_command(
            "example.etl_orders 2021-06-04", user_id=REQUESTER, channel_id=CHANNEL
        )
        assert reply.status == 200
        await eventually(lambda: bot.slack.state.messages(CHANNEL), timeout_s=30)
        await bot.settle()
        told = [e.text for e in bot.slack.state.ephemerals if e.user == REQUESTER]
        preview = json.dumps(bot.slack.state.messages(CHANNEL)[-1].blocks)
    assert any("Still asking Marquez about" in text for text in told), told
    assert "example.etl_orders_7_days" in preview
