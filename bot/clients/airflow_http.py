"""The HTTP transport shared by the Airflow 2 and Airflow 3 clients (`bot.clients.airflow`).

Retries follow `RetryPolicy` with jittered backoff. A request that may not have reached Airflow
(connection refused, DNS) is always retried; one that may have been processed (timeout or
disconnect after sending, 5xx) only when the call is safe to repeat: re-sending a backfill or a
dag-run trigger could start it twice, so those report `AirflowUnavailable` at once and the caller
reconciles by listing. A 401/403 renews the credentials once (Airflow 3 tokens) and re-sends:
nothing was processed, so that is safe for every call.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Literal
from urllib.parse import quote

import aiohttp
from yarl import URL

from bot.clients.airflow_models import (
    AirflowAuthError,
    AirflowBadResponse,
    AirflowConflict,
    AirflowError,
    AirflowNotFound,
    AirflowRequestError,
    AirflowUnavailable,
    Parser,
    error_detail,
)
from bot.clients.http import (
    DEFAULT_RETRY,
    USER_AGENT,
    RetryPolicy,
    SessionOwner,
    describe,
    truncate,
)

logger = logging.getLogger("bot.clients.airflow")

Method = Literal["GET", "POST", "PATCH", "PUT"]
QueryValue = str | int | bool
Query = Sequence[tuple[str, QueryValue]]
_RETRYABLE_STATUSES = frozenset({500, 502, 503, 504})


def seg(value: str) -> str:
    """One percent-encoded path segment (DAG ids contain dots, run ids `:` and `+`)."""
    return quote(value, safe="")


def iso(value: datetime, name: str) -> str:
    """ISO-8601 in UTC with an explicit offset; naive datetimes are refused."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{name} must be timezone-aware, got naive {value.isoformat()}")
    return value.astimezone(UTC).isoformat()


def _query_value(value: QueryValue) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class Reply:
    """A decoded 2xx answer and the parser to read it with."""

    def __init__(self, endpoint: str, status: int, data: Any) -> None:
        self.data = data
        self.parse = Parser(endpoint, status)


