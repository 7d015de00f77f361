"""Where a backfill or an alert can be reached from, over the real HTTP path: `/backfill status
ID` answers only where the request lives (and in a DM to its requester), a button counts only
from the channel of the message it is on, and Snooze follows the rules of Approve. Every
refusal is audited with the id as given; a click from elsewhere learns nothing."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from sqlalchemy import select

from bot.config import parse_config
from bot.core.audit import AuditEntry
from bot.slack.rules.ids import ActionId
from standins.marquez.server import StandInServer
from tests.support.e2e import CHANNEL, CONFIG, OUTSIDER, OWNER, REQUESTER, Bot, buttons, eventually
from tests.support.e2e import running_bot as running
from tests.support.story import DAYS, alerts, incident, post_events, run_event

ELSEWHERE = "C0ELSEWHER"
DM = "D0REQUEST1"
# Alerts sent at once (watch.group_wait_s 0): where a click counts from is the subject here, not
# how the watcher gathers its Slack calls, and a gathered alert keeps each settle waiting 2 s.
AT_ONCE = {"group_wait_s": 0}


@pytest.fixture
async def bot(tmp_path: Path, food_delivery_marquez: StandInServer) -> AsyncIterator[Bot]:
    """tests/conftest.py's `bot`, with AT_ONCE."""
    config = parse_config({**CONFIG, "watch": AT_ONCE})
    async with running(f"sqlite:///{tmp_path / 'bot.db'}", food_delivery_marquez, config) as bot:
        yield bot


def answers_for(bot: Bot, user: str) -> list[str]:
    return [
        f"{e.text} {json.dumps(e.blocks)}" for e in bot.slack.state.ephemerals if e.user == user
    ]


async def ask(bot: Bot, text: str, *, user: str = REQUESTER, channel: str = CHANNEL) -> str:
    before = len(answers_for(bot, user))
    reply = await bot.slack.slash_command(text, user_id=user, channel_id=channel)
    assert reply.status == 200
    found = await eventually(
        lambda: [t for t in answers_for(bot, user)[before:] if "Planning" not in t]
    )
    return found[-1]


async def refusals(bot: Bot, action: str) -> list[AuditEntry]:
    """Audit rows of `action` (a refusal or what was done), oldest first."""
    async with bot.services.sessions() as session:
        rows = await session.scalars(
            select(AuditEntry).where(AuditEntry.action == action).order_by(AuditEntry.id)
        )
        return list(rows)


async def preview(bot: Bot, text: str = "example.etl_orders 2021-06-04") -> Any:
    """A plan preview posted in CHANNEL by REQUESTER."""
    await bot.slack.slash_command(text, user_id=REQUESTER, channel_id=CHANNEL)
    await eventually(lambda: bot.slack.state.messages(CHANNEL))
    await bot.settle()
    return bot.slack.state.messages(CHANNEL)[-1]


async def forged_click(
    bot: Bot, message: Any, action_id: str, *, user: str, channel: str, value: str
) -> None:
    """A signed click of `action_id` carrying `value`, on `message`, whose payload says it came
    from `channel`: what a crafted request would send (the button need not be on the message)."""
    st = bot.slack.state
    payload = st.interaction("block_actions", user, st.issue_trigger(user))
    action = {"type": "button", "action_id": action_id, "block_id": "forged", "value": value}
    payload.update(
        container={
            "type": "message",
            "message_ts": message.ts,
            "channel_id": channel,
            "is_ephemeral": False,
        },
        channel={"id": channel, "name": st.channel_name(channel)},
        message=st.message_json(message),
        state={"values": {}},
        response_url=st.issue_response_url(bot.slack.url, channel, user),
        actions=[{**action, "text": {"type": "plain_text", "text": "x"}, "action_ts": "1.0"}],
    )
    body = urlencode({"payload": json.dumps(payload)}).encode()
    reply = await bot.slack.send_raw(body, bot.slack.sign(body))
    assert reply.status == 200


