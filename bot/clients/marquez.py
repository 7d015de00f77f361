"""Async client for the Marquez 0.51 HTTP API.

Behaviour follows `tests/fixtures/marquez/NOTES.md` where it differs from the published spec.
The client returns Marquez's JSON objects as plain dicts; parsing them is the caller's job.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Literal, cast
from urllib.parse import quote

import aiohttp
from yarl import URL

from bot.core.http import (
    DEFAULT_RETRY,
    SAFE_TO_REPEAT,
    USER_AGENT,
    Answer,
    ApiError,
    GaveUp,
    Page,
    Retryable,
    RetryPolicy,
    SessionOwner,
    all_items,
    describe,
    error_message,
    offset_pages,
    send_with_retries,
    truncate,
)
from bot.core.urls import display_url

__all__ = [
    "RUN_STATES",
    "EventsPage",
    "MarquezBadResponse",
    "MarquezClient",
    "MarquezError",
    "MarquezNotFound",
    "MarquezRequestError",
    "MarquezUnavailable",
    "RetryPolicy",
    "dataset_node_id",
    "job_node_id",
]

logger = logging.getLogger(__name__)

RUN_STATES = frozenset({"NEW", "RUNNING", "COMPLETED", "ABORTED", "FAILED", "OTHER"})
# An event POST is re-sent after any 5xx, or a connection lost before Marquez answered; not
# after a timeout or a broken answer, when Marquez may have stored it and a copy would duplicate.
_POST_RETRYABLE = Retryable(
    statuses=range(500, 1000), timeout=False, dropped=True, broken_answer=False
)
_QueryValue = str | int


class MarquezError(ApiError):
    """Base of every error the Marquez client raises."""

    system = "marquez"

    def __init__(self, message: str, *, url: str, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.url = url
        self.status = status

    def __str__(self) -> str:
        if self.status is None:
            return self.message
        return f"{self.message} (HTTP {self.status} from {self.url})"


class MarquezUnavailable(MarquezError):
    """Marquez could not be reached, timed out, or kept answering 5xx until retries ran out."""

    kind = "unavailable"

    def __str__(self) -> str:
        return self.message


class MarquezNotFound(MarquezError):
    """404; `message` is Marquez's own text, e.g. "Job 'ns:x' not found."."""

    kind = "not_found"


class MarquezBadResponse(MarquezError):
    """A 2xx answer that is not JSON or not shaped like the endpoint's documented body."""

    kind = "bad_response"


class MarquezRequestError(MarquezError):
    """A 4xx other than 404 (400, 422, ...), carrying Marquez's message."""


@dataclass(frozen=True)
class EventsPage:
    """One page of `GET /api/v1/events/lineage`; `total_count` counts all event types."""

    events: list[dict[str, Any]]
    total_count: int


def job_node_id(namespace: str, name: str) -> str:
    """The lineage node id of a job, e.g. `job:food_delivery:etl_orders`."""
    return f"job:{namespace}:{name}"


def dataset_node_id(namespace: str, name: str) -> str:
    """The lineage node id of a dataset, e.g. `dataset:food_delivery:public.orders`."""
    return f"dataset:{namespace}:{name}"


def _seg(value: str) -> str:
    return quote(value, safe="")


def _iso(value: datetime, name: str) -> str:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{name} must be timezone-aware, got naive {value.isoformat()}")
    return value.isoformat()


ErrorHook = Callable[[MarquezError], None]


def _ignore(_: MarquezError) -> None:
    pass


@dataclass(frozen=True)
class _Reply:
    endpoint: str
    url: str
    status: int
    data: Any
    on_error: ErrorHook = _ignore

    def bad(self, problem: str) -> MarquezBadResponse:
        error = MarquezBadResponse(f"{self.endpoint}: {problem}", url=self.url, status=self.status)
        self.on_error(error)  # every caller raises it: a body of the wrong shape is an error
        return error

    def objects(self, key: str) -> list[dict[str, Any]]:
        items = self.data.get(key) if isinstance(self.data, dict) else None
        if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
            raise self.bad(f"expected a JSON object with a {key!r} list of objects")
        return cast(list[dict[str, Any]], items)

    def object_with(self, key: str) -> dict[str, Any]:
        if not isinstance(self.data, dict) or not isinstance(self.data.get(key), str):
            raise self.bad(f"expected a JSON object with a string {key!r}")
        return cast(dict[str, Any], self.data)


