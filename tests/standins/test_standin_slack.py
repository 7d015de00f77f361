"""The Slack stand-in over real HTTP, driven by slack_sdk's own AsyncWebClient.

Each test names a behaviour of Slack's Web API (or of Slack acting as a user towards a bot) that
the bot relies on, and fails if the stand-in stops behaving that way. Time-dependent rules
(rate limits, trigger and response_url expiry) run on an injected clock instead of sleeping.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlencode

import aiohttp
import pytest
from aiohttp import web
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.signature import SignatureVerifier
from slack_sdk.web.async_client import AsyncWebClient

from standins.slack.server import (
    SlackStandIn,
    SlackStandInOptions,
    running_slack_standin,
    serve_forever,
)

CHANNEL = "C0BACKFILL"
REQUESTER = "U0REQUEST1"
TS = re.compile(r"^\d{10}\.\d{6}$")
JsonDict = dict[str, Any]


class FakeClock:
    """A monotonic clock that only moves when a test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def standin(clock: FakeClock) -> AsyncIterator[SlackStandIn]:
    """A stand-in without rate limits (most tests post many times into one channel)."""
    async with running_slack_standin(rate_limits=False, clock=clock) as server:
        yield server


@pytest.fixture
async def limited(clock: FakeClock) -> AsyncIterator[SlackStandIn]:
    """A stand-in with Slack's rate limits on, driven by the fake clock."""
    async with running_slack_standin(clock=clock) as server:
        yield server


def client_for(server: SlackStandIn, token: str | None = None, **kwargs: Any) -> AsyncWebClient:
    return AsyncWebClient(base_url=f"{server.url}/api/", token=token or server.bot_token, **kwargs)


@pytest.fixture
def client(standin: SlackStandIn) -> AsyncWebClient:
    return client_for(standin)


async def slack_error(call: Any) -> JsonDict:
    """Await a slack_sdk call that must fail; return Slack's answer."""
    with pytest.raises(SlackApiError) as failure:
        await call
    data = failure.value.response.data
    assert isinstance(data, dict)
    assert data["ok"] is False
    return data


async def raw_call(
    server: SlackStandIn, method: str, http_verb: str = "POST", **kwargs: Any
) -> tuple[int, JsonDict]:
    async with (
        aiohttp.ClientSession() as session,
        session.request(http_verb, f"{server.url}/api/{method}", **kwargs) as response,
    ):
        return response.status, await response.json()


def section(text: str) -> JsonDict:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def button(action_id: str = "approve", value: str = "req-1", text: str = "Approve") -> JsonDict:
    return {
        "type": "button",
        "action_id": action_id,
        "value": value,
        "text": {"type": "plain_text", "text": text},
    }


def actions(*elements: JsonDict, block_id: str | None = None) -> JsonDict:
    block: JsonDict = {"type": "actions", "elements": list(elements)}
    if block_id is not None:
        block["block_id"] = block_id
    return block


# -- the Web API: authentication, encodings, unknown methods ----------------------------------


async def test_auth_test_names_the_bot_user_team_and_bot_id(client: AsyncWebClient) -> None:
    answer = await client.auth_test()
    assert answer["ok"] is True
    assert answer["user_id"] == "U0BOT00001"
    assert answer["bot_id"] == "B0BOT00001"
    assert answer["team_id"] == "T0TEAM0001"
    assert answer["url"].startswith("https://")
    assert answer["team"]
    assert answer["user"]


async def test_a_missing_token_is_not_authed_and_a_wrong_one_invalid_auth(
    standin: SlackStandIn,
) -> None:
    status, body = await raw_call(standin, "auth.test")
    assert (status, body) == (200, {"ok": False, "error": "not_authed"})
    error = await slack_error(client_for(standin, token="xoxb-wrong").auth_test())
    assert error["error"] == "invalid_auth"


async def test_a_token_inside_a_json_body_is_ignored_as_slack_does(standin: SlackStandIn) -> None:
    json_body = {"token": standin.bot_token, "channel": CHANNEL, "text": "hi"}
    _, body = await raw_call(standin, "chat.postMessage", json=json_body)
    assert body["error"] == "not_authed"
    assert standin.state.messages(CHANNEL) == []


async def test_unknown_methods_answer_unknown_method(standin: SlackStandIn) -> None:
    headers = {"Authorization": f"Bearer {standin.bot_token}"}
    status, body = await raw_call(standin, "chat.frobnicate", headers=headers)
    assert status == 200
    assert body["ok"] is False
    assert body["error"] == "unknown_method"


async def test_form_bodies_carry_token_and_json_encoded_blocks(standin: SlackStandIn) -> None:
    form = {
        "token": standin.bot_token,
        "channel": CHANNEL,
        "text": "from a form",
        "blocks": json.dumps([section("*form*")]),
    }
    status, body = await raw_call(standin, "chat.postMessage", data=form)
    assert status == 200
    assert body["ok"] is True
    [stored] = standin.state.messages(CHANNEL)
    assert stored.text == "from a form"
    assert stored.blocks[0]["text"]["text"] == "*form*"


async def test_malformed_json_and_blocks_answer_slacks_format_errors(standin: SlackStandIn) -> None:
    headers = {"Authorization": f"Bearer {standin.bot_token}", "Content-Type": "application/json"}
    _, body = await raw_call(standin, "chat.postMessage", data=b"{not json", headers=headers)
    assert body["error"] == "invalid_json"
    form = {"token": standin.bot_token, "channel": CHANNEL, "blocks": '{"type": "divider"}'}
    _, body = await raw_call(standin, "chat.postMessage", data=form)
    assert body["error"] == "invalid_blocks_format"


async def test_reading_methods_answer_get_with_a_query_string_as_slack_sdk_sends_them(
    standin: SlackStandIn, client: AsyncWebClient
) -> None:
    posted = await client.chat_postMessage(channel=CHANNEL, text="parent")
    await client.conversations_history(channel=CHANNEL)
    await client.conversations_replies(channel=CHANNEL, ts=posted["ts"])
    await client.users_info(user=REQUESTER)
    verbs = {call.method: call.http_verb for call in standin.state.calls}
    assert verbs["conversations.history"] == "GET"
    assert verbs["conversations.replies"] == "GET"
    assert verbs["users.info"] == "GET"
    assert verbs["chat.postMessage"] == "POST"
    query = {"token": standin.bot_token, "channel": CHANNEL, "ts": posted["ts"]}
    status, body = await raw_call(standin, "conversations.replies", "GET", params=query)
    assert status == 200
    assert [m["text"] for m in body["messages"]] == ["parent"]


