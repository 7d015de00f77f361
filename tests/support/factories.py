"""Small factories for the bot's parts, built with every collaborator they require, as the
composition root (`bot/app.py`) builds them: a test names only what it changes."""

from __future__ import annotations

from typing import Any

from slack_sdk.web.async_client import AsyncWebClient
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.app import SLACK_PARENTS
from bot.slack.service.sender import OutboxSender

Sessions = async_sessionmaker[AsyncSession]


def outbox_sender(sessions: Sessions, client: AsyncWebClient, **options: Any) -> OutboxSender:
    """The Slack sender, with the bot's parents of outbox rows (status messages, alerts)."""
    return OutboxSender(sessions, client, parents=SLACK_PARENTS, **options)
