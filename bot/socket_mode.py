"""Socket Mode (SLACK_APP_TOKEN): the bot opens a WebSocket to Slack instead of taking requests.

slack_bolt's handler retries a refused `apps.connections.open` every few seconds for ever, so a
wrong token would look like a bot that started and hears nothing: the first URL is asked for
here, and a refusal stops `serve` with Slack's reason. Requests over the socket skip
`bot/slack_http.py`, so its Events API retry rule is applied here too, as a bolt middleware.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp
from slack_bolt.response import BoltResponse
from slack_sdk.errors import SlackApiError

from bot.slack_http import EVENT_RETRY_S, ReplayCache

logger = logging.getLogger(__name__)


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
    the token."""
    drop_event_retries(bolt)
    handler = AsyncSocketModeHandler(bolt, app_token)
    try:
        handler.client.wss_uri = await handler.client.issue_new_wss_url()
    except SlackApiError as exc:
        await handler.close_async()  # type: ignore[no-untyped-call]
        raise SocketModeRefused(
            f"SLACK_APP_TOKEN was refused by Slack ({exc.response.get('error')}): Socket Mode "
            "needs the app-level token (xapp-…) with the connections:write scope"
        ) from None
    await handler.connect_async()  # type: ignore[no-untyped-call]
    return handler
