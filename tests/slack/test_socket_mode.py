"""Socket Mode end to end: the bot connects to the Slack stand-in over a WebSocket (an app-level
token, no signing secret, no Request URL) and the example story goes through envelopes and acks
only: `/backfill`, the preview, Approve by the orders team's approver, the run on the Airflow
stand-in to its status message and thread. Also: a connection refresh mid-story, an event whose
ack was lost delivered again and handled once, a bot token refused by apps.connections.open
with Slack's reason, and /readyz reporting the connection."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from bot.app import create_bolt_app
from bot.slack.rules.ids import ActionId
from bot.slack.service import socket_mode
from standins.demo.run import APPROVER, CHANNEL, REQUESTER
from standins.marquez.server import StandInServer
from tests.support.e2e import Bot, buttons, eventually
from tests.support.execution import (
    COMMAND,
    approve,
    finished,
    request_backfill,
    status_message,
    thread_text,
)
from tests.support.socket_mode import envelopes, socket_mode_bot


@pytest.fixture
async def bot(tmp_path: Path, food_delivery_marquez: StandInServer) -> AsyncIterator[Bot]:
    async with socket_mode_bot(tmp_path, food_delivery_marquez) as running:
        yield running


async def test_the_example_story_runs_over_socket_mode(bot: Bot) -> None:
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{bot.url}/slack/events", data=b"command=%2Fbackfill") as reply,
    ):
        assert reply.status == 404  # no Request URL: Slack can only reach the bot on its socket

    preview = await request_backfill(bot, COMMAND, REQUESTER)
    assert "example.etl_orders" in preview.text
    assert ActionId.APPROVE in buttons(preview)
    [typed] = envelopes(bot, "slash_commands")
    assert (typed.outcome, typed.payload["text"]) == ("acked", COMMAND)
    # the ack's payload is the answer Slack shows the person who typed the command
    assert typed.ack is not None
    assert "Planning example.etl_orders" in str(typed.ack["payload"])
    [shown] = [e for e in bot.slack.state.ephemerals if e.source == "ack"]
    assert (shown.user, shown.channel) == (REQUESTER, CHANNEL)
    assert "Planning example.etl_orders 2021-06-04..2021-06-06" in shown.text

    request_id = await approve(bot, preview, APPROVER)
    [clicked] = envelopes(bot, "interactive")
    assert clicked.outcome == "acked"
    assert (clicked.payload["type"], clicked.payload["user"]["id"]) == ("block_actions", APPROVER)
    request = await finished(bot, request_id)
    assert request.state == "succeeded"
    status = status_message(bot, request)
    assert "Succeeded" in status.text
    assert ActionId.CANCEL not in buttons(status)
    thread = thread_text(bot, request)
    assert "`example.etl_orders` succeeded" in thread
    assert "Backfill succeeded" in thread

    socket = bot.slack.socket
    assert bot.slack.sent_requests == []  # nothing reached the bot over HTTP
    assert socket.protocol_errors == []
    assert [c.id for c in socket.connections] == [1]  # one connection held the whole story


async def test_after_a_refresh_mid_story_the_next_command_uses_the_new_connection(
    bot: Bot,
) -> None:
    preview = await request_backfill(bot, COMMAND, REQUESTER)
    socket = bot.slack.socket
    [old] = socket.connections
    new = await socket.refresh()  # `disconnect` refresh_requested: the bot opens another
    assert not old.open
    assert new.open
    assert [c.type for c in socket.envelopes] == ["slash_commands"]

    request_id = await approve(bot, preview, APPROVER)
    reply = await bot.slack.slash_command(
        f"status {request_id}", user_id=REQUESTER, channel_id=CHANNEL
    )
    assert reply.status == 200
    clicked, status = socket.envelopes[1:]
    assert (clicked.type, clicked.connection, clicked.outcome) == ("interactive", new.id, "acked")
    assert (status.type, status.connection, status.outcome) == ("slash_commands", new.id, "acked")
    request = await finished(bot, request_id)
    assert request.state == "succeeded"
    assert "Backfill succeeded" in thread_text(bot, request)
    assert socket.protocol_errors == []


async def test_an_event_whose_ack_was_lost_is_delivered_again_and_handled(bot: Bot) -> None:
    bot.slack.state.add_user(APPROVER, "alice")  # a member of the workspace
    bot.slack.socket.lose_acks(1)
    event = {"type": "app_home_opened", "user": APPROVER, "channel": "D0HOME0001", "tab": "home"}
    reply = await bot.slack.send_event(event)
    assert reply.status == 200
    first, again = envelopes(bot, "events_api")
    assert (first.outcome, again.outcome) == ("ack_lost", "acked")
    assert (first.retry_attempt, again.retry_attempt) == (0, 1)
    assert again.payload["event_id"] == first.payload["event_id"]  # one event, sent twice
    home = await eventually(lambda: bot.slack.state.home.get(APPROVER))
    assert home.payload["type"] == "home"
    await bot.settle()
    publishes = [c for c in bot.slack.state.calls if c.method == "views.publish"]
    assert len(publishes) == 1  # handled once: the redelivery is dropped by its event_id


async def test_a_bot_token_as_the_app_token_stops_serve_with_slacks_reason(bot: Bot) -> None:
    connected = list(bot.slack.socket.connections)
    with pytest.raises(socket_mode.SocketModeRefused) as refused:
        await socket_mode.connect(create_bolt_app(bot.services), "xoxb-standin")
    assert "not_allowed_token_type" in str(refused.value)
    assert "xapp-" in str(refused.value)  # what token is needed
    assert bot.slack.socket.connections == connected  # nothing more connected


async def test_readyz_reports_the_socket_mode_connection(bot: Bot) -> None:
    async with aiohttp.ClientSession() as http, http.get(f"{bot.url}/readyz") as reply:
        assert reply.status == 200
        body = await reply.json()
    assert body["checks"]["socket_mode"] == {"ok": True}
