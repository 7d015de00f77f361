"""The OpenLineage receiver: `POST /api/v1/lineage` on the bot's own HTTP server.

A pipeline sends its events to Marquez and to the bot at once (OpenLineage's composite
transport), so a failure reaches the bot in milliseconds instead of at the next poll. The
endpoint answers like Marquez's (NOTES.md §1.8): one event per request, 201 with an empty body,
422 with a reason for an event it cannot use. Dataset and job events are accepted and dropped
(the watcher only follows runs). Events are stored with the poller's identity rules
(`bot/events/rules/parse.py`), so the same event from both sources is one row.

Bad input never makes a 500: every answer but 201 is `{"error": reason}`.
"""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import Awaitable, Callable

from aiohttp import web
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.core.metrics import Metrics
from bot.events.rules.event import ParsedEvent
from bot.events.rules.parse import InvalidEvent, parse_run_event
from bot.events.store.models import EventSource
from bot.events.store.run_events import store_events

__all__ = ["MAX_BODY_BYTES", "PATH", "add_receiver"]

logger = logging.getLogger(__name__)

PATH = "/api/v1/lineage"
MAX_BODY_BYTES = 1024 * 1024
"""Far above any real run event (Marquez's large sample is ~20 kB), far below harm."""
_JSON_TYPES = ("application/json",)


def add_receiver(
    app: web.Application,
    *,
    sessions: async_sessionmaker[AsyncSession],
    api_key: str | None,
    on_events: Callable[[list[ParsedEvent]], Awaitable[None]] | None = None,
    metrics: Metrics,
) -> None:
    """Register `POST /api/v1/lineage` on `app`.

    With `api_key` set, requests need `Authorization: Bearer <api_key>` (what OpenLineage's
    HTTP transport sends with `auth: {type: api_key}`). A new run event wakes whatever
    processes stored events once it is committed (`bot.events.store.run_events.OWED`).
    """
    expected = api_key.encode() if api_key else None
    counted = metrics

    async def receive(request: web.Request) -> web.Response:
        if expected is not None and not _authorized(request, expected):
            return _error(401, "a valid 'Authorization: Bearer <OPENLINEAGE_API_KEY>' is required")
        media_type = request.content_type
        if media_type not in _JSON_TYPES and not media_type.endswith("+json"):
            return _error(415, f"the body must be application/json, not {media_type}")
        if (request.content_length or 0) > MAX_BODY_BYTES:
            return _error(413, f"the body is larger than {MAX_BODY_BYTES} bytes")
        try:
            raw = await _read_limited(request)
        except web.RequestPayloadError as exc:  # e.g. a Content-Encoding it does not match
            return _error(400, f"the body could not be read: {' '.join(str(exc).split())}")
        if raw is None:
            return _error(413, f"the body is larger than {MAX_BODY_BYTES} bytes")
        try:
            body = json.loads(raw)
        except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
            return _error(400, "the body is not valid JSON")
        if not isinstance(body, dict):
            return _error(400, "the body must be one OpenLineage event (a JSON object)")
        try:
            event = parse_run_event(body)
        except InvalidEvent as exc:
            return _error(422, str(exc))
        if event is None:  # a dataset or job event: valid, but no run to watch
            return web.Response(status=201)
        stored: list[ParsedEvent] = []
        try:
            async with sessions.begin() as session:
                new = await store_events(
                    session, [event], source=EventSource.RECEIVER, resolved=stored
                )
        except SQLAlchemyError:
            # Not the sender's fault: 503 makes OpenLineage's HTTP transport retry.
            logger.exception("storing a received run event failed")
            return _error(503, "the event could not be stored; try again")
        if new:
            counted.event_ingested(EventSource.RECEIVER.value, event.event_type)
        if new and on_events is not None:
            await on_events(stored)  # after the commit: never at the event's expense
        return web.Response(status=201)

    app.router.add_post(PATH, receive)


def _authorized(request: web.Request, expected: bytes) -> bool:
    scheme, _, token = request.headers.get("Authorization", "").strip().partition(" ")
    given = token.strip().encode("utf-8", "surrogateescape")
    # compare_digest: the time taken does not tell how much of a guessed key was right.
    return scheme.lower() == "bearer" and hmac.compare_digest(given, expected)


async def _read_limited(request: web.Request) -> bytes | None:
    """The (decompressed) body, or None past MAX_BODY_BYTES: a missing or lying
    Content-Length, or a gzip bomb, cannot make the bot buffer more than the limit."""
    chunks: list[bytes] = []
    size = 0
    while chunk := await request.content.readany():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _error(status: int, reason: str) -> web.Response:
    headers = {"WWW-Authenticate": 'Bearer realm="openlineage"'} if status == 401 else None
    return web.json_response({"error": reason}, status=status, headers=headers)
