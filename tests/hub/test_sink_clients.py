"""The sink clients (signed webhook, PagerDuty Events API v2) over real HTTP to their stand-ins.

One attempt per `send`, classified: delivered, retry (after how long) or permanent; the detail
never shows a secret. The stand-ins are checked too: the webhook receiver verifies signatures
and dedupes on the delivery id, the PagerDuty one validates and keeps alerts as PagerDuty does.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from bot.hub.sinks.base import Outcome, SinkClient, clean, retry_after
from bot.hub.sinks.pagerduty import PagerDutyClient, pagerduty_event
from bot.hub.sinks.webhook import WebhookClient, sign, verify
from standins.sinks.pagerduty import PagerDutyStandin, running_pagerduty_standin
from standins.sinks.webhook import WebhookReceiver, running_webhook_receiver

SECRET = "whsec-0123456789abcdef"
ROUTING_KEY = "R0UT1NGKEY0123456789abcdefABCDEF"
assert len(ROUTING_KEY) == 32
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@pytest.fixture
async def receiver() -> AsyncIterator[WebhookReceiver]:
    async with running_webhook_receiver(SECRET) as server:
        yield server


@pytest.fixture
async def pagerduty() -> AsyncIterator[PagerDutyStandin]:
    async with running_pagerduty_standin() as server:
        yield server


async def serve(handler: Handler) -> TestServer:
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    return server


async def send_once(client: SinkClient, body: dict[str, Any], delivery_id: str = "d-1") -> Outcome:
    try:
        return await client.send(body, delivery_id=delivery_id)
    finally:
        await client.close()


def trigger(dedup_key: str = "incident-42", **fields: Any) -> dict[str, Any]:
    fields.setdefault("summary", "orders_daily backfill failed")
    fields.setdefault("source", "backfill-bot")
    return pagerduty_event("trigger", routing_key=ROUTING_KEY, dedup_key=dedup_key, **fields)


# --- webhook: signing --------------------------------------------------------------------


async def test_webhook_delivery_is_signed_and_verifies(receiver: WebhookReceiver) -> None:
    client = WebhookClient(receiver.url_for("ops"), SECRET)
    assert isinstance(client, SinkClient)
    assert client._session is None  # created lazily, inside the loop
    document = {"event": "backfill.failed", "dag": "orders_daily", "note": "café ☕"}
    outcome = await send_once(client, document, "dlv-001")
    # shown by its origin only: a webhook URL's path often carries its token
    assert outcome == Outcome(True, None, f"{receiver.url} answered HTTP 200")
    [got] = receiver.deliveries
    raw = json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()
    assert (got.name, got.delivery_id, got.document) == ("ops", "dlv-001", document)
    assert abs(got.timestamp - time.time()) < 5
    headers = got.headers
    assert headers["Content-Type"] == "application/json"
    assert headers["User-Agent"].startswith("backfill-bot")
    assert headers["X-Backfill-Bot-Delivery"] == "dlv-001"
    assert headers["X-Backfill-Bot-Request-Timestamp"] == str(got.timestamp)
    assert headers["X-Backfill-Bot-Signature"] == sign(SECRET, str(got.timestamp), raw)
    assert verify(
        SECRET, str(got.timestamp), raw, headers["X-Backfill-Bot-Signature"], now=time.time()
    )
    with pytest.raises(RuntimeError, match="closed"):
        await client.send(document, delivery_id="dlv-002")


def test_verify_refuses_tampering_other_secrets_and_stale_timestamps() -> None:
    body, now = b'{"a":1}', 1_700_000_000.0
    good = sign(SECRET, "1700000000", body)
    assert good.startswith("v1=")
    assert len(good) == 3 + 64
    assert verify(SECRET, "1700000000", body, good, now=now)
    assert verify(SECRET, "1700000000", body, good, now=now + 300)
    assert not verify(SECRET, "1700000000", b'{"a":2}', good, now=now)
    assert not verify("another-secret-xyz", "1700000000", body, good, now=now)
    assert not verify(SECRET, "1700000001", body, good, now=now)
    assert not verify(SECRET, "1700000000", body, good, now=now + 301)
    assert not verify(SECRET, "1700000000", body, good, now=now - 301)
    assert not verify(SECRET, "1700000000", body, good.removeprefix("v1="), now=now)
    assert not verify(SECRET, "1700000000", body, "v1=é", now=now)
    for bad_ts in ("", "17e8", "-1", "1700000000.0", " 1700000000"):
        assert not verify(SECRET, bad_ts, body, sign(SECRET, bad_ts, body), now=now)


async def test_receiver_refuses_a_tampered_body(receiver: WebhookReceiver) -> None:
    body, ts = b'{"amount":1}', str(int(time.time()))
    headers = {
        "X-Backfill-Bot-Delivery": "d-1",
        "X-Backfill-Bot-Request-Timestamp": ts,
        "X-Backfill-Bot-Signature": sign(SECRET, ts, body),
    }
    async with aiohttp.ClientSession() as session:
        async with session.post(receiver.url_for("x"), data=b'{"amount":9}', headers=headers) as r:
            assert r.status == 401
        async with session.post(receiver.url_for("x"), data=body, headers=headers) as r:
            assert r.status == 200
    assert [d.document for d in receiver.deliveries] == [{"amount": 1}]


async def test_a_stale_clock_is_refused_and_retried_slowly_until_fixed(
    receiver: WebhookReceiver,
) -> None:
    client = WebhookClient(receiver.url_for("ops"), SECRET, clock=lambda: time.time() - 900)
    outcome = await send_once(client, {"n": 1})
    assert (outcome.delivered, outcome.retry_after_s) == (False, 300.0)
    assert outcome.detail.endswith("answered HTTP 401: invalid signature")
    assert receiver.deliveries == []


async def test_a_retry_repeats_the_delivery_id(receiver: WebhookReceiver) -> None:
    receiver.fail_next(503, retry_after=7)
    async with WebhookClient(receiver.url_for("ops"), SECRET) as client:
        first = await client.send({"n": 1}, delivery_id="dlv-7")
        second = await client.send({"n": 1}, delivery_id="dlv-7")
        # the answer to `second` was lost: the sender cannot know, so it sends again
        third = await client.send({"n": 1}, delivery_id="dlv-7")
        other = await client.send({"n": 2}, delivery_id="dlv-8")
    assert (first.delivered, first.retry_after_s) == (False, 7.0)
    assert "503" in first.detail
    assert second.delivered
    assert third.delivered
    assert other.delivered
    assert [(a.delivery_id, a.status) for a in receiver.attempts] == [
        ("dlv-7", 503), ("dlv-7", 200), ("dlv-7", 200), ("dlv-8", 200),
    ]  # fmt: skip
    assert len(receiver.deliveries) == 3
    assert receiver.documents() == [{"n": 1}, {"n": 2}]
    assert receiver.documents("elsewhere") == []
    receiver.fail_next(500, times=1000)
    receiver.recover()
    async with WebhookClient(receiver.url_for("ops"), SECRET) as client:
        assert (await client.send({"n": 3}, delivery_id="dlv-9")).delivered


# --- webhook: classification -------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "retry_after_header", "expected"),
    [
        (500, None, 0.0),
        (502, None, 0.0),
        (408, None, 0.0),
        (429, None, 0.0),
        (429, 120, 120.0),
        (429, 999_999, 3600.0),
        (503, 5, 5.0),
        (400, None, None),
        (422, None, None),
        (404, None, 300.0),  # the sink refuses the bot, not the notice: retried slowly
        (410, 60, 60.0),
    ],
)
async def test_webhook_classification(
    receiver: WebhookReceiver, status: int, retry_after_header: int | None, expected: float | None
) -> None:
    receiver.fail_next(status, retry_after=retry_after_header)
    outcome = await send_once(WebhookClient(receiver.url_for("ops"), SECRET), {"n": 1})
    assert not outcome.delivered
    assert outcome.retry_after_s == expected
    assert outcome.detail == f"{receiver.url} answered HTTP {status}: injected fault {status}"


async def test_connection_refused_is_retried() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    outcome = await send_once(WebhookClient(f"http://127.0.0.1:{port}/hook", SECRET), {"n": 1})
    assert (outcome.delivered, outcome.retry_after_s) == (False, 0.0)
    assert outcome.detail == f"http://127.0.0.1:{port}: Connection refused"


async def test_no_answer_in_time_is_retried() -> None:
    async def slow(request: web.Request) -> web.Response:
        await asyncio.sleep(5)
        return web.Response()

    server = await serve(slow)
    try:
        client = WebhookClient(str(server.make_url("/hook")), SECRET, timeout_s=0.2)
        started = time.monotonic()
        outcome = await send_once(client, {"n": 1})
    finally:
        await server.close()
    assert (outcome.delivered, outcome.retry_after_s) == (False, 0.0)
    assert outcome.detail.endswith("no answer within 0.2s")
    assert time.monotonic() - started < 3


async def test_a_redirect_is_not_followed() -> None:
    async def moved(request: web.Request) -> web.Response:
        raise web.HTTPFound("/elsewhere")

    server = await serve(moved)
    try:
        outcome = await send_once(WebhookClient(str(server.make_url("/hook")), SECRET), {})
    finally:
        await server.close()
    assert outcome.permanent
    assert "HTTP 302: redirects are not followed" in outcome.detail


async def test_reason_is_short_and_free_of_control_characters() -> None:
    async def noisy(request: web.Request) -> web.Response:
        return web.Response(status=422, text="bad\x1b[31m value\r\n\u202e\x00 " + "x" * 1000)

    server = await serve(noisy)
    try:
        outcome = await send_once(WebhookClient(str(server.make_url("/hook")), SECRET), {})
    finally:
        await server.close()
    assert outcome.permanent
    reason = outcome.detail.split(": ", 1)[1]
    assert reason.startswith("bad [31m value x")
    assert len(reason) == 200
    assert reason.endswith("…")
    assert not any(ch in outcome.detail for ch in "\x1b\r\n\u202e\x00")


def test_retry_after_forms() -> None:
    now = 1_700_000_000.0
    later = format_datetime(datetime.fromtimestamp(now, UTC) + timedelta(seconds=90), usegmt=True)
    assert retry_after("42", now=now, default=7) == 42
    assert retry_after(" 1.5 ", now=now, default=7) == 1.5
    assert retry_after("86400", now=now, default=7) == 3600
    assert retry_after(later, now=now, default=7) == 90
    assert retry_after("Thu, 01 Jan 1970 00:00:00 GMT", now=now, default=7) == 0
    assert retry_after(None, now=now, default=7) == 7
    assert retry_after("soon", now=now, default=7) == 7
    assert retry_after("-5", now=now, default=7) == 7
    assert clean("a\tb\x07c\u2028d") == "a b c d"


# --- secrets never reach the detail ------------------------------------------------------


async def echo_server(status: int) -> TestServer:
    """Answers `status` with everything it received: URL, headers and body."""

    async def echo(request: web.Request) -> web.Response:
        seen = f"{request.path_qs} {request.headers.get('Authorization')} {await request.text()}"
        return web.json_response({"message": seen}, status=status)

    return await serve(echo)


@pytest.mark.parametrize("status", [400, 503])
async def test_webhook_detail_shows_no_secret(status: int) -> None:
    server = await echo_server(status)
    try:
        base = server.make_url("/hooks/ops")
        url = f"http://hookuser:hunter2pw@{base.host}:{base.port}/hooks/ops?token=qtoken123&v=1"
        outcome = await send_once(WebhookClient(url, SECRET), {"secret": SECRET})
    finally:
        await server.close()
    assert not outcome.delivered
    assert outcome.detail.startswith(f"http://{base.host}:{base.port} answered HTTP")
    assert "[redacted]" in outcome.detail  # the echo was there, and was cleaned
    for secret in (SECRET, "hookuser", "hunter2pw", "qtoken123", "aG9va3VzZXI6aHVudGVyMnB3"):
        assert secret not in outcome.detail


async def test_refused_detail_shows_no_userinfo_or_query() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://hookuser:hunter2pw@127.0.0.1:{port}/h?token=qtoken123"
    outcome = await send_once(WebhookClient(url, SECRET), {})
    assert outcome.detail == f"http://127.0.0.1:{port}: Connection refused"


async def test_a_secret_cut_short_is_still_hidden() -> None:
    async def cut(request: web.Request) -> web.Response:
        # 190 characters, then the key: the reason's 200-character cut lands inside it
        return web.json_response({"message": "x" * 190 + ROUTING_KEY}, status=400)

    server = await serve(cut)
    try:
        outcome = await send_once(PagerDutyClient(str(server.make_url("/v2/enqueue"))), trigger())
    finally:
        await server.close()
    assert outcome.detail.endswith("x[redacted]")
    assert ROUTING_KEY[:8] not in outcome.detail


async def test_an_unusable_url_is_permanent() -> None:
    ftp = await send_once(WebhookClient("ftp://hooks.example/x", SECRET), {})
    assert ftp == Outcome(False, None, "ftp://hooks.example: invalid URL (not http or https)")
    no_host = await send_once(PagerDutyClient("http://"), trigger())
    assert no_host == Outcome(False, None, "PagerDuty: invalid URL")


async def test_pagerduty_detail_never_shows_the_routing_key() -> None:
    server = await echo_server(400)
    try:
        client = PagerDutyClient(str(server.make_url("/v2/enqueue")))
        outcome = await send_once(client, trigger())
    finally:
        await server.close()
    assert outcome.permanent
    assert "[redacted]" in outcome.detail
    assert ROUTING_KEY not in outcome.detail
    assert ROUTING_KEY[:12] not in outcome.detail


# --- PagerDuty ---------------------------------------------------------------------------


async def test_pagerduty_lifecycle_is_one_alert(pagerduty: PagerDutyStandin) -> None:
    async with PagerDutyClient(f"{pagerduty.url}/v2/enqueue") as client:
        outcomes = [
            await client.send(trigger(), delivery_id="a"),
            await client.send(trigger(summary="again"), delivery_id="b"),
            await client.send(
                pagerduty_event("acknowledge", routing_key=ROUTING_KEY, dedup_key="incident-42"),
                delivery_id="c",
            ),
            await client.send(
                pagerduty_event("resolve", routing_key=ROUTING_KEY, dedup_key="incident-42"),
                delivery_id="d",
            ),
        ]
    assert outcomes == [Outcome(True, None, "accepted, dedup_key incident-42")] * 4
    assert len(pagerduty.events) == 4
    [(key, alert)] = pagerduty.alerts.items()
    assert key == (ROUTING_KEY, "incident-42")
    assert (alert.status, alert.duplicates, alert.summary) == (
        "resolved",
        1,
        "orders_daily backfill failed",
    )
    assert alert.log == ["trigger", "trigger (duplicate)", "acknowledge", "resolve"]
    assert pagerduty.past_alerts == []


async def test_pagerduty_rules_for_resolved_and_unknown_alerts(pagerduty: PagerDutyStandin) -> None:
    async with PagerDutyClient(f"{pagerduty.url}/v2/enqueue") as client:
        for action in ("acknowledge", "resolve"):
            event = pagerduty_event(action, routing_key=ROUTING_KEY, dedup_key="never-opened")
            assert (await client.send(event, delivery_id=action)).delivered
        assert pagerduty.alerts == {}
        await client.send(trigger("k"), delivery_id="1")
        resolve = pagerduty_event("resolve", routing_key=ROUTING_KEY, dedup_key="k")
        await client.send(resolve, delivery_id="2")
        ack = pagerduty_event("acknowledge", routing_key=ROUTING_KEY, dedup_key="k")
        await client.send(ack, delivery_id="3")
        assert pagerduty.alerts[(ROUTING_KEY, "k")].status == "resolved"
        await client.send(trigger("k", summary="back again"), delivery_id="4")
    reopened = pagerduty.alerts[(ROUTING_KEY, "k")]
    assert (reopened.status, reopened.summary, reopened.duplicates) == (
        "triggered",
        "back again",
        0,
    )
    assert [a.status for a in pagerduty.past_alerts] == ["resolved"]


def event_without(*path: str) -> dict[str, Any]:
    event = trigger()
    *parents, leaf = path
    target = event
    for part in parents:
        target = target[part]
    del target[leaf]
    return event


def payload_with(**fields: Any) -> dict[str, Any]:
    event = trigger()
    event["payload"].update(fields)
    return event


INVALID_EVENTS: dict[str, tuple[Callable[[], dict[str, Any]], str]] = {
    "routing-key": (
        lambda: trigger() | {"routing_key": "short-key"},
        "Length of 'routing_key' is incorrect (should be 32 characters)",
    ),
    "summary": (lambda: event_without("payload", "summary"), "'payload.summary' is missing"),
    "source": (lambda: event_without("payload", "source"), "'payload.source' is missing"),
    "severity": (
        lambda: payload_with(severity="fatal"),
        "'payload.severity' is invalid (must be one of: critical, error, warning, info)",
    ),
    "action": (lambda: trigger() | {"event_action": "escalate"}, "'event_action' is invalid"),
    "dedup-key": (
        lambda: event_without("dedup_key") | {"event_action": "resolve"},
        "'dedup_key' is missing or blank",
    ),
    "long-dedup-key": (lambda: trigger() | {"dedup_key": "k" * 256}, "'dedup_key' is too long"),
    "timestamp": (lambda: payload_with(timestamp="yesterday"), "'payload.timestamp' is invalid"),
    "long-summary": (lambda: payload_with(summary="s" * 1025), "'payload.summary' is too long"),
}


@pytest.mark.parametrize("case", INVALID_EVENTS)
async def test_pagerduty_validation_is_permanent(pagerduty: PagerDutyStandin, case: str) -> None:
    make, error = INVALID_EVENTS[case]
    event = make()
    outcome = await send_once(PagerDutyClient(f"{pagerduty.url}/v2/enqueue"), event)
    assert outcome.permanent
    assert outcome.detail.startswith("PagerDuty answered HTTP 400: ")
    assert error in outcome.detail
    assert pagerduty.events == []
    assert pagerduty.alerts == {}
    assert ROUTING_KEY not in outcome.detail


async def test_pagerduty_stand_in_generates_a_dedup_key(pagerduty: PagerDutyStandin) -> None:
    event = event_without("dedup_key")
    outcome = await send_once(PagerDutyClient(f"{pagerduty.url}/v2/enqueue"), event)
    assert outcome.delivered
    [(routing_key, dedup_key)] = pagerduty.alerts
    assert routing_key == ROUTING_KEY
    assert len(dedup_key) == 32
    assert outcome.detail == f"accepted, dedup_key {dedup_key}"


@pytest.mark.parametrize(
    ("status", "retry_after_header", "expected"),
    [(429, None, 30.0), (429, 5, 5.0), (500, None, 0.0), (502, None, 0.0), (403, None, 300.0)],
)
async def test_pagerduty_classification(
    pagerduty: PagerDutyStandin, status: int, retry_after_header: int | None, expected: float | None
) -> None:
    pagerduty.fail_next(status, retry_after=retry_after_header)
    async with PagerDutyClient(f"{pagerduty.url}/v2/enqueue") as client:
        failed = await client.send(trigger(), delivery_id="1")
        retried = await client.send(trigger(), delivery_id="1")
    assert (failed.delivered, failed.retry_after_s) == (False, expected)
    assert failed.detail.startswith(f"PagerDuty answered HTTP {status}")
    assert retried.delivered
    assert len(pagerduty.events) == 1
    assert pagerduty.requests == 2
    pagerduty.fail_next(503, times=1000)
    pagerduty.recover()
    async with PagerDutyClient(pagerduty.enqueue_url) as client:
        assert (await client.send(trigger(), delivery_id="2")).delivered


# --- PagerDuty event builder -------------------------------------------------------------


def test_builder_trigger_follows_the_api() -> None:
    at = datetime(2024, 3, 1, 12, 30, tzinfo=UTC) + timedelta(hours=0)
    event = trigger(
        summary="s" * 2000, source="h" * 300, severity="critical", timestamp=at,
        component="orders_daily", group="food_delivery", event_class="backfill",
        custom_details={"runs": 3}, links=[("https://slack.example/t/1", "Slack thread")],
        client_url="https://bot.example",
    )  # fmt: skip
    payload = event["payload"]
    assert len(payload["summary"]) == 1024
    assert payload["summary"].endswith("s…")
    assert len(payload["source"]) == 255
    assert payload["source"].endswith("…")
    assert payload["timestamp"] == "2024-03-01T12:30:00.000Z"
    assert (payload["component"], payload["group"], payload["class"]) == (
        "orders_daily",
        "food_delivery",
        "backfill",
    )
    assert payload["custom_details"] == {"runs": 3}
    assert payload["severity"] == "critical"
    assert event["links"] == [{"href": "https://slack.example/t/1", "text": "Slack thread"}]
    assert (event["client"], event["client_url"]) == ("backfill-bot", "https://bot.example")
    assert (event["event_action"], event["routing_key"], event["dedup_key"]) == (
        "trigger",
        ROUTING_KEY,
        "incident-42",
    )
    short = trigger(summary="x" * 1024)["payload"]
    assert short["summary"] == "x" * 1024
    assert set(short) == {"summary", "source", "severity"}


def test_builder_acknowledge_and_resolve_carry_only_the_key() -> None:
    for action in ("acknowledge", "resolve"):
        event = pagerduty_event(action, routing_key=ROUTING_KEY, dedup_key="k", summary="ignored")
        assert event == {"routing_key": ROUTING_KEY, "event_action": action, "dedup_key": "k"}


def test_builder_rejects_bad_keys_and_naive_times() -> None:
    assert trigger("k" * 255)["dedup_key"] == "k" * 255
    with pytest.raises(ValueError, match="empty"):
        trigger("")
    with pytest.raises(ValueError, match="256 characters"):
        trigger("k" * 256)
    with pytest.raises(ValueError, match="256 characters"):
        pagerduty_event("resolve", routing_key=ROUTING_KEY, dedup_key="k" * 256)
    with pytest.raises(ValueError, match="naive"):
        trigger(timestamp=datetime(2024, 1, 1))
    with pytest.raises(ValueError, match="summary and a source"):
        trigger(summary=" ")
