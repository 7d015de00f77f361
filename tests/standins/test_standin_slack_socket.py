"""The Slack stand-in's Socket Mode, driven by an app written against the protocol itself: a raw
aiohttp WebSocket that reads every message and acks (or not) exactly as each test says.

Each test names what Slack does over Socket Mode and fails if the stand-in stops doing it. The
bot's own client (slack_sdk's, through bolt) is driven end to end in
tests/slack/test_socket_mode.py.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import aiohttp
import pytest
from aiohttp import WSMsgType, web
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from standins.slack.server import SlackStandIn, running_slack_standin

JsonDict = dict[str, Any]
COMMAND = "example.etl_orders 2021-06-04..2021-06-06"
HOME = {"type": "app_home_opened", "user": "U0REQUEST1", "channel": "D0HOME0001", "tab": "home"}


@pytest.fixture
async def standin() -> AsyncIterator[SlackStandIn]:
    # A short ack window (1 s: a loaded 2-core CI still acks well within it) and redelivery:
    # what takes Slack seconds takes the tests a moment.
    async with running_slack_standin(
        socket_mode=True, rate_limits=False, ack_timeout=1.0, redelivery_s=0.05
    ) as server:
        yield server


def api(standin: SlackStandIn) -> AsyncWebClient:
    return AsyncWebClient(base_url=f"{standin.url}/api/")


class App:
    """One connection of an app, as its messages arrive."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws

    async def next(self) -> JsonDict:
        message = await asyncio.wait_for(self.ws.receive(), 10)
        assert message.type == WSMsgType.TEXT, message
        found: JsonDict = json.loads(message.data)
        return found

    async def ack(self, envelope: JsonDict, payload: JsonDict | None = None) -> None:
        answer: JsonDict = {"envelope_id": envelope["envelope_id"]}
        if payload is not None:
            answer["payload"] = payload
        await self.ws.send_json(answer)

    async def closed_by_slack(self) -> bool:
        message = await asyncio.wait_for(self.ws.receive(), 10)
        return message.type in (WSMsgType.CLOSE, WSMsgType.CLOSED, WSMsgType.CLOSING)


async def open_url(standin: SlackStandIn) -> str:
    answer = await api(standin).apps_connections_open(app_token=standin.app_token)
    return str(answer["url"])


class Apps:
    """Opens connections as an app does, and keeps them (one dropped would close) until the
    test ends."""

    def __init__(self, standin: SlackStandIn, http: aiohttp.ClientSession) -> None:
        self.standin, self.http = standin, http
        self.opened: list[App] = []

    async def open(self, url: str) -> App:
        app = App(await self.http.ws_connect(url))
        self.opened.append(app)
        return app

    async def connect(self) -> tuple[App, JsonDict]:
        """A new connection and its hello."""
        app = await self.open(await open_url(self.standin))
        hello = await app.next()
        assert hello["type"] == "hello"
        return app, hello


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


@pytest.fixture
async def apps(standin: SlackStandIn, http: aiohttp.ClientSession) -> AsyncIterator[Apps]:
    opened = Apps(standin, http)
    yield opened
    for app in opened.opened:
        await app.ws.close()


async def test_apps_connections_open_takes_only_an_app_token_in_the_header(
    standin: SlackStandIn, http: aiohttp.ClientSession
) -> None:
    url = await open_url(standin)
    parts = urlsplit(url)
    assert (parts.scheme, parts.path) == ("ws", "/link/")
    query = parse_qs(parts.query)
    assert query["app_id"] == [standin.state.app_id]
    assert query["ticket"][0]

    async def refused(token: str) -> str:
        with pytest.raises(SlackApiError) as raised:
            await api(standin).apps_connections_open(app_token=token)
        return str(raised.value.response["error"])

    assert await refused(standin.bot_token) == "not_allowed_token_type"
    assert await refused("xoxp-1-a-user-token") == "not_allowed_token_type"
    assert await refused("xapp-1-A0STANDIN1-1-another") == "invalid_auth"
    # the app token as a form parameter instead of the Authorization header
    method = f"{standin.url}/api/apps.connections.open"
    async with http.post(method, data={"token": standin.app_token}) as reply:
        assert (await reply.json()) == {"ok": False, "error": "not_authed"}
    async with http.get(method, headers={"Authorization": f"Bearer {standin.app_token}"}) as reply:
        assert (await reply.json())["error"] == "insecure_request"
    errors = [c.error for c in standin.state.calls if c.method == "apps.connections.open"]
    assert errors == [
        None,
        "not_allowed_token_type",
        "not_allowed_token_type",
        "invalid_auth",
        "not_authed",
        "insecure_request",
    ]
    assert standin.socket.connections == []


