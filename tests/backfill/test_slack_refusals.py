"""Refusals over the real HTTP path: each is ephemeral, names the fix, and changes nothing."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from bot.backfill.store.models import BackfillRequest
from bot.config import parse_config
from bot.core.audit import AuditEntry
from bot.slack.rules.ids import ActionId
from standins.marquez.server import StandInServer
from tests.support.e2e import CHANNEL, OWNER, REQUESTER, Bot, buttons, eventually, running_bot


def answers_for(bot: Bot, user: str) -> list[str]:
    """What the user was shown privately: fallback text and blocks, as one string each."""
    return [
        f"{e.text} {json.dumps(e.blocks)}" for e in bot.slack.state.ephemerals if e.user == user
    ]


async def ask(bot: Bot, text: str, user: str = REQUESTER) -> str:
    before = len(answers_for(bot, user))
    reply = await bot.slack.slash_command(text, user_id=user, channel_id=CHANNEL)
    assert reply.status == 200
    found = await eventually(
        lambda: [t for t in answers_for(bot, user)[before:] if "Planning" not in t]
    )
    return found[-1]


async def requests(bot: Bot) -> int:
    async with bot.services.sessions() as session:
        return int(await session.scalar(select(func.count()).select_from(BackfillRequest)) or 0)


async def test_nobody_may_approve_a_dag_no_team_owns(bot: Bot) -> None:
    await bot.slack.slash_command(
        "example.etl_delivery_7_days 2021-06-04 --only", user_id=REQUESTER, channel_id=CHANNEL
    )
    await eventually(lambda: bot.slack.state.messages(CHANNEL))
    await bot.settle()
    message = bot.slack.state.messages(CHANNEL)[-1]
    await bot.slack.click(
        channel_id=CHANNEL, message_ts=message.ts, action_id=ActionId.APPROVE, user_id=OWNER
    )
    await eventually(lambda: [t for t in answers_for(bot, OWNER) if "No team owns" in t])
    assert await requests(bot) == 1
    async with bot.services.sessions() as session:
        state = await session.scalar(select(BackfillRequest.state))
    assert state == "previewed"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("example.etl_order 2021-06-04", "Did you mean: example.etl_orders"),
        ("example.etl_orders 2021-06-06..2021-06-04", "Did you mean 2021-06-04..2021-06-06?"),
        ("example.etl_orders 2021-01-01..2021-12-31", "the maximum is 92"),
        ("example.etl_orders", "Expected a DAG and a date range"),
        ("example.etl_orders 2021-06-04 --bogus", "Unknown option --bogus"),
        ("example.etl_orders.extract 2021-06-04", "Marquez has no job by that name"),
        ("cancel", "Usage: /backfill cancel REQUEST_ID"),
        ("status nope", "32 hex characters, or its first 8"),
        ("status 0123abcd", "No backfill id starts with 0123abcd"),
        ("cancel <!channel>", "32 hex characters"),
    ],
)
async def test_bad_commands_are_refused_with_the_fix(bot: Bot, text: str, expected: str) -> None:
    answer = await ask(bot, text)
    assert expected in answer
    assert await requests(bot) == 0
    assert bot.slack.state.messages(CHANNEL) == []


async def test_help_and_dry_run_post_nothing_in_the_channel(bot: Bot) -> None:
    assert "/backfill status" in await ask(bot, "help")
    dry = await ask(bot, "example.etl_orders 2021-06-04 --dry-run")
    assert "Dry run: nothing will be started" in dry
    assert "example.etl_orders_7_days" in dry
    assert ActionId.APPROVE not in dry
    assert await requests(bot) == 0
    assert bot.slack.state.messages(CHANNEL) == []


async def test_marquez_down_plans_from_the_index_and_refuses_what_it_cannot_know(
    bot: Bot,
) -> None:
    await bot.marquez.stop()
    answer = await ask(bot, "example.etl_brand_new 2021-06-04")  # only Marquez could say
    assert "Marquez is unreachable" in answer
    assert await requests(bot) == 0
    dry = await ask(bot, "example.etl_orders 2021-06-04 --dry-run")
    assert "example.etl_orders_7_days" in dry
    assert "Lineage from the bot's index, last reconciled with Marquez" in dry


async def test_status_lists_requests_and_shows_one(bot: Bot) -> None:
    await bot.slack.slash_command(
        "example.etl_orders 2021-06-04", user_id=REQUESTER, channel_id=CHANNEL
    )
    await eventually(lambda: bot.slack.state.messages(CHANNEL))
    await bot.settle()
    request_id = buttons(bot.slack.state.messages(CHANNEL)[-1])[ActionId.APPROVE]["value"]
    listing = await ask(bot, "status")
    assert request_id in listing
    assert "example.etl_orders" in listing
    one = await ask(bot, f"status {request_id}")
    assert "example.etl_orders" in one
    short = await ask(bot, f"status {request_id[:8].upper()}")  # as status lists it, any case
    assert request_id in short
    assert "example.etl_orders" in short
    cancelled = await ask(bot, f"cancel {request_id[:8]}")
    assert "cancelled" in cancelled.lower()


@pytest.fixture
async def second_person_bot(
    tmp_path: Path, food_delivery_marquez: StandInServer
) -> AsyncIterator[Bot]:
    config = parse_config(
        {
            "teams": [
                {"name": "orders", "members": [OWNER, REQUESTER], "user_groups": ["S0ONCALL01"]}
            ],
            "ownership": [
                {"pattern": "example.etl_orders", "team": "orders", "second_approver": True}
            ],
        }
    )
    database = f"sqlite:///{tmp_path / 'bot.db'}"
    groups = {"S0ONCALL01": ["U0ONCALL01"]}
    async with running_bot(database, food_delivery_marquez, config, groups) as running:
        yield running


async def test_requester_cannot_approve_alone_but_a_group_member_can(
    second_person_bot: Bot,
) -> None:
    bot = second_person_bot
    await bot.slack.slash_command(
        "example.etl_orders 2021-06-04 --only", user_id=REQUESTER, channel_id=CHANNEL
    )
    await eventually(lambda: bot.slack.state.messages(CHANNEL))
    await bot.settle()
    message = bot.slack.state.messages(CHANNEL)[-1]
    request_id = buttons(message)[ActionId.APPROVE]["value"]
    await bot.slack.click(
        channel_id=CHANNEL, message_ts=message.ts, action_id=ActionId.APPROVE, user_id=REQUESTER
    )
    await eventually(lambda: [t for t in answers_for(bot, REQUESTER) if "second person" in t])
    await bot.slack.click(
        channel_id=CHANNEL, message_ts=message.ts, action_id=ActionId.APPROVE, user_id="U0ONCALL01"
    )
    await eventually(
        lambda: [t for t in answers_for(bot, "U0ONCALL01") if "Approved backfill" in t]
    )
    async with bot.services.sessions() as session:
        state = await session.scalar(
            select(BackfillRequest.state).where(BackfillRequest.id == request_id)
        )
        refused = await session.scalar(
            select(func.count())
            .select_from(AuditEntry)
            .where(AuditEntry.action == "approval.refused")
        )
    assert state == "approved"
    assert refused == 1


async def test_long_plans_are_truncated_with_the_full_plan_in_a_modal(bot: Bot) -> None:
    producer = "https://example.com/tests"
    for i in range(30):
        run: dict[str, Any] = {"runId": str(uuid.uuid4())}
        base = {
            "run": run,
            "job": {"namespace": "wide", "name": f"fan.{i:02d}" if i else "fan.root"},
            "producer": producer,
            "inputs": [] if i == 0 else [{"namespace": "wide", "name": "root_table"}],
            "outputs": [{"namespace": "wide", "name": f"t{i}" if i else "root_table"}],
        }
        bot.marquez.state.ingest(
            {**base, "eventType": "START", "eventTime": "2021-06-10T01:00:00Z"}
        )
        bot.marquez.state.ingest(
            {**base, "eventType": "COMPLETE", "eventTime": "2021-06-10T01:05:00Z"}
        )
    await bot.slack.slash_command("fan.root 2021-06-04", user_id=REQUESTER, channel_id=CHANNEL)
    await eventually(lambda: bot.slack.state.messages(CHANNEL))
    await bot.settle()
    message = bot.slack.state.messages(CHANNEL)[-1]
    assert "and 18 more DAGs" in json.dumps(message.blocks)
    show = buttons(message)[ActionId.SHOW_PLAN]
    reply = await bot.slack.click(
        channel_id=CHANNEL,
        message_ts=message.ts,
        action_id=ActionId.SHOW_PLAN,
        user_id=OWNER,
        value=show["value"],
    )
    assert reply.status == 200
    view = await eventually(lambda: list(bot.slack.state.views.values()))
    text = json.dumps(view[0].payload)
    assert all(f"fan.{i:02d}" in text for i in range(1, 30))


async def test_a_channel_the_bot_cannot_post_in_gets_a_dm_instead(bot: Bot) -> None:
    private = "G0SECRET01"
    reply = await bot.slack.slash_command(
        "example.etl_orders 2021-06-04", user_id=REQUESTER, channel_id=private
    )
    assert reply.status == 200
    await eventually(lambda: [t for t in answers_for(bot, REQUESTER) if "posted" in t])
    await bot.settle()
    await bot.settle()
    [dm] = bot.slack.state.messages(REQUESTER)
    assert f"in <#{private}>" in dm.text
    assert "/invite @backfill-bot" in dm.text
