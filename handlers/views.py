"""Modal submissions: Review plan's options, which change a preview's options or, from an
alert, post a preview with them. Bad values are answered under their inputs before the modal
closes (`response_action: errors`); the outcome is answered to the person ephemerally where the
preview or the alert lives (handlers/_replies.py)."""

from __future__ import annotations

import json
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncBoltContext

from bot.app_services import Services
from bot.backfill.messages import answers as backfill_answers
from bot.backfill.messages.options_form import read_form
from bot.incidents.messages import answers as incident_answers
from bot.slack.rules.ids import ViewCallbackId
from handlers._replies import Click, Replies


def _target(view: dict[str, Any]) -> dict[str, str]:
    try:
        found = json.loads(view.get("private_metadata") or "{}")
    except ValueError:
        return {}
    if not isinstance(found, dict):
        return {}
    return {k: v for k, v in found.items() if isinstance(k, str) and isinstance(v, str)}


def register(app: AsyncApp, services: Services) -> None:
    @app.view(ViewCallbackId.OPTIONS)
    async def options_submitted(
        ack: AsyncAck, body: dict[str, Any], view: dict[str, Any], context: AsyncBoltContext
    ) -> None:
        values = (view.get("state") or {}).get("values") or {}
        choices, errors = read_form(values)
        if choices is not None:
            errors = services.backfills.revisions.errors(choices)
        if errors or choices is None:
            await ack(response_action="errors", errors=errors)
            return
        await ack()
        target = _target(view)
        user = str((body.get("user") or {}).get("id") or "")
        channel = target.get("channel", "")
        reply = Replies(services.slack, Click("", user, channel, "", ""), context.respond)
        try:
            if "request" in target:
                changed = await services.backfills.revisions.revise(
                    target["request"], user=user, channel=channel, choices=choices
                )
                await reply.send(backfill_answers.answer(changed))
            elif "incident" in target:
                made = await services.incident_actions.backfill(
                    target["incident"], user=user, channel=channel, choices=choices
                )
                await reply.send(incident_answers.answer(made))
        except Exception:
            await reply.failed()
