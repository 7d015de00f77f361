"""MarquezClient against real local HTTP servers that answer the way Marquez 0.51 does."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from typing import Any
from urllib.parse import parse_qs, urlsplit

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from bot.clients.marquez import (
    EventsPage,
    MarquezBadResponse,
    MarquezClient,
    MarquezError,
    MarquezNotFound,
    MarquezRequestError,
    MarquezUnavailable,
    RetryPolicy,
    dataset_node_id,
    job_node_id,
)

FAST = RetryPolicy(attempts=3, backoff_s=0.001, max_backoff_s=0.005)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class Seen:
    method: str
    raw_path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class FakeMarquez:
    """A real HTTP server on 127.0.0.1 that records every request and answers via `handler`."""

    handler: Handler
    seen: list[Seen] = field(default_factory=list)
    server: TestServer | None = None

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.seen.append(Seen(request.method, request.raw_path, dict(request.headers), body))
        return await self.handler(request)

    @property
    def url(self) -> str:
        assert self.server is not None
        return str(self.server.make_url("")).rstrip("/")

    def queries(self) -> list[dict[str, list[str]]]:
        return [parse_qs(urlsplit(seen.raw_path).query) for seen in self.seen]


@pytest.fixture
async def serve() -> AsyncIterator[Callable[[Handler], Awaitable[FakeMarquez]]]:
    started: list[TestServer] = []

    async def start(handler: Handler) -> FakeMarquez:
        fake = FakeMarquez(handler)
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", fake._dispatch)
        fake.server = TestServer(app, host="127.0.0.1", port=0)
        await fake.server.start_server()
        started.append(fake.server)
        return fake

    yield start
    for server in started:
        await server.close()


def reply(body: bytes, status: bytes = b"200 OK") -> bytes:
    """A hand-written HTTP/1.1 response without a Content-Type header."""
    head = f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
    return b"HTTP/1.1 " + status + b"\r\n" + head + body


@dataclass
class RawHTTP:
    """Answers each connection with the next canned reply; None hangs up without answering."""

    replies: tuple[bytes | None, ...]
    url: str = ""
    requests: int = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        answer = self.replies[min(self.requests, len(self.replies) - 1)]
        self.requests += 1
        if answer is not None:
            writer.write(answer)
            await writer.drain()
        writer.close()


@pytest.fixture
async def raw_http() -> AsyncIterator[Callable[..., Awaitable[RawHTTP]]]:
    servers: list[asyncio.Server] = []

    async def start(*replies: bytes | None) -> RawHTTP:
        raw = RawHTTP(replies)
        server = await asyncio.start_server(raw.handle, "127.0.0.1", 0)
        servers.append(server)
        raw.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        return raw

    yield start
    for server in servers:
        server.close()
        await server.wait_closed()


def answer(body: Any, status: int = 200) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        return web.json_response(body, status=status)

    return handler


def paging(key: str, items: list[dict[str, Any]], *, honour_offset: bool = True) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        limit = int(request.query["limit"])
        offset = int(request.query["offset"]) if honour_offset else 0
        return web.json_response({key: items[offset : offset + limit], "totalCount": 999})

    return handler


def client(fake: FakeMarquez, **kwargs: Any) -> MarquezClient:
    kwargs.setdefault("retry", FAST)
    return MarquezClient(fake.url, **kwargs)


JOB = {"id": {"namespace": "ns", "name": "j"}, "name": "j", "latestRun": None, "latestRuns": None}


@pytest.mark.parametrize(
    ("namespace", "job", "raw"),
    [
        ("postgres://host:5432", "a.b:c", "postgres%3A%2F%2Fhost%3A5432/jobs/a.b%3Ac"),
        ("s3://bucket", "daily load é/x+1", "s3%3A%2F%2Fbucket/jobs/daily%20load%20%C3%A9%2Fx%2B1"),
    ],
)
async def test_path_segments_are_fully_percent_encoded(
    serve: Callable[[Handler], Awaitable[FakeMarquez]], namespace: str, job: str, raw: str
) -> None:
    fake = await serve(answer({"runs": [], "totalCount": 0}))
    async with client(fake) as marquez:
        assert await marquez.list_runs(namespace, job) == []
    assert fake.seen[0].raw_path == f"/api/v1/namespaces/{raw}/runs?limit=100&offset=0"


async def test_query_values_are_encoded(serve: Callable[[Handler], Awaitable[FakeMarquez]]) -> None:
    fake = await serve(answer({"graph": [], "events": [], "totalCount": 0, "results": []}))
    after = datetime(2024, 5, 1, 10, 0, tzinfo=timezone(timedelta(hours=2)))
    async with client(fake) as marquez:
        await marquez.get_lineage(dataset_node_id("postgres://h:5432", "public.t#v+1"), depth=3)
        await marquez.lineage_events(after=after, before=datetime(2030, 1, 1, tzinfo=UTC))
        await marquez.search("a&b c", filter="JOB", namespace="food_delivery")
    assert [seen.raw_path for seen in fake.seen] == [
        "/api/v1/lineage?nodeId=dataset%3Apostgres%3A%2F%2Fh%3A5432%3Apublic.t%23v%2B1&depth=3",
        "/api/v1/events/lineage?after=2024-05-01T10%3A00%3A00%2B02%3A00"
        "&before=2030-01-01T00%3A00%3A00%2B00%3A00&sortDirection=asc&limit=100&offset=0",
        "/api/v1/search?q=a%26b%20c&filter=JOB&namespace=food_delivery&limit=10",
    ]


async def test_naive_datetimes_are_rejected_before_any_request(
    serve: Callable[[Handler], Awaitable[FakeMarquez]],
) -> None:
    fake = await serve(answer({"events": [], "totalCount": 0}))
    async with client(fake) as marquez:
        with pytest.raises(ValueError, match="timezone-aware"):
            await marquez.lineage_events(after=datetime(2024, 5, 1))
    assert fake.seen == []


@pytest.mark.parametrize("suffix", ["/marquez", "/marquez/"])
async def test_base_url_with_path_prefix(
    serve: Callable[[Handler], Awaitable[FakeMarquez]], suffix: str
) -> None:
    fake = await serve(answer({"namespaces": [{"name": "ns"}]}))
    async with MarquezClient(fake.url + suffix) as marquez:
        assert await marquez.list_namespaces() == [{"name": "ns"}]
    assert fake.seen[0].raw_path == "/marquez/api/v1/namespaces?limit=100&offset=0"


@pytest.mark.parametrize(("count", "offsets"), [(5, ["0", "2", "4"]), (4, ["0", "2", "4"])])
async def test_pages_until_a_short_page(
    serve: Callable[[Handler], Awaitable[FakeMarquez]], count: int, offsets: list[str]
) -> None:
    namespaces = [{"name": f"ns{i}"} for i in range(count)]
    fake = await serve(paging("namespaces", namespaces))
    async with client(fake, page_size=2) as marquez:
        assert await marquez.list_namespaces() == namespaces
    assert [q["offset"] for q in fake.queries()] == [[offset] for offset in offsets]
    assert all(q["limit"] == ["2"] for q in fake.queries())


async def test_server_ignoring_offset_cannot_loop_forever(
    serve: Callable[[Handler], Awaitable[FakeMarquez]],
) -> None:
    jobs = [{"name": f"j{i}"} for i in range(10)]
    fake = await serve(paging("jobs", jobs, honour_offset=False))
    async with client(fake, page_size=3) as marquez:
        assert await marquez.list_jobs("ns") == jobs[:3]
    assert len(fake.seen) == 2


@pytest.mark.parametrize(("count", "offsets"), [(5, ["0", "2", "4"]), (4, ["0", "2", "4"])])
async def test_job_pages_read_the_next_page_while_the_caller_holds_this_one(
    serve: Callable[[Handler], Awaitable[FakeMarquez]], count: int, offsets: list[str]
) -> None:
    jobs = [{**JOB, "name": f"j{i}"} for i in range(count)]
    fake = await serve(paging("jobs", jobs))
    totals: list[int] = []
    pages: list[list[dict[str, Any]]] = []
    asked: list[int] = []  # requests Marquez had when each page reached the caller
    async with client(fake, page_size=2) as marquez:
        async for page in marquez.job_pages(on_total=totals.append):
            await asyncio.sleep(0.05)  # the caller writes the page
            asked.append(len(fake.seen))
            pages.append(page)
    assert [job for page in pages for job in page] == jobs
    assert [q["offset"] for q in fake.queries()] == [[offset] for offset in offsets]
    assert asked == [2, 3, 3][: len(pages)]  # the next page was asked for meanwhile
    assert totals == [999]


async def test_job_pages_stop_where_marquez_ignores_offset_and_where_the_caller_stops(
    serve: Callable[[Handler], Awaitable[FakeMarquez]], caplog: pytest.LogCaptureFixture
) -> None:
    jobs = [{**JOB, "name": f"j{i}"} for i in range(10)]
    fake = await serve(paging("jobs", jobs, honour_offset=False))
    async with client(fake, page_size=3) as marquez:
        assert [page async for page in marquez.job_pages()] == [jobs[:3]]
    assert len(fake.seen) == 2
    assert "ignored offset" in caplog.text

    fake = await serve(paging("jobs", [{**JOB, "name": f"j{i}"} for i in range(10)]))
    async with client(fake, page_size=3) as marquez:
        pages = marquez.job_pages()
        async for _ in pages:
            break  # an incremental reconcile past its stop
        await pages.aclose()  # type: ignore[attr-defined]
    assert len(fake.seen) <= 2  # the page asked for ahead, at most


async def test_list_runs_stops_at_max_runs(
    serve: Callable[[Handler], Awaitable[FakeMarquez]],
) -> None:
    runs = [{"id": str(i)} for i in range(7)]
    fake = await serve(paging("runs", runs))
    async with client(fake, page_size=3) as marquez:
        assert await marquez.list_runs("ns", "j", max_runs=5) == runs[:5]
    assert [(q["limit"], q["offset"]) for q in fake.queries()] == [(["3"], ["0"]), (["2"], ["3"])]


async def test_last_run_states_are_repeated_and_validated(
    serve: Callable[[Handler], Awaitable[FakeMarquez]],
) -> None:
    fake = await serve(answer({"jobs": [JOB], "totalCount": 40}))
    async with client(fake) as marquez:
        assert await marquez.list_jobs(last_run_states=["FAILED", "ABORTED"]) == [JOB]
        await marquez.list_jobs("food_delivery")
        with pytest.raises(ValueError, match="FAILD"):
            await marquez.list_jobs("ns", last_run_states=["FAILD"])
        with pytest.raises(ValueError, match="not a string"):
            await marquez.list_jobs("ns", last_run_states="FAILED")
    assert [seen.raw_path for seen in fake.seen] == [
        "/api/v1/jobs?lastRunStates=FAILED&lastRunStates=ABORTED&limit=100&offset=0",
        "/api/v1/namespaces/food_delivery/jobs?limit=100&offset=0",
    ]


async def test_sends_bearer_user_agent_and_accept(
    serve: Callable[[Handler], Awaitable[FakeMarquez]],
) -> None:
    fake = await serve(answer({"namespaces": []}))
    async with client(fake, api_key="s3cret") as marquez:
        await marquez.list_namespaces()
    async with client(fake) as marquez:
        await marquez.list_namespaces()
    with_key, without_key = fake.seen[0].headers, fake.seen[1].headers
    assert with_key["Authorization"] == "Bearer s3cret"
    assert with_key["User-Agent"].startswith("backfill-bot/")
    assert with_key["Accept"] == "application/json"
    assert "Authorization" not in without_key


async def test_follows_301_for_job_alias_keeping_authorization(
    serve: Callable[[Handler], Awaitable[FakeMarquez]],
) -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        if request.match_info["tail"].endswith("/jobs/old name"):
            location = f"{fake.url}/api/v1/namespaces/ns/jobs/new%20name"
            raise web.HTTPMovedPermanently(location=location)
        return web.json_response({**JOB, "name": "new name"})

    fake = await serve(handler)
    async with client(fake, api_key="k") as marquez:
        assert (await marquez.get_job("ns", "old name"))["name"] == "new name"
    assert [seen.raw_path for seen in fake.seen] == [
        "/api/v1/namespaces/ns/jobs/old%20name",
        "/api/v1/namespaces/ns/jobs/new%20name",
    ]
    assert [seen.headers.get("Authorization") for seen in fake.seen] == ["Bearer k", "Bearer k"]


async def test_retries_503_then_succeeds(
    serve: Callable[[Handler], Awaitable[FakeMarquez]],
) -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        if len(fake.seen) < 3:
            return web.json_response({"code": 503, "message": "busy"}, status=503)
        return web.json_response({"id": "r1", "state": "FAILED"})

    fake = await serve(handler)
    async with client(fake) as marquez:
        assert (await marquez.get_run("r1"))["state"] == "FAILED"
    assert len(fake.seen) == 3


async def test_5xx_exhausted_raises_unavailable(
    serve: Callable[[Handler], Awaitable[FakeMarquez]],
) -> None:
    fake = await serve(answer({"code": 503, "message": "Service Unavailable"}, status=503))
    async with client(fake) as marquez:
        with pytest.raises(MarquezUnavailable) as caught:
            await marquez.get_run("r1")
    assert len(fake.seen) == 3
    assert caught.value.status == 503
    assert caught.value.message == (
        f"Marquez at {fake.url} is unavailable: HTTP 503 Service Unavailable "
        "(3 attempts, GET /api/v1/jobs/runs/r1)"
    )
    assert isinstance(caught.value.__cause__, aiohttp.ClientResponseError)


async def test_connection_refused_raises_unavailable_with_clear_message() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    async with MarquezClient(f"http://127.0.0.1:{port}", retry=FAST) as marquez:
        with pytest.raises(MarquezUnavailable) as caught:
            await marquez.list_namespaces()
    assert str(caught.value) == (
        f"Marquez at http://127.0.0.1:{port} is unreachable: Connection refused "
        "(3 attempts, GET /api/v1/namespaces)"
    )
    assert caught.value.status is None
    assert isinstance(caught.value.__cause__, aiohttp.ClientConnectorError)


async def test_timeout_raises_unavailable_after_retries(
    serve: Callable[[Handler], Awaitable[FakeMarquez]],
) -> None:
    release = asyncio.Event()

    async def handler(request: web.Request) -> web.StreamResponse:
        await release.wait()
        return web.json_response({"namespaces": []})

    fake = await serve(handler)
    try:
        async with client(fake, timeout_s=0.2, retry=RetryPolicy(2, 0.001, 0.001)) as marquez:
            with pytest.raises(MarquezUnavailable, match=r"no answer within 0\.2s \(2 attempts"):
                await marquez.list_namespaces()
    finally:
        release.set()
    assert len(fake.seen) == 2


async def test_404_carries_marquez_message(
    serve: Callable[[Handler], Awaitable[FakeMarquez]],
) -> None:
    fake = await serve(answer({"code": 404, "message": "Job 'ns:x' not found."}, status=404))
    async with client(fake) as marquez:
        with pytest.raises(MarquezNotFound) as caught:
            await marquez.get_job("ns", "x")
    assert (caught.value.status, caught.value.message) == (404, "Job 'ns:x' not found.")
    assert len(fake.seen) == 1


async def test_422_joins_errors_and_is_not_retried(
    serve: Callable[[Handler], Awaitable[FakeMarquez]],
) -> None:
    errors = ["eventTime must not be null", "run.runId must not be null"]
    fake = await serve(answer({"errors": errors}, status=422))
    async with client(fake) as marquez:
        with pytest.raises(MarquezRequestError) as caught:
            await marquez.emit({"eventType": "START"})
    assert caught.value.status == 422
    assert caught.value.message == "; ".join(errors)
    assert len(fake.seen) == 1


@pytest.mark.parametrize(
    ("page", "expected"),
    [
        ("<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>", None),
        ("<html><body><h1>Proxy error</h1><p>" + "upstream down " * 60 + "</p></body></html>", 200),
    ],
)
async def test_html_error_page_gives_a_short_message(
    serve: Callable[[Handler], Awaitable[FakeMarquez]], page: str, expected: int | None
) -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        return web.Response(text=page, status=502, content_type="text/html")

    fake = await serve(handler)
    async with client(fake, retry=RetryPolicy(2, 0.001, 0.001)) as marquez:
        with pytest.raises(MarquezUnavailable) as caught:
            await marquez.list_namespaces()
    reason = caught.value.message.split("HTTP 502 ", 1)[1].rsplit(" (2 attempts", 1)[0]
    if expected is None:
        assert reason == "502 Bad Gateway"
    else:
        assert reason.startswith("Proxy error upstream down")
        assert reason.endswith("…")
        assert len(reason) == expected
    assert "<" not in caught.value.message


@pytest.mark.parametrize(
    ("call", "body"),
    [
        ("list_namespaces", b"not json{"),
        ("list_namespaces", b'{"namespaces": [1, 2]}'),
        ("list_jobs", b'{"jobs": null, "totalCount": 3}'),
        ("get_job", b"[]"),
        ("get_lineage", b'{"graph": [{"type": "JOB", "data": {}}]}'),
        ("lineage_events", b'{"events": [], "totalCount": "many"}'),
        ("search", b'{"totalCount": 0}'),
    ],
)
async def test_wrong_body_raises_bad_response(
    serve: Callable[[Handler], Awaitable[FakeMarquez]], call: str, body: bytes
) -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        return web.Response(body=body, content_type="application/json")

    fake = await serve(handler)
    args = {"get_job": ("ns", "j"), "get_lineage": ("job:ns:j",), "search": ("q",)}.get(call, ())
    async with client(fake) as marquez:
        with pytest.raises(MarquezBadResponse, match=r"^GET /api/v1/") as caught:
            await getattr(marquez, call)(*args)
    assert caught.value.status == 200
    assert len(fake.seen) == 1


@pytest.mark.parametrize(
    "content_type",
    ["application/json; charset=utf-8", "application/vnd.marquez+json", "text/plain"],
)
async def test_tolerates_content_type_variants(
    serve: Callable[[Handler], Awaitable[FakeMarquez]], content_type: str
) -> None:
    run = {"id": "r", "state": "NEW", "startedAt": None, "endedAt": "2024-05-01T10:00:00Z"}

    async def handler(request: web.Request) -> web.StreamResponse:
        return web.Response(body=json.dumps(run).encode(), headers={"Content-Type": content_type})

    fake = await serve(handler)
    async with client(fake) as marquez:
        assert await marquez.get_run("r") == run


async def test_tolerates_missing_content_type(raw_http: Callable[..., Awaitable[RawHTTP]]) -> None:
    server = await raw_http(reply(b'{"id": "r", "durationMs": null}'))
    async with MarquezClient(server.url, retry=FAST) as marquez:
        assert await marquez.get_run("r") == {"id": "r", "durationMs": None}


async def test_dropped_connections_are_retried(raw_http: Callable[..., Awaitable[RawHTTP]]) -> None:
    server = await raw_http(None, None, reply(b"", status=b"201 Created"), None)
    async with MarquezClient(server.url, retry=FAST) as marquez:
        await marquez.emit({"eventType": "START"})
        assert server.requests == 3
        with pytest.raises(MarquezUnavailable, match="server closed the connection"):
            await marquez.get_run("r")
    # aiohttp itself re-sends an idempotent request once, so 3 attempts are 3 to 6 connections.
    assert server.requests - 3 >= 3


async def test_lineage_and_events_return_their_payloads(
    serve: Callable[[Handler], Awaitable[FakeMarquez]],
) -> None:
    node = {"id": "job:ns:j", "type": "JOB", "data": {}, "inEdges": [], "outEdges": []}
    fake = await serve(
        answer({"graph": [node], "events": [{"eventType": "FAIL"}], "totalCount": 7})
    )
    async with client(fake) as marquez:
        assert await marquez.get_lineage(job_node_id("ns", "j")) == [node]
        page = await marquez.lineage_events(sort_direction="desc", limit=5, offset=10)
    assert page == EventsPage(events=[{"eventType": "FAIL"}], total_count=7)
    assert fake.queries()[1] == {"sortDirection": ["desc"], "limit": ["5"], "offset": ["10"]}


@pytest.mark.parametrize("status", [201, 200])
async def test_emit_posts_the_event(
    serve: Callable[[Handler], Awaitable[FakeMarquez]], status: int
) -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        return web.Response(status=status)

    fake = await serve(handler)
    event = {"eventType": "FAIL", "eventTime": "2024-05-01T10:00:00Z", "run": {"runId": "r"}}
    async with client(fake, api_key="k") as marquez:
        await marquez.emit(event)
    [seen] = fake.seen
    assert (seen.method, seen.raw_path) == ("POST", "/api/v1/lineage")
    assert seen.headers["Content-Type"] == "application/json"
    assert seen.headers["Authorization"] == "Bearer k"
    assert json.loads(seen.body) == event


async def test_emit_retries_5xx_but_not_a_timeout(
    serve: Callable[[Handler], Awaitable[FakeMarquez]],
) -> None:
    release = asyncio.Event()

    async def handler(request: web.Request) -> web.StreamResponse:
        if len(fake.seen) == 1:
            return web.json_response({"code": 500, "message": "boom"}, status=500)
        await release.wait()
        return web.Response(status=201)

    fake = await serve(handler)
    try:
        async with client(fake, timeout_s=0.2) as marquez:
            with pytest.raises(MarquezUnavailable, match=r"no answer within 0\.2s \(2 attempts"):
                await marquez.emit({"eventType": "START"})
    finally:
        release.set()
    assert len(fake.seen) == 2


async def test_close_leaves_a_borrowed_session_open(
    serve: Callable[[Handler], Awaitable[FakeMarquez]],
) -> None:
    fake = await serve(answer({"namespaces": []}))
    async with aiohttp.ClientSession() as session:
        async with client(fake, session=session) as marquez:
            await marquez.list_namespaces()
        assert not session.closed
        with pytest.raises(RuntimeError, match="closed"):
            await marquez.list_namespaces()


def closed_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


@pytest.mark.parametrize(
    ("password", "spellings"), [("s3cret", ("s3cret",)), ("p%40ss", ("p%40ss", "p@ss"))]
)
async def test_credentials_in_the_base_url_are_sent_but_never_shown(
    serve: Callable[[Handler], Awaitable[FakeMarquez]],
    caplog: pytest.LogCaptureFixture,
    password: str,
    spellings: tuple[str, ...],
) -> None:
    """MARQUEZ_URL may carry basic auth (`http://bot:pw@marquez:5000`): Marquez gets it, while
    no error (they reach Slack and doctor's table) and no log line shows it."""

    async def handler(request: web.Request) -> web.StreamResponse:
        if request.path.endswith("/busy"):
            return web.json_response({"code": 503, "message": "busy"}, status=503)
        if request.path.endswith("/garbled"):
            return web.Response(text="not json{")
        return web.json_response({"code": 404, "message": "Job 'ns:x' not found."}, status=404)

    caplog.set_level(logging.DEBUG)  # the retry warnings and the per-request debug lines
    fake = await serve(handler)
    errors: list[MarquezError] = []
    async with MarquezClient(
        fake.url.replace("http://", f"http://bot:{password}@"), retry=FAST
    ) as marquez:
        for call in (
            marquez.get_run("busy"),
            marquez.get_run("garbled"),
            marquez.get_job("ns", "x"),
        ):
            with pytest.raises(MarquezError) as caught:
                await call
            errors.append(caught.value)
    async with MarquezClient(
        closed_url().replace("http://", f"http://bot:{password}@"), retry=FAST
    ) as down:
        with pytest.raises(MarquezUnavailable) as refused:
            await down.list_namespaces()
    errors.append(refused.value)
    with pytest.raises(ValueError, match="must not have a query") as invalid:
        MarquezClient(f"http://bot:{password}@marquez:5000/?x=1")

    busy, garbled, missing, _ = errors
    assert busy.message.startswith(f"Marquez at {fake.url} is unavailable: HTTP 503 busy")
    assert str(garbled) == (
        "GET /api/v1/jobs/runs/garbled: response is not JSON: 'not json{' "
        f"(HTTP 200 from {fake.url}/api/v1/jobs/runs/garbled)"
    )
    assert str(missing) == (
        f"Job 'ns:x' not found. (HTTP 404 from {fake.url}/api/v1/namespaces/ns/jobs/x)"
    )
    assert "retry 2 of 2" in caplog.text
    user = "bot:" + password.replace("%40", "@")
    basic = "Basic " + base64.b64encode(user.encode()).decode()
    assert {seen.headers.get("Authorization") for seen in fake.seen} == {basic}
    shown = [caplog.text, str(invalid.value)]
    shown += [text for error in errors for text in (str(error), error.message, error.url)]
    for secret in spellings:
        for text in shown:
            assert secret not in text, text


def test_node_ids() -> None:
    assert job_node_id("food_delivery", "etl_orders") == "job:food_delivery:etl_orders"
    assert dataset_node_id("postgres://h:5432", "public.t") == "dataset:postgres://h:5432:public.t"
