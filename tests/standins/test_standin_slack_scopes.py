"""The Slack stand-in's OAuth scopes and conversations over real HTTP, driven by slack_sdk: the
X-OAuth-Scopes header, `missing_scope`, who may post where (archived channels, channels the bot
is not in, chat:write.public), and `conversations.info`. `backfill-bot doctor` relies on each.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from standins.slack.server import SlackStandIn, running_slack_standin
from standins.slack.state import DEFAULT_SCOPES

JsonDict = dict[str, Any]


@pytest.fixture
async def standin() -> AsyncIterator[SlackStandIn]:
    async with running_slack_standin(rate_limits=False) as server:
        yield server


@pytest.fixture
def client(standin: SlackStandIn) -> AsyncWebClient:
    return AsyncWebClient(base_url=f"{standin.url}/api/", token=standin.bot_token)


async def slack_error(call: Any) -> JsonDict:
    with pytest.raises(SlackApiError) as failure:
        await call
    data = failure.value.response.data
    assert isinstance(data, dict)
    assert data["ok"] is False
    return data


async def test_every_authenticated_answer_names_the_tokens_scopes(
    standin: SlackStandIn, client: AsyncWebClient
) -> None:
    answer = await client.auth_test()
    assert set(answer.headers["x-oauth-scopes"].split(",")) == set(DEFAULT_SCOPES)
    assert answer.headers["x-accepted-oauth-scopes"] == ""
    posted = await client.chat_postMessage(channel="C0BACKFILL", text="hi")
    assert posted.headers["x-accepted-oauth-scopes"] == "chat:write"
    standin.state.scopes.discard("users:read")
    again = await client.auth_test()
    assert "users:read" not in again.headers["x-oauth-scopes"].split(",")
    # A refused token learns nothing about scopes.
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{standin.url}/api/auth.test", data={"token": "xoxb-wrong"}) as reply,
    ):
        assert (await reply.json())["error"] == "invalid_auth"
        assert "X-OAuth-Scopes" not in reply.headers


@pytest.mark.parametrize(
    ("scope", "method", "args"),
    [
        ("chat:write", "chat.postMessage", {"channel": "C0BACKFILL", "text": "x"}),
        ("chat:write", "chat.update", {"channel": "C0BACKFILL", "ts": "1.000001", "text": "x"}),
        ("usergroups:read", "usergroups.users.list", {"usergroup": "S0GROUP001"}),
        ("users:read", "users.info", {"user": "U0REQUEST1"}),
    ],
)
async def test_a_method_without_its_scope_is_missing_scope_naming_needed_and_provided(
    standin: SlackStandIn, client: AsyncWebClient, scope: str, method: str, args: JsonDict
) -> None:
    standin.state.add_usergroup("S0GROUP001", ["U0REQUEST1"])
    standin.state.scopes.discard(scope)
    error = await slack_error(client.api_call(method, params=args))
    assert error["error"] == "missing_scope"
    assert error["needed"] == scope
    assert set(error["provided"].split(",")) == set(DEFAULT_SCOPES) - {scope}
    assert standin.state.messages("C0BACKFILL") == []


async def test_posts_to_archived_channels_and_channels_without_the_bot(
    standin: SlackStandIn, client: AsyncWebClient
) -> None:
    standin.state.add_channel("C0ARCHIVE1", "old", archived=True)
    archived = await slack_error(client.chat_postMessage(channel="C0ARCHIVE1", text="x"))
    assert archived["error"] == "is_archived"
    # A public channel the bot is not in takes its posts with chat:write.public only.
    standin.state.add_channel("C0OUTSIDE1", "outside", member=False)
    await client.chat_postMessage(channel="C0OUTSIDE1", text="public")
    standin.state.scopes.discard("chat:write.public")
    refused = await slack_error(client.chat_postMessage(channel="C0OUTSIDE1", text="x"))
    assert refused["error"] == "not_in_channel"
    ephemeral = await slack_error(
        client.chat_postEphemeral(channel="C0OUTSIDE1", user="U0REQUEST1", text="x")
    )
    assert ephemeral["error"] == "not_in_channel"
    unknown = await slack_error(client.chat_postMessage(channel="C0UNKNOWN1", text="x"))
    assert unknown["error"] == "not_in_channel"
    # A private channel the bot is not in does not exist, as far as the bot can tell.
    standin.state.add_channel("G0PRIVATE1", "private", member=False)
    hidden = await slack_error(client.chat_postMessage(channel="G0PRIVATE1", text="x"))
    assert hidden["error"] == "channel_not_found"
    assert [m.text for m in standin.state.messages("C0OUTSIDE1")] == ["public"]


async def test_conversations_info_says_whether_the_bot_is_in_and_whether_it_is_archived(
    standin: SlackStandIn, client: AsyncWebClient
) -> None:
    standin.state.add_channel("C0ARCHIVE1", "old", archived=True, member=False)
    standin.state.add_channel("G0PRIVATE1", "team-private")
    member = (await client.conversations_info(channel="C0BACKFILL"))["channel"]
    assert {k: member[k] for k in ("id", "name", "is_member", "is_archived", "is_private")} == {
        "id": "C0BACKFILL",
        "name": "backfill",
        "is_member": True,
        "is_archived": False,
        "is_private": False,
    }
    assert member["is_channel"] is True
    old = (await client.conversations_info(channel="C0ARCHIVE1"))["channel"]
    assert (old["is_member"], old["is_archived"]) == (False, True)
    private = (await client.conversations_info(channel="G0PRIVATE1"))["channel"]
    assert (private["is_private"], private["is_group"], private["is_member"]) == (True, True, True)
    assert standin.state.calls[-1].http_verb == "GET"


async def test_conversations_info_errors(standin: SlackStandIn, client: AsyncWebClient) -> None:
    standin.state.add_channel("G0HIDDEN01", "hidden", member=False)
    for unseen in ("C0NOWHERE1", "G0HIDDEN01", "backfill", "#backfill"):
        error = await slack_error(client.conversations_info(channel=unseen))
        assert error["error"] == "channel_not_found", unseen
    standin.state.add_channel("G0PRIVATE1", "team-private")
    standin.state.scopes -= {"channels:read", "groups:read"}
    public = await slack_error(client.conversations_info(channel="C0BACKFILL"))
    assert (public["error"], public["needed"]) == ("missing_scope", "channels:read")
    private = await slack_error(client.conversations_info(channel="G0PRIVATE1"))
    assert (private["error"], private["needed"]) == ("missing_scope", "groups:read")
