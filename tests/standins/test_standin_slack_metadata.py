"""Slack message metadata in the Slack stand-in (`standins.slack.metadata`), over real HTTP with
slack_sdk's AsyncWebClient: chat.postMessage and chat.update take it (JSON or form-encoded) and
refuse a broken one with Slack's error codes; conversations.history and .replies show it whole
only with include_all_metadata, and take the arguments a sender looks for its own post with.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from slack_sdk.web.async_client import AsyncWebClient

from standins.slack.metadata import MAX_METADATA_BYTES
from standins.slack.server import SlackStandIn, running_slack_standin
from tests.standins.test_standin_slack import CHANNEL, client_for, slack_error

JsonDict = dict[str, Any]
EVENT = "backfill_bot_outbox"


def meta(ids: str) -> JsonDict:
    return {"event_type": EVENT, "event_payload": {"outbox_ids": ids}}


@pytest.fixture
async def standin() -> AsyncIterator[SlackStandIn]:
    async with running_slack_standin(rate_limits=False) as server:
        yield server


@pytest.fixture
def client(standin: SlackStandIn) -> AsyncWebClient:
    return client_for(standin)


async def form_post(server: SlackStandIn, method: str, form: dict[str, str]) -> JsonDict:
    """A form-encoded call, as curl or an older client sends one (JSON values as strings)."""
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"{server.url}/api/{method}", data={"token": server.bot_token, **form}
        ) as response,
    ):
        body: JsonDict = await response.json()
        return body


# -- chat.postMessage and chat.update ---------------------------------------------------------


async def test_post_message_stores_metadata_and_answers_with_it_whole(
    standin: SlackStandIn, client: AsyncWebClient
) -> None:
    answer = await client.chat_postMessage(channel=CHANNEL, text="hi", metadata=meta("1,2"))
    assert answer["message"]["metadata"] == meta("1,2")
    assert standin.state.messages(CHANNEL)[0].metadata == meta("1,2")
    plain = await client.chat_postMessage(channel=CHANNEL, text="no metadata")
    assert "metadata" not in plain["message"]


async def test_form_encoded_metadata_is_a_json_string(standin: SlackStandIn) -> None:
    form = {"channel": CHANNEL, "text": "hi", "metadata": json.dumps(meta("7"))}
    answer = await form_post(standin, "chat.postMessage", form)
    assert answer["ok"] is True
    assert answer["message"]["metadata"] == meta("7")


@pytest.mark.parametrize(
    ("metadata", "error"),
    [
        ("{not json", "invalid_metadata_format"),
        ("[1, 2]", "invalid_metadata_format"),
        ('"a string"', "invalid_metadata_format"),
        ("{}", "invalid_metadata_schema"),
        (json.dumps({"event_type": EVENT}), "invalid_metadata_schema"),
        (json.dumps({"event_payload": {}}), "invalid_metadata_schema"),
        (json.dumps({"event_type": " ", "event_payload": {}}), "invalid_metadata_schema"),
        (json.dumps({"event_type": 5, "event_payload": {}}), "invalid_metadata_schema"),
        (json.dumps({"event_type": EVENT, "event_payload": "ids"}), "invalid_metadata_schema"),
        (
            json.dumps({"event_type": EVENT, "event_payload": {"k": "x" * MAX_METADATA_BYTES}}),
            "metadata_too_large",
        ),
    ],
)
async def test_broken_metadata_is_refused_with_slacks_error_and_nothing_is_posted(
    standin: SlackStandIn, metadata: str, error: str
) -> None:
    form = {"channel": CHANNEL, "text": "hi", "metadata": metadata}
    assert await form_post(standin, "chat.postMessage", form) == {"ok": False, "error": error}
    assert standin.state.messages(CHANNEL) == []


async def test_a_json_body_that_is_no_object_is_invalid_metadata_format(
    client: AsyncWebClient,
) -> None:
    refused = await slack_error(
        client.api_call(
            "chat.postMessage", json={"channel": CHANNEL, "text": "hi", "metadata": [meta("1")]}
        )
    )
    assert refused["error"] == "invalid_metadata_format"


async def test_metadata_up_to_the_size_limit_is_taken_and_one_byte_more_is_too_large(
    client: AsyncWebClient,
) -> None:
    empty = {"event_type": "t", "event_payload": {"k": ""}}
    room = MAX_METADATA_BYTES - len(json.dumps(empty, separators=(",", ":")))
    fits = {"event_type": "t", "event_payload": {"k": "x" * room}}
    assert (await client.chat_postMessage(channel=CHANNEL, text="hi", metadata=fits))["ok"]
    over = {"event_type": "t", "event_payload": {"k": "x" * (room + 1)}}
    refused = await slack_error(client.chat_postMessage(channel=CHANNEL, text="hi", metadata=over))
    assert refused["error"] == "metadata_too_large"


async def test_chat_update_keeps_replaces_or_removes_metadata(
    standin: SlackStandIn, client: AsyncWebClient
) -> None:
    ts = (await client.chat_postMessage(channel=CHANNEL, text="v1", metadata=meta("1")))["ts"]
    kept = await client.chat_update(channel=CHANNEL, ts=ts, text="v2")
    assert kept["message"]["metadata"] == meta("1")  # absent: kept
    replaced = await client.chat_update(channel=CHANNEL, ts=ts, text="v3", metadata=meta("1,2"))
    assert replaced["message"]["metadata"] == meta("1,2")
    refused = await slack_error(
        client.api_call(
            "chat.update", json={"channel": CHANNEL, "ts": ts, "text": "v4", "metadata": "[]"}
        )
    )
    assert refused["error"] == "invalid_metadata_format"
    assert standin.state.messages(CHANNEL)[0].text == "v3"  # a refused edit changes nothing
    removed = await client.api_call(
        "chat.update", json={"channel": CHANNEL, "ts": ts, "text": "v5", "metadata": {}}
    )
    assert "metadata" not in removed["message"]  # an empty object removes it
    assert standin.state.messages(CHANNEL)[0].metadata is None


# -- reading: include_all_metadata ------------------------------------------------------------


async def test_history_shows_the_event_type_only_unless_include_all_metadata(
    client: AsyncWebClient,
) -> None:
    await client.chat_postMessage(channel=CHANNEL, text="with", metadata=meta("5"))
    await client.chat_postMessage(channel=CHANNEL, text="without")
    plain = await client.conversations_history(channel=CHANNEL)
    assert [m.get("metadata") for m in plain["messages"]] == [None, {"event_type": EVENT}]
    whole = await client.conversations_history(channel=CHANNEL, include_all_metadata=True)
    assert [m.get("metadata") for m in whole["messages"]] == [None, meta("5")]
    asked_not = await client.conversations_history(channel=CHANNEL, include_all_metadata=False)
    assert asked_not["messages"][1]["metadata"] == {"event_type": EVENT}


async def test_replies_show_the_event_type_only_unless_include_all_metadata(
    client: AsyncWebClient,
) -> None:
    parent = (await client.chat_postMessage(channel=CHANNEL, text="parent"))["ts"]
    await client.chat_postMessage(
        channel=CHANNEL, text="reply", thread_ts=parent, metadata=meta("9")
    )
    plain = await client.conversations_replies(channel=CHANNEL, ts=parent)
    assert [m.get("metadata") for m in plain["messages"]] == [None, {"event_type": EVENT}]
    whole = await client.conversations_replies(
        channel=CHANNEL, ts=parent, include_all_metadata=True
    )
    assert [m.get("metadata") for m in whole["messages"]] == [None, meta("9")]


# -- reading: how a sender looks for its own post ---------------------------------------------


async def test_a_sender_finds_its_post_by_metadata_through_history_pages(
    client: AsyncWebClient,
) -> None:
    """The lookup bot/slack/service/posting.py makes: oldest, limit, include_all_metadata and
    the cursor, newest first, until the post carrying the row's id turns up."""
    before = (await client.chat_postMessage(channel=CHANNEL, text="earlier", metadata=meta("1")))[
        "ts"
    ]
    ts = [
        (await client.chat_postMessage(channel=CHANNEL, text=f"m{i}", metadata=meta(str(i))))["ts"]
        for i in range(2, 7)
    ]
    seen: list[str] = []
    cursor: str | None = None
    while True:
        args: JsonDict = {"oldest": before, "limit": 2, "include_all_metadata": True}
        if cursor:
            args["cursor"] = cursor
        page = await client.conversations_history(channel=CHANNEL, **args)
        seen += [m["metadata"]["event_payload"]["outbox_ids"] for m in page["messages"]]
        cursor = (page.get("response_metadata") or {}).get("next_cursor")
        assert page["has_more"] is bool(cursor)
        if not cursor:
            break
    assert seen == ["6", "5", "4", "3", "2"]  # after `oldest` (exclusive), newest first
    inclusive = await client.conversations_history(
        channel=CHANNEL, oldest=before, latest=ts[1], inclusive=True, include_all_metadata=True
    )
    assert [m["text"] for m in inclusive["messages"]] == ["m3", "m2", "earlier"]