# -- chat.postMessage, threads, history -------------------------------------------------------


async def test_post_message_stores_the_message_and_returns_ts_channel_and_message(
    standin: SlackStandIn, client: AsyncWebClient
) -> None:
    blocks = [section("*plan*"), actions(button())]
    first = await client.chat_postMessage(channel=CHANNEL, text="plan", blocks=blocks)
    second = await client.chat_postMessage(channel=CHANNEL, text="again")
    assert first["channel"] == CHANNEL
    assert TS.match(first["ts"])
    assert TS.match(second["ts"])
    assert float(second["ts"]) > float(first["ts"])
    assert first["message"]["text"] == "plan"
    assert first["message"]["bot_id"] == "B0BOT00001"
    # Slack gives every block a block_id when the sender did not.
    assert all(b["block_id"] for b in first["message"]["blocks"])
    stored = standin.state.find_message(CHANNEL, first["ts"])
    assert stored.blocks == first["message"]["blocks"]
    assert [m.text for m in standin.state.messages(CHANNEL)] == ["plan", "again"]


async def test_channels_appear_on_first_post_to_an_id_and_names_resolve_only_if_known(
    standin: SlackStandIn, client: AsyncWebClient
) -> None:
    # public channels (chat:write.public) and a user's DM need no invite ...
    for new_id in ("C0NEWCHAN1", "U0SOMEONE1"):
        await client.chat_postMessage(channel=new_id, text="hello")
        assert [m.text for m in standin.state.messages(new_id)] == ["hello"]
    # ... private channels and other DMs do, until the bot is a member
    for closed in ("G0PRIVATE1", "D0DIRECT01"):
        failed = await slack_error(client.chat_postMessage(channel=closed, text="x"))
        assert failed["error"] == "channel_not_found"
        standin.state.add_channel(closed)
        await client.chat_postMessage(channel=closed, text="hello")
        assert [m.text for m in standin.state.messages(closed)] == ["hello"]
    by_name = await client.chat_postMessage(channel="#backfill", text="by name")
    assert by_name["channel"] == CHANNEL
    assert (await slack_error(client.chat_postMessage(channel="general", text="x")))[
        "error"
    ] == "channel_not_found"
    assert "general" not in standin.state.channels


async def test_post_message_argument_errors(client: AsyncWebClient) -> None:
    missing = await slack_error(client.api_call("chat.postMessage", json={"text": "x"}))
    assert missing["error"] == "invalid_arguments"
    assert "channel" in missing["response_metadata"]["messages"][0]
    # api_call, not chat_postMessage: slack_sdk itself warns about a message without text.
    bare = await slack_error(client.api_call("chat.postMessage", json={"channel": CHANNEL}))
    assert bare["error"] == "no_text"
    empty = {"channel": CHANNEL, "text": "", "blocks": []}
    assert (await slack_error(client.api_call("chat.postMessage", json=empty)))[
        "error"
    ] == "no_text"


async def test_text_over_40000_characters_is_msg_too_long(
    standin: SlackStandIn, client: AsyncWebClient
) -> None:
    await client.chat_postMessage(channel=CHANNEL, text="x" * 40_000)
    error = await slack_error(client.chat_postMessage(channel=CHANNEL, text="x" * 40_001))
    assert error["error"] == "msg_too_long"
    assert len(standin.state.messages(CHANNEL)) == 1


async def test_thread_replies_join_the_parents_thread_and_broadcasts_show_in_channel(
    standin: SlackStandIn, client: AsyncWebClient
) -> None:
    parent = await client.chat_postMessage(channel=CHANNEL, text="status")
    reply = await client.chat_postMessage(channel=CHANNEL, text="r1", thread_ts=parent["ts"])
    # A reply addressed to a reply lands in the same thread, as in Slack.
    await client.chat_postMessage(channel=CHANNEL, text="r2", thread_ts=reply["ts"])
    await client.chat_postMessage(
        channel=CHANNEL, text="done", thread_ts=parent["ts"], reply_broadcast=True
    )
    assert reply["message"]["thread_ts"] == parent["ts"]
    assert [m.text for m in standin.state.thread(CHANNEL, parent["ts"])] == ["r1", "r2", "done"]
    assert [m.text for m in standin.state.messages(CHANNEL)] == ["status", "done"]
    history = await client.conversations_history(channel=CHANNEL)
    top = history["messages"][-1]
    assert top["text"] == "status"
    assert top["reply_count"] == 3
    assert history["messages"][0]["subtype"] == "thread_broadcast"


async def test_conversations_replies_pages_through_a_thread_parent_first(
    client: AsyncWebClient,
) -> None:
    parent = await client.chat_postMessage(channel=CHANNEL, text="parent")
    for i in range(5):
        await client.chat_postMessage(channel=CHANNEL, text=f"reply {i}", thread_ts=parent["ts"])
    texts: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        page = await client.conversations_replies(
            channel=CHANNEL, ts=parent["ts"], limit=2, cursor=cursor
        )
        pages += 1
        texts += [m["text"] for m in page["messages"]]
        metadata: JsonDict = page.get("response_metadata") or {}
        assert page["has_more"] is bool(metadata.get("next_cursor"))
        if not page["has_more"]:
            break
        cursor = page["response_metadata"]["next_cursor"]
    assert texts == ["parent"] + [f"reply {i}" for i in range(5)]
    assert pages == 3
    any_reply = (await client.conversations_replies(channel=CHANNEL, ts=parent["ts"]))["messages"]
    from_reply = await client.conversations_replies(channel=CHANNEL, ts=any_reply[3]["ts"])
    assert [m["text"] for m in from_reply["messages"]] == texts


async def test_conversations_replies_errors(client: AsyncWebClient) -> None:
    error = await slack_error(client.conversations_replies(channel=CHANNEL, ts="1.000001"))
    assert error["error"] == "thread_not_found"
    error = await slack_error(client.conversations_replies(channel="C0NOWHERE1", ts="1.000001"))
    assert error["error"] == "channel_not_found"


