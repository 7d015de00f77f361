"""The Slack stand-in's page API (`/`, `/ui/api/…`) over HTTP: what a member sees (their own
ephemerals only), refusals of malformed requests, the live stream, and the page's own files."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import date
from typing import Any

import aiohttp
import pytest

from standins.demo.world import DemoClock, DemoWorld
from standins.slack.server import SlackStandIn, running_slack_standin
from standins.slack.state import Ephemeral


@pytest.fixture
async def slack() -> AsyncIterator[SlackStandIn]:
    async with running_slack_standin() as standin:
        yield standin


async def get(slack: SlackStandIn, path: str) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as http, http.get(f"{slack.url}{path}") as reply:
        body = await reply.text()
        is_json = reply.content_type == "application/json"
        return reply.status, json.loads(body) if is_json else body


async def post(slack: SlackStandIn, path: str, body: Any, **headers: str) -> tuple[int, Any]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    sent = {"Content-Type": "application/json", **headers}
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{slack.url}{path}", data=data, headers=sent) as reply,
    ):
        is_json = reply.content_type == "application/json"
        return reply.status, await (reply.json() if is_json else reply.text())


async def test_the_page_and_its_scripts_come_from_the_stand_in_with_a_strict_policy(
    slack: SlackStandIn,
) -> None:
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{slack.url}/") as reply:
            assert reply.status == 200
            assert "default-src 'self'" in reply.headers["Content-Security-Policy"]
            assert '<script type="module" src="/ui/main.js">' in await reply.text()
        async with http.get(f"{slack.url}/ui/main.js") as reply:
            assert reply.content_type == "text/javascript"
        for bad in ("/ui/..%2fslack.py", "/ui/.hidden.js", "/ui/nosuch.js", "/ui/web.py"):
            async with http.get(f"{slack.url}{bad}") as reply:
                assert reply.status == 404, bad


async def test_a_member_sees_the_channel_and_only_their_own_ephemerals(
    slack: SlackStandIn,
) -> None:
    state = slack.state
    parent = state.post("C0BACKFILL", text="*plan* for `x`")
    state.post("C0BACKFILL", text="a reply", thread_ts=parent.ts)
    state.add_ephemeral(Ephemeral("C0BACKFILL", "U0REQUEST1", "for riley", [], "ack"))
    state.add_ephemeral(Ephemeral("C0BACKFILL", "U0APPROVE1", "for alex", [], "ack"))

    status, riley = await get(slack, "/ui/api/history?channel=C0BACKFILL&user=U0REQUEST1")
    assert status == 200
    assert [(i["kind"], i["text"]) for i in riley["items"]] == [
        ("message", "*plan* for `x`"),
        ("ephemeral", "for riley"),
    ]
    assert riley["items"][0]["reply_count"] == 1
    _, alex = await get(slack, "/ui/api/history?channel=C0BACKFILL&user=U0APPROVE1")
    assert [i["text"] for i in alex["items"]] == ["*plan* for `x`", "for alex"]
    _, thread = await get(
        slack, f"/ui/api/replies?channel=C0BACKFILL&ts={parent.ts}&user=U0REQUEST1"
    )
    assert [i["text"] for i in thread["items"]] == ["a reply"]
    status, _ = await get(slack, "/ui/api/replies?channel=C0BACKFILL&ts=1.2&user=U0REQUEST1")
    assert status == 404

    _, workspace = await get(slack, "/ui/api/workspace")
    assert workspace["default_channel"] == "C0BACKFILL"
    assert workspace["demo"] is False
    assert {"id": "U0REQUEST1", "name": "riley"}.items() <= workspace["users"][1].items()
    status, emoji = await get(slack, "/ui/api/emoji")
    assert emoji["large_green_circle"] == "🟢"


async def test_malformed_or_impossible_actions_get_a_clear_answer(slack: SlackStandIn) -> None:
    assert await post(slack, "/ui/api/command", b"{not json") == (
        400,
        {"ok": False, "error": "the body is not JSON"},
    )
    status, body = await post(slack, "/ui/api/command", {"user": "U0NOBODY01", "text": "/x"})
    assert (status, body["error"]) == (400, "no member U0NOBODY01 in this workspace")
    status, body = await post(
        slack,
        "/ui/api/command",
        {"user": "U0REQUEST1", "channel": "C0BACKFILL", "text": "x" * 5000},
    )
    assert status == 400
    assert "at most 4000 characters" in body["error"]
    member = {"user": "U0REQUEST1", "channel": "C0BACKFILL"}
    _, body = await post(slack, "/ui/api/command", {**member, "text": "/deploy now"})
    assert "/deploy is not a valid command" in body["error"]
    _, body = await post(slack, "/ui/api/command", {**member, "text": "hello"})
    assert "Only slash commands" in body["error"]
    # no app connected: said, not a stack trace
    _, body = await post(slack, "/ui/api/command", {**member, "text": "/backfill help"})
    assert body == {"ok": False, "error": "No app is connected: start the bot (backfill-bot demo)"}
    _, body = await post(slack, "/ui/api/view_submit", {"user": "U0REQUEST1", "view_id": "V1"})
    assert body["ok"] is False
    _, body = await post(slack, "/ui/api/click", {**member, "ts": "1.000001", "action_id": "a"})
    assert body["ok"] is False
    status, _ = await get(slack, "/ui/api/demo")
    assert status == 404
    _, body = await post(slack, "/ui/api/demo/recover", {})
    assert body == {"ok": False, "error": "no demo is running"}


async def test_the_live_stream_tells_the_page_what_changed(slack: SlackStandIn) -> None:
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"{slack.url}/ui/api/stream") as stream,
    ):
        assert stream.headers["Content-Type"] == "text/event-stream"
        assert await stream.content.readline() == b"retry: 1000\n"
        await stream.content.readline()
        message = slack.state.post("C0BACKFILL", text="hello")
        slack.state.update(message, text="hello again", blocks=None)
        events = []
        for _ in range(2):
            assert await asyncio.wait_for(stream.content.readline(), 5) == b"event: change\n"
            data = await asyncio.wait_for(stream.content.readline(), 5)
            events.append(json.loads(data.decode().removeprefix("data: ")))
            await stream.content.readline()
    assert events == [{"kind": "message", "channel": "C0BACKFILL", "ts": message.ts}] * 2


async def test_the_demo_panel_refuses_what_it_cannot_do_before_anything_is_sent() -> None:
    clock = DemoClock()

    async def no_check() -> int:
        raise AssertionError("the SLA check must not run for a refused move")

    # nothing listens on this URL: a refusal must come before any event is sent
    world = DemoWorld("http://127.0.0.1:9", airflow=None, clock=clock, check_sla=no_check)
    with pytest.raises(ValueError, match="before the first"):
        await world.fail(date(2021, 6, 6), date(2021, 6, 4))
    with pytest.raises(ValueError, match="between 2021-01-01 and 2021-12-31"):
        await world.fail(date(1, 1, 1), date(2021, 6, 4))
    with pytest.raises(ValueError, match="At most 31 days"):
        await world.fail(date(2021, 1, 1), date(2021, 6, 4))
    with pytest.raises(ValueError, match=r"No run of example\.etl_orders is failing"):
        await world.recover()
    for hours in (0, -5, 10_000):
        with pytest.raises(ValueError, match="Move the clock forward"):
            await world.advance(hours)
    assert clock.now() == DemoClock().now()
    assert world.failed == set()


async def test_only_the_page_itself_may_act_as_a_member(slack: SlackStandIn) -> None:
    # The API acts as anyone: another site open in the same browser must not drive it.
    command = {"user": "U0REQUEST1", "channel": "C0BACKFILL", "text": "/backfill help"}
    status, body = await post(slack, "/ui/api/command", command, **{"Content-Type": "text/plain"})
    assert (status, body["error"]) == (415, "send JSON (Content-Type: application/json)")
    status, body = await post(slack, "/ui/api/command", command, Origin="https://evil.example")
    assert (status, body) == (403, "cross-origin requests are refused")
    # a DNS name pointed at this machine (DNS rebinding) is refused, reads included
    for path in ("/", "/ui/api/workspace"):
        async with (
            aiohttp.ClientSession() as http,
            http.get(f"{slack.url}{path}", headers={"Host": "evil.example"}) as reply,
        ):
            assert reply.status == 403, path
    # the page's own origin, and the Web API the bot uses, are untouched
    origin = slack.url
    status, body = await post(slack, "/ui/api/command", command, Origin=origin)
    assert (status, body["ok"]) == (200, False)  # no app connected: said in the answer
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{slack.url}/api/auth.test", headers={"Host": "evil.example"}) as reply,
    ):
        assert (await reply.json())["error"] == "not_authed"


async def test_an_app_that_is_not_listening_is_slacks_dispatch_failed() -> None:
    async with running_slack_standin(events_url="http://127.0.0.1:9/slack/events") as slack:
        command = {"user": "U0REQUEST1", "channel": "C0BACKFILL", "text": "/backfill help"}
        status, body = await post(slack, "/ui/api/command", command)
    assert (status, body) == (
        200,
        {"ok": False, "error": '/backfill failed with the error "dispatch_failed"'},
    )