async def test_a_ticket_opens_one_connection_which_starts_with_hello(
    standin: SlackStandIn, http: aiohttp.ClientSession, apps: Apps
) -> None:
    url = await open_url(standin)
    app = await apps.open(url + "&debug_reconnects=true")
    hello = await app.next()
    assert hello["num_connections"] == 1
    assert hello["connection_info"] == {"app_id": standin.state.app_id}
    debug = hello["debug_info"]
    assert set(debug) >= {"host", "build_number", "approximate_connection_time"}
    assert debug["approximate_connection_time"] == 360  # debug_reconnects: a short connection
    with pytest.raises(aiohttp.WSServerHandshakeError) as again:
        await http.ws_connect(url)
    assert again.value.status == 403
    _, second = await apps.connect()
    assert second["num_connections"] == 2
    assert second["debug_info"]["approximate_connection_time"] == 3600


async def test_a_slash_command_is_an_envelope_whose_ack_payload_is_the_reply(
    standin: SlackStandIn, apps: Apps
) -> None:
    app, _ = await apps.connect()
    typed = asyncio.create_task(standin.slash_command(COMMAND))
    envelope = await app.next()
    assert envelope["type"] == "slash_commands"
    assert envelope["accepts_response_payload"] is True
    assert "retry_attempt" not in envelope  # only events are retried
    payload = envelope["payload"]
    assert (payload["command"], payload["text"], payload["user_id"]) == (
        "/backfill",
        COMMAND,
        "U0REQUEST1",
    )
    assert payload["response_url"].startswith(f"{standin.url}/response_url/")
    assert payload["trigger_id"] in standin.state.triggers
    await app.ack(envelope, {"text": "Planning example.etl_orders …"})
    reply = await typed
    assert (reply.status, reply.json) == (200, {"text": "Planning example.etl_orders …"})
    [shown] = standin.state.ephemerals
    assert (shown.source, shown.text) == ("ack", "Planning example.etl_orders …")
    # an ack without a payload: nothing is shown, as for an HTTP 200 with an empty body
    typed = asyncio.create_task(standin.slash_command("help"))
    await app.ack(await app.next())
    assert (await typed).body == ""
    assert len(standin.state.ephemerals) == 1
    assert standin.sent_requests == []  # nothing went over HTTP


async def test_a_click_and_a_view_submission_are_interactive_envelopes(
    standin: SlackStandIn, apps: Apps
) -> None:
    app, _ = await apps.connect()
    button = {"type": "button", "action_id": "go", "text": {"type": "plain_text", "text": "Go"}}
    message = standin.state.post(
        "C0BACKFILL", text="t", blocks=[{"type": "actions", "elements": [button]}]
    )
    clicked = asyncio.create_task(
        standin.click(
            channel_id="C0BACKFILL", message_ts=message.ts, action_id="go", user_id="U0APPROVE1"
        )
    )
    envelope = await app.next()
    assert (envelope["type"], envelope["payload"]["type"]) == ("interactive", "block_actions")
    assert envelope["payload"]["actions"][0]["action_id"] == "go"
    await app.ack(envelope)
    assert (await clicked).status == 200
    modal = {"type": "modal", "title": {"type": "plain_text", "text": "Plan"}, "blocks": []}
    view = standin.state.open_view("U0APPROVE1", modal)
    submitted = asyncio.create_task(standin.submit_view(view_id=view.id, user_id="U0APPROVE1"))
    envelope = await app.next()
    assert envelope["payload"]["type"] == "view_submission"
    errors = {"block": "Pick a date"}
    await app.ack(envelope, {"response_action": "errors", "errors": errors})
    assert (await submitted).status == 200
    assert view.errors == errors  # the ack's response_action applied, as an HTTP body's is