async def test_conversations_history_is_newest_first_with_cursor_and_time_bounds(
    client: AsyncWebClient,
) -> None:
    posted = [await client.chat_postMessage(channel=CHANNEL, text=f"m{i}") for i in range(5)]
    ts = [p["ts"] for p in posted]
    first = await client.conversations_history(channel=CHANNEL, limit=3)
    assert [m["text"] for m in first["messages"]] == ["m4", "m3", "m2"]
    assert first["has_more"] is True
    rest = await client.conversations_history(
        channel=CHANNEL, limit=3, cursor=first["response_metadata"]["next_cursor"]
    )
    assert [m["text"] for m in rest["messages"]] == ["m1", "m0"]
    assert rest["has_more"] is False
    between = await client.conversations_history(channel=CHANNEL, oldest=ts[1], latest=ts[3])
    assert [m["text"] for m in between["messages"]] == ["m2"]
    inclusive = await client.conversations_history(
        channel=CHANNEL, oldest=ts[1], latest=ts[3], inclusive=True
    )
    assert [m["text"] for m in inclusive["messages"]] == ["m3", "m2", "m1"]
    bad = await slack_error(client.conversations_history(channel=CHANNEL, cursor="!!"))
    assert bad["error"] == "invalid_cursor"
    missing = await slack_error(client.conversations_history(channel="C0NOWHERE1"))
    assert missing["error"] == "channel_not_found"


# -- chat.update, chat.postEphemeral, users.info ----------------------------------------------


async def test_chat_update_replaces_text_and_blocks_and_marks_the_message_edited(
    standin: SlackStandIn, client: AsyncWebClient
) -> None:
    posted = await client.chat_postMessage(channel=CHANNEL, text="old", blocks=[section("old")])
    updated = await client.chat_update(channel=CHANNEL, ts=posted["ts"], text="new")
    assert updated["ts"] == posted["ts"]
    assert updated["text"] == "new"
    stored = standin.state.find_message(CHANNEL, posted["ts"])
    # Without `blocks` Slack keeps the previous blocks; with them, it replaces them.
    assert stored.blocks[0]["text"]["text"] == "old"
    assert stored.edited is not None
    await client.chat_update(channel=CHANNEL, ts=posted["ts"], text="n", blocks=[section("fresh")])
    assert stored.blocks[0]["text"]["text"] == "fresh"
    assert len(standin.state.messages(CHANNEL)) == 1


async def test_chat_update_errors(standin: SlackStandIn, client: AsyncWebClient) -> None:
    missing = await slack_error(client.chat_update(channel=CHANNEL, ts="1.000001", text="x"))
    assert missing["error"] == "message_not_found"
    theirs = standin.state.post(CHANNEL, text="a person wrote this", user=REQUESTER)
    foreign = await slack_error(client.chat_update(channel=CHANNEL, ts=theirs.ts, text="x"))
    assert foreign["error"] == "cant_update_message"
    assert theirs.text == "a person wrote this"
    nowhere = await slack_error(client.chat_update(channel="C0NOWHERE1", ts=theirs.ts, text="x"))
    assert nowhere["error"] == "channel_not_found"
    mine = await client.chat_postMessage(channel=CHANNEL, text="mine")
    too_long = await slack_error(
        client.chat_update(channel=CHANNEL, ts=mine["ts"], text="x" * 40_001)
    )
    assert too_long["error"] == "msg_too_long"


async def test_post_ephemeral_records_who_saw_what(
    standin: SlackStandIn, client: AsyncWebClient
) -> None:
    answer = await client.chat_postEphemeral(
        channel=CHANNEL, user=REQUESTER, text="only you", blocks=[section("secret")]
    )
    assert TS.match(answer["message_ts"])
    [seen] = standin.state.ephemerals
    assert (seen.channel, seen.user, seen.text, seen.source) == (
        CHANNEL,
        REQUESTER,
        "only you",
        "chat.postEphemeral",
    )
    assert seen.blocks[0]["text"]["text"] == "secret"
    assert standin.state.messages(CHANNEL) == []
    nobody = await slack_error(
        client.chat_postEphemeral(channel=CHANNEL, user="U0NOBODY01", text="x")
    )
    assert nobody["error"] == "user_not_found"
    bad = await slack_error(
        client.chat_postEphemeral(
            channel=CHANNEL, user=REQUESTER, text="t", blocks=[{"type": "nope"}]
        )
    )
    assert bad["error"] == "invalid_blocks"


async def test_users_info_answers_from_the_seeded_users(
    standin: SlackStandIn, client: AsyncWebClient
) -> None:
    user = (await client.users_info(user=REQUESTER))["user"]
    assert user["id"] == REQUESTER
    assert user["name"]
    assert user["is_bot"] is False
    standin.state.add_user("U0NEWUSER1", "casey", real_name="Casey New")
    assert (await client.users_info(user="U0NEWUSER1"))["user"]["real_name"] == "Casey New"
    error = await slack_error(client.users_info(user="U0NOBODY01"))
    assert error["error"] == "user_not_found"


async def test_usergroups_users_list_answers_from_seeded_groups(
    standin: SlackStandIn, client: AsyncWebClient
) -> None:
    standin.state.add_usergroup("S0APPROVER", ["U0APPROVE1", "U0APPROVE2"])
    answer = await client.usergroups_users_list(usergroup="S0APPROVER")
    assert answer["users"] == ["U0APPROVE1", "U0APPROVE2"]
    assert standin.state.calls[-1].http_verb == "GET"
    error = await slack_error(client.usergroups_users_list(usergroup="S0NOTHERE0"))
    assert error["error"] == "no_such_subteam"


# -- Block Kit limits -------------------------------------------------------------------------


def _confirm(**overrides: int) -> JsonDict:
    sizes = {"title": 5, "text": 5, "confirm": 5, "deny": 5, **overrides}
    kinds = {"text": "mrkdwn"}
    return {k: {"type": kinds.get(k, "plain_text"), "text": "c" * n} for k, n in sizes.items()}


def _button_with(**fields: Any) -> list[JsonDict]:
    return [actions({**button(), **fields})]


