"""/backfill end to end: signed requests from the Slack stand-in to the bot over HTTP, the plan
from the Marquez stand-in, state in the database, and the messages Slack ends up showing."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import func, select

from bot.backfill.store.models import BackfillRequest
from bot.core.audit import AuditEntry
from bot.slack.rules.ids import ActionId
from tests.support.e2e import CHANNEL, OUTSIDER, OWNER, REQUESTER, Bot, buttons, eventually

COMMAND = "example.etl_orders 2021-06-04..2021-06-06"


async def count(bot: Bot, model: Any, **where: Any) -> int:
    async with bot.services.sessions() as session:
        query = select(func.count()).select_from(model)
        for key, value in where.items():
            query = query.where(getattr(model, key) == value)
        return int(await session.scalar(query) or 0)


async def preview(bot: Bot, user: str = REQUESTER) -> Any:
    reply = await bot.slack.slash_command(COMMAND, user_id=user, channel_id=CHANNEL)
    assert reply.status == 200
    await eventually(lambda: bot.slack.state.messages(CHANNEL))
    await bot.settle()
    return bot.slack.state.messages(CHANNEL)[-1]


async def test_slash_command_posts_a_plan_preview_with_buttons(bot: Bot) -> None:
    message = await preview(bot)
    assert "example.etl_orders" in message.text
    text = json.dumps(message.blocks)
    for dag in ("example.etl_orders_7_days", "example.etl_delivery_7_days"):
        assert dag in text
    assert "example.etl_menus" not in text
    assert "Lineage from the bot's index, last reconciled with Marquez 20" in text  # how fresh
    found = buttons(message)
    assert set(found) >= {ActionId.APPROVE, ActionId.CANCEL}
    request_id = found[ActionId.APPROVE]["value"]
    assert await count(bot, BackfillRequest, id=request_id, state="previewed") == 1
    acks = [e for e in bot.slack.state.ephemerals if e.source == "ack"]
    assert acks
    assert "Planning example.etl_orders" in acks[0].text


async def test_double_click_approves_once_and_hands_off_once(bot: Bot) -> None:
    message = await preview(bot)
    request_id = buttons(message)[ActionId.APPROVE]["value"]

    async def click() -> int:
        reply = await bot.slack.click(
            channel_id=CHANNEL, message_ts=message.ts, action_id=ActionId.APPROVE, user_id=OWNER
        )
        return reply.status

    # two clicks before the preview loses its buttons, as a quick double click does
    assert await asyncio.gather(click(), click()) == [200, 200]
    await eventually(lambda: count(bot, BackfillRequest, id=request_id, state="approved"))
    await eventually(lambda: [e for e in bot.slack.state.ephemerals if "Nothing changed" in e.text])
    await bot.settle()
    assert await count(bot, AuditEntry, request_id=request_id, action="request.approved") == 1
    assert await count(bot, AuditEntry, request_id=request_id, action="request.handed_off") == 1
    assert await count(bot, BackfillRequest, state="approved") == 1
    # the preview lost its buttons; the new status message parents the executor's thread
    assert ActionId.APPROVE not in buttons(bot.slack.state.find_message(CHANNEL, message.ts))
    status = bot.slack.state.messages(CHANNEL)[-1]
    assert status.ts != message.ts
    assert ActionId.CANCEL in buttons(status)
    thread = bot.slack.state.thread(CHANNEL, status.ts)
    assert any("airflow backfill create --dag-id example.etl_orders " in m.text for m in thread)


async def test_replayed_payload_changes_nothing(bot: Bot) -> None:
    message = await preview(bot)
    request_id = buttons(message)[ActionId.APPROVE]["value"]
    await bot.slack.click(
        channel_id=CHANNEL, message_ts=message.ts, action_id=ActionId.APPROVE, user_id=OWNER
    )
    await eventually(lambda: count(bot, BackfillRequest, id=request_id, state="approved"))
    await bot.settle()
    recorded = bot.slack.sent_requests[-1]  # the exact signed bytes Slack sent
    replay = await bot.slack.send_raw(recorded.body, recorded.headers)
    assert replay.status == 200
    assert replay.body == ""  # a replay of the same signature is acknowledged, not handled
    await bot.settle()
    assert await count(bot, AuditEntry, request_id=request_id, action="request.approved") == 1
    assert not [e for e in bot.slack.state.ephemerals if "Nothing changed" in e.text]
    # the same click signed anew (as Slack sends a double click) is handled and changes nothing
    resent = bot.slack.sign(recorded.body, timestamp=int(time.time()) + 1)
    assert (await bot.slack.send_raw(recorded.body, resent)).status == 200
    await eventually(lambda: [e for e in bot.slack.state.ephemerals if "Nothing changed" in e.text])
    await bot.settle()
    assert await count(bot, AuditEntry, request_id=request_id, action="request.approved") == 1
    assert await count(bot, AuditEntry, request_id=request_id, action="request.handed_off") == 1


async def test_forged_and_stale_requests_get_401_and_do_nothing(bot: Bot) -> None:
    body = (
        b"command=%2Fbackfill&text=example.etl_orders+2021-06-04"
        b"&user_id=U0REQUEST1&channel_id=C0BACKFILL"
    )
    forged = dict(bot.slack.sign(body))
    forged["X-Slack-Signature"] = "v0=" + "0" * 64
    assert (await bot.slack.send_raw(body, forged)).status == 401
    stale = bot.slack.sign(body, timestamp=int(time.time()) - 6 * 60)
    assert (await bot.slack.send_raw(body, stale)).status == 401
    await bot.settle()
    assert await count(bot, BackfillRequest) == 0
    assert await count(bot, AuditEntry) == 0
    assert bot.slack.state.messages(CHANNEL) == []


async def test_unauthorized_clicker_is_refused_and_audited(bot: Bot) -> None:
    message = await preview(bot)
    request_id = buttons(message)[ActionId.APPROVE]["value"]
    await bot.slack.click(
        channel_id=CHANNEL, message_ts=message.ts, action_id=ActionId.APPROVE, user_id=OUTSIDER
    )
    refusal = await eventually(
        lambda: [
            e
            for e in bot.slack.state.ephemerals
            if e.user == OUTSIDER and "may not approve" in e.text
        ]
    )
    assert "orders" in refusal[0].text
    assert await count(bot, BackfillRequest, id=request_id, state="previewed") == 1
    assert await count(bot, AuditEntry, request_id=request_id, action="approval.refused") == 1


async def test_cancel_from_the_preview(bot: Bot) -> None:
    message = await preview(bot)
    request_id = buttons(message)[ActionId.CANCEL]["value"]
    await bot.slack.click(
        channel_id=CHANNEL, message_ts=message.ts, action_id=ActionId.CANCEL, user_id=REQUESTER
    )
    await eventually(lambda: count(bot, BackfillRequest, id=request_id, state="cancelled"))
    await bot.settle()
    updated = bot.slack.state.find_message(CHANNEL, message.ts)
    assert buttons(updated) == {}
    # a stale Approve (the click's bytes replayed after the cancel) changes nothing
    approve_body = bot.slack.sent_requests[-1].body.replace(b"backfill.cancel", b"backfill.approve")
    stale = await bot.slack.send_raw(approve_body, bot.slack.sign(approve_body))
    assert stale.status == 200
    await eventually(lambda: [e for e in bot.slack.state.ephemerals if "was cancelled" in e.text])
    assert await count(bot, BackfillRequest, id=request_id, state="cancelled") == 1
    assert await count(bot, AuditEntry, request_id=request_id, action="request.cancelled") == 1


async def test_without_an_executor_the_preview_says_at_is_up_to_whoever_runs_it(bot: Bot) -> None:
    at = datetime.now(UTC) + timedelta(days=3)
    reply = await bot.slack.slash_command(
        f'{COMMAND} --at "{at:%Y-%m-%d %H:%M}"', user_id=REQUESTER, channel_id=CHANNEL
    )
    assert reply.status == 200
    await eventually(lambda: bot.slack.state.messages(CHANNEL))
    shown = json.dumps(bot.slack.state.messages(CHANNEL)[-1].blocks)
    assert "--at and off-peak windows are up to whoever runs them" in shown
