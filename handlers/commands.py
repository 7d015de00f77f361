"""`/backfill`: ack within Slack's 3 seconds, then answer the person ephemerally."""

from __future__ import annotations

import logging
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncRespond

from bot.app_services import Services
from bot.backfill.messages.backfill import help_message
from bot.slack.messages.common import acknowledgement, refusal
from bot.slack.rules.commands import (
    CancelCommand,
    CommandError,
    HelpCommand,
    PlanCommand,
    StatusCommand,
    SubscribeCommand,
    SubscriptionsCommand,
    UnsubscribeCommand,
    parse_command,
)

logger = logging.getLogger(__name__)
BACKFILL = "/backfill"


def register(app: AsyncApp, services: Services) -> None:
    @app.command(BACKFILL)
    async def backfill(ack: AsyncAck, command: dict[str, Any], respond: AsyncRespond) -> None:
        user, channel = command.get("user_id", ""), command.get("channel_id", "")
        try:
            parsed = parse_command(command.get("text", ""))
        except CommandError as exc:
            await ack(**refusal(str(exc), hint=f"Type `{BACKFILL} help` for examples."))
            await services.backfills.audit_refusal(user, str(exc), command.get("text", ""))
            return
        if isinstance(parsed, HelpCommand):
            await ack(**help_message(BACKFILL))
            return
        if isinstance(parsed, PlanCommand):
            await ack(**acknowledgement(f"Planning {parsed.dag} {parsed.range_text} …"))
        else:
            await ack()
        try:
            if isinstance(parsed, PlanCommand):
                reply = await services.backfills.preview(parsed, user=user, channel=channel)
            elif isinstance(parsed, StatusCommand):
                reply = await services.backfills.status(
                    parsed.request_id, user=user, channel=channel
                )
            elif isinstance(parsed, SubscribeCommand):
                reply = await services.subscriptions.subscribe(parsed, user=user, channel=channel)
            elif isinstance(parsed, SubscriptionsCommand):
                reply = await services.subscriptions.list(user=user, channel=channel)
            elif isinstance(parsed, UnsubscribeCommand):
                reply = await services.subscriptions.unsubscribe(
                    parsed.subscription_id, user=user, channel=channel
                )
            else:
                assert isinstance(parsed, CancelCommand)
                reply = await services.backfills.cancel(
                    parsed.request_id, user=user, channel=channel, command=True
                )
        except Exception:
            logger.exception("/backfill %r failed", command.get("text"))
            reply_payload = refusal(
                "Something went wrong on our side; the error is in the bot's log.",
                hint="Try again in a minute.",
            )
            await respond(response_type="ephemeral", **reply_payload)
            return
        await respond(response_type="ephemeral", **reply.payload)
