"""Edit keys against the Slack stand-in: outbox rows of one parent with the same key are one
Slack message (the first posts it, later ones edit it in place, only the newest content is
sent); a later row waits for the first post without holding its channel; a restart edits the
message an earlier process posted."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from slack_sdk.web.async_client import AsyncWebClient
from sqlalchemy.ext.asyncio import AsyncSession

from bot.backfill.store import repository
from bot.backfill.store.models import BackfillRequest
from bot.core.db import make_engine, session_factory, upgrade
from bot.slack.service.sender import OutboxSender
from bot.slack.store import outbox
from bot.slack.store.models import OutboxRole
from standins.slack.server import SlackStandIn, running_slack_standin
from tests.support.factories import outbox_sender

CHANNEL = "C0EDITKEY1"
KEY = "grouped"
PLAN = {
    "dag_id": "d",
    "namespace": "ns",
    "start": "2021-06-04",
    "end": "2021-06-04",
    "steps": [
        {
            "dag_id": "d",
            "namespace": "ns",
            "intervals": [{"start": "2021-06-04T00:00:00Z", "end": "2021-06-05T00:00:00Z"}],
            "upstream": [],
        }
    ],
}


@pytest.fixture
async def slack() -> AsyncIterator[SlackStandIn]:
    async with running_slack_standin() as server:
        yield server


@pytest.fixture
async def sender(database_url: str, slack: SlackStandIn) -> AsyncIterator[OutboxSender]:
    upgrade(database_url)
    engine = make_engine(database_url)
    client = AsyncWebClient(token=slack.bot_token, base_url=f"{slack.url}/api/")
    yield outbox_sender(session_factory(engine), client, post_pace=None, update_pace=None)
    await engine.dispose()


async def new_request(session: AsyncSession) -> BackfillRequest:
    return await repository.create_request(session, plan=PLAN, requester="U1", channel=CHANNEL)


async def owe(
    session: AsyncSession,
    request: BackfillRequest,
    text: str,
    *,
    role: OutboxRole = OutboxRole.THREAD,
    key: str | None = KEY,
    payload: dict[str, Any] | None = None,
) -> None:
    await outbox.enqueue(
        session,
        channel=CHANNEL,
        payload=payload or {"text": text},
        role=role,
        request_id=request.id,
        edit_key=key,
    )


def count(slack: SlackStandIn, method: str) -> int:
    return len([c for c in slack.state.calls if c.method == method and c.status == 200])


async def test_rows_of_one_key_are_one_reply_edited_to_the_newest(
    sender: OutboxSender, slack: SlackStandIn
) -> None:
    async with sender.sessions.begin() as session:
        request = await new_request(session)
        await owe(session, request, "status", role=OutboxRole.STATUS, key=None)
        await owe(session, request, "1 joined")
        await owe(session, request, "2 joined")
        await owe(session, request, "step 1 done", key=None)  # another reply: not merged
        await owe(session, request, "3 joined")
    await sender.drain(timeout_s=30)

    [parent] = slack.state.messages(CHANNEL)
    replies = slack.state.thread(CHANNEL, parent.ts)
    assert [m.text for m in replies] == ["3 joined", "step 1 done"]
    assert replies[0].edited is not None  # the first post, edited in place
    assert count(slack, "chat.postMessage") == 3  # status, the keyed reply, the other reply
    assert count(slack, "chat.update") == 1  # "2 joined" was superseded before it was sent


async def test_a_key_belongs_to_its_parent(sender: OutboxSender, slack: SlackStandIn) -> None:
    async with sender.sessions.begin() as session:
        first, second = await new_request(session), await new_request(session)
        for request in (first, second):
            await owe(session, request, f"status {request.id}", role=OutboxRole.STATUS, key=None)
            await owe(session, request, f"joined {request.id}")
    await sender.drain(timeout_s=30)

    for request, parent in zip((first, second), slack.state.messages(CHANNEL), strict=True):
        assert parent.text == f"status {request.id}"
        assert [m.text for m in slack.state.thread(CHANNEL, parent.ts)] == [f"joined {request.id}"]
    assert count(slack, "chat.update") == 0


async def test_a_later_row_waits_for_the_first_post_without_holding_the_channel(
    sender: OutboxSender, slack: SlackStandIn
) -> None:
    async with sender.sessions.begin() as session:
        request = await new_request(session)
        # the keyed reply is owed before its thread's parent, so its first post must wait
        await owe(session, request, "1 joined")
        await owe(session, request, "2 joined")
        await outbox.enqueue(session, channel=CHANNEL, payload={"text": "unrelated"})
        await owe(session, request, "status", role=OutboxRole.STATUS, key=None)

    await sender.deliver_due()
    # neither keyed row went out, and neither kept the channel's later messages back
    assert [m.text for m in slack.state.messages(CHANNEL)] == ["unrelated", "status"]
    assert slack.state.thread(CHANNEL, slack.state.messages(CHANNEL)[1].ts) == []
    assert count(slack, "chat.update") == 0

    await sender.drain(timeout_s=30)
    parent = slack.state.messages(CHANNEL)[1]
    assert [m.text for m in slack.state.thread(CHANNEL, parent.ts)] == ["2 joined"]
    assert count(slack, "chat.postMessage") == 3  # unrelated, status, one keyed reply
    assert count(slack, "chat.update") == 1


async def test_after_a_restart_later_rows_edit_what_the_first_process_posted(
    sender: OutboxSender, slack: SlackStandIn
) -> None:
    async with sender.sessions.begin() as session:
        request = await new_request(session)
        await owe(session, request, "status", role=OutboxRole.STATUS, key=None)
        await owe(session, request, "1 joined")
    await sender.drain(timeout_s=30)

    restarted = outbox_sender(sender.sessions, sender.client, post_pace=None, update_pace=None)
    async with restarted.sessions.begin() as session:
        await owe(session, request, "5 joined")
    await restarted.drain(timeout_s=30)

    [parent] = slack.state.messages(CHANNEL)
    assert [m.text for m in slack.state.thread(CHANNEL, parent.ts)] == ["5 joined"]
    assert count(slack, "chat.postMessage") == 2
    assert count(slack, "chat.update") == 1


async def test_when_the_first_post_is_refused_the_next_row_posts(
    sender: OutboxSender, slack: SlackStandIn
) -> None:
    refused = {"text": "x", "blocks": [{"type": "divider"}] * 51}  # over Slack's block limit
    async with sender.sessions.begin() as session:
        request = await new_request(session)
        await owe(session, request, "status", role=OutboxRole.STATUS, key=None)
        await owe(session, request, "1 joined", payload=refused)
        await owe(session, request, "2 joined")
        await owe(session, request, "3 joined")
    await sender.drain(timeout_s=30)

    [parent] = slack.state.messages(CHANNEL)
    assert [m.text for m in slack.state.thread(CHANNEL, parent.ts)] == ["3 joined"]


async def test_an_edit_key_needs_a_parent_and_a_post(sender: OutboxSender) -> None:
    async with sender.sessions() as session:
        with pytest.raises(ValueError, match="request_id or incident_id"):
            await outbox.enqueue(session, channel=CHANNEL, payload={"text": "x"}, edit_key=KEY)
        with pytest.raises(ValueError, match="edit_key"):
            await outbox.enqueue(
                session,
                channel=CHANNEL,
                payload={"text": "x"},
                role=OutboxRole.STATUS,
                request_id="r1",
                edit_key=KEY,
            )
