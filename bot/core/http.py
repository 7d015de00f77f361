"""HTTP plumbing shared by the bot's API clients (Marquez, Airflow 2 and Airflow 3).

`send_with_retries` owns the retry loop and `offset_pages` the `limit`/`offset` paging, so the
clients cannot drift apart on what is safe to repeat or when a list ends. Each client keeps what
is its own: auth, URL building, defaults, and mapping outcomes to its typed errors.
"""

from __future__ import annotations

import asyncio
import html
import json
import logging
import os
import random
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Container, Mapping
from dataclasses import dataclass
from importlib import metadata
from types import TracebackType
from typing import Generic, Self, TypeVar

import aiohttp
from multidict import CIMultiDictProxy
from yarl import URL

MAX_TEXT_MESSAGE = 200
#: 5xx answers worth another try; 501, 505... mean "never", so repeating them is pointless.
RETRYABLE_STATUSES = frozenset({500, 502, 503, 504})
T = TypeVar("T")


def _user_agent() -> str:
    try:
        return f"backfill-bot/{metadata.version('backfill-bot')}"
    except metadata.PackageNotFoundError:
        return "backfill-bot/0+unknown"


USER_AGENT = _user_agent()


class SessionOwner:
    """An API client's aiohttp session: its own unless the caller passed one in (then the caller
    closes it). Subclasses set `_session`, `_owns_session` and `_closed` in `__init__`."""

    _session: aiohttp.ClientSession | None
    _owns_session: bool
    _closed: bool

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the HTTP session if this client created it."""
        self._closed = True
        if self._owns_session and self._session is not None:
            await self._session.close()
            self._session = None

    def _http(self) -> aiohttp.ClientSession:
        # Created on first use, inside the running loop (aiohttp wants one there).
        if self._session is None:
            self._session = aiohttp.ClientSession()
        return self._session


class ApiError(Exception):
    """Base of every error an API client raises (Marquez, Airflow): transport trouble, told
    apart from the domain's own errors. `system` and `kind` label it in /metrics
    (backfill_bot_request_errors): the system it came from, and what went wrong."""

    system = "api"
    kind = "request_error"
    """unavailable (unreachable, timeout, 5xx), auth, not_found, conflict, request_error (another
    4xx) or bad_response; a 429 is counted as rate_limited whatever the class."""


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently to retry; `attempts` counts the first try."""

    attempts: int = 3
    backoff_s: float = 0.25
    max_backoff_s: float = 4.0

    def __post_init__(self) -> None:
        if self.attempts < 1 or self.backoff_s < 0 or self.max_backoff_s < 0:
            raise ValueError(f"invalid RetryPolicy: {self}")

    def delay(self, retry: int) -> float:
        """Seconds to wait before retry number `retry` (1-based): capped exponential, jittered."""
        ceiling = min(self.max_backoff_s, self.backoff_s * 2 ** (retry - 1))
        return random.uniform(ceiling / 2, ceiling)


DEFAULT_RETRY = RetryPolicy()


def truncate(text: str) -> str:
    """`text` with whitespace collapsed, cut to MAX_TEXT_MESSAGE characters."""
    text = " ".join(text.split())
    return text if len(text) <= MAX_TEXT_MESSAGE else text[: MAX_TEXT_MESSAGE - 1] + "…"


def error_message(raw: bytes, reason: str | None) -> str:
    """The most useful text in an error body: Dropwizard's message/errors, else cleaned text."""
    text = raw.decode("utf-8", errors="replace").strip()
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        message, errors = data.get("message"), data.get("errors")
        if isinstance(message, str) and message:
            return message
        if isinstance(errors, list) and errors:
            return "; ".join(str(error) for error in errors)
    if re.search(r"<(html|body|head|title|!doctype)\b", text, re.IGNORECASE):
        title = re.search(r"<title[^>]*>(.*?)</title>", text, re.IGNORECASE | re.DOTALL)
        body = re.sub(r"<(script|style)\b.*?</\1>", " ", text, flags=re.IGNORECASE | re.DOTALL)
        text = html.unescape(title.group(1) if title else re.sub(r"<[^>]*>", " ", body))
    return truncate(text) or reason or "no message"


def describe(exc: BaseException) -> str:
    """A short human reason for a transport error, e.g. "Connection refused"."""
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        return f"DNS lookup failed for {exc.host}"
    if isinstance(exc, aiohttp.ClientConnectorError) and exc.os_error.errno:
        return os.strerror(exc.os_error.errno)
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return "the server closed the connection"
    return str(exc) or type(exc).__name__


# --- retries ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Retryable:
    """Which failures of one request are worth another attempt.

    A refused or unresolvable connection is always retried: the request never left, so repeating
    it cannot duplicate anything. The other failures may come after the server acted on it.
    """

    #: 5xx statuses to re-send
    statuses: Container[int] = RETRYABLE_STATUSES
    #: no answer in time (the server may still have carried the request out)
    timeout: bool = True
    #: the connection was lost before any answer began
    dropped: bool = True
    #: the connection was lost, or the body cut short, after the answer began
    broken_answer: bool = True


#: A read, or a write that changes nothing when repeated.
SAFE_TO_REPEAT = Retryable()
#: A write that could take effect twice (start a backfill, trigger a run): only a connection that
#: was never made is retried, and anything else is reported for the caller to check.
ONCE_ONLY = Retryable(statuses=frozenset(), timeout=False, dropped=False, broken_answer=False)


@dataclass(frozen=True)
class Answer:
    """An answer below 500: 2xx, 4xx, or a 3xx that was not followed. The client maps it."""

    status: int
    reason: str | None
    #: where the answer came from, after any redirects that were followed
    url: URL
    headers: CIMultiDictProxy[str]
    body: bytes


