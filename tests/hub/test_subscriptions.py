"""`/backfill subscribe`, `subscriptions` and `unsubscribe` over the real HTTP path (the Slack
stand-in types the command, the bot answers ephemerally), on SQLite and PostgreSQL: who may
subscribe a channel (owners, approvers, anyone with `hub.subscriptions: anyone`; anyone a DM),
what is stored (a DM's under the user's id, where the bot can post), duplicates, the limit,
removal by id (another channel's id answered as unknown), audit rows, and bad input."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import pytest
from slack_sdk.errors import SlackApiError
from sqlalchemy import select

from bot.config import parse_config
from bot.core.audit import AuditEntry
from bot.hub.store.models import Subscription
from standins.marquez.server import StandInServer
from tests.support.e2e import (
    CHANNEL,
    CONFIG,
    OUTSIDER,
    OWNER,
    REQUESTER,
    Bot,
    eventually,
    running_bot,
)

ELSEWHERE = "C0ELSEWHER"
PLATFORM = "U0PLATFRM1"
APPROVER = "U0APPROVE1"
ID = re.compile(r"ID `([0-9a-f]{8})`")

Start = Callable[..., AbstractAsyncContextManager[Bot]]


def config(**more: Any) -> dict[str, Any]:
    return {
        **CONFIG,
        "teams": [*CONFIG["teams"], {"name": "platform", "user_groups": ["S0PLATFORM"]}],
        "ownership": [*CONFIG["ownership"], {"pattern": "*::example.*", "team": "platform"}],
        "approvers": {"users": [APPROVER]},
        **more,
    }


@pytest.fixture
def start(database_url: str, food_delivery_marquez: StandInServer) -> Start:
    """A bot on SQLite and on PostgreSQL, with BOT_CONFIG `config(**more)`."""

    def run(**more: Any) -> AbstractAsyncContextManager[Bot]:
        return running_bot(
            database_url,
            food_delivery_marquez,
            parse_config(config(**more)),
            groups={"S0PLATFORM": [PLATFORM]},
        )

    return run


@pytest.fixture
async def bot(start: Start) -> AsyncIterator[Bot]:
    async with start() as running:
        yield running


def answers_for(bot: Bot, user: str) -> list[str]:
    return [
        f"{e.text}\n{json.dumps(e.blocks, ensure_ascii=False)}"
        for e in bot.slack.state.ephemerals
        if e.user == user
    ]


async def ask(bot: Bot, text: str, *, user: str = OWNER, channel: str = CHANNEL) -> str:
    """Type `/backfill text`; the answer the person sees."""
    before = len(answers_for(bot, user))
    reply = await bot.slack.slash_command(text, user_id=user, channel_id=channel)
    assert reply.status == 200, reply.body
    found = await eventually(lambda: answers_for(bot, user)[before:])
    assert len(found) == 1, found
    return found[0].partition("\n")[0]


def id_in(answer: str) -> str:
    found = ID.search(answer)
    assert found is not None, answer
    return found.group(1)


async def rows(bot: Bot) -> list[Subscription]:
    async with bot.services.sessions() as session:
        found = await session.scalars(select(Subscription).order_by(Subscription.created_at))
        return list(found)


async def audited(bot: Bot, action: str) -> list[AuditEntry]:
    async with bot.services.sessions() as session:
        found = await session.scalars(
            select(AuditEntry).where(AuditEntry.action == action).order_by(AuditEntry.id)
        )
        return list(found)


async def test_an_owner_subscribes_the_channel_and_sees_it_listed(bot: Bot) -> None:
    answer = await ask(bot, "subscribe example.etl_orders* --failures --downstream")
    assert answer.startswith(
        ":bell: Subscribed this channel to failures events of the DAGs matching "
        "`example.etl_orders*` and of the DAGs downstream of them. ID `"
    )
    first = id_in(answer)
    [row] = await rows(bot)
    assert (row.id, row.channel, row.pattern, row.events, row.downstream, row.created_by) == (
        first,
        CHANNEL,
        "example.etl_orders*",
        ["failures"],
        True,
        OWNER,
    )
    assert row.removed_at is None
    [added] = await audited(bot, "subscription.added")
    assert added.actor == OWNER
    assert added.detail == {
        "id": first,
        "channel": CHANNEL,
        "typed_in": CHANNEL,
        "pattern": "example.etl_orders*",
        "events": ["failures"],
        "downstream": True,
    }

    # no flag: every event class; a team member subscribing a DAG it owns
    everything = id_in(await ask(bot, "subscribe example.etl_orders", user=REQUESTER))
    # an approver may subscribe anything, and a team's user group counts for its members
    anything = id_in(await ask(bot, "subscribe * --sla", user=APPROVER))
    namespaced = id_in(
        await ask(bot, "subscribe food_delivery::example.* --reports", user=PLATFORM)
    )
    assert len({first, everything, anything, namespaced}) == 4

    listing = await ask(bot, "subscriptions", user=OUTSIDER)  # anyone may look
    assert listing == "Subscriptions of this channel: 4"
    shown = json.dumps(bot.slack.state.ephemerals[-1].blocks)
    for subscription_id in (first, everything, anything, namespaced):
        assert f"`{subscription_id}`" in shown
    assert "failures, sla, backfills, reports" in shown
    assert "downstream" in shown
    assert f"<@{OWNER}>" in shown
    assert await ask(bot, "subscriptions", channel=ELSEWHERE) == (
        "This channel has no subscriptions."
    )


async def test_the_same_subscription_again_answers_the_existing_id(bot: Bot) -> None:
    first = id_in(await ask(bot, "subscribe example.etl_orders --sla --failures"))
    again = await ask(bot, "subscribe example.etl_orders --failures --sla --failures")
    assert again.startswith(":information_source: This channel is already subscribed to ")
    assert id_in(again) == first
    by_someone_else = await ask(
        bot, "subscribe example.etl_orders --failures --sla", user=REQUESTER
    )
    assert id_in(by_someone_else) == first
    assert len(await rows(bot)) == 1
    assert len(await audited(bot, "subscription.added")) == 1
    # other events, --downstream, or another channel: another subscription
    assert id_in(await ask(bot, "subscribe example.etl_orders --failures")) != first
    assert id_in(await ask(bot, "subscribe example.etl_orders --sla --failures --downstream"))
    assert id_in(await ask(bot, "subscribe example.etl_orders --sla --failures", channel=ELSEWHERE))
    assert len(await rows(bot)) == 4


async def test_someone_owning_none_of_it_is_refused_and_audited(bot: Bot) -> None:
    answer = await ask(bot, "subscribe example.etl_orders*", user=OUTSIDER)
    assert answer == (
        ":no_entry: Only members of the teams owning `example.etl_orders*` (orders, platform) "
        "or the configured approvers may subscribe a channel to it."
    )
    hint = bot.slack.state.ephemerals[-1].blocks[1]["elements"][0]["text"]
    assert "`hub.subscriptions: anyone` in BOT_CONFIG" in hint
    # owning a part is not owning the whole
    assert "(platform)" in await ask(bot, "subscribe example.*", user=OWNER)
    nobody = await ask(bot, "subscribe *", user=OWNER)
    assert nobody.startswith(":no_entry: No team's ownership covers `*`")
    assert await rows(bot) == []
    refused = await audited(bot, "subscribe.refused")
    assert [(r.actor, r.detail["id"], r.detail["refused"]) for r in refused] == [
        (OUTSIDER, "example.etl_orders*", "not_allowed"),
        (OWNER, "example.*", "not_allowed"),
        (OWNER, "*", "not_allowed"),
    ]
    assert refused[0].detail["channel"] == CHANNEL
    assert refused[0].detail["pattern"] == "example.etl_orders*"
    assert "orders, platform" in refused[0].detail["reason"]


async def test_anyone_may_subscribe_a_channel_when_the_config_says_so(start: Start) -> None:
    async with start(hub={"subscriptions": "anyone"}) as bot:
        answer = await ask(bot, "subscribe * --backfills", user=OUTSIDER)
        assert answer.startswith(":bell: Subscribed this channel to backfills events")
        [row] = await rows(bot)
        assert (row.channel, row.pattern, row.created_by) == (CHANNEL, "*", OUTSIDER)


async def test_anyone_may_subscribe_their_dm_to_anything(bot: Bot) -> None:
    dm = bot.slack.dm_of(OUTSIDER)
    answer = await ask(bot, "subscribe * --failures", user=OUTSIDER, channel=dm)
    assert answer.startswith(":bell: Subscribed your DM with the bot to failures events")
    subscription_id = id_in(answer)
    [row] = await rows(bot)
    # kept under the user's id: chat.postMessage there reaches their DM with the bot, where a
    # D… id from a slash command may be a DM between two people the bot cannot post in
    assert row.channel == OUTSIDER
    posted = await bot.services.slack.chat_postMessage(channel=row.channel, text="hello")
    assert posted["ok"]
    with pytest.raises(SlackApiError, match="channel_not_found"):
        await bot.services.slack.chat_postMessage(channel="D0SOMEONE2", text="hello")

    # the DM (any DM of theirs) lists it; a channel does not, nor someone else's DM
    assert await ask(bot, "subscriptions", user=OUTSIDER, channel=dm) == (
        "Subscriptions of your DM: 1"
    )
    assert f"`{subscription_id}`" in json.dumps(bot.slack.state.ephemerals[-1].blocks)
    assert await ask(bot, "subscriptions", user=OUTSIDER, channel="D0SOMEONE2") == (
        "Subscriptions of your DM: 1"
    )
    assert await ask(bot, "subscriptions", user=OUTSIDER) == "This channel has no subscriptions."
    assert await ask(bot, "subscriptions", user=OWNER, channel=bot.slack.dm_of(OWNER)) == (
        "Your DM with the bot has no subscriptions."
    )
    removed = await ask(bot, f"unsubscribe {subscription_id}", user=OUTSIDER, channel=dm)
    assert removed.startswith(f":no_bell: Removed subscription `{subscription_id}`: your DM")


async def test_unsubscribe_by_id_here_only(bot: Bot) -> None:
    ours = id_in(await ask(bot, "subscribe example.etl_orders --failures"))
    theirs = id_in(await ask(bot, "subscribe example.etl_orders --failures", channel=ELSEWHERE))

    # another channel's id is answered as an unknown one, and refused in the audit
    elsewhere = await ask(bot, f"unsubscribe {theirs}")
    unknown = await ask(bot, "unsubscribe 00000000")
    assert elsewhere.replace(theirs, "00000000") == unknown
    assert unknown == (
        ":no_entry: No subscription of this channel has the id 00000000. "
        "See /backfill subscriptions for the ids here."
    )
    refused = await audited(bot, "unsubscribe.refused")
    assert [(r.detail["id"], r.detail["refused"]) for r in refused] == [
        (theirs, "wrong_channel"),
        ("00000000", "unknown_id"),
    ]

    # neither its creator nor an owner: refused
    outsider = await ask(bot, f"unsubscribe {ours}", user=OUTSIDER)
    assert outsider.startswith(f":no_entry: Only whoever added subscription `{ours}`")
    assert (await audited(bot, "unsubscribe.refused"))[-1].detail["refused"] == "not_allowed"

    # another member of the owning team may
    answer = await ask(bot, f"unsubscribe {ours.upper()}", user=REQUESTER)
    assert answer == (
        f":no_bell: Removed subscription `{ours}`: this channel no longer gets failures events "
        "of the DAGs matching `example.etl_orders`."
    )
    row = next(r for r in await rows(bot) if r.id == ours)
    assert (row.removed_by, row.removed_at is not None) == (REQUESTER, True)  # kept, marked
    [removed] = await audited(bot, "subscription.removed")
    assert (removed.actor, removed.detail["id"], removed.detail["channel"]) == (
        REQUESTER,
        ours,
        CHANNEL,
    )
    assert await ask(bot, "subscriptions") == "This channel has no subscriptions."
    again = await ask(bot, f"unsubscribe {ours}")
    assert (
        again
        == f":information_source: Subscription `{ours}` was already removed, by <@{REQUESTER}>."
    )
    assert len(await audited(bot, "subscription.removed")) == 1
    # the same subscription again is a new one
    assert id_in(await ask(bot, "subscribe example.etl_orders --failures")) not in (ours, theirs)


async def test_the_creator_may_remove_it_even_without_owning_it_any_more(start: Start) -> None:
    async with start(hub={"subscriptions": "anyone"}) as bot:
        subscription_id = id_in(await ask(bot, "subscribe * --sla", user=OUTSIDER))
    async with start() as bot:  # the same database, `owners` again
        answer = await ask(bot, f"unsubscribe {subscription_id}", user=OUTSIDER)
        assert answer.startswith(f":no_bell: Removed subscription `{subscription_id}`")


async def test_a_channel_has_at_most_its_limit(bot: Bot) -> None:
    bot.services.subscriptions.limit = 2
    for dag in ("example.etl_orders", "example.etl_orders_7_days"):
        id_in(await ask(bot, f"subscribe {dag}"))
    full = await ask(bot, "subscribe example.etl_orders*")
    assert full.startswith(":no_entry: This channel has 2 subscriptions already, the most it")
    assert "/backfill unsubscribe ID" in full
    assert id_in(await ask(bot, "subscribe example.etl_orders"))  # the same: its id, still
    assert id_in(await ask(bot, "subscribe example.etl_orders*", channel=ELSEWHERE))
    assert len(await rows(bot)) == 3
    assert (await audited(bot, "subscribe.refused"))[-1].detail["reason"] == (
        "2 subscriptions already"
    )


@pytest.mark.parametrize(
    ("text", "fix"),
    [
        ("subscribe", "Expected one DAG pattern, got no pattern"),
        ("subscribe example.* --failure", "Unknown option --failure"),
        ("subscribe a.* b.*", "got 2 patterns"),
        ("subscribe " + "x" * 256, "at most 255"),
        ("subscribe example.\x01*", "spaces or control characters"),
        ("subscribe <!channel>* --nope", "Unknown option --nope"),
        ("subscriptions please", "Usage: /backfill subscriptions"),
        ("unsubscribe", "Usage: /backfill unsubscribe ID"),
        ("unsubscribe <!here>", "8 hex characters"),
    ],
)
async def test_bad_input_is_answered_with_the_fix(bot: Bot, text: str, fix: str) -> None:
    answer = await ask(bot, text)
    assert answer.startswith(":no_entry: ")
    assert fix in answer
    for unwanted in ("Traceback", "<!channel>", "<!here>"):
        assert unwanted not in answer
    assert await rows(bot) == []
    await bot.settle()  # the refusal is audited after the ack that answered it
    [refused] = await audited(bot, "command.refused")
    assert refused.detail["text"] == text


async def test_a_hostile_pattern_is_stored_and_shown_as_typed(bot: Bot) -> None:
    dm = bot.slack.dm_of(OUTSIDER)
    answer = await ask(bot, "subscribe <!channel>*", user=OUTSIDER, channel=dm)
    assert "`&lt;!channel&gt;*`" in answer
    [row] = await rows(bot)
    assert row.pattern == "<!channel>*"
    listing = json.dumps(bot.slack.state.ephemerals[-1].blocks)
    assert "<!channel>" not in listing