async def test_status_by_id_answers_only_where_the_request_lives(bot: Bot) -> None:
    message = await preview(bot)
    request_id = buttons(message)[ActionId.APPROVE]["value"]
    assert "example.etl_orders" in await ask(bot, f"status {request_id}")

    unknown = "0" * 32
    for user in (OUTSIDER, REQUESTER):  # even its requester, outside a DM
        for given in (request_id, request_id[:8]):
            answer = await ask(bot, f"status {given}", user=user, channel=ELSEWHERE)
            assert "example.etl_orders" not in answer
            assert "2021-06-04" not in answer
            assert "does not exist" in answer or "No backfill id starts with" in answer
    told_unknown = await ask(bot, f"status {unknown}", user=OUTSIDER, channel=ELSEWHERE)
    told_elsewhere = await ask(bot, f"status {request_id}", user=OUTSIDER, channel=ELSEWHERE)
    assert told_elsewhere.replace(request_id, unknown) == told_unknown  # the same answer
    listing = await ask(bot, "status", user=OUTSIDER, channel=ELSEWHERE)
    assert request_id[:8] not in listing

    rows = await refusals(bot, "status.refused")
    assert [r.detail["refused"] for r in rows] == [
        *["wrong_channel"] * 4,
        "unknown_id",
        "wrong_channel",
    ]
    assert (rows[0].actor, rows[0].request_id) == (OUTSIDER, request_id)
    assert (rows[0].detail["id"], rows[0].detail["channel"]) == (request_id, ELSEWHERE)
    assert (rows[1].detail["id"], rows[2].actor) == (request_id[:8], REQUESTER)
    assert (rows[4].detail["id"], rows[4].request_id) == (unknown, None)


async def test_in_a_dm_the_requester_sees_the_request_and_nobody_else_does(bot: Bot) -> None:
    message = await preview(bot)
    request_id = buttons(message)[ActionId.APPROVE]["value"]
    mine = await ask(bot, f"status {request_id[:8]}", user=REQUESTER, channel=DM)
    assert "example.etl_orders" in mine
    assert request_id[:8] in await ask(bot, "status", user=REQUESTER, channel=DM)
    theirs = await ask(bot, f"status {request_id}", user=OUTSIDER, channel="D0OUTSIDE1")
    assert "example.etl_orders" not in theirs
    assert "does not exist" in theirs


async def test_cancel_typed_elsewhere_is_answered_like_an_unknown_id(bot: Bot) -> None:
    message = await preview(bot)
    request_id = buttons(message)[ActionId.APPROVE]["value"]
    answer = await ask(bot, f"cancel {request_id}", user=OWNER, channel=ELSEWHERE)
    assert f"Backfill {request_id} does not exist." in answer
    [row] = await refusals(bot, "cancel.refused")
    assert (row.detail["refused"], row.request_id) == ("wrong_channel", request_id)
    assert "Waiting for approval" in await ask(bot, f"status {request_id}")


REQUEST_BUTTONS = {
    ActionId.SHOW_PLAN: "show_plan.refused",
    ActionId.APPROVE: "approval.refused",
    ActionId.CANCEL: "cancel.refused",
}


@pytest.mark.parametrize(("action_id", "action"), REQUEST_BUTTONS.items())
async def test_a_click_from_another_channel_is_refused(
    bot: Bot, action_id: ActionId, action: str
) -> None:
    message = await preview(bot)
    request_id = buttons(message)[ActionId.APPROVE]["value"]
    await forged_click(bot, message, action_id, user=OWNER, channel=ELSEWHERE, value=request_id)
    said = await eventually(lambda: answers_for(bot, OWNER))
    assert f"Backfill {request_id} does not exist." in said[-1]
    assert "example.etl_orders" not in said[-1]
    assert not bot.slack.state.views  # no plan shown
    [row] = await refusals(bot, action)
    assert row.actor == OWNER
    assert row.detail["refused"] == "wrong_channel"
    assert (row.detail["id"], row.detail["channel"]) == (request_id, ELSEWHERE)
    assert row.request_id == request_id
    assert await refusals(bot, "request.approved") == []
    assert await refusals(bot, "request.cancelled") == []


