"""Buttons: Approve, Cancel, Retry, Show full plan (a request id each), and an incident alert's
Approve backfill, Review plan, Backfill downstream, Acknowledge, Snooze, Unsnooze, the older
Backfill, and its links (an incident id each). Services reload what the id names on every
click, and act only if it belongs to the channel the click came from (passed as `channel`);
each answers with an outcome, which this module turns into the ephemeral reply through the
capability's `answers`."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Coroutine
from functools import partial
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncRespond
from slack_sdk.web.async_client import AsyncWebClient

from bot.app_services import Services
from bot.backfill.messages import answers as backfill_answers
from bot.backfill.messages.backfill import plan_modal
from bot.incidents.messages import answers as incident_answers
from bot.lineage.rules.planner import Plan
from bot.sla import messages as sla_messages
from bot.slack.messages.common import refusal
from bot.slack.rules.ids import ActionId

logger = logging.getLogger(__name__)
Listener = Callable[[AsyncAck, dict[str, Any], AsyncRespond], Coroutine[Any, Any, None]]
Answer = Callable[[Any], dict[str, Any]]


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
        decision: Callable[..., Awaitable[Any]],
        answer: Answer,
        body: dict[str, Any],
        respond: AsyncRespond,
    ) -> None:
        value, user, channel = _clicked(body)
        try:
            outcome = await decision(value, user=user, channel=channel)
            payload = answer(outcome)
        except Exception:
            await _say_failed(respond)
            return
        await respond(response_type="ephemeral", replace_original=False, **payload)

    def on_click(decision: Callable[..., Awaitable[Any]], answer: Answer) -> Listener:
        """A listener for a button whose whole answer is the service's ephemeral reply."""

        async def listener(ack: AsyncAck, body: dict[str, Any], respond: AsyncRespond) -> None:
            await ack()
            await decide(decision, answer, body, respond)

        return listener

    # Buttons whose value is an id and whose answer is one ephemeral sentence.
    backfills, alerts = services.backfills, services.incident_actions
    decisions: dict[ActionId, tuple[Callable[..., Awaitable[Any]], Answer]] = {
        ActionId.APPROVE: (backfills.approve, backfill_answers.answer),
        ActionId.CANCEL: (backfills.cancel, backfill_answers.answer),
        ActionId.RETRY: (services.retries.retry, backfill_answers.answer),
        ActionId.INCIDENT_APPROVE: (alerts.approve, incident_answers.answer),
        ActionId.INCIDENT_DOWNSTREAM: (alerts.downstream, incident_answers.answer),
        ActionId.INCIDENT_BACKFILL: (alerts.backfill, incident_answers.answer),
        ActionId.INCIDENT_ACK: (alerts.acknowledge, incident_answers.answer),
        ActionId.INCIDENT_SNOOZE_1H: (partial(alerts.snooze, hours=1), incident_answers.answer),
        ActionId.INCIDENT_SNOOZE_24H: (partial(alerts.snooze, hours=24), incident_answers.answer),
        ActionId.INCIDENT_UNSNOOZE: (alerts.unsnooze, incident_answers.answer),
    }
    for action_id, (decision, answer) in decisions.items():
        app.action(action_id)(on_click(decision, answer))

    async def open_plan(
        found: Plan | Any,
        answer: Answer,
        request_id: str,
        body: dict[str, Any],
        client: AsyncWebClient,
        respond: AsyncRespond,
    ) -> None:
        """The plan in a modal, or the reply saying why there is none."""
        if not isinstance(found, Plan):
            await respond(response_type="ephemeral", replace_original=False, **answer(found))
            return
        view = plan_modal(found, request_id=request_id)
        await client.views_open(trigger_id=body["trigger_id"], view=view)

    @app.action(ActionId.INCIDENT_REVIEW)
    async def review_plan(
        ack: AsyncAck, body: dict[str, Any], client: AsyncWebClient, respond: AsyncRespond
    ) -> None:
        await ack()
        incident_id, user, channel = _clicked(body)
        try:
            found = await alerts.review(incident_id, user=user, channel=channel)
            await open_plan(found, incident_answers.answer, "", body, client, respond)
        except Exception:
            await _say_failed(respond)

    @app.action(ActionId.SLA_ACK)
    async def acknowledge_sla(ack: AsyncAck, body: dict[str, Any], respond: AsyncRespond) -> None:
        await ack()
        message: dict[str, Any] = body.get("message") or {}
        ts = str(message.get("ts") or (body.get("container") or {}).get("message_ts") or "")
        acknowledge = partial(services.sla.acknowledge, ts=ts, message=message)
        # the channel is the clicked notice's
        await decide(acknowledge, sla_messages.answer, body, respond)

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
            found = await backfills.show_plan(request_id, user=user, channel=channel)
            await open_plan(found, backfill_answers.answer, request_id, body, client, respond)
        except Exception:
            await _say_failed(respond)
