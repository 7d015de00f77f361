"""`/backfill`: ack within Slack's 3 seconds, then answer the person ephemerally."""

from __future__ import annotations

import logging
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncRespond

from bot.app_services import Services
from bot.backfill.messages import answers as backfill_answers
from bot.backfill.messages.backfill import help_message
from bot.core.progress import with_notice
from bot.hub.messages import subscriptions as subscription_answers
from bot.slack.messages.common import acknowledgement, refusal
from bot.slack.rules.commands import (
    CancelCommand,
    Command,
    CommandError,
    HelpCommand,
    HistoryCommand,
    PauseCommand,
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
            payload = await _answered(services, parsed, user=user, channel=channel, respond=respond)
        except Exception:
            logger.exception("/backfill %r failed", command.get("text"))
            reply_payload = refusal(
                "Something went wrong on our side; the error is in the bot's log.",
                hint="Try again in a minute.",
            )
            await respond(response_type="ephemeral", **reply_payload)
            return
        await respond(response_type="ephemeral", **payload)


async def _answered(
    services: Services, parsed: Command, *, user: str, channel: str, respond: AsyncRespond
) -> dict[str, Any]:
    """Call the service the command names, and its capability's words for the outcome."""
    if isinstance(parsed, PlanCommand):
        preview = await with_notice(
            services.backfills.preview(parsed, user=user, channel=channel),
            after_s=services.config.limits.still_planning_s,
            notice=lambda: respond(
                response_type="ephemeral", **backfill_answers.still_planning(parsed.dag)
            ),
        )
        return backfill_answers.answer(preview)
    if isinstance(parsed, StatusCommand):
        status = await services.backfills.lookup.status(
            parsed.request_id, user=user, channel=channel
        )
        return backfill_answers.answer(status)
    if isinstance(parsed, SubscribeCommand):
        added = await services.subscriptions.subscribe(parsed, user=user, channel=channel)
        return subscription_answers.answer(added)
    if isinstance(parsed, SubscriptionsCommand):
        listed = await services.subscriptions.list(user=user, channel=channel)
        return subscription_answers.answer(listed)
    if isinstance(parsed, UnsubscribeCommand):
        removed = await services.subscriptions.unsubscribe(
            parsed.subscription_id, user=user, channel=channel
        )
        return subscription_answers.answer(removed)
    if isinstance(parsed, HistoryCommand):
        return await services.verifier.history(parsed.subject)
    if isinstance(parsed, PauseCommand):
        control = services.backfills.control
        act = control.resume if parsed.resume else control.pause
        changed = await act(parsed.request_id, user=user, channel=channel, command=True)
        return backfill_answers.answer(changed)
    assert isinstance(parsed, CancelCommand)
    cancelled = await services.backfills.cancel(
        parsed.request_id, user=user, channel=channel, command=True
    )
    return backfill_answers.answer(cancelled)
