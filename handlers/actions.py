"""Buttons: Approve, Cancel, Retry, Show full plan (a request id each), and an incident alert's
Approve backfill, Review plan, Backfill downstream, Acknowledge, Snooze, Unsnooze, the older
Backfill, and its links (an incident id each). Services reload what the id names on every
click, and act only if it belongs to the channel the click came from (passed as `channel`)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Coroutine
from functools import partial
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncRespond
from slack_sdk.web.async_client import AsyncWebClient

from bot.app_services import Services
from bot.backfill.messages.backfill import plan_modal
from bot.slack.messages.common import refusal
from bot.slack.messages.reply import Reply
from bot.slack.rules.ids import ActionId

logger = logging.getLogger(__name__)
Listener = Callable[[AsyncAck, dict[str, Any], AsyncRespond], Coroutine[Any, Any, None]]


def _clicked(body: dict[str, Any]) -> tuple[str, str, str]:
    """(the button's value, who clicked, the channel of the message clicked; "" if none)."""
    actions = body.get("actions") or [{}]
    value = str(actions[0].get("value") or "")
    user = str((body.get("user") or {}).get("id") or "")
    container = body.get("container") or {}
    channel = str((body.get("channel") or {}).get("id") or container.get("channel_id") or "")
    return value, user, channel


async def _say_failed(respond: AsyncRespond) -> None:
    logger.exception("a button click failed")
    payload = refusal(
        "Something went wrong on our side; nothing was changed that you were not told about.",
        hint="Try again in a minute; the error is in the bot's log.",
    )
    await respond(response_type="ephemeral", replace_original=False, **payload)


def register(app: AsyncApp, services: Services) -> None:
    async def decide(
        decision: Callable[..., Awaitable[Reply]], body: dict[str, Any], respond: AsyncRespond
    ) -> None:
        value, user, channel = _clicked(body)
        try:
            reply = await decision(value, user=user, channel=channel)
        except Exception:
            await _say_failed(respond)
            return
        await respond(response_type="ephemeral", replace_original=False, **reply.payload)

    def on_click(decision: Callable[..., Awaitable[Reply]]) -> Listener:
        """A listener for a button whose whole answer is the service's ephemeral reply."""

        async def listener(ack: AsyncAck, body: dict[str, Any], respond: AsyncRespond) -> None:
            await ack()
            await decide(decision, body, respond)

        return listener

    # Buttons whose value is an id and whose answer is one ephemeral sentence.
    decisions: dict[ActionId, Callable[..., Awaitable[Reply]]] = {
        ActionId.APPROVE: services.backfills.approve,
        ActionId.CANCEL: services.backfills.cancel,
        ActionId.RETRY: services.retries.retry,
        ActionId.INCIDENT_APPROVE: services.incident_actions.approve,
        ActionId.INCIDENT_DOWNSTREAM: services.incident_actions.downstream,
        ActionId.INCIDENT_BACKFILL: services.incident_actions.backfill,
        ActionId.INCIDENT_ACK: services.incident_actions.acknowledge,
        ActionId.INCIDENT_SNOOZE_1H: partial(services.incident_actions.snooze, hours=1),
        ActionId.INCIDENT_SNOOZE_24H: partial(services.incident_actions.snooze, hours=24),
        ActionId.INCIDENT_UNSNOOZE: services.incident_actions.unsnooze,
    }
    for action_id, decision in decisions.items():
        app.action(action_id)(on_click(decision))

    @app.action(ActionId.INCIDENT_REVIEW)
    async def review_plan(
        ack: AsyncAck, body: dict[str, Any], client: AsyncWebClient, respond: AsyncRespond
    ) -> None:
        await ack()
        incident_id, user, channel = _clicked(body)
        try:
            plan = await services.incident_actions.review(incident_id, user=user, channel=channel)
            if isinstance(plan, Reply):
                await respond(response_type="ephemeral", replace_original=False, **plan.payload)
                return
            view = plan_modal(plan, request_id="")
            await client.views_open(trigger_id=body["trigger_id"], view=view)
        except Exception:
            await _say_failed(respond)

    @app.action(ActionId.SLA_ACK)
    async def acknowledge_sla(ack: AsyncAck, body: dict[str, Any], respond: AsyncRespond) -> None:
        await ack()
        message: dict[str, Any] = body.get("message") or {}
        ts = str(message.get("ts") or (body.get("container") or {}).get("message_ts") or "")
        acknowledge = partial(services.sla.acknowledge, ts=ts, message=message)
        await decide(acknowledge, body, respond)  # the channel is the clicked notice's

    @app.action(ActionId.INCIDENT_MARQUEZ)
    @app.action(ActionId.SLA_AIRFLOW)
    @app.action(ActionId.SLA_MARQUEZ)
    @app.action(ActionId.INCIDENT_AIRFLOW)
    @app.action(ActionId.INCIDENT_LOG)
    async def open_link(ack: AsyncAck) -> None:
        await ack()  # a link button: Slack opens the URL, the bot only acknowledges

    @app.action(ActionId.SHOW_PLAN)
    async def show_plan(
        ack: AsyncAck, body: dict[str, Any], client: AsyncWebClient, respond: AsyncRespond
    ) -> None:
        await ack()
        request_id, user, channel = _clicked(body)
        try:
            plan = await services.backfills.show_plan(request_id, user=user, channel=channel)
            if isinstance(plan, Reply):
                await respond(response_type="ephemeral", replace_original=False, **plan.payload)
                return
            view = plan_modal(plan, request_id=request_id)
            await client.views_open(trigger_id=body["trigger_id"], view=view)
        except Exception:
            await _say_failed(respond)