# (name, blocks built for a size, the limit, the json-pointer of the failure)
LIMITS: list[tuple[str, Callable[[int], list[JsonDict]], int, str, str]] = [
    ("blocks per message", lambda n: [{"type": "divider"}] * n, 50, "/blocks", "items"),
    ("section text", lambda n: [section("s" * n)], 3000, "/blocks/0/text/text", "chars"),
    (
        "section fields",
        lambda n: [{"type": "section", "fields": [{"type": "mrkdwn", "text": "f"}] * n}],
        10,
        "/blocks/0/fields",
        "items",
    ),
    (
        "section field text",
        lambda n: [{"type": "section", "fields": [{"type": "mrkdwn", "text": "f" * n}]}],
        2000,
        "/blocks/0/fields/0/text",
        "chars",
    ),
    (
        "header text",
        lambda n: [{"type": "header", "text": {"type": "plain_text", "text": "h" * n}}],
        150,
        "/blocks/0/text/text",
        "chars",
    ),
    (
        "context elements",
        lambda n: [{"type": "context", "elements": [{"type": "mrkdwn", "text": "c"}] * n}],
        10,
        "/blocks/0/elements",
        "items",
    ),
    (
        "actions elements",
        lambda n: [actions(*(button(action_id=f"a{i}") for i in range(n)))],
        25,
        "/blocks/0/elements",
        "items",
    ),
    (
        "button text",
        lambda n: _button_with(text={"type": "plain_text", "text": "b" * n}),
        75,
        "/blocks/0/elements/0/text/text",
        "chars",
    ),
    (
        "action_id",
        lambda n: _button_with(action_id="a" * n),
        255,
        "/blocks/0/elements/0/action_id",
        "chars",
    ),
    (
        "button value",
        lambda n: _button_with(value="v" * n),
        2000,
        "/blocks/0/elements/0/value",
        "chars",
    ),
    (
        "button url",
        lambda n: _button_with(url="https://e.com/" + "u" * (n - 14)),
        3000,
        "/blocks/0/elements/0/url",
        "chars",
    ),
    (
        "confirm title",
        lambda n: _button_with(confirm=_confirm(title=n)),
        100,
        "/blocks/0/elements/0/confirm/title/text",
        "chars",
    ),
    (
        "confirm text",
        lambda n: _button_with(confirm=_confirm(text=n)),
        300,
        "/blocks/0/elements/0/confirm/text/text",
        "chars",
    ),
    (
        "confirm button",
        lambda n: _button_with(confirm=_confirm(confirm=n)),
        30,
        "/blocks/0/elements/0/confirm/confirm/text",
        "chars",
    ),
    (
        "deny button",
        lambda n: _button_with(confirm=_confirm(deny=n)),
        30,
        "/blocks/0/elements/0/confirm/deny/text",
        "chars",
    ),
    (
        "block_id",
        lambda n: [{"type": "divider", "block_id": "b" * n}],
        255,
        "/blocks/0/block_id",
        "chars",
    ),
]


@pytest.mark.parametrize(
    ("build", "limit", "pointer", "unit"),
    [
        pytest.param(build, limit, pointer, unit, id=name)
        for name, build, limit, pointer, unit in LIMITS
    ],
)
async def test_each_block_kit_limit_accepts_the_maximum_and_rejects_one_more(
    client: AsyncWebClient,
    build: Callable[[int], list[JsonDict]],
    limit: int,
    pointer: str,
    unit: str,
) -> None:
    accepted = await client.chat_postMessage(channel=CHANNEL, text="t", blocks=build(limit))
    assert accepted["ok"] is True
    error = await slack_error(
        client.chat_postMessage(channel=CHANNEL, text="t", blocks=build(limit + 1))
    )
    assert error["error"] == "invalid_blocks"
    problem = (
        f"no more than {limit} items allowed"
        if unit == "items"
        else f"must be less than {limit + 1} characters"
    )
    # Slack's own wording: what broke, and where (a json-pointer into the payload).
    assert error["response_metadata"]["messages"] == [f"[ERROR] {problem} [json-pointer:{pointer}]"]


async def test_unknown_block_types_and_duplicate_ids_are_invalid_blocks(
    client: AsyncWebClient,
) -> None:
    unknown = await slack_error(
        client.chat_postMessage(channel=CHANNEL, text="t", blocks=[{"type": "carousel_of_doom"}])
    )
    assert unknown["error"] == "invalid_blocks"
    assert "carousel_of_doom" in unknown["response_metadata"]["messages"][0]
    twice = [{"type": "divider", "block_id": "same"}, {"type": "divider", "block_id": "same"}]
    duplicate = await slack_error(client.chat_postMessage(channel=CHANNEL, text="t", blocks=twice))
    assert "duplicate block_id" in duplicate["response_metadata"]["messages"][0]


async def test_slack_sdk_models_catch_what_the_limit_table_does_not(client: AsyncWebClient) -> None:
    # An image without alt_text: no length limit involved, but slack_sdk's model knows it is
    # required, and so does Slack.
    image = {"type": "image", "image_url": "https://example.com/a.png"}
    error = await slack_error(client.chat_postMessage(channel=CHANNEL, text="t", blocks=[image]))
    assert error["error"] == "invalid_blocks"
    assert error["response_metadata"]["messages"]


# -- views ------------------------------------------------------------------------------------


def modal(title: str = "Confirm", blocks: list[JsonDict] | None = None, **fields: Any) -> JsonDict:
    return {
        "type": "modal",
        "title": {"type": "plain_text", "text": title},
        "blocks": blocks if blocks is not None else [section("Approve this backfill?")],
        **fields,
    }


def plain(text: str) -> JsonDict:
    return {"type": "plain_text", "text": text}


async def test_views_open_exchanges_a_fresh_trigger_for_a_modal(
    standin: SlackStandIn, client: AsyncWebClient
) -> None:
    trigger = standin.state.issue_trigger(REQUESTER)
    opened = (await client.views_open(trigger_id=trigger, view=modal(callback_id="confirm")))[
        "view"
    ]
    assert opened["id"].startswith("V")
    assert opened["hash"]
    assert opened["callback_id"] == "confirm"
    stored = standin.state.views[opened["id"]]
    assert stored.user == REQUESTER
    assert not stored.closed
    again = await slack_error(client.views_open(trigger_id=trigger, view=modal()))
    assert again["error"] == "exchanged_trigger_id"
    unknown = await slack_error(client.views_open(trigger_id="1.2.abc", view=modal()))
    assert unknown["error"] == "invalid_trigger_id"


async def test_a_trigger_id_expires_after_three_seconds(
    standin: SlackStandIn, client: AsyncWebClient, clock: FakeClock
) -> None:
    in_time = standin.state.issue_trigger(REQUESTER)
    late = standin.state.issue_trigger(REQUESTER)
    clock.advance(3.0)
    await client.views_open(trigger_id=in_time, view=modal())
    clock.advance(0.01)
    error = await slack_error(client.views_open(trigger_id=late, view=modal()))
    assert error["error"] == "expired_trigger_id"
    assert len(standin.state.views) == 1


VIEW_LIMITS = [
    ("title", lambda n: modal(title="t" * n), 24, "/view/title/text"),
    ("submit", lambda n: modal(submit=plain("s" * n)), 24, "/view/submit/text"),
    ("close", lambda n: modal(close=plain("c" * n)), 24, "/view/close/text"),
    ("private_metadata", lambda n: modal(private_metadata="p" * n), 3000, "/view/private_metadata"),
    ("callback_id", lambda n: modal(callback_id="c" * n), 255, "/view/callback_id"),
    ("blocks", lambda n: modal(blocks=[{"type": "divider"}] * n), 100, "/view/blocks"),
]


