"""Answering a button click, whichever way back to the person Slack left open.

Slack gives a click two: its response_url (an ephemeral reply where the click was) and its
trigger_id (a modal, within 3 seconds). A click can lack one (a button in a modal or on the Home
tab comes without a response_url) or carry one that no longer works (a response_url takes five
answers in 30 minutes; a trigger_id is spent after 3 seconds, and planning can take longer).
Then the answer goes through the Web API with the bot's own client: an ephemeral message to the
person in the channel of the click, else a DM. Slack's refusals and network failures are logged
as warnings, never raised: the click was acknowledged already and nobody else is waiting.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
from slack_bolt.async_app import AsyncRespond
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.messages.common import refusal
from bot.slack.messages.render import Mrkdwn

logger = logging.getLogger(__name__)
# What a call to Slack (Web API or response_url) raises when Slack or the network says no.
SLACK_FAILURES = (SlackClientError, aiohttp.ClientError, TimeoutError)


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


@dataclass(frozen=True)
class Click:
    """What a listener needs from a block_actions payload (its shape is checked before bolt
    runs, in bot/slack/service/http.py)."""

    value: str  # the button's value: the id it acts on
    user: str
    channel: str  # the channel of the message clicked; "" for a modal or the Home tab
    thread_ts: str  # the thread of the message clicked; "" if it is in none
    trigger_id: str  # "" if Slack sent none

    @classmethod
    def of(cls, body: dict[str, Any]) -> Click:
        action = (body.get("actions") or [{}])[0]
        container = body.get("container") or {}
        channel = (body.get("channel") or {}).get("id") or container.get("channel_id")
        return cls(
            value=_text(action.get("value")),
            user=_text((body.get("user") or {}).get("id")),
            channel=_text(channel),
            thread_ts=_text(container.get("thread_ts")),
            trigger_id=_text(body.get("trigger_id")),
        )


class Replies:
    """The ephemeral answers to one click, by its response_url or through the Web API."""

    def __init__(self, slack: AsyncWebClient, click: Click, respond: AsyncRespond | None) -> None:
        self.slack, self.click, self.respond = slack, click, respond

    async def send(self, payload: dict[str, Any]) -> None:
        """Show `payload` (text and blocks) to the person who clicked, and them only."""
        if (
            self.respond is not None
            and self.respond.response_url
            and await self._responded(payload)
        ):
            return
        await self._post(payload)

    async def open_view(
        self, view: dict[str, Any], instead: Callable[[Mrkdwn], dict[str, Any]]
    ) -> None:
        """Open `view` as a modal; without a trigger_id, or when Slack refuses it, answer with
        `instead(summary)`, where summary is the view's first line."""
        if self.click.trigger_id:
            try:
                await self.slack.views_open(trigger_id=self.click.trigger_id, view=view)
                return
            except SLACK_FAILURES as exc:
                logger.warning("could not open a modal for %s: %s", self.click.user, _why(exc))
        await self.send(instead(_summary(view)))

    async def failed(self) -> None:
        """Log the error being handled and tell the person the click did not go through."""
        logger.exception("a button click failed")
        await self.send(
            refusal(
                "Something went wrong on our side; nothing was changed that you were not told "
                "about.",
                hint="Try again in a minute; the error is in the bot's log.",
            )
        )

    async def _responded(self, payload: dict[str, Any]) -> bool:
        assert self.respond is not None
        try:
            reply = await self.respond(response_type="ephemeral", replace_original=False, **payload)
        except SLACK_FAILURES as exc:
            logger.warning("a click's response_url failed (%s); answering another way", _why(exc))
            return False
        if reply.status_code != 200:  # used up or expired: Slack answers 404 or 410
            logger.warning(
                "a click's response_url answered %s; answering another way", reply.status_code
            )
            return False
        return True

    async def _post(self, payload: dict[str, Any]) -> None:
        click = self.click
        message = {k: payload[k] for k in ("text", "blocks") if k in payload}
        if click.channel:
            try:
                await self.slack.chat_postEphemeral(
                    channel=click.channel,
                    user=click.user,
                    thread_ts=click.thread_ts or None,
                    **message,
                )
                return
            except SLACK_FAILURES as exc:  # not a member there, or the channel is gone
                logger.warning(
                    "could not answer %s in %s: %s", click.user, click.channel, _why(exc)
                )
        try:
            await self.slack.chat_postMessage(channel=click.user, **message)  # their DM
        except SLACK_FAILURES as exc:
            logger.warning("could not answer %s's click at all: %s", click.user, _why(exc))


def _why(exc: BaseException) -> str:
    """Slack's error code, or the exception's name and message, in one short line."""
    code = exc.response.get("error") if isinstance(exc, SlackApiError) else None
    return str(code) if code else f"{type(exc).__name__}: {str(exc)[:200]}"


def _summary(view: dict[str, Any]) -> Mrkdwn:
    """The first line of a view the bot rendered (mrkdwn already: escaped when rendered)."""
    blocks = view.get("blocks") or [{}]
    text = (blocks[0].get("text") or {}).get("text")
    return Mrkdwn(text if isinstance(text, str) else "")