async def test_an_unacknowledged_event_is_sent_again_with_its_retry_attempt(
    standin: SlackStandIn, apps: Apps
) -> None:
    app, _ = await apps.connect()
    opened = asyncio.create_task(standin.send_event(HOME))
    first = await app.next()  # not acked
    assert first["type"] == "events_api"
    assert first["accepts_response_payload"] is False
    assert (first["retry_attempt"], first["retry_reason"]) == (0, "")
    assert first["payload"]["type"] == "event_callback"
    assert first["payload"]["event"]["type"] == "app_home_opened"
    second = await app.next()
    assert (second["retry_attempt"], second["retry_reason"]) == (1, "timeout")
    assert second["envelope_id"] != first["envelope_id"]
    assert second["payload"]["event_id"] == first["payload"]["event_id"]  # the same event
    await app.ack(second)
    assert (await opened).status == 200
    assert [e.outcome for e in standin.socket.envelopes] == ["timeout", "acked"]
    # the first attempt's late ack changes nothing, and is told apart from a real ack
    await app.ack(first)
    standin.socket.lose_acks(1)
    opened = asyncio.create_task(standin.send_event(HOME))
    await app.ack(await app.next())  # lost on its way
    retried = await app.next()
    assert retried["retry_attempt"] == 1
    await app.ack(retried)
    assert (await opened).status == 200
    outcomes = [e.outcome for e in standin.socket.envelopes]
    assert outcomes == ["timeout", "acked", "ack_lost", "acked"]
    assert len(standin.socket.protocol_errors) == 1
    assert "ack of no envelope waiting" in standin.socket.protocol_errors[0]


async def test_an_event_is_retried_three_times_at_most(standin: SlackStandIn, apps: Apps) -> None:
    app, _ = await apps.connect()
    opened = asyncio.create_task(standin.send_event(HOME))
    attempts = [(await app.next())["retry_attempt"] for _ in range(4)]
    assert attempts == [0, 1, 2, 3]
    reply = await opened
    assert reply.status == 0
    assert [e.outcome for e in standin.socket.envelopes] == ["timeout"] * 4


async def test_slash_commands_are_not_retried_the_person_sees_the_failure(
    standin: SlackStandIn, apps: Apps
) -> None:
    reply = await standin.slash_command(COMMAND)  # no connection open
    assert (reply.status, reply.body) == (0, "dispatch_failed")
    app, _ = await apps.connect()
    typed = asyncio.create_task(standin.slash_command(COMMAND))
    await app.next()  # never acked
    reply = await typed
    assert (reply.status, reply.body) == (0, "operation_timeout")
    assert [e.outcome for e in standin.socket.envelopes] == ["no_connection", "timeout"]
    assert standin.state.ephemerals == []


async def test_an_event_due_while_no_connection_is_open_comes_as_a_retry(
    http: aiohttp.ClientSession,
) -> None:
    async with running_slack_standin(socket_mode=True, redelivery_s=0.5) as standin:
        opened = asyncio.create_task(standin.send_event(HOME))
        await asyncio.sleep(0)  # the first attempt finds no connection
        assert [e.outcome for e in standin.socket.envelopes] == ["no_connection"]
        app, _ = await Apps(standin, http).connect()
        envelope = await app.next()
        assert envelope["retry_attempt"] >= 1  # 1 unless connecting took a redelivery or more
        assert envelope["retry_reason"] == "timeout"
        await app.ack(envelope)
        assert (await opened).status == 200
        await app.ws.close()