@pytest.mark.parametrize(
    ("build", "limit", "pointer"),
    [pytest.param(build, limit, pointer, id=name) for name, build, limit, pointer in VIEW_LIMITS],
)
async def test_each_modal_limit_accepts_the_maximum_and_rejects_one_more(
    standin: SlackStandIn,
    client: AsyncWebClient,
    build: Callable[[int], JsonDict],
    limit: int,
    pointer: str,
) -> None:
    await client.views_open(trigger_id=standin.state.issue_trigger(REQUESTER), view=build(limit))
    error = await slack_error(
        client.views_open(trigger_id=standin.state.issue_trigger(REQUESTER), view=build(limit + 1))
    )
    # Slack reports a broken view as invalid_arguments, naming the limit and where it broke.
    assert error["error"] == "invalid_arguments"
    [message] = error["response_metadata"]["messages"]
    assert str(limit) in message or str(limit + 1) in message
    assert message.endswith(f"[json-pointer:{pointer}]")


async def test_a_modal_with_inputs_needs_a_submit_button(
    standin: SlackStandIn, client: AsyncWebClient
) -> None:
    field = {
        "type": "input",
        "label": plain("Reason"),
        "element": {"type": "plain_text_input", "action_id": "reason"},
    }
    error = await slack_error(
        client.views_open(
            trigger_id=standin.state.issue_trigger(REQUESTER), view=modal(blocks=[field])
        )
    )
    assert error["error"] == "invalid_arguments"
    await client.views_open(
        trigger_id=standin.state.issue_trigger(REQUESTER),
        view=modal(blocks=[field], submit=plain("Send")),
    )


async def test_views_update_by_id_or_external_id_honours_the_hash(
    standin: SlackStandIn, client: AsyncWebClient
) -> None:
    opened = (
        await client.views_open(
            trigger_id=standin.state.issue_trigger(REQUESTER), view=modal(external_id="req-1")
        )
    )["view"]
    updated = (
        await client.views_update(view_id=opened["id"], view=modal("Updated"), hash=opened["hash"])
    )["view"]
    assert updated["id"] == opened["id"]
    assert updated["hash"] != opened["hash"]
    assert standin.state.views[opened["id"]].payload["title"]["text"] == "Updated"
    stale = await slack_error(
        client.views_update(view_id=opened["id"], view=modal(), hash=opened["hash"])
    )
    assert stale["error"] == "hash_conflict"
    by_external = await client.views_update(external_id="req-1", view=modal("Again"))
    assert by_external["view"]["title"]["text"] == "Again"
    missing = await slack_error(client.views_update(view_id="V0NOTHERE0", view=modal()))
    assert missing["error"] == "not_found"


async def test_views_push_stacks_at_most_three_views(
    standin: SlackStandIn, client: AsyncWebClient
) -> None:
    root = (
        await client.views_open(trigger_id=standin.state.issue_trigger(REQUESTER), view=modal())
    )["view"]
    below = root["id"]
    for _ in range(2):
        trigger = standin.state.issue_trigger(REQUESTER, view_id=below)
        pushed = (await client.views_push(trigger_id=trigger, view=modal("Pushed")))["view"]
        assert pushed["root_view_id"] == root["id"]
        assert pushed["previous_view_id"] == below
        below = pushed["id"]
    full = await slack_error(
        client.views_push(
            trigger_id=standin.state.issue_trigger(REQUESTER, view_id=below), view=modal()
        )
    )
    assert full["error"] == "push_limit_reached"
    not_from_a_modal = await slack_error(
        client.views_push(trigger_id=standin.state.issue_trigger(REQUESTER), view=modal())
    )
    assert not_from_a_modal["error"] == "not_found"


async def test_views_publish_stores_a_home_tab_per_user(
    standin: SlackStandIn, client: AsyncWebClient
) -> None:
    home = {"type": "home", "blocks": [section("Your backfills")]}
    published = (await client.views_publish(user_id=REQUESTER, view=home))["view"]
    assert standin.state.home[REQUESTER].id == published["id"]
    again = (await client.views_publish(user_id=REQUESTER, view=home))["view"]
    assert again["id"] == published["id"]
    wrong_type = await slack_error(client.views_publish(user_id=REQUESTER, view=modal()))
    assert wrong_type["error"] == "invalid_arguments"
    nobody = await slack_error(client.views_publish(user_id="U0NOBODY01", view=home))
    assert nobody["error"] == "user_not_found"
    too_many = {"type": "home", "blocks": [{"type": "divider"}] * 101}
    error = await slack_error(client.views_publish(user_id=REQUESTER, view=too_many))
    assert error["response_metadata"]["messages"] == [
        "[ERROR] no more than 100 items allowed [json-pointer:/view/blocks]"
    ]


# -- rate limits ------------------------------------------------------------------------------


async def test_post_message_allows_a_burst_of_three_then_one_per_second_per_channel(
    limited: SlackStandIn, clock: FakeClock
) -> None:
    headers = {"Authorization": f"Bearer {limited.bot_token}"}

    async def post(channel: str) -> tuple[int, JsonDict, str | None]:
        async with (
            aiohttp.ClientSession() as session,
            session.post(
                f"{limited.url}/api/chat.postMessage",
                json={"channel": channel, "text": "x"},
                headers=headers,
            ) as response,
        ):
            return response.status, await response.json(), response.headers.get("Retry-After")

    for _ in range(3):
        assert (await post(CHANNEL))[0] == 200
    status, body, retry_after = await post(CHANNEL)
    assert (status, body, retry_after) == (429, {"ok": False, "error": "ratelimited"}, "1")
    assert (await post("C0ELSEWHERE"))[0] == 200  # the limit is per channel
    clock.advance(0.5)
    assert (await post(CHANNEL))[0] == 429
    clock.advance(0.5)
    assert (await post(CHANNEL))[0] == 200
    assert len(limited.state.messages(CHANNEL)) == 4
    assert [c.status for c in limited.state.calls].count(429) == 2


