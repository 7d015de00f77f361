"""The generic webhook sink: one signed JSON POST per notice.

Each request carries:

- `X-Backfill-Bot-Delivery`: the delivery's id. A retry after a lost answer repeats it, so a
  receiver that processes each id once never handles a notice twice.
- `X-Backfill-Bot-Request-Timestamp`: Unix seconds when the request was signed.
- `X-Backfill-Bot-Signature`: `v1=` + hex HMAC-SHA256 of `v1:<timestamp>:<raw body>` keyed with
  the shared secret — Slack's request-signing scheme with our own version prefix.

A receiver checks the signature over the raw body before parsing it, and refuses timestamps
more than five minutes away (a captured request cannot be replayed later)::

    from bot.hub.sinks.webhook import verify
    ts = request.headers["X-Backfill-Bot-Request-Timestamp"]
    sig = request.headers["X-Backfill-Bot-Signature"]
    if not verify(SECRET, ts, raw_body, sig, now=time.time()):
        return 401  # then dedupe on X-Backfill-Bot-Delivery and json.loads(raw_body)

In other languages: compute the HMAC over the bytes `v1:` + timestamp + `:` + body, compare
`"v1=" + hex` with the header in constant time, and check the timestamp's age.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import time
from collections.abc import Callable
from typing import Any

from bot.core.http import USER_AGENT
from bot.hub.sinks.base import OneShotClient, Outcome, classify, public_url, scrubbed, url_secrets

__all__ = [
    "DELIVERY_HEADER",
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "WebhookClient",
    "sign",
    "verify",
]

DELIVERY_HEADER = "X-Backfill-Bot-Delivery"
TIMESTAMP_HEADER = "X-Backfill-Bot-Request-Timestamp"
SIGNATURE_HEADER = "X-Backfill-Bot-Signature"
VERSION = "v1"
_DELIVERY_ID = re.compile(r"[\x21-\x7e]{1,200}")  # printable ASCII: safe in a header
_TIMESTAMP = re.compile(r"[0-9]{1,15}", re.ASCII)


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """The signature header's value for `body` sent at `timestamp`: `v1=<hex HMAC-SHA256>`."""
    message = f"{VERSION}:{timestamp}:".encode() + body
    digest = hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()
    return f"{VERSION}={digest}"


def verify(
    secret: str,
    timestamp: str,
    body: bytes,
    signature: str,
    *,
    now: float,
    tolerance_s: float = 300,
) -> bool:
    """Whether `signature` is `sign(secret, timestamp, body)` (compared in constant time) and
    `timestamp` is whole Unix seconds at most `tolerance_s` away from `now`."""
    if not _TIMESTAMP.fullmatch(timestamp) or abs(now - int(timestamp)) > tolerance_s:
        return False
    expected = sign(secret, timestamp, body).encode()
    return hmac.compare_digest(expected, signature.encode("utf-8", errors="replace"))


class WebhookClient(OneShotClient):
    """POSTs each document, signed, to `url`; one attempt per `send` (see `bot.hub.sinks.base`).

    `detail` shows the URL without userinfo or query string, and never the secret.
    """

    def __init__(
        self,
        url: str,
        secret: str,
        *,
        timeout_s: float = 10.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not secret:
            raise ValueError("a webhook needs a signing secret")
        super().__init__(timeout_s=timeout_s)
        self._url = url
        self._secret = secret
        self._clock = clock
        self._label = public_url(url)
        self._secrets = [secret, *url_secrets(url)]

    @property
    def label(self) -> str:
        """The URL as logs may show it."""
        return self._label

    async def send(self, body: dict[str, Any], *, delivery_id: str) -> Outcome:
        """POST `body` once, signed, and classify the answer."""
        if not _DELIVERY_ID.fullmatch(delivery_id):
            return Outcome.fail(f"{self._label}: delivery id is not 1-200 printable ASCII")
        try:
            data = json.dumps(
                body, separators=(",", ":"), ensure_ascii=False, allow_nan=False
            ).encode()
        except (TypeError, ValueError) as exc:
            return Outcome.fail(f"{self._label}: document is not JSON ({type(exc).__name__})")
        timestamp = str(int(self._clock()))
        headers = {
            "Content-Type": "application/json",
            "User-Agent": USER_AGENT,
            DELIVERY_HEADER: delivery_id,
            TIMESTAMP_HEADER: timestamp,
            SIGNATURE_HEADER: sign(self._secret, timestamp, data),
        }
        reply = await self._post(self._url, data, headers, label=self._label, secrets=self._secrets)
        if not isinstance(reply, Outcome):
            reply = classify(reply, label=self._label, now=self._clock())
        return scrubbed(reply, self._secrets)