class AirflowHttp(SessionOwner):
    """Session, retries, auth hooks and error mapping; subclasses add the endpoints."""

    #: whether a refused credential can be renewed and the request re-sent (tokens can)
    _renewable_auth = False

    def __init__(
        self,
        base_url: str,
        username: str | None,
        password: str | None,
        *,
        timeout_s: float = 15.0,
        retry: RetryPolicy | None = None,
        session: aiohttp.ClientSession | None = None,
    ) -> None:
        parsed = URL(base_url)
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise ValueError(f"Airflow base URL must be an absolute http(s) URL, got {base_url!r}")
        if parsed.query_string or parsed.fragment:
            raise ValueError(f"Airflow base URL must not have a query or fragment: {base_url!r}")
        if timeout_s <= 0:
            raise ValueError("timeout_s must be > 0")
        self.base_url = str(parsed).rstrip("/")
        self._username = username
        self._password = password
        self._timeout_s = timeout_s
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._retry = retry or DEFAULT_RETRY
        self._session = session
        self._owns_session = session is None
        self._closed = False
        self._headers = {"Accept": "application/json", "User-Agent": USER_AGENT}

    # --- hooks for the subclasses ----------------------------------------------------------

    async def _auth_header(self) -> str | None:
        """The `Authorization` value to send, None for none."""
        return None

    async def _renew_auth(self, used: str | None) -> None:
        """Forget credentials that Airflow refused (`used` is the header that was sent)."""

    # --- requests --------------------------------------------------------------------------

    async def _request(
        self,
        method: Method,
        path: str,
        *,
        query: Query = (),
        body: Any = None,
        retry_safe: bool,
        auth: bool = True,
    ) -> Reply:
        """Send with retries and one credential renewal; a 2xx answer as decoded JSON."""
        endpoint = f"{method} {path}"
        renewed = False
        while True:
            header = await self._auth_header() if auth else None
            status, reason, raw = await self._send(method, path, query, body, retry_safe, header)
            renewable = header is not None and self._renewable_auth
            if status in (401, 403) and renewable and not renewed:
                logger.info("Airflow answered %d to %s; renewing the token", status, endpoint)
                renewed = True
                await self._renew_auth(header)
                continue
            return self._decode(endpoint, status, reason, raw, authenticated=header is not None)

    def _decode(
        self, endpoint: str, status: int, reason: str | None, raw: bytes, *, authenticated: bool
    ) -> Reply:
        if 200 <= status < 300:
            try:
                data = json.loads(raw) if raw.strip() else None
            except ValueError:
                text = truncate(raw.decode("utf-8", "replace"))
                raise Parser(endpoint, status).bad(f"the body is not JSON: {text!r}") from None
            return Reply(endpoint, status, data)
        detail = error_detail(raw, reason)
        if status in (401, 403):
            hint = (
                "check AIRFLOW_USERNAME and AIRFLOW_PASSWORD and the user's permissions"
                if authenticated
                else "set AIRFLOW_USERNAME and AIRFLOW_PASSWORD"
            )
            raise AirflowAuthError(
                f"Airflow refused the request: {detail} ({hint})", status=status, endpoint=endpoint
            )
        error: type[AirflowError]
        if status == 404:
            error = AirflowNotFound
        elif status == 409:
            error = AirflowConflict
        elif 400 <= status < 500:
            error = AirflowRequestError
        else:
            error = AirflowBadResponse
            detail = f"Airflow answered {endpoint} with an unexpected HTTP {status}: {detail}"
        raise error(detail, status=status, endpoint=endpoint)

    async def _send(
        self,
        method: Method,
        path: str,
        query: Query,
        body: Any,
        retry_safe: bool,
        authorization: str | None,
    ) -> tuple[int, str | None, bytes]:
        """One request with retries; the (status, reason, body) of any answer below 500."""
        if self._closed:
            raise RuntimeError("Airflow client is closed")
        query_string = "&".join(f"{seg(k)}={seg(_query_value(v))}" for k, v in query)
        url = URL(self.base_url + path + (f"?{query_string}" if query_string else ""), encoded=True)
        headers = dict(self._headers)
        data = None
        if body is not None:
            headers["Content-Type"] = "application/json"
            data = json.dumps(body).encode()
        if authorization is not None:
            headers["Authorization"] = authorization
        endpoint = f"{method} {path}"
        attempts = self._retry.attempts
        failure, status = "", None
        cause: BaseException | None = None
        attempt = 0
        for attempt in range(1, attempts + 1):
            if attempt > 1:
                delay = self._retry.delay(attempt - 1)
                logger.warning(
                    "Airflow %s failed (%s); retry %d of %d in %.2fs",
                    endpoint,
                    failure,
                    attempt - 1,
                    attempts - 1,
                    delay,
                )
                await asyncio.sleep(delay)
            try:
                async with self._http().request(
                    method,
                    url,
                    headers=headers,
                    data=data,
                    timeout=self._timeout,
                    allow_redirects=method == "GET",
                    raise_for_status=False,
                ) as resp:
                    raw = await resp.read()
                    logger.debug("Airflow %s -> %d", endpoint, resp.status)
                    if resp.status < 500:
                        return resp.status, resp.reason, raw
                    status = resp.status
                    failure = f"HTTP {status}: {error_detail(raw, resp.reason)}"
                    cause = None
                    retryable = retry_safe and status in _RETRYABLE_STATUSES
            except TimeoutError as exc:
                failure, status, cause = f"no answer within {self._timeout_s:g}s", None, exc
                retryable = retry_safe
            except aiohttp.TooManyRedirects as exc:
                raise AirflowBadResponse(
                    f"Airflow at {self.base_url} redirected {endpoint} too often",
                    status=exc.status,
                    endpoint=endpoint,
                ) from exc
            except aiohttp.ClientConnectorError as exc:
                # Refused or unresolvable: the request never left, so a retry cannot duplicate.
                failure, status, cause = describe(exc), None, exc
                retryable = True
            except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError) as exc:
                failure, status, cause = describe(exc), None, exc
                retryable = retry_safe
            except aiohttp.ClientError as exc:
                raise AirflowUnavailable(
                    f"Airflow at {self.base_url} failed: {describe(exc)} ({endpoint})",
                    endpoint=endpoint,
                ) from exc
            if not retryable:
                break
        verb = "is unreachable" if status is None else "is unavailable"
        tries = f"{attempt} attempt{'s' if attempt > 1 else ''}"
        message = f"Airflow at {self.base_url} {verb}: {failure} ({tries}, {endpoint})"
        if not retry_safe and (status is not None or isinstance(cause, TimeoutError)):
            message += "; the request may have been carried out, check before repeating it"
        raise AirflowUnavailable(message, status=status, endpoint=endpoint) from cause

    async def _paged(
        self, path: str, key: str, query: Query = (), *, page_size: int = 100
    ) -> list[Any]:
        """Every item of an offset-paged list (`limit`/`offset`, `total_entries`)."""
        items: list[Any] = []
        for _ in range(10_000):
            page_query = [*query, ("limit", page_size), ("offset", len(items))]
            reply = await self._request("GET", path, query=page_query, retry_safe=True)
            page = reply.parse.objects(reply.data, key)
            items.extend(page)
            total = reply.data.get("total_entries")
            if not page or (isinstance(total, int) and len(items) >= total):
                break
            if not isinstance(total, int) and len(page) < page_size:
                break
        return items

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession()
        return self._session