async def test_chat_update_is_tier_3_fifty_per_minute(
    limited: SlackStandIn, clock: FakeClock
) -> None:
    posted = limited.state.post(CHANNEL, text="status")
    headers = {"Authorization": f"Bearer {limited.bot_token}"}
    statuses = []
    async with aiohttp.ClientSession() as session:
        for i in range(51):
            async with session.post(
                f"{limited.url}/api/chat.update",
                json={"channel": CHANNEL, "ts": posted.ts, "text": f"v{i}"},
                headers=headers,
            ) as response:
                statuses.append((response.status, response.headers.get("Retry-After")))
        clock.advance(60 / 50)
        async with session.post(
            f"{limited.url}/api/chat.update",
            json={"channel": CHANNEL, "ts": posted.ts, "text": "later"},
            headers=headers,
        ) as response:
            assert response.status == 200
    assert statuses[:50] == [(200, None)] * 50
    assert statuses[50][0] == 429
    assert int(statuses[50][1] or 0) >= 1
    assert posted.text == "later"


async def test_slack_sdk_retry_handler_rides_out_429s_and_stores_each_message_once() -> None:
    # The clock runs 20x faster than real time so slack_sdk's real Retry-After sleeps (>= 1 s)
    # refill the bucket quickly; the 429s and the retries themselves are real.
    start = time.monotonic()
    async with running_slack_standin(clock=lambda: (time.monotonic() - start) * 20) as server:
        client = client_for(
            server, retry_handlers=[AsyncRateLimitErrorRetryHandler(max_retry_count=5)]
        )
        texts = [f"message {i}" for i in range(8)]
        answers = await asyncio.gather(
            *(client.chat_postMessage(channel=CHANNEL, text=t) for t in texts)
        )
        assert all(a["ok"] for a in answers)
        stored = [m.text for m in server.state.messages(CHANNEL)]
        assert sorted(stored) == sorted(texts)
        assert any(c.status == 429 for c in server.state.calls)


# -- response_url -----------------------------------------------------------------------------


async def post_json(url: str, body: Any) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.post(url, json=body) as response:
        return response.status, await response.text()


async def test_response_url_posts_are_ephemeral_by_default_or_in_channel(
    standin: SlackStandIn,
) -> None:
    url = standin.state.issue_response_url(standin.url, CHANNEL, REQUESTER)
    assert await post_json(url, {"text": "only you"}) == (200, "ok")
    assert await post_json(url, {"text": "everyone", "response_type": "in_channel"}) == (200, "ok")
    [ephemeral] = standin.state.ephemerals
    assert (ephemeral.channel, ephemeral.user, ephemeral.text, ephemeral.source) == (
        CHANNEL,
        REQUESTER,
        "only you",
        "response_url",
    )
    assert [m.text for m in standin.state.messages(CHANNEL)] == ["everyone"]
    assert [p.body for p in standin.state.response_posts] == [
        {"text": "only you"},
        {"text": "everyone", "response_type": "in_channel"},
    ]


async def test_response_url_replace_and_delete_original_act_on_the_clicked_message(
    standin: SlackStandIn,
) -> None:
    original = standin.state.post(CHANNEL, text="plan", blocks=[actions(button())])
    url = standin.state.issue_response_url(standin.url, CHANNEL, REQUESTER, (CHANNEL, original.ts))
    replaced = {"replace_original": True, "text": "approved", "blocks": [section("done")]}
    assert await post_json(url, replaced) == (200, "ok")
    assert original.text == "approved"
    assert original.blocks[0]["text"]["text"] == "done"
    assert len(standin.state.messages(CHANNEL)) == 1
    assert await post_json(url, {"delete_original": True}) == (200, "ok")
    assert standin.state.messages(CHANNEL) == []


async def test_response_urls_post_into_threads_and_leave_a_tombstone_for_deleted_parents(
    standin: SlackStandIn,
) -> None:
    parent = standin.state.post(CHANNEL, text="status", blocks=[actions(button())])
    url = standin.state.issue_response_url(standin.url, CHANNEL, REQUESTER, (CHANNEL, parent.ts))
    threaded = {"response_type": "in_channel", "text": "progress", "thread_ts": parent.ts}
    assert await post_json(url, threaded) == (200, "ok")
    assert [m.text for m in standin.state.thread(CHANNEL, parent.ts)] == ["progress"]
    assert await post_json(url, {"delete_original": True}) == (200, "ok")
    [tombstone] = standin.state.messages(CHANNEL)
    assert tombstone.subtype == "tombstone"
    assert tombstone.blocks == []
    assert len(standin.state.thread(CHANNEL, parent.ts)) == 1


async def test_a_response_url_allows_five_uses_within_thirty_minutes(
    standin: SlackStandIn, clock: FakeClock
) -> None:
    url = standin.state.issue_response_url(standin.url, CHANNEL, REQUESTER)
    for i in range(5):
        assert await post_json(url, {"text": f"use {i}"}) == (200, "ok")
    assert await post_json(url, {"text": "sixth"}) == (404, "used_url")
    fresh = standin.state.issue_response_url(standin.url, CHANNEL, REQUESTER)
    clock.advance(30 * 60 + 1)
    assert await post_json(fresh, {"text": "too late"}) == (404, "expired_url")
    assert len(standin.state.ephemerals) == 5
    assert [p.status for p in standin.state.response_posts] == [200] * 5 + [404, 404]


async def test_response_url_bodies_are_checked_against_slacks_limits(standin: SlackStandIn) -> None:
    url = standin.state.issue_response_url(standin.url, CHANNEL, REQUESTER)
    assert await post_json(url, {"blocks": [{"type": "divider"}] * 51}) == (400, "invalid_blocks")
    assert await post_json(url, {"response_type": "ephemeral"}) == (400, "no_text")
    assert await post_json(url, "not an object") == (400, "invalid_payload")
    assert standin.state.ephemerals == []


# -- acting as a user: signed requests to the bot ---------------------------------------------


@dataclass
class EchoBot:
    """A tiny bot: verifies Slack's signature and echoes the form it got as JSON."""

    url: str
    received: list[JsonDict] = field(default_factory=list)
    scripted: list[web.Response] = field(default_factory=list)  # next answers, in order


