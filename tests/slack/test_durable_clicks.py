"""A click that decides something is a row before Slack is told it arrived, and is marked
handled only once decided and answered: a bot stopped between the ack and the decision replays
it when it runs again, through bolt, with the click as Slack sent it."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from sqlalchemy import select, update

from bot.backfill.store import repository
from bot.core.tables import utcnow
from bot.slack.rules.ids import ActionId
from bot.slack.store.models import ReceivedClick
from standins.slack.records import button_action, find_button
from tests.support.e2e import CHANNEL, OWNER, REQUESTER, Bot, buttons, eventually


async def preview(bot: Bot) -> Any:
    await bot.slack.slash_command(
        "example.etl_orders 2021-06-04", user_id=REQUESTER, channel_id=CHANNEL
    )
    await eventually(lambda: bot.slack.state.messages(CHANNEL))
    await bot.settle()
    return bot.slack.state.messages(CHANNEL)[-1]


async def clicks(bot: Bot) -> list[ReceivedClick]:
    async with bot.services.sessions() as session:
        return list(await session.scalars(select(ReceivedClick).order_by(ReceivedClick.id)))


def click_payload(bot: Bot, message: Any, action_id: str, user: str) -> dict[str, Any]:
    """The block_actions payload Slack sends for a click of `action_id` on `message`."""
    st = bot.slack.state
    block_id, button = find_button(message.blocks, action_id, None)
    payload = st.interaction("block_actions", user, st.issue_trigger(user))
    payload.update(
        container={"type": "message", "message_ts": message.ts, "channel_id": CHANNEL},
        channel={"id": CHANNEL, "name": st.channel_name(CHANNEL)},
        message=st.message_json(message),
        state={"values": {}},
        response_url=st.issue_response_url(bot.slack.url, CHANNEL, user, (CHANNEL, message.ts)),
        actions=[button_action(block_id, button, None)],
    )
    return dict(payload)


async def test_a_deciding_click_is_recorded_and_marked_handled(bot: Bot) -> None:
    message = await preview(bot)
    approve = await bot.slack.click(
        channel_id=CHANNEL, message_ts=message.ts, action_id=ActionId.APPROVE, user_id=OWNER
    )
    assert approve.status == 200
    await bot.settle()
    [recorded] = await clicks(bot)
    assert (recorded.action_id, recorded.user, recorded.state) == (
        ActionId.APPROVE,
        OWNER,
        "handled",
    )


async def test_a_click_acknowledged_by_a_bot_that_stopped_is_replayed_once(bot: Bot) -> None:
    message = await preview(bot)
    request_id = buttons(message)[ActionId.APPROVE]["value"]
    payload = click_payload(bot, message, ActionId.APPROVE, OWNER)
    # What the middleware wrote before a bot was killed after its ack: the click, nothing else.
    async with bot.services.sessions.begin() as session:
        soon = utcnow() + timedelta(seconds=60)  # the grace its own listener had
        session.add(
            ReceivedClick(
                action_id=ActionId.APPROVE, user=OWNER, payload=payload, next_attempt_at=soon
            )
        )
    assert await bot.services.clicks.replay_due() == 0  # within its grace: its listener may run
    async with bot.services.sessions.begin() as session:
        await session.execute(
            update(ReceivedClick).values(next_attempt_at=utcnow() - timedelta(seconds=1))
        )
    assert await bot.services.clicks.replay_due() == 1

    async def approved() -> bool:
        async with bot.services.sessions() as session:
            request = await repository.get_request(session, request_id)
        return request.state != "previewed"

    await eventually(approved)
    await bot.settle()
    [click] = await clicks(bot)
    assert click.state == "handled"
    assert click.attempts == 1
    async with bot.services.sessions() as session:
        request = await repository.get_request(session, request_id)
    assert request.approvers == [OWNER]
    assert await bot.services.clicks.replay_due() == 0  # handled: never again
    told = [e for e in bot.slack.state.ephemerals if e.user == OWNER]
    assert told, "the replayed click was not answered"
    assert any("approv" in (e.text + json.dumps(e.blocks)).lower() for e in told)
