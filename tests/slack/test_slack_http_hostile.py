"""Hostile and broken requests to the bot's Slack Request URL, over real HTTP.

The whole web app runs on a port (as `serve` builds it) against the Slack and Marquez stand-ins.
Unsigned requests get 401, signed but malformed ones 400, a replayed signed request is answered
200 with nothing done; none of them makes a 500 or shows a traceback, and Slack's real requests
still work.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from aiohttp import web
from sqlalchemy import func, select

from bot.app import build_services, create_bolt_app
from bot.app_services import Services
from bot.backfill.store.models import BackfillRequest
from bot.config import parse_config
from bot.core.db import upgrade
from bot.settings import load_settings
from bot.slack.rules.ids import ActionId
from bot.slack.service.client import slack_client
from bot.web import create_web_app
from standins.marquez.server import StandInServer
from standins.slack.server import BotReply, SlackStandIn, running_slack_standin

OWNER = "U0ORDERS01"
REQUESTER = "U0REQUEST1"
CHANNEL = "C0BACKFILL"
COMMAND = "example.etl_orders 2021-06-04"
JSON = {"Content-Type": "application/json"}
CONFIG = {
    "teams": [{"name": "orders", "channel": CHANNEL, "members": [OWNER, REQUESTER]}],
    "ownership": [{"pattern": "example.etl_orders*", "team": "orders"}],
}


@dataclass
class Bot:
    services: Services
    slack: SlackStandIn

    async def send(self, body: bytes, headers: Mapping[str, str] | None = None) -> BotReply:
        """POST exactly these bytes and headers; nothing the bot answers shows a traceback."""
        reply = await self.slack.send_raw(body, headers or {})
        assert reply.status != 500
        assert "Traceback" not in reply.body
        return reply

    async def send_signed(self, body: bytes, headers: Mapping[str, str] | None = None) -> BotReply:
        return await self.send(body, {**(headers or {}), **self.slack.sign(body)})

    async def requests(self) -> int:
        async with self.services.sessions() as session:
            query = select(func.count()).select_from(BackfillRequest)
            return int(await session.scalar(query) or 0)

    async def settle(self) -> None:
        await asyncio.sleep(0.2)  # the listeners work after acking
        await self.services.sender.drain(timeout_s=20)


async def eventually(check: Callable[[], Any], timeout_s: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)


@pytest.fixture
async def bot(tmp_path: Path, food_delivery_marquez: StandInServer) -> AsyncIterator[Bot]:
    """The bot's web app on a free port, wired to the Slack and Marquez stand-ins."""
    database = f"sqlite:///{tmp_path / 'bot.db'}"
    async with running_slack_standin() as slack:
        settings = load_settings(
            {
                "MARQUEZ_URL": food_delivery_marquez.url,
                "DATABASE_URL": database,
                "SLACK_BOT_TOKEN": slack.bot_token,
                "SLACK_SIGNING_SECRET": slack.signing_secret,
                "SLACK_API_URL": f"{slack.url}/api/",
                "BOT_EXECUTOR": "manual",
            }
        )
        await asyncio.to_thread(upgrade, database)
        services = build_services(settings, parse_config(CONFIG), slack_client(settings))
        runner = web.AppRunner(create_web_app(create_bolt_app(services), services))
        await runner.setup()
        try:
            await web.TCPSite(runner, "127.0.0.1", 0).start()
            slack.set_events_url(f"http://127.0.0.1:{runner.addresses[0][1]}/slack/events")
            reconciler = services.reconciler
            if reconciler is not None:  # plans come from the index once it is reconciled
                await eventually(lambda: reconciler.index.freshness.full_reconcile_at, 30)
            yield Bot(services, slack)
        finally:
            await runner.cleanup()


