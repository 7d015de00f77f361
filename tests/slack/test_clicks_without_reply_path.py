"""Clicks Slack sent without one of its two ways back, or with one that no longer works, over
the real HTTP path and through the Slack stand-in.

A click is answered through its response_url, and Show full plan / Review plan open a modal with
its trigger_id. Without the response_url (or when it is used up), the answer is an ephemeral
message posted with chat.postEphemeral to the person in the channel of the click, or a DM when
there is no channel or the ephemeral cannot be posted. Without a usable trigger_id the plan is
summed up in that ephemeral instead. Nothing raises after the ack, nothing is logged as an error.
"""

from __future__ import annotations

import json
import logging
import uuid
from typing import Any
from urllib.parse import urlencode

import pytest
from sqlalchemy import select

from bot.backfill.store.models import BackfillRequest
from bot.slack.rules.ids import ActionId
from standins.slack.records import Ephemeral, button_action, find_button
from tests.support.e2e import CHANNEL, OWNER, REQUESTER, Bot, buttons, eventually
from tests.support.story import DAYS, alerts, post_events, run_event

LEAVE_OUT = object()


@pytest.fixture(autouse=True)
def no_errors(caplog: pytest.LogCaptureFixture) -> Any:
    """Whatever a test clicks, the bot logs no error (and so no traceback)."""
    caplog.set_level(logging.INFO)
    yield
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors, [r.getMessage() for r in errors]


async def preview(bot: Bot, dag: str = "example.etl_orders") -> Any:
    """A plan preview REQUESTER asked for in CHANNEL, with its Approve button."""
    await bot.slack.slash_command(f"{dag} 2021-06-04", user_id=REQUESTER, channel_id=CHANNEL)
    await eventually(lambda: bot.slack.state.messages(CHANNEL))
    await bot.settle()
    return bot.slack.state.messages(CHANNEL)[-1]


async def long_preview(bot: Bot) -> Any:
    """A preview of a plan too long to show whole: 30 DAGs, with Show full plan."""
    for i in range(30):
        base = {
            "run": {"runId": str(uuid.uuid4())},
            "job": {"namespace": "wide", "name": f"fan.{i:02d}" if i else "fan.root"},
            "producer": "https://example.com/tests",
            "inputs": [] if i == 0 else [{"namespace": "wide", "name": "root_table"}],
            "outputs": [{"namespace": "wide", "name": f"t{i}" if i else "root_table"}],
        }
        for kind, time in (("START", "01:00"), ("COMPLETE", "01:05")):
            event = {**base, "eventType": kind, "eventTime": f"2021-06-10T{time}:00Z"}
            bot.marquez.state.ingest(event)
    message = await preview(bot, "fan.root")
    assert ActionId.SHOW_PLAN in buttons(message)
    return message


async def click(
    bot: Bot,
    message: Any,
    action_id: str,
    *,
    response_url: Any = None,
    trigger_id: Any = None,
    channel: str | None = CHANNEL,
) -> None:
    """Click `action_id` on `message` as OWNER the way Slack sends it, but for what is changed:
    LEAVE_OUT leaves the response_url or trigger_id out; `channel` None sends the click as from
    a modal (no channel, no message)."""
    st = bot.slack.state
    block_id, button = find_button(message.blocks, action_id, None)
    issued = st.issue_trigger(OWNER) if trigger_id is None else trigger_id
    payload = st.interaction("block_actions", OWNER, issued)
    payload["actions"] = [button_action(block_id, button, None)]
    if channel is None:
        payload["container"] = {"type": "view", "view_id": "V0PLAN0001"}
    else:
        container = {"type": "message", "message_ts": message.ts, "channel_id": channel}
        payload.update(
            container=container,
            channel={"id": channel, "name": st.channel_name(channel)},
            message=st.message_json(message),
            response_url=response_url or st.issue_response_url(bot.slack.url, channel, OWNER),
        )
    for name, value in (("response_url", response_url), ("trigger_id", trigger_id)):
        if value is LEAVE_OUT:
            payload.pop(name, None)
    body = urlencode({"payload": json.dumps(payload)}).encode()
    reply = await bot.slack.send_raw(body, bot.slack.sign(body))
    assert (reply.status, reply.body) == (200, "")
    await bot.settle()


def told(bot: Bot, source: str) -> list[Ephemeral]:
    return [e for e in bot.slack.state.ephemerals if e.user == OWNER and e.source == source]


def shown(ephemeral: Any) -> str:
    return f"{ephemeral.text} {json.dumps(ephemeral.blocks)}"


