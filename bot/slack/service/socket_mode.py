"""Socket Mode (SLACK_APP_TOKEN): the bot opens a WebSocket to Slack instead of taking requests.

slack_bolt's handler retries a refused `apps.connections.open` every few seconds for ever, so a
wrong token would look like a bot that started and hears nothing: the first URL is asked for
here, and a refused token stops `serve` with Slack's reason. Any other failure (Slack's
`internal_error`, a 5xx, the network) may pass: it is retried, with a warning, until it does.
Requests over the socket skip `bot/slack/service/http.py`, so its Events API retry rule is
applied here too, as a bolt middleware.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp
from slack_bolt.response import BoltResponse
from slack_sdk.errors import SlackApiError

from bot.core.http import describe
from bot.slack.service.http import EVENT_RETRY_S, ReplayCache

logger = logging.getLogger(__name__)


# apps.connections.open errors that no retry will cure: the token is wrong, revoked or lacks
# connections:write. Anything else (internal_error, fatal_error, a 5xx) may pass.
TOKEN_ERRORS = frozenset(
    {
        "invalid_auth",
        "not_authed",
        "not_allowed_token_type",
        "token_revoked",
        "token_expired",
        "account_inactive",
        "missing_scope",
    }
)
FIRST_RETRY_S, LAST_RETRY_S = 1.0, 30.0  # a blip is ridden out fast, an outage not hammered


class SocketModeRefused(ValueError):
    """Slack refused SLACK_APP_TOKEN; the message says why and what token is needed."""


def drop_event_retries(bolt: AsyncApp, replays: ReplayCache | None = None) -> None:
    """Slack redelivers an event whose ack it missed (same event_id, new envelope): handle it
    once, as `/slack/events` does."""
    seen = replays or ReplayCache()

    async def once(
        body: dict[str, Any], next: Callable[[], Awaitable[None]]
    ) -> BoltResponse | None:
        event_id = body.get("event_id") if body.get("type") == "event_callback" else None
        if isinstance(event_id, str) and 0 < len(event_id) <= 64:
            now = time.time()
            if not seen.first_time(f"event:{event_id}", int(now), now, ttl_s=EVENT_RETRY_S):
                logger.info("dropped a retry of Slack event %s", event_id)
                return BoltResponse(status=200, body="")
        await next()
        return None

    bolt.middleware(once)


async def connect(bolt: AsyncApp, app_token: str) -> AsyncSocketModeHandler:
    """A connected handler (close it with `close_async`); SocketModeRefused if Slack refuses
    the token. Waits, retrying, while Slack or the network fails otherwise."""
    drop_event_retries(bolt)
    handler = AsyncSocketModeHandler(bolt, app_token)
    try:
        handler.client.wss_uri = await _first_url(handler, app_token)
        # A URL that then fails to connect is the handler's own loop to retry.
        await handler.connect_async()  # type: ignore[no-untyped-call]
    except BaseException:  # refused, or cancelled (SIGTERM while retrying)
        await handler.close_async()  # type: ignore[no-untyped-call]  # else its session leaks
        raise
    return handler


async def _first_url(handler: AsyncSocketModeHandler, app_token: str) -> str:
    """apps.connections.open until it answers a URL, or refuses the token. Asked here rather
    than in the handler's own loop, which retries a refusal too and logs each failure with a
    traceback; and with the Web API call itself, since the client's issue_new_wss_url also
    logs a refusal as an error, which `serve` says in its one line."""
    delay = FIRST_RETRY_S
    while True:
        try:
            opened = await handler.client.web_client.apps_connections_open(app_token=app_token)
            return str(opened["url"])
        except SlackApiError as exc:
            code = _slack_error(exc)
            if code in TOKEN_ERRORS:
                raise SocketModeRefused(
                    f"SLACK_APP_TOKEN was refused by Slack ({code}): Socket Mode needs the "
                    "app-level token (xapp-…) with the connections:write scope"
                ) from None
            failure = _describe_failure(exc)
        except (aiohttp.ClientError, TimeoutError) as exc:
            failure = _describe_failure(exc)
        logger.warning("apps.connections.open failed (%s); retrying in %gs", failure, delay)
        await asyncio.sleep(delay)
        delay = min(delay * 2, LAST_RETRY_S)


def _slack_error(exc: SlackApiError) -> str | None:
    # `response` is a SlackResponse, except for a JSON-typed body that is no JSON (then the raw
    # aiohttp response, without `data`).
    data = getattr(exc.response, "data", None)
    code = data.get("error") if isinstance(data, dict) else None
    return code if isinstance(code, str) else None


def _describe_failure(exc: Exception) -> str:
    """A short reason: Slack's HTTP status and error code, else the transport error."""
    if isinstance(exc, SlackApiError):
        status = getattr(exc.response, "status_code", None) or getattr(exc.response, "status", "?")
        code = _slack_error(exc)
        return f"HTTP {status}, {code}" if code else f"HTTP {status}"
    return f"{type(exc).__name__}: {describe(exc)}"
