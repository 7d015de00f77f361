"""Messages of the watcher: an incident's alert (posted once, then edited in place) and the
replies in its thread. View models here, layout in templates/watch/."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from bot import messages
from bot.render import environment
from bot.slack_ids import ActionId, BlockId
from bot.slack_limits import check_message

_LISTED = 8  # DAGs or reports named in an alert before "and N more"


def interval_words(start: datetime | None, end: datetime | None) -> str:
    """A run's interval as a person says it: a day, a span, or one logical date."""
    if start is None:
        return "an unknown interval"
    if end is not None and end == start:
        # Airflow gives a manual or triggered run one logical date, not an interval.
        return (
            f"the run of {start:%Y-%m-%d %H:%M} UTC (one logical date: a manual or triggered run)"
        )
    if end is None or (end - start == timedelta(days=1) and start.hour == 0 and start.minute == 0):
        return start.date().isoformat()
    return f"{start:%Y-%m-%d %H:%M} → {end:%Y-%m-%d %H:%M}"


@dataclass(frozen=True)
class AlertView:
    incident_id: str
    namespace: str
    dag_id: str
    interval: str
    open: bool
    failures: int
    error: str | None
    impact: dict[str, Any]
    mentions: tuple[str, ...]
    """Slack mentions of the affected teams, e.g. `<!subteam^S0ANALYTIC>` or `<@U0ALICE>`."""
    grouped: int
    """How many failures downstream joined this incident."""
    grouped_dags: Sequence[str]
    """Distinct DAGs among them (as far as they were loaded)."""
    backfill: str | None
    snoozed_until: datetime | None
    snoozed_by: str | None
    marquez_url: str
    error_job: str | None = None
    """The task or job whose failure `error` is, when it is not the DAG itself."""


def _names(items: Sequence[str], noun: str) -> str:
    if not items:
        return "none"
    shown = ", ".join(items[:_LISTED])
    more = len(items) - _LISTED
    return f"{shown} and {more} more {noun}" if more > 0 else shown


def alert(view: AlertView) -> dict[str, Any]:
    impact = view.impact
    downstream = [d["dag_id"] for d in impact.get("downstream", [])]
    reports = [f"{r['name']} ({r['team']})" for r in impact.get("reports", [])]
    if impact.get("pending"):
        downstream_text = "being worked out…"
    elif impact.get("error"):
        downstream_text = f"unknown ({impact['error']})"
    else:
        downstream_text = _names(downstream, "DAGs") if downstream else "nothing downstream"
    page = {
        "incident_id": view.incident_id,
        "dag_id": messages.clip(view.dag_id, messages.NAME),
        "namespace": messages.clip(view.namespace, messages.NAME),
        "interval": view.interval,
        "emoji": ":rotating_light:" if view.open else ":white_check_mark:",
        "headline": "failed" if view.open else "failed, now resolved",
        "owners": messages.clip(impact.get("root_owners") or "no team", messages.LIST),
        "failures": view.failures,
        "error": messages.clip(view.error, 1500) if view.error else "",
        "error_job": messages.clip(view.error_job, messages.NAME)
        if view.error and view.error_job and view.error_job != view.dag_id
        else "",
        "downstream": messages.clip(downstream_text, 1200),
        "reports": messages.clip(_names(reports, "reports"), 800),
        "datasets": str(len(impact.get("datasets", []))),
        "mentions": " ".join(view.mentions[:20]),
        "grouped": view.grouped,
        "grouped_text": messages.plural(view.grouped, "downstream failure") + " joined",
        "grouped_dags": messages.clip(_names(list(view.grouped_dags), "DAGs"), 800),
        "backfill": view.backfill or "",
        "snoozed": view.snoozed_until.strftime("%Y-%m-%d %H:%M UTC")
        if view.open and view.snoozed_until
        else "",
        "snoozed_by": view.snoozed_by or "",
        "open": view.open,
        "marquez_url": view.marquez_url,
    }
    return _render("watch/incident_alert.json.j2", page)


def reply(text: str) -> dict[str, Any]:
    """A thread reply; `text` is the bot's own sentence (mentions kept, the rest escaped)."""
    return _render(
        "watch/incident_reply.json.j2",
        {"text": messages.escape_keeping_mentions(messages.clip(text, messages.SENTENCE))},
    )


def _render(template: str, view: dict[str, Any]) -> dict[str, Any]:
    text = environment().get_template(template).render(**view, ActionId=ActionId, BlockId=BlockId)
    payload: dict[str, Any] = json.loads(text)
    check_message(payload)
    return payload