class MarquezClient(SessionOwner):
    """Reads jobs, runs and lineage from Marquez and posts OpenLineage events to it.

    Use as `async with MarquezClient(url) as marquez:`; a session passed in is left open.
    """

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 10.0,
        lineage_timeout_s: float = 60.0,
        retry: RetryPolicy = DEFAULT_RETRY,
        session: aiohttp.ClientSession | None = None,
        page_size: int = 100,
        on_error: ErrorHook | None = None,
    ) -> None:
        """`on_error` is told of every error this client raises (to count them), before it is
        raised."""
        parsed = URL(base_url)
        shown = display_url(base_url)
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise ValueError(f"Marquez base URL must be an absolute http(s) URL, got {shown!r}")
        if parsed.query_string or parsed.fragment:
            raise ValueError(f"Marquez base URL must not have a query or fragment: {shown!r}")
        if page_size < 1 or timeout_s <= 0 or lineage_timeout_s <= 0:
            raise ValueError("page_size must be >= 1 and timeouts > 0")
        self._base = str(parsed).rstrip("/")
        # The base URL may carry basic-auth credentials (`http://bot:pw@marquez:5000`): requests
        # use `_base`, while every message, error and log line names Marquez by `_shown_base`.
        self._shown_base = display_url(self._base)
        self._timeout_s = timeout_s
        # Marquez's heavy reads: `/lineage` runs a recursive query (10-15 s on big graphs,
        # Marquez issue #3058) and a jobs page reads each job's latest runs (issue #2987).
        self._slow_timeout_s = max(timeout_s, lineage_timeout_s)
        self._retry = retry
        self._page_size = page_size
        self._session = session
        self._owns_session = session is None
        self._closed = False
        self._on_error = on_error or _ignore
        self._headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"

    async def list_namespaces(self) -> list[dict[str, Any]]:
        return await self._paged("/api/v1/namespaces", "namespaces")

    async def ping(self) -> None:
        """One small read (a page of one namespace): raises unless Marquez answers as Marquez."""
        reply = await self._get("/api/v1/namespaces", [("limit", 1)])
        reply.objects("namespaces")

    async def list_jobs(
        self, namespace: str | None = None, *, last_run_states: Sequence[str] = ()
    ) -> list[dict[str, Any]]:
        """All jobs of `namespace` (all namespaces if None) whose current run is in a given state.

        Jobs that never ran always pass Marquez's state filter.
        """
        if isinstance(last_run_states, str):
            raise ValueError("last_run_states must be a sequence of states, not a string")
        unknown = sorted(set(last_run_states) - RUN_STATES)
        if unknown:
            raise ValueError(f"unknown run states {unknown}; expected some of {sorted(RUN_STATES)}")
        path = "/api/v1/jobs" if namespace is None else f"/api/v1/namespaces/{_seg(namespace)}/jobs"
        states = [("lastRunStates", state) for state in last_run_states]
        return await self._paged(path, "jobs", states)

    def job_pages(
        self, *, on_total: Callable[[int], None] | None = None
    ) -> AsyncGenerator[list[dict[str, Any]]]:
        """Every job of every namespace, one page at a time, most recently updated first
        (`GET /api/v1/jobs`): a caller may stop early, and never holds the whole catalog.
        `on_total` hears the first page's `totalCount` (unfiltered, so `JobDao.count()`: an
        estimate of the pages to come, never what ends the listing).

        The next page's bytes are read while the caller handles this one (Marquez works on
        it meanwhile, instead of waiting for the caller's writes); each is parsed only when
        asked for, so one page of objects at a time. As `_pages`: an empty or short page
        ends the list, one equal to the one before means Marquez ignores `offset`."""
        return self._pages_ahead("/api/v1/jobs", "jobs", on_total=on_total)

    async def _pages_ahead(
        self, path: str, key: str, *, on_total: Callable[[int], None] | None = None
    ) -> AsyncGenerator[list[dict[str, Any]]]:
        limit = self._page_size

        def ask(offset: int) -> asyncio.Future[tuple[str, int, bytes]]:
            query = [("limit", limit), ("offset", offset)]
            future = asyncio.ensure_future(self._call("GET", path, query, slow=True))
            # a caller that stops early leaves the last one: its failure is nobody's to report
            future.add_done_callback(lambda done: done.cancelled() or done.exception())
            return future

        offset = 0
        before: bytes | None = None
        ahead: asyncio.Future[tuple[str, int, bytes]] | None = ask(0)
        try:
            while ahead is not None:
                url, status, raw = await ahead
                ahead = None
                reply = self._parsed(f"GET {path}", url, status, raw)
                total = reply.data.get("totalCount") if isinstance(reply.data, dict) else None
                if on_total is not None and offset == 0 and type(total) is int and total >= 0:
                    on_total(total)
                items = reply.objects(key)
                digest = hashlib.blake2b(raw, digest_size=16).digest()
                del raw, reply
                if not items:
                    return
                if digest == before:
                    logger.warning(
                        "Marquez ignored offset on %s; stopping after %d items", path, offset
                    )
                    return
                before = digest
                offset += len(items)
                if len(items) >= limit:
                    ahead = ask(offset)
                yield items
                del items
        finally:
            if ahead is not None:
                ahead.cancel()

    async def get_job(self, namespace: str, name: str) -> dict[str, Any]:
        reply = await self._get(f"/api/v1/namespaces/{_seg(namespace)}/jobs/{_seg(name)}")
        return reply.object_with("name")

    async def list_runs(
        self, namespace: str, job: str, *, max_runs: int | None = None
    ) -> list[dict[str, Any]]:
        """Runs of a job, newest start first, up to `max_runs` (all if None)."""
        if max_runs is not None and max_runs < 0:
            raise ValueError("max_runs must be >= 0")
        path = f"/api/v1/namespaces/{_seg(namespace)}/jobs/{_seg(job)}/runs"
        return await self._paged(path, "runs", max_items=max_runs)

    async def get_run(self, run_id: str) -> dict[str, Any]:
        reply = await self._get(f"/api/v1/jobs/runs/{_seg(run_id)}")
        return reply.object_with("id")

    async def get_lineage(self, node_id: str, *, depth: int = 20) -> list[dict[str, Any]]:
        """The (undirected) lineage graph around a `job:` or `dataset:` node."""
        query: list[tuple[str, _QueryValue]] = [("nodeId", node_id), ("depth", depth)]
        reply = await self._get("/api/v1/lineage", query, slow=True)
        graph = reply.objects("graph")
        for node in graph:
            if not isinstance(node.get("id"), str) or not isinstance(node.get("type"), str):
                raise reply.bad("every graph node needs a string 'id' and 'type'")
        return graph

    async def lineage_events(
        self,
        *,
        after: datetime | None = None,
        before: datetime | None = None,
        sort_direction: Literal["asc", "desc"] = "asc",
        limit: int = 100,
        offset: int = 0,
    ) -> EventsPage:
        """One page of run events with `after <= eventTime < before`."""
        if sort_direction not in ("asc", "desc"):
            raise ValueError(f"sort_direction must be 'asc' or 'desc', got {sort_direction!r}")
        query: list[tuple[str, _QueryValue]] = []
        if after is not None:
            query.append(("after", _iso(after, "after")))
        if before is not None:
            query.append(("before", _iso(before, "before")))
        query += [("sortDirection", sort_direction), ("limit", limit), ("offset", offset)]
        reply = await self._get("/api/v1/events/lineage", query)
        events = reply.objects("events")
        total = reply.data.get("totalCount", len(events))
        if not isinstance(total, int) or isinstance(total, bool):
            raise reply.bad("'totalCount' is not an integer")
        return EventsPage(events=events, total_count=total)

    async def search(
        self,
        q: str,
        *,
        filter: Literal["DATASET", "JOB"] | None = None,
        namespace: str | None = None,
        limit: int = 10,
    ) -> list[dict[str, Any]]:
        """Jobs and datasets whose name contains `q` (one page: Marquez has no offset here)."""
        query: list[tuple[str, _QueryValue]] = [("q", q)]
        if filter is not None:
            if filter not in ("DATASET", "JOB"):
                raise ValueError(f"filter must be 'DATASET' or 'JOB', got {filter!r}")
            query.append(("filter", filter))
        if namespace is not None:
            query.append(("namespace", namespace))
        query.append(("limit", limit))
        return (await self._get("/api/v1/search", query)).objects("results")

    async def emit(self, event: Mapping[str, Any]) -> None:
        """POST one OpenLineage event to `/api/v1/lineage` (Marquez answers 201)."""
        body = json.dumps(event).encode()
        await self._call("POST", "/api/v1/lineage", (), body)

    async def _get(
        self, path: str, query: Sequence[tuple[str, _QueryValue]] = (), *, slow: bool = False
    ) -> _Reply:
        """`slow`: one of Marquez's heavy reads, given `lineage_timeout_s`."""
        url, status, raw = await self._call("GET", path, query, slow=slow)
        return self._parsed(f"GET {path}", url, status, raw)

    def _parsed(self, endpoint: str, url: str, status: int, raw: bytes) -> _Reply:
        reply = _Reply(endpoint, url, status, None, self._on_error)
        try:
            data = json.loads(raw)
        except ValueError as exc:
            problem = f"response is not JSON: {truncate(raw.decode('utf-8', 'replace'))!r}"
            raise reply.bad(problem) from exc
        return replace(reply, data=data)

    async def _paged(
        self,
        path: str,
        key: str,
        query: Sequence[tuple[str, _QueryValue]] = (),
        *,
        max_items: int | None = None,
    ) -> list[dict[str, Any]]:
        return await all_items(self._pages(path, key, query, max_items=max_items))

    def _pages(
        self,
        path: str,
        key: str,
        query: Sequence[tuple[str, _QueryValue]] = (),
        *,
        max_items: int | None = None,
        on_total: Callable[[int], None] | None = None,
    ) -> AsyncIterator[list[dict[str, Any]]]:
        slow = path.endswith("/jobs")

        async def fetch(limit: int, offset: int) -> Page[dict[str, Any]]:
            reply = await self._get(path, [*query, ("limit", limit), ("offset", offset)], slow=slow)
            total = reply.data.get("totalCount") if isinstance(reply.data, dict) else None
            if on_total is not None and offset == 0 and type(total) is int and total >= 0:
                on_total(total)
            # totalCount is unreliable (absent, or ignoring filters): only a short page ends it.
            return Page(reply.objects(key))

        def ignored_offset(offset: int) -> None:
            logger.warning("Marquez ignored offset on %s; stopping after %d items", path, offset)

        return offset_pages(
            fetch, page_size=self._page_size, max_items=max_items, on_repeat=ignored_offset
        )

    async def _call(
        self,
        method: Literal["GET", "POST"],
        path: str,
        query: Sequence[tuple[str, _QueryValue]] = (),
        body: bytes | None = None,
        *,
        slow: bool = False,
    ) -> tuple[str, int, bytes]:
        """Send one request with retries; return (url, status, body) of a 2xx answer."""
        try:
            return await self._send(method, path, query, body, slow=slow)
        except MarquezError as exc:
            self._on_error(exc)
            raise

    async def _send(
        self,
        method: Literal["GET", "POST"],
        path: str,
        query: Sequence[tuple[str, _QueryValue]],
        body: bytes | None,
        *,
        slow: bool = False,
    ) -> tuple[str, int, bytes]:
        if self._closed:
            raise RuntimeError("MarquezClient is closed")
        query_string = "&".join(f"{_seg(k)}={_seg(str(v))}" for k, v in query)
        url = URL(self._base + path + (f"?{query_string}" if query_string else ""), encoded=True)
        headers = dict(self._headers)
        if body is not None:
            headers["Content-Type"] = "application/json"
        endpoint = f"{method} {path}"
        shown = display_url(url)  # errors carry it and callers print them: no credentials
        try:
            answer = await send_with_retries(
                self._http(),
                method,
                url,
                headers=headers,
                data=body,
                timeout_s=self._slow_timeout_s if slow else self._timeout_s,
                policy=self._retry,
                retryable=SAFE_TO_REPEAT if method == "GET" else _POST_RETRYABLE,
                explain=lambda status, reason, raw: f"HTTP {status} {error_message(raw, reason)}",
                log=logger,
                label=f"Marquez {method} {shown}",
            )
        except GaveUp as exc:
            message = exc.summary("Marquez", self._shown_base, endpoint)
            raise MarquezUnavailable(message, url=shown, status=exc.status) from exc.cause
        except aiohttp.TooManyRedirects as exc:
            raise MarquezBadResponse(
                f"{endpoint}: too many redirects", url=shown, status=exc.status
            ) from exc
        except aiohttp.ClientError as exc:
            message = f"Marquez at {self._shown_base} failed: {describe(exc)} ({endpoint})"
            raise MarquezUnavailable(message, url=shown) from exc
        return shown, answer.status, self._check(answer, endpoint)

    def _check(self, answer: Answer, endpoint: str) -> bytes:
        if 200 <= answer.status < 300:
            return answer.body
        url, status = display_url(answer.url), answer.status
        if status >= 400:
            error = MarquezNotFound if status == 404 else MarquezRequestError
            raise error(error_message(answer.body, answer.reason), url=url, status=status)
        location = answer.headers.get("Location")
        where = f" to {location}" if location else ""
        raise MarquezBadResponse(
            f"{endpoint}: unexpected HTTP {status}{where}", url=url, status=status
        )
