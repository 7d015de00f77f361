"""The Slack stand-in's `response_url`s: what a bot posts to the URL a slash command or a click
gave it, answered as Slack answers (plain-text `ok` or an error name) within Slack's limits of
five uses in thirty minutes."""

from __future__ import annotations

import contextlib
import json
from typing import Any

from aiohttp import web

from standins.slack.api import STANDIN
from standins.slack.limits import message_content
from standins.slack.state import (
    RESPONSE_URL_TTL,
    RESPONSE_URL_USES,
    Ephemeral,
    ResponseUrlPost,
    SlackError,
    SlackState,
)

__all__ = ["response_url"]


async def response_url(request: web.Request) -> web.Response:
    """A response_url, answered like Slack's: plain-text `ok` or an error name."""
    state = request.app[STANDIN].state
    raw = await request.read()
    try:
        body: Any = json.loads(raw)
    except ValueError:
        body = None
    status, answer = _use_response_url(state, request.match_info["token"], body)
    state.response_posts.append(ResponseUrlPost(str(request.url), body, status, answer))
    return web.Response(status=status, text=answer)


def _use_response_url(state: SlackState, token: str, body: Any) -> tuple[int, str]:
    target = state.response_urls.get(token)
    if target is None:
        return 404, "invalid_token"
    if state.clock() - target.issued_at > RESPONSE_URL_TTL:
        return 404, "expired_url"
    if target.uses >= RESPONSE_URL_USES:
        return 404, "used_url"
    if not isinstance(body, dict):
        return 400, "invalid_payload"
    original = None
    if target.original is not None:
        with contextlib.suppress(LookupError):
            original = state.find_message(*target.original)
    if body.get("delete_original") in (True, "true") and original is not None:
        target.uses += 1
        state.delete(original)
        return 200, "ok"
    try:
        text, blocks = message_content(body)
    except SlackError as exc:
        return 400, exc.code
    target.uses += 1
    if body.get("replace_original") in (True, "true") and original is not None:
        state.update(original, text=text, blocks=blocks or [])
    elif body.get("response_type") == "in_channel":
        state.post(target.channel, text=text, blocks=blocks, thread_ts=body.get("thread_ts"))
    else:  # Slack's default response_type is ephemeral
        state.add_ephemeral(
            Ephemeral(
                target.channel,
                target.user,
                text,
                blocks or [],
                "response_url",
                body.get("thread_ts"),
            )
        )
    return 200, "ok"
