"""Buttons: Approve, Cancel, Retry, Pause, Resume, Show full plan (a request id each), and an
incident alert's Approve backfill, Review plan, Backfill downstream, Acknowledge, Snooze,
Unsnooze, the older Backfill, and its links (an incident id each). Services reload what the id
names on every click, and act only if it belongs to the channel the click came from (passed as
`channel`); each answers with an outcome, which this module turns into the ephemeral reply
through the capability's `answers`, sent back by handlers/_replies.py (by the click's
response_url, or through the Web API when the click came without one)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from functools import partial
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncBoltContext, AsyncRespond

from bot.app_services import Services
from bot.backfill.messages import answers as backfill_answers
from bot.backfill.messages.backfill import plan_modal
from bot.backfill.messages.options_form import options_modal
from bot.backfill.rules.options import default_rerun
from bot.backfill.rules.outcomes import ToReview
from bot.incidents.messages import answers as incident_answers
from bot.lineage.rules.planner import Plan
from bot.sla import messages as sla_messages
from bot.slack.messages.clicks import plan_not_opened
from bot.slack.rules.ids import ActionId
from handlers._replies import Click, Replies

Listener = Callable[
    [AsyncAck, dict[str, Any], AsyncRespond, AsyncBoltContext], Coroutine[Any, Any, None]
]
Answer = Callable[[Any], dict[str, Any]]


def register(app: AsyncApp, services: Services) -> None:
    def replies(body: dict[str, Any], respond: AsyncRespond) -> Replies:
        return Replies(services.slack, Click.of(body), respond)

    async def decide(
        decision: Callable[..., Awaitable[Any]],
        answer: Answer,
        body: dict[str, Any],
        respond: AsyncRespond,
        context: AsyncBoltContext,
    ) -> None:
        """Decide, answer, and only then mark the click handled: a bot killed before that
        replays it (bot/slack/service/clicks.py)."""
        reply = replies(body, respond)
        click = reply.click
        try:
            payload = answer(await decision(click.value, user=click.user, channel=click.channel))
        except Exception:
            await reply.failed()
        else:
            await reply.send(payload)
        await services.clicks.handled(context)

    def on_click(decision: Callable[..., Awaitable[Any]], answer: Answer) -> Listener:
        """A listener for a button whose whole answer is the service's ephemeral reply."""

        async def listener(
            ack: AsyncAck, body: dict[str, Any], respond: AsyncRespond, context: AsyncBoltContext
        ) -> None:
            await ack()
            await decide(decision, answer, body, respond, context)

        return listener

    # Buttons whose value is an id and whose answer is one ephemeral sentence.
    backfills, alerts = services.backfills, services.incident_actions
    decisions: dict[ActionId, tuple[Callable[..., Awaitable[Any]], Answer]] = {
        ActionId.APPROVE: (backfills.approve, backfill_answers.answer),
        ActionId.CANCEL: (backfills.cancel, backfill_answers.answer),
        ActionId.RETRY: (services.retries.retry, backfill_answers.answer),
        ActionId.RETRY_TASKS: (
            partial(services.retries.retry, tasks=True),
            backfill_answers.answer,
        ),
        ActionId.PAUSE: (backfills.control.pause, backfill_answers.answer),
        ActionId.RESUME: (backfills.control.resume, backfill_answers.answer),
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

    ViewOf = Callable[[Any, Click], tuple[dict[str, Any], str] | None]

    async def open_modal(
        find: Callable[..., Awaitable[Any]],
        answer: Answer,
        view_of: ViewOf,
        body: dict[str, Any],
        respond: AsyncRespond,
    ) -> None:
        """What `find` answers the click, in a modal (`view_of`: the view and the request it
        shows, or None when `find` answered why there is nothing to show): summed up in an
        ephemeral message when no modal can open, or the reply saying why there is none."""
        reply = replies(body, respond)
        click = reply.click
        try:
            found = await find(click.value, user=click.user, channel=click.channel)
            shown = view_of(found, click)
            if shown is None:
                await reply.send(answer(found))
                return
            view, request_id = shown
            await reply.open_view(view, partial(plan_not_opened, request_id=request_id))
        except Exception:
            await reply.failed()

    def default() -> str:
        return default_rerun(services.config.execution.airflow.reprocess_behavior)

    def plan_view(request_id: str) -> ViewOf:
        def view_of(found: Any, click: Click) -> tuple[dict[str, Any], str] | None:
            if not isinstance(found, Plan):
                return None
            return plan_modal(found, request_id=request_id), request_id

        return view_of

    def alert_options(found: Any, click: Click) -> tuple[dict[str, Any], str] | None:
        if not isinstance(found, Plan):
            return None
        target = {"incident": click.value, "channel": click.channel}
        view = options_modal(
            found, metadata=target, options=None, start_at=None, default_rerun=default(),
            submit="Preview backfill",
        )  # fmt: skip
        return view, ""

    def preview_options(found: Any, click: Click) -> tuple[dict[str, Any], str] | None:
        if not isinstance(found, ToReview):
            return None
        view = options_modal(
            found.plan, metadata={"request": found.of, "channel": click.channel},
            options=found.options, start_at=found.start_at, default_rerun=default(),
            submit="Update plan",
        )  # fmt: skip
        return view, found.of

    @app.action(ActionId.INCIDENT_REVIEW)
    async def review_plan(ack: AsyncAck, body: dict[str, Any], respond: AsyncRespond) -> None:
        """The plan Approve backfill would run, with its options to choose (Review plan)."""
        await ack()
        await open_modal(alerts.review, incident_answers.answer, alert_options, body, respond)

    @app.action(ActionId.REVIEW)
    async def review_preview(ack: AsyncAck, body: dict[str, Any], respond: AsyncRespond) -> None:
        """A preview's plan and options in a modal, to change them before approval."""
        await ack()
        review = backfills.revisions.review
        await open_modal(review, backfill_answers.answer, preview_options, body, respond)

    @app.action(ActionId.OPTION)
    async def option_changed(ack: AsyncAck) -> None:
        await ack()  # an input of Review plan: only its submission acts

    @app.action(ActionId.SLA_ACK)
    async def acknowledge_sla(
        ack: AsyncAck, body: dict[str, Any], respond: AsyncRespond, context: AsyncBoltContext
    ) -> None:
        await ack()
        message: dict[str, Any] = body.get("message") or {}
        ts = str(message.get("ts") or (body.get("container") or {}).get("message_ts") or "")
        acknowledge = partial(services.sla.acknowledge, ts=ts, message=message)
        # the channel is the clicked notice's
        await decide(acknowledge, sla_messages.answer, body, respond, context)

    @app.action(ActionId.INCIDENT_MARQUEZ)
    @app.action(ActionId.SLA_AIRFLOW)
    @app.action(ActionId.SLA_MARQUEZ)
    @app.action(ActionId.INCIDENT_AIRFLOW)
    @app.action(ActionId.INCIDENT_LOG)
    async def open_link(ack: AsyncAck) -> None:
        await ack()  # a link button: Slack opens the URL, the bot only acknowledges

    @app.action(ActionId.SHOW_PLAN)
    async def show_plan(ack: AsyncAck, body: dict[str, Any], respond: AsyncRespond) -> None:
        await ack()
        request_id = Click.of(body).value
        view = plan_view(request_id)
        await open_modal(backfills.lookup.show_plan, backfill_answers.answer, view, body, respond)
