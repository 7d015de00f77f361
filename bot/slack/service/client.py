"""The bot's Slack Web API client, as `serve` and `doctor` build it from the settings."""

from __future__ import annotations

from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient

from bot.settings import Settings, SetupError


def slack_client(settings: Settings) -> AsyncWebClient:
    """SLACK_BOT_TOKEN's client against SLACK_API_URL (Slack's, or the stand-in's)."""
    if settings.slack_bot_token is None:
        raise SetupError("SLACK_BOT_TOKEN is not set: the bot needs its xoxb- token")
    return AsyncWebClient(
        token=settings.slack_bot_token.get_secret_value(),
        base_url=settings.slack_api_url,
        timeout=20,  # well inside the outbox lease, so a slow post is never sent twice
        retry_handlers=[AsyncRateLimitErrorRetryHandler(max_retry_count=2)],
    )