@pytest.fixture
async def bot(standin: SlackStandIn) -> AsyncIterator[EchoBot]:
    verifier = SignatureVerifier(standin.signing_secret)
    echo = EchoBot(url="")

    async def events(request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        valid = verifier.is_valid(
            body=raw.decode(),
            timestamp=request.headers.get("X-Slack-Request-Timestamp", ""),
            signature=request.headers.get("X-Slack-Signature", ""),
        )
        form = {k: v[0] for k, v in parse_qs(raw.decode(), keep_blank_values=True).items()}
        echo.received.append(
            {"raw": raw, "form": form, "valid": valid, "content_type": request.content_type}
        )
        if not valid:
            return web.Response(status=401, text="invalid signature")
        if echo.scripted:
            return echo.scripted.pop(0)
        return web.json_response({"echo": form})

    app = web.Application()
    app.router.add_post("/slack/events", events)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    echo.url = f"http://{host}:{port}/slack/events"
    standin.set_events_url(echo.url)
    yield echo
    await runner.cleanup()


SLASH_FIELDS = {
    "token",
    "team_id",
    "team_domain",
    "channel_id",
    "channel_name",
    "user_id",
    "user_name",
    "command",
    "text",
    "api_app_id",
    "response_url",
    "trigger_id",
}


async def test_a_slash_command_is_a_signed_form_with_slacks_fields(
    standin: SlackStandIn, bot: EchoBot, client: AsyncWebClient
) -> None:
    reply = await standin.slash_command("example.etl_orders 2021-06-04..2021-06-06")
    assert reply.status == 200
    [got] = bot.received
    assert got["valid"] is True
    assert got["content_type"] == "application/x-www-form-urlencoded"
    form = got["form"]
    assert set(form) >= SLASH_FIELDS
    assert form["command"] == "/backfill"
    assert form["text"] == "example.etl_orders 2021-06-04..2021-06-06"
    assert (form["user_id"], form["channel_id"], form["team_id"]) == (
        REQUESTER,
        CHANNEL,
        "T0TEAM0001",
    )
    assert (form["user_name"], form["channel_name"]) == ("riley", "backfill")
    assert reply.json == {"echo": form}
    # The trigger_id and response_url in the command really work.
    await client.views_open(trigger_id=form["trigger_id"], view=modal())
    assert await post_json(form["response_url"], {"text": "working on it"}) == (200, "ok")
    assert standin.state.ephemerals[-1].text == "working on it"


@pytest.mark.parametrize(
    ("answer", "ephemeral", "in_channel"),
    [
        pytest.param(web.Response(text="Planning…"), "Planning…", None, id="plain-text"),
        pytest.param(web.json_response({"text": "Planning…"}), "Planning…", None, id="json"),
        pytest.param(
            web.json_response({"text": "Plan", "response_type": "in_channel"}),
            None,
            "Plan",
            id="in-channel",
        ),
        pytest.param(web.Response(), None, None, id="empty-ack"),
    ],
)
async def test_a_slash_commands_ack_body_is_shown_like_slack_shows_it(
    standin: SlackStandIn,
    bot: EchoBot,
    answer: web.Response,
    ephemeral: str | None,
    in_channel: str | None,
) -> None:
    bot.scripted.append(answer)
    await standin.slash_command("help")
    assert [(e.text, e.source, e.user) for e in standin.state.ephemerals] == (
        [(ephemeral, "ack", REQUESTER)] if ephemeral else []
    )
    assert [m.text for m in standin.state.messages(CHANNEL)] == ([in_channel] if in_channel else [])


async def test_someone_who_acts_is_a_workspace_member_even_if_not_seeded(
    standin: SlackStandIn, bot: EchoBot, client: AsyncWebClient
) -> None:
    await standin.slash_command("help", user_id="U0ORDERS01")
    assert bot.received[0]["form"]["user_name"] == "u0orders01"
    assert (await client.users_info(user="U0ORDERS01"))["user"]["id"] == "U0ORDERS01"
    await client.chat_postEphemeral(channel=CHANNEL, user="U0ORDERS01", text="hi")


async def test_a_click_is_a_signed_block_actions_payload_for_the_stored_button(
    standin: SlackStandIn, bot: EchoBot, client: AsyncWebClient
) -> None:
    posted = await client.chat_postMessage(
        channel=CHANNEL,
        text="plan",
        blocks=[
            section("plan"),
            actions(button(), button("cancel", "req-1", "Cancel"), block_id="b1"),
        ],
    )
    reply = await standin.click(
        channel_id=CHANNEL, message_ts=posted["ts"], action_id="approve", user_id="U0APPROVE1"
    )
    assert reply.status == 200
    [got] = bot.received
    assert got["valid"] is True
    assert set(got["form"]) == {"payload"}
    payload = json.loads(got["form"]["payload"])
    assert payload["type"] == "block_actions"
    assert payload["user"]["id"] == "U0APPROVE1"
    assert payload["team"]["id"] == "T0TEAM0001"
    assert payload["container"] == {
        "type": "message",
        "message_ts": posted["ts"],
        "channel_id": CHANNEL,
        "is_ephemeral": False,
    }
    assert payload["channel"] == {"id": CHANNEL, "name": "backfill"}
    assert payload["message"]["ts"] == posted["ts"]
    assert payload["message"]["blocks"] == posted["message"]["blocks"]
    [action] = payload["actions"]
    assert {k: action[k] for k in ("type", "action_id", "block_id", "value")} == {
        "type": "button",
        "action_id": "approve",
        "block_id": "b1",
        "value": "req-1",
    }
    assert TS.match(action["action_ts"])
    assert payload["trigger_id"]
    assert payload["response_url"].startswith(standin.url)
    with pytest.raises(LookupError):
        await standin.click(
            channel_id=CHANNEL, message_ts=posted["ts"], action_id="nope", user_id="U0APPROVE1"
        )


async def test_a_click_value_picks_among_buttons_and_can_forge_a_stale_one(
    standin: SlackStandIn, bot: EchoBot
) -> None:
    rows = [actions(button(value=f"req-{i}"), block_id=f"row{i}") for i in range(3)]
    message = standin.state.post(CHANNEL, text="requests", blocks=rows)
    await standin.click(
        channel_id=CHANNEL,
        message_ts=message.ts,
        action_id="approve",
        user_id="U0APPROVE1",
        value="req-2",
    )
    await standin.click(
        channel_id=CHANNEL,
        message_ts=message.ts,
        action_id="approve",
        user_id="U0APPROVE1",
        value="req-old",
    )
    first, forged = (json.loads(r["form"]["payload"])["actions"][0] for r in bot.received)
    assert (first["block_id"], first["value"]) == ("row2", "req-2")
    assert forged["value"] == "req-old"


async def test_a_clicks_response_url_replaces_the_clicked_message(
    standin: SlackStandIn, bot: EchoBot
) -> None:
    message = standin.state.post(CHANNEL, text="plan", blocks=[actions(button())])
    await standin.click(
        channel_id=CHANNEL, message_ts=message.ts, action_id="approve", user_id="U0APPROVE1"
    )
    payload = json.loads(bot.received[0]["form"]["payload"])
    status = await post_json(
        payload["response_url"], {"replace_original": True, "text": "Approved"}
    )
    assert status == (200, "ok")
    assert message.text == "Approved"
    assert message.blocks == []


async def test_clicks_in_a_modal_carry_the_view_and_a_trigger_for_views_push(
    standin: SlackStandIn, bot: EchoBot, client: AsyncWebClient
) -> None:
    opened = (
        await client.views_open(
            trigger_id=standin.state.issue_trigger(REQUESTER),
            view=modal(blocks=[section("full plan"), actions(button("more"))]),
        )
    )["view"]
    reply = await standin.click_in_view(view_id=opened["id"], action_id="more", user_id=REQUESTER)
    assert reply.status == 200
    payload = json.loads(bot.received[0]["form"]["payload"])
    assert payload["type"] == "block_actions"
    assert payload["container"] == {"type": "view", "view_id": opened["id"]}
    assert payload["view"]["id"] == opened["id"]
    assert "response_url" not in payload
    pushed = await client.views_push(trigger_id=payload["trigger_id"], view=modal("Details"))
    assert pushed["view"]["previous_view_id"] == opened["id"]


async def test_submitting_a_view_sends_its_state_and_closes_it_on_an_empty_ack(
    standin: SlackStandIn, bot: EchoBot, client: AsyncWebClient
) -> None:
    opened = (
        await client.views_open(
            trigger_id=standin.state.issue_trigger(REQUESTER),
            view=modal(callback_id="confirm", private_metadata="req-1", submit=plain("Approve")),
        )
    )["view"]
    values = {"reason": {"reason_input": {"type": "plain_text_input", "value": "late data"}}}
    bot.scripted.append(web.Response())
    reply = await standin.submit_view(view_id=opened["id"], user_id=REQUESTER, values=values)
    assert reply.status == 200
    payload = json.loads(bot.received[0]["form"]["payload"])
    assert payload["type"] == "view_submission"
    assert payload["view"]["callback_id"] == "confirm"
    assert payload["view"]["private_metadata"] == "req-1"
    assert payload["view"]["state"] == {"values": values}
    assert payload["user"]["id"] == REQUESTER
    assert payload["trigger_id"]
    assert standin.state.views[opened["id"]].closed
    with pytest.raises(LookupError):
        await standin.submit_view(view_id=opened["id"], user_id=REQUESTER)


async def test_view_submission_response_actions_keep_or_change_the_modal(
    standin: SlackStandIn, bot: EchoBot, client: AsyncWebClient
) -> None:
    opened = (
        await client.views_open(trigger_id=standin.state.issue_trigger(REQUESTER), view=modal())
    )["view"]
    errors = {"reason": "Say why"}
    bot.scripted.append(web.json_response({"response_action": "errors", "errors": errors}))
    await standin.submit_view(view_id=opened["id"], user_id=REQUESTER)
    view = standin.state.views[opened["id"]]
    assert not view.closed
    assert view.errors == errors
    bot.scripted.append(web.json_response({"response_action": "update", "view": modal("Thanks")}))
    await standin.submit_view(view_id=opened["id"], user_id=REQUESTER)
    assert not view.closed
    assert view.payload["title"]["text"] == "Thanks"
    bot.scripted.append(web.json_response({"response_action": "clear"}))
    await standin.submit_view(view_id=opened["id"], user_id=REQUESTER)
    assert view.closed


async def test_forged_and_stale_requests_reach_the_bot_unchanged(
    standin: SlackStandIn, bot: EchoBot
) -> None:
    body = urlencode({"command": "/backfill", "text": "help"}).encode()
    forged = await standin.send_raw(
        body, {"X-Slack-Request-Timestamp": str(int(time.time())), "X-Slack-Signature": "v0=00"}
    )
    stale = await standin.send_raw(body, standin.sign(body, timestamp=int(time.time()) - 6 * 60))
    fine = await standin.send_raw(body, standin.sign(body))
    assert (forged.status, forged.body) == (401, "invalid signature")
    assert stale.status == 401
    assert fine.status == 200
    assert [r["raw"] for r in bot.received] == [body] * 3
    assert [r["valid"] for r in bot.received] == [False, False, True]


async def test_a_bot_that_does_not_answer_within_the_ack_timeout_gets_status_0() -> None:
    async def slow(request: web.Request) -> web.Response:
        await asyncio.sleep(0.3)
        return web.Response()

    app = web.Application()
    app.router.add_post("/slack/events", slow)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    host, port = runner.addresses[0][:2]
    try:
        options: SlackStandInOptions = {
            "ack_timeout": 0.05,
            "events_url": f"http://{host}:{port}/slack/events",
        }
        async with running_slack_standin(**options) as server:
            reply = await server.slash_command("help")
            assert (reply.status, reply.body) == (0, "operation_timeout")
            assert server.state.ephemerals == []
    finally:
        await runner.cleanup()


async def test_acting_as_a_user_needs_the_bots_request_url(standin: SlackStandIn) -> None:
    with pytest.raises(RuntimeError, match="set_events_url"):
        await standin.slash_command("help")


async def test_serve_forever_announces_its_url(capsys: pytest.CaptureFixture[str]) -> None:
    task = asyncio.create_task(serve_forever("127.0.0.1", 0, rate_limits=False))
    try:
        for _ in range(100):
            await asyncio.sleep(0.01)
            line = capsys.readouterr().out
            if line:
                break
        match = re.fullmatch(r"Slack stand-in listening on (http://127\.0\.0\.1:\d+)\n", line)
        assert match is not None
        async with (
            aiohttp.ClientSession() as session,
            session.post(f"{match.group(1)}/api/auth.test") as response,
        ):
            assert (await response.json())["error"] == "not_authed"
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_a_dm_posted_to_by_user_id_answers_with_its_d_id_which_edits_take(
    standin: SlackStandIn, client: AsyncWebClient
) -> None:
    # Slack opens the bot's DM for a user id, answers with the DM's D… id, and chat.update
    # wants that id ("ensure that this value is a DM ID … instead of a User ID").
    posted = await client.chat_postMessage(channel=REQUESTER, text="hello")
    dm = standin.dm_of(REQUESTER)
    assert posted["channel"] == dm
    with pytest.raises(SlackApiError) as refused:
        await client.chat_update(channel=REQUESTER, ts=str(posted["ts"]), text="edited")
    assert refused.value.response["error"] == "channel_not_found"
    edited = await client.chat_update(channel=dm, ts=str(posted["ts"]), text="edited")
    assert edited["channel"] == dm
    [message] = standin.state.messages(REQUESTER)
    assert message.text == "edited"