async def test_a_refresh_warns_then_requests_a_new_connection_and_closes_the_old(
    standin: SlackStandIn, apps: Apps
) -> None:
    old, _ = await apps.connect()
    refreshing = asyncio.create_task(standin.socket.refresh(warning_s=0.05))
    warning = await old.next()
    assert (warning["type"], warning["reason"]) == ("disconnect", "warning")
    assert set(warning["debug_info"]) == {"host"}
    requested = await old.next()  # this app waits for the request itself
    assert (requested["type"], requested["reason"]) == ("disconnect", "refresh_requested")
    new, hello = await apps.connect()
    assert hello["num_connections"] == 2  # the old one is still open until the new one is
    moved_to = await refreshing
    assert await old.closed_by_slack()
    assert [c.open for c in standin.socket.connections] == [False, True]
    assert moved_to is standin.socket.connections[1]
    typed = asyncio.create_task(standin.slash_command(COMMAND))
    await new.ack(await new.next())
    assert (await typed).status == 200


async def test_an_app_that_does_not_reconnect_makes_the_refresh_fail(
    standin: SlackStandIn, apps: Apps
) -> None:
    app, _ = await apps.connect()
    with pytest.raises(TimeoutError):
        await standin.socket.refresh(timeout_s=0.2)
    assert (await app.next())["reason"] == "refresh_requested"
    assert await app.closed_by_slack()  # Slack closes it all the same
    assert (await standin.slash_command(COMMAND)).body == "dispatch_failed"


async def test_link_disabled_closes_the_connection_and_delivery_returns_to_the_request_url(
    standin: SlackStandIn, apps: Apps
) -> None:
    received: list[tuple[str, str]] = []

    async def events(request: web.Request) -> web.Response:
        received.append((request.content_type, (await request.read()).decode()))
        return web.Response()

    web_app = web.Application()
    web_app.router.add_post("/slack/events", events)
    runner = web.AppRunner(web_app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    standin.set_events_url(f"http://127.0.0.1:{runner.addresses[0][1]}/slack/events")
    try:
        app, _ = await apps.connect()
        await standin.socket.disable()
        disabled = await app.next()
        assert (disabled["type"], disabled["reason"]) == ("disconnect", "link_disabled")
        assert await app.closed_by_slack()
        assert (await standin.slash_command(COMMAND)).status == 200
        assert (await standin.send_event(HOME)).status == 200
    finally:
        await runner.cleanup()
    assert [kind for kind, _ in received] == [
        "application/x-www-form-urlencoded",
        "application/json",
    ]
    assert json.loads(received[1][1])["event"]["type"] == "app_home_opened"
    assert standin.socket.envelopes == []


async def test_the_eleventh_connection_is_refused(standin: SlackStandIn, apps: Apps) -> None:
    for _ in range(10):
        await apps.connect()
    extra = await apps.open(await open_url(standin))
    refused = await extra.next()
    assert (refused["type"], refused["reason"]) == ("disconnect", "too_many_websockets")
    assert await extra.closed_by_slack()
    assert len(standin.socket.open_connections()) == 10


async def test_what_is_no_ack_is_recorded_as_a_protocol_error(
    standin: SlackStandIn, apps: Apps
) -> None:
    app, _ = await apps.connect()
    await app.ws.send_str("not json")
    await app.ws.send_json({"payload": {}})
    await app.ws.send_json({"envelope_id": "no-such-envelope"})
    await app.ws.send_bytes(b"\x00")
    typed = asyncio.create_task(standin.slash_command(COMMAND))
    await app.ack(await app.next())  # the connection still works
    assert (await typed).status == 200
    errors = standin.socket.protocol_errors
    assert len(errors) == 4
    assert [e.split(": ")[1] for e in errors[:2]] == ["not an ack", "not an ack"]
    assert "BINARY" in errors[3]