class GaveUp(Exception):
    """No usable answer: the attempts ran out, or the last failure was not safe to retry.

    `failure` words the last failure ("HTTP 503 ...", "Connection refused", "no answer within
    10s"); `status` is its 5xx, None when no answer came; `cause` is the exception behind it (an
    `aiohttp.ClientResponseError` for a 5xx); `attempts` counts the requests sent.
    """

    def __init__(
        self, failure: str, *, status: int | None, cause: BaseException | None, attempts: int
    ) -> None:
        super().__init__(failure)
        self.failure = failure
        self.status = status
        self.cause = cause
        self.attempts = attempts

    def summary(self, service: str, base_url: str, endpoint: str) -> str:
        """The sentence for the client's "unavailable" error, e.g. "Airflow at http://af:8080
        is unreachable: Connection refused (3 attempts, GET /api/v2/version)"."""
        verb = "is unreachable" if self.status is None else "is unavailable"
        tries = f"{self.attempts} attempt{'s' if self.attempts > 1 else ''}"
        return f"{service} at {base_url} {verb}: {self.failure} ({tries}, {endpoint})"


async def send_with_retries(
    session: aiohttp.ClientSession,
    method: str,
    url: URL,
    *,
    headers: Mapping[str, str],
    data: bytes | None,
    timeout_s: float,
    policy: RetryPolicy,
    retryable: Retryable,
    explain: Callable[[int, str | None, bytes], str],
    log: logging.Logger,
    label: str,
) -> Answer:
    """Send one request, and again per `policy` while its failures are `retryable`.

    Returns the first answer below 500; raises `GaveUp` when the attempts run out or a failure
    may not be retried. `explain(status, reason, body)` words a 5xx (for `GaveUp` and the log);
    `label`, e.g. "Airflow GET /api/v2/dags/x", names the request in the log. Any other aiohttp
    error (`TooManyRedirects`, a garbled answer...) is never retried and propagates unchanged
    for the client to map. Retry-After is not read (no client ever honoured it): the jittered
    backoff alone paces the attempts.
    """
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    failure, status = "", None
    cause: BaseException | None = None
    attempt = 0
    for attempt in range(1, policy.attempts + 1):
        if attempt > 1:
            delay = policy.delay(attempt - 1)
            log.warning(
                "%s failed (%s); retry %d of %d in %.2fs",
                label,
                failure,
                attempt - 1,
                policy.attempts - 1,
                delay,
            )
            await asyncio.sleep(delay)
        answered = False
        try:
            async with session.request(
                method,
                url,
                headers=headers,
                data=data,
                timeout=timeout,
                # aiohttp would turn a redirected POST into a GET and drop its body.
                allow_redirects=method == "GET",
                raise_for_status=False,
            ) as resp:
                answered = True
                raw = await resp.read()
                log.debug("%s -> %d", label, resp.status)
                if resp.status < 500:
                    return Answer(resp.status, resp.reason, resp.url, resp.headers, raw)
                status = resp.status
                failure = explain(status, resp.reason, raw)
                cause = aiohttp.ClientResponseError(
                    resp.request_info, resp.history, status=status, message=failure
                )
                retry = status in retryable.statuses
        except TimeoutError as exc:
            failure, status, cause = f"no answer within {timeout_s:g}s", None, exc
            retry = retryable.timeout
        except aiohttp.ClientConnectorError as exc:
            # Refused or unresolvable: the request never left, so a retry cannot duplicate it.
            failure, status, cause = describe(exc), None, exc
            retry = True
        except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError) as exc:
            failure, status, cause = describe(exc), None, exc
            retry = retryable.broken_answer if answered else retryable.dropped
        if not retry:
            break
    raise GaveUp(failure, status=status, cause=cause, attempts=attempt)


# --- paging -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Page(Generic[T]):
    """One answer of an offset-paged list: its items, and the list's total if it is trusted."""

    items: list[T]
    total: int | None = None


async def offset_pages(
    fetch: Callable[[int, int], Awaitable[Page[T]]],
    *,
    page_size: int,
    max_items: int | None = None,
    max_pages: int | None = None,
    on_repeat: Callable[[int], None] | None = None,
) -> AsyncIterator[list[T]]:
    """The non-empty pages of a `limit`/`offset` list, each fetched when the caller asks for it.

    `fetch(limit, offset)` gets one page. The list ends at an empty page; with a total, once that
    many items came (a short page is no end there: servers cap `limit`); without one, at a page
    shorter than asked for. `max_items` caps the items (the last request asks only for the
    rest) and `max_pages` the requests. Given `on_repeat`, a page equal to the one before means
    the server ignores `offset`: that page is dropped, `on_repeat(offset)` called, paging ended.
    """
    if page_size < 1:
        raise ValueError("page_size must be >= 1")
    offset = requests = 0
    previous: list[T] | None = None
    while (max_items is None or offset < max_items) and (max_pages is None or requests < max_pages):
        limit = page_size if max_items is None else min(page_size, max_items - offset)
        page = await fetch(limit, offset)
        requests += 1
        if on_repeat is not None and page.items and page.items == previous:
            on_repeat(offset)
            return
        if not page.items:
            return
        yield page.items
        offset += len(page.items)
        if page.total is not None:
            if offset >= page.total:
                return
        elif len(page.items) < limit:
            return
        previous = page.items


async def all_items(pages: AsyncIterator[list[T]]) -> list[T]:
    """Every item of `offset_pages(...)`, in order."""
    return [item async for page in pages for item in page]
