"""The outbox sender against the Slack stand-in: bursts ride out 429s and arrive exactly once, in
order; replies wait for their thread parent; permanent errors stop, transient ones retry."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient
from sqlalchemy import select

from bot.backfill.store import guards, repository
from bot.core.db import make_engine, session_factory, upgrade
from bot.core.tables import utcnow
from bot.slack.service.sender import OutboxSender
from bot.slack.store import outbox
from bot.slack.store.models import OutboxMessage, OutboxRole
from standins.slack.faults import BadDay, Fault
from standins.slack.server import SlackStandIn, running_slack_standin
from tests.support.e2e import eventually
from tests.support.factories import outbox_sender

CHANNEL = "C0BURST001"
PLAN = {
    "dag_id": "d",
    "namespace": "ns",
    "start": "2021-06-04T00:00:00Z",
    "end": "2021-06-05T00:00:00Z",
    "steps": [
        {
            "dag_id": "d",
            "namespace": "ns",
            "intervals": [{"start": "2021-06-04T00:00:00Z", "end": "2021-06-05T00:00:00Z"}],
            "upstream": [],
        }
    ],
}


def fast_clock() -> float:
    # Slack's buckets refill 5x faster than real time: Retry-After waits stay short, and a
    # burst still outruns the refill on a busy machine.
    return time.monotonic() * 5


@pytest.fixture
async def slack() -> AsyncIterator[SlackStandIn]:
    async with running_slack_standin(clock=fast_clock) as server:
        yield server


@pytest.fixture
async def sender(database_url: str, slack: SlackStandIn) -> AsyncIterator[OutboxSender]:
    upgrade(database_url)
    engine = make_engine(database_url)
    client = AsyncWebClient(
        token=slack.bot_token,
        base_url=f"{slack.url}/api/",
        retry_handlers=[AsyncRateLimitErrorRetryHandler(max_retry_count=1)],
    )
    # No pacing of our own: these tests are about riding out Slack's 429s.
    yield outbox_sender(session_factory(engine), client, post_pace=None, update_pace=None)
    await engine.dispose()


async def test_paced_burst_never_meets_a_429(database_url: str) -> None:
    upgrade(database_url)
    engine = make_engine(database_url)
    async with running_slack_standin() as slack:  # Slack's real refill rate
        client = AsyncWebClient(token=slack.bot_token, base_url=f"{slack.url}/api/")
        paced = outbox_sender(session_factory(engine), client)
        async with paced.sessions.begin() as session:
            for n in range(6):
                await outbox.enqueue(session, channel=CHANNEL, payload={"text": f"paced {n}"})
        started = time.monotonic()
        await paced.drain(timeout_s=30)
        took = time.monotonic() - started
        assert [m.text for m in slack.state.messages(CHANNEL)] == [f"paced {n}" for n in range(6)]
        assert [c.status for c in slack.state.calls if c.method == "chat.postMessage"] == [200] * 6
        # 3 at once, then about one a second: the pace, not a retry, set the time
        assert took >= 2.5
    await engine.dispose()


async def test_a_burst_into_one_channel_arrives_once_in_order(
    sender: OutboxSender, slack: SlackStandIn
) -> None:
    async with sender.sessions.begin() as session:
        for n in range(10):
            await outbox.enqueue(session, channel=CHANNEL, payload={"text": f"message {n}"})
    await sender.drain(timeout_s=60)
    texts = [m.text for m in slack.state.messages(CHANNEL)]
    assert texts == [f"message {n}" for n in range(10)]
    limited = [c for c in slack.state.calls if c.method == "chat.postMessage" and c.status == 429]
    assert limited, "the burst never met Slack's rate limit, so this test proves nothing"
    async with sender.sessions() as session:
        rows = list(await session.scalars(select(OutboxMessage)))
    assert {r.state for r in rows} == {"sent"}
    assert len({r.posted_ts for r in rows}) == 10


async def test_replies_wait_for_the_status_message_and_thread_under_it(
    sender: OutboxSender, slack: SlackStandIn
) -> None:
    async with sender.sessions.begin() as session:
        request = await repository.create_request(
            session, plan=PLAN, requester="U1", channel=CHANNEL
        )
        # the reply is owed first, but must land under the status message posted after it
        await outbox.enqueue(
            session,
            channel=CHANNEL,
            payload={"text": "step 1 done"},
            role=OutboxRole.THREAD,
            request_id=request.id,
        )
        await outbox.enqueue(
            session,
            channel=CHANNEL,
            payload={"text": "status"},
            role=OutboxRole.STATUS,
            request_id=request.id,
        )
        await outbox.enqueue(
            session,
            channel=CHANNEL,
            payload={"text": "status, updated"},
            method="chat.update",
            role=OutboxRole.STATUS_UPDATE,
            request_id=request.id,
        )
    await sender.drain(timeout_s=30)
    [parent] = slack.state.messages(CHANNEL)
    assert parent.text == "status, updated"
    assert [m.text for m in slack.state.thread(CHANNEL, parent.ts)] == ["step 1 done"]
    async with sender.sessions() as session:
        stored = await repository.get_request(session, request.id)
    assert (stored.status_channel, stored.status_message_ts) == (CHANNEL, parent.ts)


async def test_a_message_slack_rejects_fails_without_blocking_the_rest(
    sender: OutboxSender, slack: SlackStandIn
) -> None:
    too_many = {"text": "x", "blocks": [{"type": "divider"}] * 51}
    async with sender.sessions.begin() as session:
        await outbox.enqueue(session, channel=CHANNEL, payload=too_many)
        await outbox.enqueue(session, channel=CHANNEL, payload={"text": "after"})
    await sender.drain(timeout_s=30)
    assert [m.text for m in slack.state.messages(CHANNEL)] == ["after"]
    async with sender.sessions() as session:
        rows = list(await session.scalars(select(OutboxMessage).order_by(OutboxMessage.id)))
    assert rows[0].state == "failed"
    assert rows[0].error is not None
    assert rows[0].error.startswith("invalid_blocks")


async def test_after_approval_replies_wait_for_the_new_status_message(
    sender: OutboxSender, slack: SlackStandIn
) -> None:
    async with sender.sessions.begin() as session:
        request = await repository.create_request(
            session, plan=PLAN, requester="U1", channel=CHANNEL
        )
        await outbox.enqueue(
            session, channel=CHANNEL, payload={"text": "preview"}, role=OutboxRole.STATUS,
            request_id=request.id,
        )  # fmt: skip
    await sender.drain(timeout_s=30)
    [preview] = slack.state.messages(CHANNEL)
    # approval: the preview is rewritten, the thread parent moves to a new status message
    async with sender.sessions.begin() as session:
        await outbox.enqueue(
            session, channel=CHANNEL, payload={"text": "approved", "ts": preview.ts},
            method="chat.update", request_id=request.id,
        )  # fmt: skip
        await guards.forget_status_message(session, request.id)
        status = await outbox.enqueue(
            session, channel=CHANNEL, payload={"text": "status"}, role=OutboxRole.STATUS,
            request_id=request.id,
        )  # fmt: skip
        await outbox.enqueue(
            session, channel=CHANNEL, payload={"text": "progress"}, role=OutboxRole.THREAD,
            request_id=request.id,
        )  # fmt: skip
    # the new status message hits a transient error and waits for its retry
    async with sender.sessions.begin() as session:
        await outbox.retry_later(
            session, status, at=utcnow() + timedelta(seconds=1), error="internal_error"
        )
    await sender.deliver_due()
    assert slack.state.thread(CHANNEL, preview.ts) == [], "a reply went under the old preview"
    await sender.drain(timeout_s=30)
    parent = slack.state.messages(CHANNEL)[-1]
    assert parent.text == "status"
    assert slack.state.find_message(CHANNEL, preview.ts).text == "approved"
    assert [m.text for m in slack.state.thread(CHANNEL, parent.ts)] == ["progress"]


async def test_two_senders_on_one_database_send_each_message_once(
    sender: OutboxSender, slack: SlackStandIn
) -> None:
    other = outbox_sender(sender.sessions, sender.client)
    async with sender.sessions.begin() as session:
        for n in range(6):
            await outbox.enqueue(session, channel=f"C0TWO{n:05d}", payload={"text": f"m{n}"})
    await asyncio.gather(sender.deliver_due(), other.deliver_due())
    await sender.drain(timeout_s=30)
    posted = [c for c in slack.state.calls if c.method == "chat.postMessage" and c.status == 200]
    assert len(posted) == 6


HUNG_S = 6


async def test_a_hung_call_delays_only_its_own_channel(database_url: str) -> None:
    upgrade(database_url)
    engine = make_engine(database_url)
    async with running_slack_standin() as slack:
        slack.state.add_channel("C0HUNG0001", "hung")
        slack.state.add_channel("C0FREE0001", "free")
        # The first chat.* call hangs past the client's timeout; Slack never posted it. The
        # timeout is well above what the free channel's three posts take on a loaded machine
        # (3.7 s seen), so only waiting for the hung call can make them that late.
        slack.state.bad_day(BadDay(script=(Fault.HANG,), hang_s=30))
        client = AsyncWebClient(
            token=slack.bot_token, base_url=f"{slack.url}/api/", timeout=HUNG_S, retry_handlers=[]
        )
        sender = outbox_sender(session_factory(engine), client)
        async with sender.sessions.begin() as session:
            await outbox.enqueue(session, channel="C0HUNG0001", payload={"text": "hung 1"})
            await outbox.enqueue(session, channel="C0HUNG0001", payload={"text": "hung 2"})
            for n in range(3):
                await outbox.enqueue(session, channel="C0FREE0001", payload={"text": f"free {n}"})
        started = time.monotonic()
        delivering = asyncio.create_task(sender.drain(timeout_s=60))
        free = await eventually(lambda: len(slack.state.messages("C0FREE0001")) == 3)
        took_free = time.monotonic() - started
        await delivering
    await engine.dispose()
    assert free
    assert took_free < HUNG_S, "the other channel waited for the hung call"
    # the hung channel kept its order, and the hung post was looked for, then sent once
    assert [m.text for m in slack.state.messages("C0HUNG0001")] == ["hung 1", "hung 2"]
