"""bot.core.http's retry loop and offset paging, through real HTTP to tiny local servers.

The Marquez and Airflow clients both send through `send_with_retries` and page through
`offset_pages`; their own tests check what they add (auth, URLs, typed errors). These pin the
shared rules themselves: what is retried, how often, how long between tries, when a list ends.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from yarl import URL

from bot.core.http import (
    ONCE_ONLY,
    SAFE_TO_REPEAT,
    Answer,
    GaveUp,
    Page,
    Retryable,
    RetryPolicy,
    all_items,
    offset_pages,
    send_with_retries,
)

FAST = RetryPolicy(attempts=3, backoff_s=0.001, max_backoff_s=0.005)
LOG = "tests.http_helper"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class Fake:
    """A real HTTP server on 127.0.0.1 that records every request and answers via `handler`."""

    handler: Handler
    seen: list[tuple[str, str]] = field(default_factory=list)
    server: TestServer | None = None

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        self.seen.append((request.method, request.raw_path))
        return await self.handler(request)

    def url(self, path: str = "/") -> str:
        assert self.server is not None
        return str(self.server.make_url(path))


@pytest.fixture
async def serve() -> AsyncIterator[Callable[[Handler], Awaitable[Fake]]]:
    started: list[TestServer] = []

    async def start(handler: Handler) -> Fake:
        fake = Fake(handler)
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", fake._dispatch)
        fake.server = TestServer(app, host="127.0.0.1", port=0)
        await fake.server.start_server()
        started.append(fake.server)
        return fake

    yield start
    for server in started:
        await server.close()


@dataclass
class RawHTTP:
    """Answers every connection with the same canned bytes; None hangs up without answering."""

    reply: bytes | None
    url: str = ""
    requests: int = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        self.requests += 1
        if self.reply is not None:
            writer.write(self.reply)
            await writer.drain()
        writer.close()


@pytest.fixture
async def raw_http() -> AsyncIterator[Callable[[bytes | None], Awaitable[RawHTTP]]]:
    servers: list[asyncio.Server] = []

    async def start(reply: bytes | None) -> RawHTTP:
        raw = RawHTTP(reply)
        server = await asyncio.start_server(raw.handle, "127.0.0.1", 0)
        servers.append(server)
        raw.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/x"
        return raw

    yield start
    for server in servers:
        server.close()
        await server.wait_closed()


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as http:
        yield http


def explain(status: int, reason: str | None, raw: bytes) -> str:
    return f"HTTP {status} {raw.decode() or reason}"


async def send(
    session: aiohttp.ClientSession,
    url: str,
    method: str = "GET",
    *,
    retryable: Retryable = SAFE_TO_REPEAT,
    policy: RetryPolicy = FAST,
    timeout_s: float = 5.0,
) -> Answer:
    return await send_with_retries(
        session,
        method,
        URL(url),
        headers={"Accept": "application/json"},
        data=b"{}" if method == "POST" else None,
        timeout_s=timeout_s,
        policy=policy,
        retryable=retryable,
        explain=explain,
        log=logging.getLogger(LOG),
        label=f"Test {method} {URL(url).path}",
    )


def text(body: str, status: int = 200) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        return web.Response(text=body, status=status)

    return handler


def sequence(*handlers: Handler) -> Handler:
    """Answer the n-th call with the n-th handler (the last one repeats)."""
    calls = 0

    async def handler(request: web.Request) -> web.StreamResponse:
        nonlocal calls
        calls += 1
        return await handlers[min(calls, len(handlers)) - 1](request)

    return handler


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# --- what comes back ----------------------------------------------------------------------


@pytest.mark.parametrize("status", [200, 201, 404, 409, 422])
async def test_answers_below_500_are_returned_after_one_request(
    serve: Callable[[Handler], Awaitable[Fake]], session: aiohttp.ClientSession, status: int
) -> None:
    fake = await serve(text("body", status))
    answer = await send(session, fake.url("/p"), "POST")
    assert (answer.status, answer.body, answer.url.path) == (status, b"body", "/p")
    assert fake.seen == [("POST", "/p")]


async def test_get_follows_redirects_and_reports_where_the_answer_came_from(
    serve: Callable[[Handler], Awaitable[Fake]], session: aiohttp.ClientSession
) -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        if request.path == "/old":
            raise web.HTTPFound(location="/new")
        return web.Response(text="moved here")

    fake = await serve(handler)
    answer = await send(session, fake.url("/old"))
    assert (answer.status, answer.body, answer.url.path) == (200, b"moved here", "/new")
    assert fake.seen == [("GET", "/old"), ("GET", "/new")]


async def test_post_redirect_is_returned_not_followed(
    serve: Callable[[Handler], Awaitable[Fake]], session: aiohttp.ClientSession
) -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        raise web.HTTPFound(location="/elsewhere")

    fake = await serve(handler)
    answer = await send(session, fake.url("/p"), "POST")
    assert answer.status == 302
    assert answer.headers["location"] == "/elsewhere"
    assert fake.seen == [("POST", "/p")]


async def test_too_many_redirects_propagates_and_is_not_retried(
    serve: Callable[[Handler], Awaitable[Fake]], session: aiohttp.ClientSession
) -> None:
    async def loop(request: web.Request) -> web.StreamResponse:
        raise web.HTTPFound(location="/again")

    fake = await serve(loop)
    with pytest.raises(aiohttp.TooManyRedirects):
        await send(session, fake.url("/again"))
    assert len(fake.seen) == 10  # aiohttp gives up after max_redirects=10, in one attempt


# --- 5xx ----------------------------------------------------------------------------------


async def test_retryable_5xx_is_retried_with_growing_jittered_delays(
    serve: Callable[[Handler], Awaitable[Fake]],
    session: aiohttp.ClientSession,
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake = await serve(sequence(text("busy", 503), text("gateway", 502), text("ok")))
    policy = RetryPolicy(attempts=3, backoff_s=0.02, max_backoff_s=0.03)
    with caplog.at_level(logging.WARNING, logger=LOG):
        answer = await send(session, fake.url("/p"), policy=policy)
    assert answer.body == b"ok"
    assert len(fake.seen) == 3
    warnings = [r for r in caplog.records if r.name == LOG]
    assert [r.getMessage().rsplit(" in ", 1)[0] for r in warnings] == [
        "Test GET /p failed (HTTP 503 busy); retry 1 of 2",
        "Test GET /p failed (HTTP 502 gateway); retry 2 of 2",
    ]
    # Half to all of min(max_backoff_s, backoff_s * 2 ** (retry - 1)).
    first, second = (float(r.args[-1]) for r in warnings if isinstance(r.args, tuple))
    assert 0.01 <= first <= 0.02
    assert 0.015 <= second <= 0.03


async def test_5xx_exhausted_gives_up_with_the_last_failure(
    serve: Callable[[Handler], Awaitable[Fake]], session: aiohttp.ClientSession
) -> None:
    fake = await serve(text("database down", 503))
    with pytest.raises(GaveUp) as caught:
        await send(session, fake.url("/p"))
    gave_up = caught.value
    assert (gave_up.failure, gave_up.status, gave_up.attempts) == ("HTTP 503 database down", 503, 3)
    assert isinstance(gave_up.cause, aiohttp.ClientResponseError)
    assert gave_up.cause.status == 503
    assert gave_up.summary("Svc", "http://svc", "GET /p") == (
        "Svc at http://svc is unavailable: HTTP 503 database down (3 attempts, GET /p)"
    )
    assert len(fake.seen) == 3


@pytest.mark.parametrize(
    ("status", "retryable", "requests"),
    [
        (500, SAFE_TO_REPEAT, 3),
        (504, SAFE_TO_REPEAT, 3),
        (501, SAFE_TO_REPEAT, 1),
        (505, SAFE_TO_REPEAT, 1),
        (500, ONCE_ONLY, 1),
        (501, Retryable(statuses=range(500, 1000)), 3),
    ],
)
async def test_which_5xx_are_retried(
    serve: Callable[[Handler], Awaitable[Fake]],
    session: aiohttp.ClientSession,
    status: int,
    retryable: Retryable,
    requests: int,
) -> None:
    fake = await serve(text("no", status))
    with pytest.raises(GaveUp) as caught:
        await send(session, fake.url("/p"), "POST", retryable=retryable)
    assert caught.value.attempts == requests
    assert len(fake.seen) == requests


async def test_one_attempt_is_worded_in_the_singular(
    serve: Callable[[Handler], Awaitable[Fake]], session: aiohttp.ClientSession
) -> None:
    fake = await serve(text("boom", 500))
    with pytest.raises(GaveUp) as caught:
        await send(session, fake.url("/p"), policy=RetryPolicy(attempts=1))
    assert caught.value.summary("Svc", "http://svc", "GET /p") == (
        "Svc at http://svc is unavailable: HTTP 500 boom (1 attempt, GET /p)"
    )


# --- no answer ----------------------------------------------------------------------------


@pytest.mark.parametrize(("retryable", "requests"), [(SAFE_TO_REPEAT, 2), (ONCE_ONLY, 1)])
async def test_timeout_is_retried_only_when_safe(
    serve: Callable[[Handler], Awaitable[Fake]],
    session: aiohttp.ClientSession,
    retryable: Retryable,
    requests: int,
) -> None:
    release = asyncio.Event()

    async def slow(request: web.Request) -> web.StreamResponse:
        await release.wait()
        return web.Response(text="late")

    fake = await serve(slow)
    policy = RetryPolicy(attempts=2, backoff_s=0.001, max_backoff_s=0.001)
    try:
        with pytest.raises(GaveUp) as caught:
            await send(
                session, fake.url("/p"), "POST", retryable=retryable, policy=policy, timeout_s=0.2
            )
    finally:
        release.set()
    assert (caught.value.failure, caught.value.status) == ("no answer within 0.2s", None)
    assert isinstance(caught.value.cause, TimeoutError)
    assert caught.value.attempts == requests
    assert len(fake.seen) == requests


async def test_refused_connection_is_retried_even_when_not_safe(
    session: aiohttp.ClientSession,
) -> None:
    url = f"http://127.0.0.1:{closed_port()}/p"
    with pytest.raises(GaveUp) as caught:
        await send(session, url, "POST", retryable=ONCE_ONLY)
    assert (caught.value.failure, caught.value.status) == ("Connection refused", None)
    assert caught.value.attempts == 3
    assert isinstance(caught.value.cause, aiohttp.ClientConnectorError)
    assert caught.value.summary("Svc", "http://svc", "POST /p") == (
        "Svc at http://svc is unreachable: Connection refused (3 attempts, POST /p)"
    )


@pytest.mark.parametrize(
    ("retryable", "requests"),
    [(SAFE_TO_REPEAT, 3), (Retryable(dropped=True, broken_answer=False), 3), (ONCE_ONLY, 1)],
)
async def test_connection_dropped_before_an_answer(
    raw_http: Callable[[bytes | None], Awaitable[RawHTTP]],
    session: aiohttp.ClientSession,
    retryable: Retryable,
    requests: int,
) -> None:
    server = await raw_http(None)
    with pytest.raises(GaveUp) as caught:
        await send(session, server.url, "POST", retryable=retryable)
    assert caught.value.failure == "the server closed the connection"
    assert caught.value.attempts == requests
    assert server.requests == requests


@pytest.mark.parametrize(
    ("retryable", "requests"),
    [(SAFE_TO_REPEAT, 3), (Retryable(dropped=True, broken_answer=False), 1), (ONCE_ONLY, 1)],
)
async def test_answer_cut_short(
    raw_http: Callable[[bytes | None], Awaitable[RawHTTP]],
    session: aiohttp.ClientSession,
    retryable: Retryable,
    requests: int,
) -> None:
    head = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nConnection: close\r\n\r\n"
    server = await raw_http(head + b"short")
    with pytest.raises(GaveUp) as caught:
        await send(session, server.url, "POST", retryable=retryable)
    assert caught.value.status is None
    assert isinstance(caught.value.cause, aiohttp.ClientPayloadError)
    assert server.requests == requests


# --- paging -------------------------------------------------------------------------------


def listing(
    count: int, *, total: bool = False, max_limit: int = 1000, honour_offset: bool = True
) -> Handler:
    """`GET ?limit=&offset=` over items 0..count-1, like Marquez (no total) or Airflow."""

    async def handler(request: web.Request) -> web.StreamResponse:
        limit = min(int(request.query["limit"]), max_limit)
        offset = int(request.query["offset"]) if honour_offset else 0
        body: dict[str, Any] = {"items": list(range(count))[offset : offset + limit]}
        if total:
            body["total"] = count
        return web.json_response(body)

    return handler


def fetcher(
    session: aiohttp.ClientSession, fake: Fake
) -> Callable[[int, int], Awaitable[Page[int]]]:
    async def fetch(limit: int, offset: int) -> Page[int]:
        answer = await send(session, fake.url("/items") + f"?limit={limit}&offset={offset}")
        data = json.loads(answer.body)
        return Page(data["items"], data.get("total"))

    return fetch


def limits_and_offsets(fake: Fake) -> list[tuple[str, str]]:
    return [(URL(path).query["limit"], URL(path).query["offset"]) for _, path in fake.seen]


async def collect(pages: AsyncIterator[list[int]]) -> list[list[int]]:
    return [page async for page in pages]


@pytest.mark.parametrize(
    ("count", "pages", "offsets"),
    [
        (5, [[0, 1], [2, 3], [4]], ["0", "2", "4"]),
        (4, [[0, 1], [2, 3]], ["0", "2", "4"]),  # the empty page ends it, and is not yielded
        (0, [], ["0"]),
    ],
)
async def test_without_a_total_a_short_page_ends_the_list(
    serve: Callable[[Handler], Awaitable[Fake]],
    session: aiohttp.ClientSession,
    count: int,
    pages: list[list[int]],
    offsets: list[str],
) -> None:
    fake = await serve(listing(count))
    assert await collect(offset_pages(fetcher(session, fake), page_size=2)) == pages
    assert limits_and_offsets(fake) == [("2", offset) for offset in offsets]


async def test_with_a_total_short_pages_go_on_until_it_is_reached(
    serve: Callable[[Handler], Awaitable[Fake]], session: aiohttp.ClientSession
) -> None:
    # Like Airflow's maximum_page_limit: the server hands out fewer items than asked for.
    fake = await serve(listing(8, total=True, max_limit=3))
    items = await all_items(offset_pages(fetcher(session, fake), page_size=5))
    assert items == list(range(8))
    assert limits_and_offsets(fake) == [("5", "0"), ("5", "3"), ("5", "6")]


async def test_max_items_asks_only_for_the_rest(
    serve: Callable[[Handler], Awaitable[Fake]], session: aiohttp.ClientSession
) -> None:
    fake = await serve(listing(7))
    pages = offset_pages(fetcher(session, fake), page_size=3, max_items=5)
    assert await all_items(pages) == [0, 1, 2, 3, 4]
    assert limits_and_offsets(fake) == [("3", "0"), ("2", "3")]


async def test_max_items_zero_sends_nothing(
    serve: Callable[[Handler], Awaitable[Fake]], session: aiohttp.ClientSession
) -> None:
    fake = await serve(listing(7))
    assert await all_items(offset_pages(fetcher(session, fake), page_size=3, max_items=0)) == []
    assert fake.seen == []


async def test_max_pages_caps_a_list_that_never_ends(
    serve: Callable[[Handler], Awaitable[Fake]], session: aiohttp.ClientSession
) -> None:
    fake = await serve(listing(1000, total=True, honour_offset=False))
    pages = await collect(offset_pages(fetcher(session, fake), page_size=2, max_pages=4))
    assert pages == [[0, 1]] * 4
    assert len(fake.seen) == 4


async def test_a_repeated_page_means_offset_is_ignored(
    serve: Callable[[Handler], Awaitable[Fake]], session: aiohttp.ClientSession
) -> None:
    fake = await serve(listing(10, honour_offset=False))
    repeats: list[int] = []
    pages = offset_pages(fetcher(session, fake), page_size=3, on_repeat=repeats.append)
    assert await collect(pages) == [[0, 1, 2]]
    assert repeats == [3]
    assert limits_and_offsets(fake) == [("3", "0"), ("3", "3")]


async def test_pages_are_fetched_only_as_the_caller_asks(
    serve: Callable[[Handler], Awaitable[Fake]], session: aiohttp.ClientSession
) -> None:
    fake = await serve(listing(10))
    async with aclosing(offset_pages(fetcher(session, fake), page_size=3)) as pages:
        async for page in pages:
            assert page == [0, 1, 2]
            break
    assert len(fake.seen) == 1


async def test_a_failed_page_request_ends_paging_with_its_error(
    serve: Callable[[Handler], Awaitable[Fake]], session: aiohttp.ClientSession
) -> None:
    fake = await serve(sequence(listing(10), text("down", 503)))
    got: list[list[int]] = []

    async def read_all() -> None:
        async for page in offset_pages(fetcher(session, fake), page_size=3):
            got.append(page)

    with pytest.raises(GaveUp, match="HTTP 503 down"):
        await read_all()
    assert got == [[0, 1, 2]]
    assert len(fake.seen) == 1 + FAST.attempts


async def test_page_size_must_be_positive() -> None:
    async def fetch(limit: int, offset: int) -> Page[int]:
        raise AssertionError("not called")

    with pytest.raises(ValueError, match="page_size"):
        await all_items(offset_pages(fetch, page_size=0))