async def test_a_sender_finds_its_reply_by_metadata_in_a_thread(client: AsyncWebClient) -> None:
    parent = (await client.chat_postMessage(channel=CHANNEL, text="parent"))["ts"]
    replies = [
        (
            await client.chat_postMessage(
                channel=CHANNEL, text=f"r{i}", thread_ts=parent, metadata=meta(str(i))
            )
        )["ts"]
        for i in range(4)
    ]
    found: list[str] = []
    cursor: str | None = None
    while True:
        args: JsonDict = {"ts": parent, "oldest": replies[0], "limit": 2}
        if cursor:
            args["cursor"] = cursor
        page = await client.conversations_replies(
            channel=CHANNEL, include_all_metadata=True, **args
        )
        # Whether Slack adds the parent (older than `oldest`) is left open: it carries no ids.
        found += [
            m["metadata"]["event_payload"]["outbox_ids"]
            for m in page["messages"]
            if "metadata" in m
        ]
        cursor = (page.get("response_metadata") or {}).get("next_cursor")
        if not cursor:
            break
    assert found == ["1", "2", "3"]  # oldest first, after `oldest` (exclusive)


async def test_reading_back_needs_the_history_scope_and_membership(
    standin: SlackStandIn, client: AsyncWebClient
) -> None:
    """A bot token reads only conversations it is a member of, with the history scope of their
    type: a lookup may be refused, and the sender must tell that from a post not found."""
    await client.chat_postMessage(channel=CHANNEL, text="mine", metadata=meta("1"))
    standin.state.scopes.discard("channels:history")
    refused = await slack_error(client.conversations_history(channel=CHANNEL))
    assert (refused["error"], refused["needed"]) == ("missing_scope", "channels:history")
    standin.state.scopes.add("channels:history")
    # Posting in a public channel the bot is not in takes chat:write.public; reading it back
    # is not_in_channel (https://docs.slack.dev/reference/methods/conversations.history).
    await client.chat_postMessage(channel="C0ELSEWHERE", text="there", metadata=meta("2"))
    outside = await slack_error(client.conversations_history(channel="C0ELSEWHERE"))
    assert outside["error"] == "not_in_channel"
    dm = (await client.chat_postMessage(channel="U0REQUEST1", text="dm", metadata=meta("3")))[
        "channel"
    ]
    standin.state.scopes.discard("im:history")
    refused_dm = await slack_error(client.conversations_history(channel=dm))
    assert refused_dm["needed"] == "im:history"
