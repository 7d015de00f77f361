"""The HTTP transport shared by the Airflow 2 and Airflow 3 clients (`bot.clients.airflow`).

Retries (`send_with_retries` in `bot.core.http`) follow `RetryPolicy` with jittered backoff.
A request that may not have reached Airflow (connection refused, DNS) is always retried; one
that may have been processed (timeout or disconnect after sending, 5xx) only when the call is
safe to repeat: re-sending a backfill or a dag-run trigger could start it twice, so those report
`AirflowUnavailable` at once and the caller reconciles by listing. A 401/403 renews the
credentials once (Airflow 3 tokens) and re-sends: nothing was processed, so that is safe for
every call. Credentials Airflow refused (a login answered 401/403, or basic auth answered 401)
are not offered again for `login_retry_s`: the calls in between fail at once with the same
AirflowAuthError, so a wrong password costs one login per interval, not one per request.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Collection, Sequence
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
from bot.core.http import (
    DEFAULT_RETRY,
    ONCE_ONLY,
    SAFE_TO_REPEAT,
    USER_AGENT,
    GaveUp,
    Page,
    RetryPolicy,
    SessionOwner,
    all_items,
    describe,
    offset_pages,
    send_with_retries,
    truncate,
)
from bot.core.urls import display_url

logger = logging.getLogger("bot.clients.airflow")

Method = Literal["GET", "POST", "PATCH", "PUT"]
QueryValue = str | int | bool
Query = Sequence[tuple[str, QueryValue]]


def seg(value: str) -> str:
    """One percent-encoded path segment (DAG ids contain dots, run ids `:` and `+`)."""
    return quote(value, safe="")


def iso(value: datetime, name: str) -> str:
    """ISO-8601 in UTC with an explicit offset; naive datetimes are refused."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{name} must be timezone-aware, got naive {value.isoformat()}")
    return value.astimezone(UTC).isoformat()