async def state_of(bot: Bot, request_id: str) -> str:
    async with bot.services.sessions() as session:
        request = await session.scalar(
            select(BackfillRequest).where(BackfillRequest.id == request_id)
        )
        assert request is not None
        return request.state


async def test_approve_without_a_response_url_is_answered_in_the_channel(bot: Bot) -> None:
    message = await preview(bot)
    request_id = buttons(message)[ActionId.APPROVE]["value"]
    await click(bot, message, ActionId.APPROVE, response_url=LEAVE_OUT)
    assert await state_of(bot, request_id) == "approved"
    [answer] = told(bot, "chat.postEphemeral")
    assert answer.channel == CHANNEL
    assert request_id in shown(answer)
    assert told(bot, "response_url") == []


async def test_a_used_up_response_url_falls_back_to_the_channel(bot: Bot) -> None:
    message = await preview(bot)
    request_id = buttons(message)[ActionId.APPROVE]["value"]
    spent = f"{bot.slack.url}/response_url/no-such-token"  # Slack: 404 invalid_token
    await click(bot, message, ActionId.APPROVE, response_url=spent)
    [answer] = told(bot, "chat.postEphemeral")
    assert answer.channel == CHANNEL
    assert await state_of(bot, request_id) == "approved"


async def test_a_click_from_no_channel_without_a_response_url_is_answered_in_a_dm(
    bot: Bot,
) -> None:
    message = await preview(bot)
    request_id = buttons(message)[ActionId.APPROVE]["value"]
    await click(bot, message, ActionId.APPROVE, channel=None)
    # Approve counts only from the channel of the request: refused, and told so in the DM.
    assert await state_of(bot, request_id) == "previewed"
    assert told(bot, "chat.postEphemeral") == told(bot, "response_url") == []
    [dm] = bot.slack.state.messages(OWNER)
    assert f"Backfill {request_id} does not exist" in dm.text


async def test_when_no_ephemeral_can_be_posted_the_answer_goes_to_a_dm(bot: Bot) -> None:
    message = await long_preview(bot)
    bot.slack.state.channels[CHANNEL].is_archived = True  # chat.postEphemeral: is_archived
    spent = bot.slack.state.issue_trigger(OWNER)
    bot.slack.state.exchange_trigger(spent)
    await click(bot, message, ActionId.SHOW_PLAN, response_url=LEAVE_OUT, trigger_id=spent)
    assert told(bot, "chat.postEphemeral") == []
    [dm] = bot.slack.state.messages(OWNER)
    assert "could not open the plan" in dm.text


async def test_show_plan_without_a_trigger_id_sums_the_plan_up(bot: Bot) -> None:
    message = await long_preview(bot)
    request_id = buttons(message)[ActionId.SHOW_PLAN]["value"]
    await click(bot, message, ActionId.SHOW_PLAN, trigger_id=LEAVE_OUT)
    assert bot.slack.state.views == {}
    [answer] = told(bot, "response_url")
    assert "could not open the plan in a window" in answer.text
    assert "fan.root" in answer.text  # the plan's first line
    assert f"/backfill status {request_id}" in shown(answer)


async def test_show_plan_with_a_spent_trigger_id_sums_the_plan_up(bot: Bot) -> None:
    message = await long_preview(bot)
    spent = bot.slack.state.issue_trigger(OWNER)
    bot.slack.state.exchange_trigger(spent)  # Slack: exchanged_trigger_id (or expired, > 3 s)
    await click(bot, message, ActionId.SHOW_PLAN, trigger_id=spent, response_url=LEAVE_OUT)
    assert bot.slack.state.views == {}
    [answer] = told(bot, "chat.postEphemeral")
    assert "could not open the plan in a window" in answer.text


async def test_show_plan_with_its_trigger_id_still_opens_the_modal(bot: Bot) -> None:
    message = await long_preview(bot)
    await click(bot, message, ActionId.SHOW_PLAN, response_url=LEAVE_OUT)
    [view] = bot.slack.state.views.values()
    assert "fan.29" in json.dumps(view.payload)
    assert told(bot, "chat.postEphemeral") == told(bot, "response_url") == []


async def test_review_plan_without_a_trigger_id_sums_the_plan_up(bot: Bot) -> None:
    await post_events(bot, [run_event("FAIL", DAYS[0])])
    [alert] = alerts(bot, CHANNEL)
    await click(bot, alert, ActionId.INCIDENT_REVIEW, trigger_id=LEAVE_OUT)
    assert bot.slack.state.views == {}
    [answer] = told(bot, "response_url")
    assert "could not open the plan in a window" in answer.text
    assert "Review plan again" in shown(answer)
