"""A request that lives in a thread (started from an incident alert, or a retry in the failed
backfill's thread), against the Slack stand-in: its preview, status message and replies are
posted in that thread (replies not under the status message: Slack threads are one level
deep), its status edits find the status message by its stored ts; a request without a thread
posts as before."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse
from sqlalchemy.ext.asyncio import AsyncSession

from bot.backfill.store import guards, repository
from bot.backfill.store.models import BackfillRequest
from bot.core.db import make_engine, session_factory, upgrade
from bot.slack.service.sender import OutboxSender
from bot.slack.store import outbox
from bot.slack.store.models import OutboxRole
from standins.slack.server import SlackStandIn, running_slack_standin
from tests.support.factories import outbox_sender

CHANNEL = "C0THREADS1"
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


class RecordingClient(AsyncWebClient):
    """The real Web API client, keeping each call's arguments as they go over HTTP: the
    stand-in files a reply to a reply under the thread's parent, as Slack does, so where the
    bot aimed a reply shows only in what it sent."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.sent: list[tuple[str, dict[str, Any]]] = []

    async def api_call(
        self, api_method: str, *, json: dict[str, Any] | None = None, **kwargs: Any
    ) -> AsyncSlackResponse:
        self.sent.append((api_method, dict(json or {})))
        return await super().api_call(api_method, json=json, **kwargs)


@pytest.fixture
async def slack() -> AsyncIterator[SlackStandIn]:
    async with running_slack_standin() as server:
        yield server


@pytest.fixture
async def client(slack: SlackStandIn) -> RecordingClient:
    return RecordingClient(token=slack.bot_token, base_url=f"{slack.url}/api/")


@pytest.fixture
async def sender(database_url: str, client: RecordingClient) -> AsyncIterator[OutboxSender]:
    upgrade(database_url)
    engine = make_engine(database_url)
    yield outbox_sender(session_factory(engine), client, post_pace=None, update_pace=None)
    await engine.dispose()


async def new_request(session: AsyncSession, thread_ts: str | None) -> BackfillRequest:
    request = await repository.create_request(session, plan=PLAN, requester="U1", channel=CHANNEL)
    request.thread_ts = thread_ts
    await session.flush()
    return request


async def owe(
    session: AsyncSession,
    request: BackfillRequest,
    payload: dict[str, Any],
    role: OutboxRole,
    method: str = "chat.postMessage",
) -> None:
    await outbox.enqueue(
        session,
        channel=CHANNEL,
        payload=payload,
        method=method,
        role=role,
        request_id=request.id,
    )


def posts(client: RecordingClient) -> dict[str, str | None]:
    """Text → the thread_ts it was posted with."""
    return {a["text"]: a.get("thread_ts") for m, a in client.sent if m == "chat.postMessage"}


async def test_a_request_in_an_alert_thread_keeps_to_that_thread(
    sender: OutboxSender, slack: SlackStandIn, client: RecordingClient
) -> None:
    alert = slack.state.post(CHANNEL, text="etl_orders failed")  # the bot's incident alert
    async with sender.sessions.begin() as session:
        request = await new_request(session, alert.ts)
        await owe(session, request, {"text": "preview"}, OutboxRole.STATUS)
    await sender.drain(timeout_s=30)
    [preview] = slack.state.thread(CHANNEL, alert.ts)
    assert preview.text == "preview"

    # approval: the preview becomes a pointer, a new status message parents the progress
    async with sender.sessions.begin() as session:
        await outbox.enqueue(
            session, channel=CHANNEL, payload={"text": "approved", "ts": preview.ts},
            method="chat.update", request_id=request.id,
        )  # fmt: skip
        await guards.forget_status_message(session, request.id)
        await owe(session, request, {"text": "progress"}, OutboxRole.THREAD)  # waits for status
        await owe(session, request, {"text": "status"}, OutboxRole.STATUS)
        await owe(
            session, request, {"text": "status, 1 of 1 done"}, OutboxRole.STATUS_UPDATE,
            method="chat.update",
        )  # fmt: skip
    await sender.drain(timeout_s=30)

    assert [m.text for m in slack.state.messages(CHANNEL)] == ["etl_orders failed"]
    thread = slack.state.thread(CHANNEL, alert.ts)
    assert [m.text for m in thread] == ["approved", "status, 1 of 1 done", "progress"]
    status = thread[1]
    assert posts(client) == {"preview": alert.ts, "status": alert.ts, "progress": alert.ts}
    edits = [a for m, a in client.sent if m == "chat.update"]
    assert [(a["ts"], a["text"]) for a in edits] == [
        (preview.ts, "approved"),
        (status.ts, "status, 1 of 1 done"),
    ]
    async with sender.sessions() as session:
        stored = await repository.get_request(session, request.id)
    assert (stored.status_channel, stored.status_message_ts) == (CHANNEL, status.ts)


async def test_a_request_without_a_thread_threads_under_its_status_message(
    sender: OutboxSender, slack: SlackStandIn, client: RecordingClient
) -> None:
    failed = slack.state.post(CHANNEL, text="backfill abc failed")  # a retry lives under it
    async with sender.sessions.begin() as session:
        retry = await new_request(session, failed.ts)
        plain = await new_request(session, None)
        await owe(session, retry, {"text": "retry status"}, OutboxRole.STATUS)
        await owe(session, plain, {"text": "plain status"}, OutboxRole.STATUS)
        await owe(session, retry, {"text": "retry progress"}, OutboxRole.THREAD)
        await owe(session, plain, {"text": "plain progress"}, OutboxRole.THREAD)
    await sender.drain(timeout_s=30)

    top = slack.state.messages(CHANNEL)
    assert [m.text for m in top] == ["backfill abc failed", "plain status"]
    assert [m.text for m in slack.state.thread(CHANNEL, failed.ts)] == [
        "retry status",
        "retry progress",
    ]
    assert [m.text for m in slack.state.thread(CHANNEL, top[1].ts)] == ["plain progress"]
    assert posts(client) == {
        "retry status": failed.ts,
        "plain status": None,
        "retry progress": failed.ts,
        "plain progress": top[1].ts,
    }
