"""HTTP helpers shared by the bot's API clients: retry policy, User-Agent, error-body text."""

from __future__ import annotations

import html
import json
import os
import random
import re
from dataclasses import dataclass
from importlib import metadata
from types import TracebackType
from typing import Self

import aiohttp

MAX_TEXT_MESSAGE = 200


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