async def test_show_full_plan_works_in_its_channel_for_anyone_there(bot: Bot) -> None:
    message = await preview(bot)
    request_id = buttons(message)[ActionId.APPROVE]["value"]
    await forged_click(
        bot, message, ActionId.SHOW_PLAN, user=OUTSIDER, channel=CHANNEL, value=request_id
    )
    [view] = await eventually(lambda: list(bot.slack.state.views.values()))
    assert "example.etl_orders" in json.dumps(view.payload)
    assert await refusals(bot, "show_plan.refused") == []


@pytest.mark.parametrize(("action_id", "action"), REQUEST_BUTTONS.items())
async def test_a_click_on_an_unknown_id_is_refused_and_audited(
    bot: Bot, action_id: ActionId, action: str
) -> None:
    message = await preview(bot)
    forged = "<!channel> " + "x" * 300
    await forged_click(bot, message, action_id, user=OUTSIDER, channel=CHANNEL, value=forged)
    said = await eventually(lambda: answers_for(bot, OUTSIDER))
    assert "No backfill has the id you gave." in said[-1]
    assert "channel>" not in said[-1]
    [row] = await refusals(bot, action)
    assert (row.actor, row.detail["refused"], row.request_id) == (OUTSIDER, "unknown_id", None)
    assert row.detail["id"].startswith("<!channel> xxx")
    assert len(row.detail["id"]) == 64
    assert not bot.slack.state.views


# --- incidents -----------------------------------------------------------------------------


async def alert_in(bot: Bot) -> Any:
    """An alert for a failed run of example.etl_orders, in CHANNEL (the orders team's)."""
    await post_events(bot, [run_event("FAIL", DAYS[0])])
    [alert] = alerts(bot, CHANNEL)
    return alert


async def click_alert(bot: Bot, alert: Any, action_id: str, user: str) -> None:
    reply = await bot.slack.click(
        channel_id=CHANNEL,
        message_ts=alert.ts,
        action_id=action_id,
        user_id=user,
        value=str(buttons(alert)[action_id]["value"]),
    )
    assert reply.status == 200


async def test_snooze_by_someone_who_may_not_approve_is_refused_and_says_who_may(
    bot: Bot,
) -> None:
    alert = await alert_in(bot)
    for action_id in (ActionId.INCIDENT_SNOOZE_1H, ActionId.INCIDENT_SNOOZE_24H):
        await click_alert(bot, alert, action_id, OUTSIDER)
    said = await eventually(lambda: answers_for(bot, OUTSIDER)[1:] and answers_for(bot, OUTSIDER))
    assert all("You may not snooze alerts of example.etl_orders" in s for s in said)
    assert "only members of its owning teams (orders) or the configured approvers" in said[0]
    found = await incident(bot)
    assert (found.snoozed_until, found.snoozed_by) == (None, None)
    rows = await refusals(bot, "incident.snooze.refused")
    assert [(r.actor, r.detail["refused"]) for r in rows] == [(OUTSIDER, "not_allowed")] * 2
    assert rows[0].detail["incident_id"] == found.id
    assert rows[0].detail["channel"] == CHANNEL
    assert await refusals(bot, "incident.snoozed") == []


