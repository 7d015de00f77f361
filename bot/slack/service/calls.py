"""Counting every Slack Web API request the bot makes, whoever makes it.

The bot calls Slack through two kinds of client: the outbox sender's and bolt's. Bolt does not
hand listeners the client it was given but a new `AsyncWebClient` per request, copied from it
(token, base URL, timeout, and its list of retry handlers), so a subclass or a wrapper of the
client would miss every call a handler makes. The retry handlers are what the copies share, and
slack_sdk asks them about every HTTP attempt, successful or not: a handler placed first that
counts the attempt and never asks for a retry sees each one, 429s that a later handler retries
included.
"""

from __future__ import annotations

from collections.abc import Callable

from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState
from slack_sdk.web.async_client import AsyncWebClient

__all__ = ["CallCounter", "counted", "outcome"]

Count = Callable[[str, str], None]
"""Called with (method, status) for each attempt, e.g. ("chat.postMessage", "ok")."""


def outcome(response: HttpResponse | None, error: Exception | None) -> str:
    """The status of one attempt: "ok", Slack's error code, "http_429", "http_<status>" for an
    answer Slack did not word, or "network_error"."""
    if response is None:
        return "network_error" if error is not None else "unknown"
    if response.status_code == 429:  # rate limited: its own status, whatever the body says
        return "http_429"
    body = response.body
    if isinstance(body, dict) and body.get("ok") is True:
        return "ok"
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        return str(body["error"])
    return f"http_{response.status_code}"


class CallCounter(AsyncRetryHandler):
    """A retry handler that only counts: it must come first in a client's handlers."""

    def __init__(self, count: Count) -> None:
        super().__init__(max_retry_count=0)
        self._count = count

    async def can_retry_async(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> bool:
        method = request.url.rstrip("/").rsplit("/", 1)[-1]
        self._count(method, outcome(response, error))
        return False


def counted(client: AsyncWebClient, count: Count) -> AsyncWebClient:
    """A client like `client` (token, base URL, timeout and retry handlers) whose every request
    is counted."""
    handlers = list(client.retry_handlers)
    return AsyncWebClient(
        token=client.token,
        base_url=client.base_url,
        timeout=client.timeout,
        retry_handlers=[CallCounter(count), *handlers],
    )