def slash_form(bot: Bot, **changes: str | None) -> bytes:
    """A /backfill as Slack sends it; a None in `changes` leaves that field out."""
    form: dict[str, str | None] = {
        "token": "verification-token",
        "team_id": "T0TEAM0001",
        "channel_id": CHANNEL,
        "user_id": REQUESTER,
        "command": "/backfill",
        "text": COMMAND,
        "response_url": f"{bot.slack.url}/response_url/abc",
        "trigger_id": "1234.5678.abcdef",
        **changes,
    }
    return urlencode({k: v for k, v in form.items() if v is not None}).encode()


def payload_form(payload: Any) -> bytes:
    return urlencode({"payload": json.dumps(payload)}).encode()


def click(**changes: Any) -> dict[str, Any]:
    """A block_actions payload; a None in `changes` leaves that field out."""
    payload = {
        "type": "block_actions",
        "user": {"id": OWNER, "name": "owner"},
        "trigger_id": "1234.5678.abcdef",
        "response_url": "https://hooks.slack.com/actions/T0/1/abc",
        "container": {"type": "message", "message_ts": "1.000001", "channel_id": CHANNEL},
        "channel": {"id": CHANNEL, "name": "backfill"},
        "actions": [{"action_id": ActionId.APPROVE, "value": "0" * 32, "type": "button"}],
        **changes,
    }
    return {k: v for k, v in payload.items() if v is not None}


@pytest.mark.parametrize("timestamp", ["soon", "", "-1", "+1700000000", "1.7e9", "12 34"])
async def test_unsigned_request_with_a_non_numeric_timestamp_is_401(
    bot: Bot, timestamp: str
) -> None:
    headers = {"X-Slack-Request-Timestamp": timestamp, "X-Slack-Signature": "v0=" + "0" * 64}
    reply = await bot.send(slash_form(bot), headers)
    assert reply.status == 401
    assert reply.body == "missing or invalid X-Slack-Request-Timestamp"
    assert await bot.requests() == 0


@pytest.mark.parametrize(
    "signature", [None, "", "v0=zz", "v1=" + "0" * 64, "v0=" + "0" * 64, "v0=" + "A" * 64]
)
async def test_missing_or_wrong_signature_is_401(bot: Bot, signature: str | None) -> None:
    headers = {"X-Slack-Request-Timestamp": str(int(time.time()))}
    if signature is not None:
        headers["X-Slack-Signature"] = signature
    reply = await bot.send(slash_form(bot), headers)
    assert reply.status == 401
    assert await bot.requests() == 0


async def test_a_stale_signature_is_401(bot: Bot) -> None:
    body = slash_form(bot)
    reply = await bot.send(body, bot.slack.sign(body, timestamp=int(time.time()) - 6 * 60))
    assert (reply.status, reply.body) == (401, "invalid signature or stale timestamp")


@pytest.mark.parametrize(
    "body", [b'{"type": "url_verification", "challenge": "x"}', b"{not json", b"[1, 2]", b'"x"']
)
async def test_unsigned_json_body_is_401(bot: Bot, body: bytes) -> None:
    assert (await bot.send(body, JSON)).status == 401
    stamped = {**JSON, "X-Slack-Request-Timestamp": str(int(time.time()))}
    assert (await bot.send(body, stamped)).status == 401


async def test_invalid_utf8_is_401_unsigned_and_400_signed(bot: Bot) -> None:
    body = b"command=%2Fbackfill&text=\xff\xfe&user_id=" + REQUESTER.encode()
    unsigned = await bot.send(body, {"X-Slack-Request-Timestamp": str(int(time.time()))})
    assert unsigned.status == 401
    signed = await bot.send_signed(body)
    assert (signed.status, signed.body) == (400, "the body is not UTF-8")
    assert (await bot.send_signed(b'{"type": "\xc3"}', JSON)).status == 400
    assert await bot.requests() == 0


