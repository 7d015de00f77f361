"""What sink clients share: one delivery attempt, and the `Outcome` it came to.

A sink is somewhere a notice goes besides Slack (PagerDuty, a signed webhook). The outbox's
sender claims a due row and calls `SinkClient.send` once; the client classifies the answer and
the sender owns retries, backoff and once-only bookkeeping. The classification is the same for
every sink, so `classify` and `OneShotClient` live here:

- 2xx: delivered;
- 408, 429, 5xx, connection errors and timeouts: retry, after Retry-After when the answer has it
  (seconds or an HTTP date, capped at an hour), else after the client's default;
- 401, 403, 404, 405, 410: the sink refuses the bot, not the notice (a wrong secret or URL, a
  revoked key, a clock far off): retry slowly (Retry-After, else 5 minutes) until a person
  fixes it, so nothing is dropped meanwhile;
- anything else (400, 422 and other 4xx: this notice is wrong; an unfollowed 3xx; an invalid
  URL): permanent, with the status and a short reason from the body.

`Outcome.detail` goes to logs and the outbox row, so it never carries a secret: each client
passes its secrets to `redact`, and URLs are shown by `public_url`.
"""

from __future__ import annotations

import base64
import json
import math
import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from email.utils import parsedate_to_datetime
from typing import Any, Protocol, runtime_checkable

import aiohttp
from yarl import URL

from bot.core.http import SessionOwner, describe, error_message

MAX_RETRY_AFTER_S = 3600.0
MAX_REASON = 200
REDACTED = "[redacted]"
_READ_LIMIT = 64 * 1024  # enough for any error message; a hostile server cannot make us buffer more
_HTML = re.compile(r"<(html|body|head|title|!doctype)\b", re.IGNORECASE)
_SECONDS = re.compile(r"[0-9]+(\.[0-9]+)?", re.ASCII)


@dataclass(frozen=True)
class Outcome:
    """One delivery attempt: delivered, or when to try again (None: never)."""

    delivered: bool
    #: when not delivered: seconds to wait before retrying (0: the sender's own backoff),
    #: None = permanent failure, do not retry
    retry_after_s: float | None
    #: short, for logs and the outbox row's error column; never contains a secret
    detail: str

    @property
    def permanent(self) -> bool:
        return not self.delivered and self.retry_after_s is None

    @classmethod
    def ok(cls, detail: str) -> Outcome:
        return cls(True, None, detail)

    @classmethod
    def retry(cls, detail: str, after_s: float = 0.0) -> Outcome:
        return cls(False, after_s, detail)

    @classmethod
    def fail(cls, detail: str) -> Outcome:
        return cls(False, None, detail)


@runtime_checkable
class SinkClient(Protocol):
    """What the outbox sender calls: one attempt per `send`, never an exception for a failure
    of the sink (a bad URL, an error answer, a dropped connection are all Outcomes)."""

    async def send(self, body: dict[str, Any], *, delivery_id: str) -> Outcome: ...

    async def close(self) -> None: ...


def clean(text: str, limit: int = MAX_REASON) -> str:
    """`text` on one line: control and format characters dropped, whitespace collapsed, cut to
    `limit` characters (the last one "…" when cut)."""
    kept = "".join(
        " " if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp") else ch for ch in text
    )
    kept = " ".join(kept.split())
    return kept if len(kept) <= limit else kept[: limit - 1] + "…"


def public_url(url: str | URL) -> str:
    """`url` as it may be shown: its scheme, host and port only. Many webhook URLs carry their
    token in the path (Slack's, Teams' and Zapier's do), the query or the userinfo."""
    try:
        parsed = URL(url) if isinstance(url, str) else url
        if not parsed.host:
            return "<invalid URL>"
        return str(parsed.origin())
    except (ValueError, TypeError):
        return "<invalid URL>"


def redact(text: str, secrets: Iterable[str]) -> str:
    """`text` with every occurrence of each non-empty secret replaced (longest first)."""
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return text


def url_secrets(url: str) -> list[str]:
    """The parts of `url` that must not be shown: userinfo, query string and its values."""
    try:
        parsed = URL(url)
    except (ValueError, TypeError):
        return [url]
    found = [parsed.raw_user or "", parsed.user or "", parsed.raw_password or ""]
    found += [parsed.password or "", parsed.raw_query_string, parsed.query_string]
    found += [value for value in parsed.query.values() if len(value) >= 4]
    if parsed.user is not None or parsed.password is not None:
        # aiohttp sends userinfo as Basic auth, which an error page may echo back
        pair = f"{parsed.user or ''}:{parsed.password or ''}".encode()
        found.append(base64.b64encode(pair).decode())
    return found