def clear_body(
    *,
    dag_run_id: str | None,
    start_date: datetime | None,
    end_date: datetime | None,
    only_failed: bool,
    task_ids: Collection[str] | None,
) -> dict[str, Any]:
    """The `clearTaskInstances` body both APIs take (ClearTaskInstances in v1, the
    ClearTaskInstancesBody of v2): a real clear (`dry_run` defaults to true in both) whose runs
    go back to queued (`reset_dag_runs` defaults to false in Airflow 2).

    Picking nothing would clear the whole DAG's history, so a run or a date is required; which
    combinations Airflow accepts is its to say (dag_run_id and dates: 422 in v2, 400 in v1).
    """
    if dag_run_id is None and start_date is None and end_date is None:
        raise ValueError("give dag_run_id, or start_date and/or end_date, of the runs to clear")
    if isinstance(task_ids, str):
        raise ValueError(f"task_ids must be a collection of task ids, got {task_ids!r}")
    body: dict[str, Any] = {"dry_run": False, "only_failed": only_failed, "reset_dag_runs": True}
    if dag_run_id is not None:
        body["dag_run_id"] = dag_run_id
    if start_date is not None:
        body["start_date"] = iso(start_date, "start_date")
    if end_date is not None:
        body["end_date"] = iso(end_date, "end_date")
    if task_ids is not None:
        body["task_ids"] = list(task_ids)
    return body


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
    #: seconds during which credentials Airflow refused are not offered again
    login_retry_s = 60.0

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
        shown = display_url(base_url)
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise ValueError(f"Airflow base URL must be an absolute http(s) URL, got {shown!r}")
        if parsed.query_string or parsed.fragment:
            raise ValueError(f"Airflow base URL must not have a query or fragment: {shown!r}")
        if timeout_s <= 0:
            raise ValueError("timeout_s must be > 0")
        self.base_url = str(parsed).rstrip("/")
        #: `base_url` without the user and password it may carry for basic auth: the name of
        #: this Airflow in every message and log line (errors reach Slack and the terminal).
        self.shown_url = display_url(self.base_url)
        self._username = username
        self._password = password
        self._timeout_s = timeout_s
        self._retry = retry or DEFAULT_RETRY
        self._session = session
        self._owns_session = session is None
        self._closed = False
        self._headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
        self._refused: tuple[float, AirflowAuthError] | None = None

    # --- hooks for the subclasses ----------------------------------------------------------

    async def _auth_header(self) -> str | None:
        """The `Authorization` value to send, None for none."""
        return None

    async def _renew_auth(self, used: str | None) -> None:
        """Forget credentials that Airflow refused (`used` is the header that was sent)."""

    # --- refused credentials -----------------------------------------------------------------

    def _login_refused(self, error: AirflowAuthError) -> None:
        """Airflow refused the credentials themselves: do not offer them for `login_retry_s`."""
        self._refused = (time.monotonic(), error)
        logger.warning(
            "%s; not logging in to Airflow again for %gs", error.detail, self.login_retry_s
        )

    def _login_accepted(self) -> None:
        self._refused = None

    def _check_login(self) -> None:
        """Raise the last refusal again while it is recent (no request is sent)."""
        if self._refused is None:
            return
        at, error = self._refused
        if time.monotonic() - at >= self.login_retry_s:
            self._refused = None
            return
        raise AirflowAuthError(error.detail, status=error.status, endpoint=error.endpoint)

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
            try:
                return self._decode(endpoint, status, reason, raw, authenticated=header is not None)
            except AirflowAuthError as exc:
                # Basic auth answered 401: the user or password is wrong (403 is a permission
                # missing for this call only).
                if status == 401 and header is not None and not self._renewable_auth:
                    self._login_refused(exc)
                raise

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
        if status == 429:  # a proxy or Airflow's rate limit: it passes, the caller may retry
            raise AirflowUnavailable(
                f"Airflow at {self.shown_url} is rate-limiting requests: {detail}",
                status=status,
                endpoint=endpoint,
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
        try:
            answer = await send_with_retries(
                self._http(),
                method,
                url,
                headers=headers,
                data=data,
                timeout_s=self._timeout_s,
                policy=self._retry,
                retryable=SAFE_TO_REPEAT if retry_safe else ONCE_ONLY,
                explain=lambda status, reason, raw: f"HTTP {status}: {error_detail(raw, reason)}",
                log=logger,
                label=f"Airflow {endpoint}",
            )
        except GaveUp as exc:
            message = exc.summary("Airflow", self.shown_url, endpoint)
            if not retry_safe and (exc.status is not None or isinstance(exc.cause, TimeoutError)):
                message += "; the request may have been carried out, check before repeating it"
            # A 5xx is all in the message; only a transport failure is worth chaining.
            cause = exc.cause if exc.status is None else None
            raise AirflowUnavailable(message, status=exc.status, endpoint=endpoint) from cause
        except aiohttp.TooManyRedirects as exc:
            raise AirflowBadResponse(
                f"Airflow at {self.shown_url} redirected {endpoint} too often",
                status=exc.status,
                endpoint=endpoint,
            ) from exc
        except aiohttp.ClientError as exc:
            raise AirflowUnavailable(
                f"Airflow at {self.shown_url} failed: {describe(exc)} ({endpoint})",
                endpoint=endpoint,
            ) from exc
        return answer.status, answer.reason, answer.body

    async def _paged(
        self,
        path: str,
        key: str,
        query: Query = (),
        *,
        page_size: int = 100,
        trust_total: bool = True,
    ) -> list[Any]:
        """Every item of an offset-paged list (`limit`/`offset`, `total_entries`). Without
        `trust_total` the list ends at a short or empty page (Airflow's page cap, 100, is
        `page_size`), for lists whose `total_entries` counts something else."""

        async def fetch(limit: int, offset: int) -> Page[Any]:
            page_query = [*query, ("limit", limit), ("offset", offset)]
            reply = await self._request("GET", path, query=page_query, retry_safe=True)
            items = reply.parse.objects(reply.data, key)
            total = reply.data.get("total_entries") if trust_total else None
            return Page(items, total if isinstance(total, int) else None)

        # However the server pages, an endless list cannot hang the caller.
        pages = offset_pages(fetch, page_size=page_size, max_pages=10_000)
        return await all_items(pages)