@pytest.mark.parametrize(
    ("body", "headers"),
    [
        (b"[1, 2]", JSON),
        (b'"event_callback"', JSON),
        (b"{not json", JSON),
        (b"[" * 100_000, JSON),
        (payload_form([{"type": "block_actions"}]), {}),
        (payload_form("block_actions"), {}),
        (b"payload=%7Bnot+json", {}),
    ],
)
async def test_signed_payload_that_is_not_an_object_is_400(
    bot: Bot, body: bytes, headers: dict[str, str]
) -> None:
    reply = await bot.send_signed(body, headers)
    assert reply.status == 400
    assert len(reply.body) < 100


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (click(type=None), "payload without type"),
        (click(type=7), "payload without type"),
        (click(user=None), "block_actions without user"),
        (click(user="U0ORDERS01"), "block_actions: user is not an object"),
        (click(actions=None), "block_actions without actions"),
        (click(actions=[]), "block_actions without actions"),
        (click(actions=[{"value": "x"}]), "block_actions without actions"),
        (click(response_url=None, trigger_id=None), "without response_url or trigger_id"),
        (click(response_url=5), "block_actions: response_url is not a string"),
        (click(channel="C0BACKFILL"), "block_actions: channel is not an object"),
        ({"type": "view_submission", "user": {"id": OWNER}}, "view_submission without view"),
        ({"type": "event_callback", "event": "app_home_opened"}, "event is not an object"),
        ({"type": "event_callback", "event": {"user": OWNER}}, "event_callback without event"),
    ],
)
async def test_signed_malformed_interaction_is_400_and_does_nothing(
    bot: Bot, payload: dict[str, Any], reason: str
) -> None:
    reply = await bot.send_signed(payload_form(payload))
    assert reply.status == 400
    assert reason in reply.body
    await bot.settle()
    assert bot.slack.state.ephemerals == []


@pytest.mark.parametrize(
    "missing", ["response_url", "trigger_id", "user_id", "channel_id", "command"]
)
async def test_slash_command_missing_a_field_is_400_and_does_nothing(
    bot: Bot, missing: str
) -> None:
    reply = await bot.send_signed(slash_form(bot, **{missing: None}))
    assert reply.status == 400
    # Without `command` the form is neither a slash command nor an interaction.
    expected = "payload without type" if missing == "command" else f"without {missing}"
    assert expected in reply.body
    blank = await bot.send_signed(slash_form(bot, **{missing: ""}))
    assert blank.status == 400
    await bot.settle()
    assert await bot.requests() == 0
    assert bot.slack.state.messages(CHANNEL) == []


@pytest.mark.parametrize("field", ["user_id", "channel_id"])
async def test_an_id_too_long_to_store_is_400_naming_it(bot: Bot, field: str) -> None:
    reply = await bot.send_signed(slash_form(bot, **{field: "U" + "0" * 64}))
    assert reply.status == 400
    assert f"{field} is longer than 64 characters" in reply.body
    await bot.settle()
    assert await bot.requests() == 0


async def test_replayed_signed_backfill_creates_one_request(
    bot: Bot, caplog: pytest.LogCaptureFixture
) -> None:
    first = await bot.slack.slash_command(COMMAND, user_id=REQUESTER, channel_id=CHANNEL)
    assert first.status == 200
    recorded = bot.slack.sent_requests[-1]  # the exact signed bytes and headers Slack sent
    with caplog.at_level(logging.WARNING, logger="bot.slack.service.http"):
        replays = await asyncio.gather(
            *(bot.send(recorded.body, recorded.headers) for _ in range(3))
        )
    assert [(r.status, r.body) for r in replays] == [(200, "")] * 3
    await eventually(lambda: bot.slack.state.messages(CHANNEL))
    await bot.settle()
    assert await bot.requests() == 1
    assert len(bot.slack.state.messages(CHANNEL)) == 1
    warnings = [r for r in caplog.records if r.name == "bot.slack.service.http"]
    assert [r.levelno for r in warnings] == [logging.WARNING] * 3
    assert all("replayed" in r.getMessage() for r in warnings)
    assert all(bot.slack.signing_secret not in r.getMessage() for r in warnings)
    assert all(recorded.headers["X-Slack-Signature"] not in r.getMessage() for r in warnings)