def retry_after(value: str | None, *, now: float, default: float) -> float:
    """Seconds a Retry-After header asks us to wait (delta-seconds or an HTTP date, capped at
    MAX_RETRY_AFTER_S); `default` when there is none or it cannot be read."""
    if value is None:
        return default
    value = value.strip()
    if _SECONDS.fullmatch(value):
        seconds = float(value)
    else:
        try:
            seconds = parsedate_to_datetime(value).timestamp() - now
        except (TypeError, ValueError, IndexError):
            return default
    if not math.isfinite(seconds):
        return default
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_S)


@dataclass(frozen=True)
class Reply:
    """An answer to one attempt: status, headers and (at most 64 KiB of) body."""

    status: int
    headers: Mapping[str, str]
    body: bytes

    def reason(self) -> str:
        """A short reason from the body: its JSON message/error/errors, an HTML page's title
        or text, else the text itself."""
        text = self.body.decode("utf-8", errors="replace").strip()
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        if isinstance(data, dict):
            for key in ("message", "error", "errors", "detail"):
                value = data.get(key)
                if isinstance(value, list) and value:
                    return clean("; ".join(str(item) for item in value))
                if isinstance(value, str) and value.strip():
                    return clean(value)
        if _HTML.search(text):
            return clean(error_message(self.body, None))
        return clean(text)


REFUSES_US = frozenset({401, 403, 404, 405, 410})
MISCONFIGURED_RETRY_S = 300.0


def classify(
    reply: Reply, *, label: str, reason: str | None = None, now: float, retry_default: float = 0.0
) -> Outcome:
    """The shared rules (module docstring) applied to `reply`; `label` names the sink in the
    detail, `reason` replaces the body's own, `retry_default` is the wait when a 429 has no
    Retry-After (other retryable answers without one wait 0: the sender's backoff)."""
    status = reply.status
    head = f"{label} answered HTTP {status}"
    if 200 <= status < 300:
        return Outcome.ok(head)
    if 300 <= status < 400:
        return Outcome.fail(f"{head}: redirects are not followed")
    text = clean(reason if reason is not None else reply.reason())
    detail = f"{head}: {text}" if text else head
    header = next((v for k, v in reply.headers.items() if k.lower() == "retry-after"), None)
    if status in (408, 429) or status >= 500:
        default = retry_default if status == 429 else 0.0
        return Outcome.retry(detail, retry_after(header, now=now, default=default))
    if status in REFUSES_US:
        # The sink refuses the bot, not this notice: a wrong secret or URL, a revoked key, a
        # clock far off. A person fixes that; meanwhile nothing is dropped: tried again slowly.
        return Outcome.retry(detail, retry_after(header, now=now, default=MISCONFIGURED_RETRY_S))
    return Outcome.fail(detail)


class OneShotClient(SessionOwner):
    """A sink client's aiohttp session (its own, created on first send, inside the running
    loop; closed by `close`, after which it cannot send) and its single attempt. Subclasses
    implement `send` and call `_post`."""

    def __init__(self, *, timeout_s: float) -> None:
        if not timeout_s > 0:
            raise ValueError("timeout_s must be > 0")
        self._timeout_s = timeout_s
        self._session = None
        self._owns_session = True
        self._closed = False

    async def _post(
        self,
        url: str,
        data: bytes,
        headers: Mapping[str, str],
        *,
        label: str,
        secrets: Iterable[str],
    ) -> Reply | Outcome:
        """POST once: the answer, or the Outcome of a request that got none. `secrets` are
        redacted from the answer's body and any error text before anything is cut short (a
        cut could otherwise leave part of a secret that no longer matches)."""
        secrets = list(secrets)
        if self._closed:
            raise RuntimeError("this sink client is closed")
        if not url.lower().startswith(("http://", "https://")):
            return Outcome.fail(f"{label}: invalid URL (not http or https)")
        if self._session is None:
            timeout = aiohttp.ClientTimeout(total=self._timeout_s)
            self._session = aiohttp.ClientSession(timeout=timeout)
        try:
            # A redirected POST would become a GET without its body: never follow one.
            async with self._session.post(
                url, data=data, headers=headers, allow_redirects=False
            ) as resp:
                body = bytearray()
                while len(body) < _READ_LIMIT:
                    chunk = await resp.content.read(_READ_LIMIT - len(body))
                    if not chunk:
                        break
                    body += chunk
                text = redact(body.decode("utf-8", errors="replace"), secrets)
                return Reply(resp.status, resp.headers, text.encode())
        except TimeoutError:
            return Outcome.retry(f"{label}: no answer within {self._timeout_s:g}s")
        except aiohttp.InvalidURL:
            return Outcome.fail(f"{label}: invalid URL")
        except aiohttp.ClientError as exc:
            return Outcome.retry(f"{label}: {clean(redact(describe(exc), secrets))}")


def scrubbed(outcome: Outcome, secrets: Iterable[str]) -> Outcome:
    """`outcome` with its detail redacted of `secrets` (a last line of defence: an answer or an
    exception message may echo what was sent)."""
    return replace(outcome, detail=redact(outcome.detail, secrets))