async def test_snooze_and_unsnooze_by_an_owner_work_and_are_audited(bot: Bot) -> None:
    alert = await alert_in(bot)
    await click_alert(bot, alert, ActionId.INCIDENT_ACK, OUTSIDER)  # anyone may acknowledge
    await eventually(lambda: [t for t in answers_for(bot, OUTSIDER) if "Acknowledged" in t])
    await click_alert(bot, alert, ActionId.INCIDENT_SNOOZE_24H, OWNER)
    await eventually(lambda: [t for t in answers_for(bot, OWNER) if "Snoozed for 24 h" in t])
    await bot.settle()
    [alert] = alerts(bot, CHANNEL)
    await click_alert(bot, alert, ActionId.INCIDENT_UNSNOOZE, OUTSIDER)
    await eventually(lambda: [t for t in answers_for(bot, OUTSIDER) if "may not unsnooze" in t])
    await click_alert(bot, alert, ActionId.INCIDENT_UNSNOOZE, REQUESTER)  # an orders member
    await eventually(lambda: [t for t in answers_for(bot, REQUESTER) if "Snooze ended" in t])

    found = await incident(bot)
    [acknowledged] = await refusals(bot, "incident.acknowledged")
    [snoozed] = await refusals(bot, "incident.snoozed")
    [unsnoozed] = await refusals(bot, "incident.unsnoozed")
    [refused] = await refusals(bot, "incident.unsnooze.refused")
    assert (acknowledged.actor, acknowledged.detail["incident_id"]) == (OUTSIDER, found.id)
    assert (snoozed.actor, snoozed.detail["incident_id"], snoozed.detail["hours"]) == (
        OWNER,
        found.id,
        24,
    )
    assert (unsnoozed.actor, refused.actor) == (REQUESTER, OUTSIDER)
    assert found.snoozed_until is None


async def test_incident_buttons_count_only_from_the_alerts_channel(bot: Bot) -> None:
    alert = await alert_in(bot)
    incident_id = buttons(alert)[ActionId.INCIDENT_SNOOZE_1H]["value"]
    for action_id in (ActionId.INCIDENT_SNOOZE_1H, ActionId.INCIDENT_ACK, ActionId.INCIDENT_REVIEW):
        await forged_click(bot, alert, action_id, user=OWNER, channel=ELSEWHERE, value=incident_id)
    said = await eventually(lambda: answers_for(bot, OWNER)[2:] and answers_for(bot, OWNER))
    assert all("This incident no longer exists." in s for s in said)
    assert not bot.slack.state.views
    found = await incident(bot)
    assert (found.snoozed_until, found.acknowledged_by) == (None, None)
    async with bot.services.sessions() as session:
        rows = list(
            await session.scalars(
                select(AuditEntry).where(AuditEntry.action.like("incident.%.refused"))
            )
        )
    assert sorted(r.action for r in rows) == [
        "incident.acknowledge.refused",
        "incident.review.refused",
        "incident.snooze.refused",
    ]
    assert {(r.detail["refused"], r.detail["id"]) for r in rows} == {("wrong_channel", found.id)}
    await forged_click(bot, alert, ActionId.INCIDENT_ACK, user=OWNER, channel=CHANNEL, value="nope")
    [unknown] = await eventually(
        lambda: [t for t in answers_for(bot, OWNER)[3:] if "no longer exists" in t]
    )
    assert unknown
    assert len(await refusals(bot, "incident.acknowledge.refused")) == 2


@pytest.fixture
async def anyone_may_snooze(
    tmp_path: Path, food_delivery_marquez: StandInServer
) -> AsyncIterator[Bot]:
    config = parse_config({**CONFIG, "watch": {**AT_ONCE, "snooze": "anyone_in_channel"}})
    async with running(f"sqlite:///{tmp_path / 'bot.db'}", food_delivery_marquez, config) as bot:
        yield bot


async def test_the_wider_setting_lets_anyone_in_the_channel_snooze(anyone_may_snooze: Bot) -> None:
    bot = anyone_may_snooze
    alert = await alert_in(bot)
    await click_alert(bot, alert, ActionId.INCIDENT_SNOOZE_1H, OUTSIDER)
    await eventually(lambda: [t for t in answers_for(bot, OUTSIDER) if "Snoozed for 1 h" in t])
    found = await incident(bot)
    assert found.snoozed_by == OUTSIDER
    [row] = await refusals(bot, "incident.snoozed")
    assert row.actor == OUTSIDER
    assert await refusals(bot, "incident.snooze.refused") == []