async def test_a_new_signature_over_the_same_body_is_not_a_replay(bot: Bot) -> None:
    """Slack retries an Events API delivery with the same body, a new timestamp and signature."""
    body = json.dumps({"type": "url_verification", "token": "t", "challenge": "c0ffee"}).encode()
    now = int(time.time())
    first = await bot.send(body, {**JSON, **bot.slack.sign(body, now)})
    retry = await bot.send(
        body, {**JSON, "X-Slack-Retry-Num": "1", **bot.slack.sign(body, now - 1)}
    )
    replay = await bot.send(body, {**JSON, **bot.slack.sign(body, now)})
    assert (first.status, first.json) == (200, {"challenge": "c0ffee"})
    assert (retry.status, retry.json) == (200, {"challenge": "c0ffee"})
    assert (replay.status, replay.body) == (200, "")


async def test_signed_backfill_and_a_button_click_still_work(bot: Bot) -> None:
    reply = await bot.slack.slash_command(COMMAND, user_id=REQUESTER, channel_id=CHANNEL)
    assert reply.status == 200
    assert "Traceback" not in reply.body
    message = (await eventually(lambda: bot.slack.state.messages(CHANNEL)))[-1]
    await bot.settle()
    assert await bot.requests() == 1
    clicked = await bot.slack.click(
        channel_id=CHANNEL, message_ts=message.ts, action_id=ActionId.APPROVE, user_id=OWNER
    )
    assert clicked.status == 200

    async def approved() -> int:
        async with bot.services.sessions() as session:
            query = select(func.count()).select_from(BackfillRequest)
            return int(await session.scalar(query.where(BackfillRequest.state == "approved")) or 0)

    assert await eventually(approved) == 1


async def test_events_api_app_home_opened_still_works(bot: Bot) -> None:
    bot.slack.state.add_user(OWNER, "owner")
    body = json.dumps(
        {
            "type": "event_callback",
            "team_id": "T0TEAM0001",
            "api_app_id": "A0APP00001",
            "event_id": "Ev0HOME0001",
            "event_time": int(time.time()),
            "event": {"type": "app_home_opened", "user": OWNER, "channel": "D0", "tab": "home"},
        }
    ).encode()
    reply = await bot.send_signed(body, JSON)
    assert reply.status == 200
    await eventually(lambda: bot.slack.state.home.get(OWNER))


async def test_a_retried_event_is_handled_once(bot: Bot) -> None:
    """Slack's retry of an event: same event_id, a new timestamp and signature."""
    bot.slack.state.add_user(OWNER, "owner")
    event = {"type": "app_home_opened", "user": OWNER, "channel": "D0", "tab": "home"}
    body = json.dumps(
        {"type": "event_callback", "event_id": "Ev0RETRY001", "event_time": 1, "event": event}
    ).encode()
    assert (await bot.send_signed(body, JSON)).status == 200
    await eventually(lambda: bot.slack.state.home.get(OWNER))
    retry = {**JSON, "X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"}
    resent = {**retry, **bot.slack.sign(body, timestamp=int(time.time()) + 1)}
    assert (await bot.send(body, resent)).status == 200
    await bot.settle()
    published = [c for c in bot.slack.state.calls if c.method == "views.publish"]
    assert len(published) == 1


async def test_slash_command_text_containing_payload_reaches_the_listener(bot: Bot) -> None:
    """Bolt alone reads any form with "payload" in it as an interaction (and then as {})."""
    reply = await bot.slack.slash_command(
        "example.payload_orders 2021-06-04", user_id=REQUESTER, channel_id=CHANNEL
    )
    assert reply.status == 200
    await eventually(
        lambda: [e for e in bot.slack.state.ephemerals if "payload_orders" in json.dumps(e.blocks)]
    )
