"""Messages of the watcher: an incident's alert (posted once, then edited in place) and the
replies in its thread. View models here, layout in templates/watch/incident_alert.json.j2 and
templates/watch/incident_reply.json.j2.

Replies are built here from the facts: the DAG ids, request ids and intervals in them are
escaped (and cannot end a code span), the mentions the bot built stay live."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from bot.domain.impact import ImpactSnapshot, ImpactStatus
from bot.domain.progress import duration_text
from bot.domain.proposal import Proposal
from bot.messages._render import (
    LIST,
    NAME,
    SENTENCE,
    clip,
    escape_code,
    escape_keeping_mentions,
    escape_mrkdwn,
    mention,
    plural,
    render,
    user_mention,
)

_LISTED = 8  # DAGs or reports named in an alert before "and N more"
_MENTIONS = 20  # mentions in an alert's "Affects" line
_GROUPED = 20  # DAGs named in a "joined this incident" reply
_GROUPED_NAME = 130  # each of them, so that 20 fit one section


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


def outage_words(intervals: Sequence[tuple[datetime | None, datetime | None]]) -> str:
    """An outage's failed intervals, oldest first: one as `interval_words` says it, several
    as their first and last (`2021-06-04 to 2021-06-06`)."""
    if not intervals:
        return interval_words(None, None)
    if len(intervals) == 1:
        return interval_words(*intervals[0])
    return f"{interval_words(*intervals[0])} to {interval_words(*intervals[-1])}"


@dataclass(frozen=True)
class AlertView:
    incident_id: str
    namespace: str
    dag_id: str
    interval: str
    open: bool
    failures: int
    error: str | None
    impact: ImpactSnapshot
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
    failed_at: datetime | None = None
    try_number: int | None = None
    airflow_url: str | None = None
    """The failed Airflow run (where Airflow is configured)."""
    log_url: str | None = None
    """The failed task's log in Airflow."""
    acknowledged_by: str | None = None
    acknowledged_at: datetime | None = None
    proposal: Proposal | None = None
    """The backfill Approve backfill would start (None once one is under way or done)."""
    backfill_state: str | None = None
    """The state of `backfill`, the incident's backfill request."""
    recovered: bool = False
    """Resolved by a rerun outside the bot: what is downstream still holds bad data."""


def _names(items: Sequence[str], noun: str) -> str:
    if not items:
        return "none"
    shown = ", ".join(items[:_LISTED])
    more = len(items) - _LISTED
    return f"{shown} and {more} more {noun}" if more > 0 else shown


def _downstream(impact: ImpactSnapshot) -> str:
    if impact.status == ImpactStatus.PENDING:
        return "being worked out…"
    if impact.status == ImpactStatus.UNAVAILABLE:
        return f"unknown ({impact.error})" if impact.error else "unknown"
    downstream = [d.dag_id for d in impact.downstream]
    return _names(downstream, "DAGs") if downstream else "nothing downstream"


def alert(view: AlertView) -> dict[str, Any]:
    """The incident's alert as it should look now (posted once, then sent with chat.update)."""
    impact = view.impact
    reports = [f"{r.name} ({r.team or 'no team'})" for r in impact.reports]
    page = {
        "incident_id": view.incident_id,
        "dag_id": clip(view.dag_id, NAME),
        "namespace": clip(view.namespace, NAME),
        "interval": view.interval,
        "emoji": ":rotating_light:" if view.open else ":white_check_mark:",
        "headline": "failed"
        if view.open
        else "failed, now resolved on its own"
        if view.recovered
        else "failed, now resolved",
        "owners": clip(", ".join(impact.root_owners) or "no team", LIST),
        "failures": view.failures,
        "error": clip(view.error, 1500) if view.error else "",
        "error_job": clip(view.error_job, NAME)
        if view.error and view.error_job and view.error_job != view.dag_id
        else "",
        "downstream": clip(_downstream(impact), 1200),
        "reports": clip(_names(reports, "reports"), 800),
        "datasets": str(len(impact.datasets)),
        "mentions": _mentions(view.mentions[:_MENTIONS], 1000),
        "grouped": view.grouped,
        "grouped_text": plural(view.grouped, "downstream failure") + " joined",
        "grouped_dags": clip(_names(list(view.grouped_dags), "DAGs"), 800),
        "backfill": view.backfill or "",
        "snoozed": view.snoozed_until.strftime("%Y-%m-%d %H:%M UTC")
        if view.open and view.snoozed_until
        else "",
        "snoozed_by": user_mention(view.snoozed_by) if view.snoozed_by else "",
        "open": view.open,
        "marquez_url": _url(view.marquez_url),
        "facts": _facts(view),
        "airflow_url": _url(view.airflow_url),
        "log_url": _url(view.log_url),
        "acknowledged_by": user_mention(view.acknowledged_by) if view.acknowledged_by else "",
        "proposal": _proposal_words(view.proposal) if view.proposal else "",
        "confirm": _confirm_words(view),
        "backfill_state": _BACKFILL_WORDS.get(view.backfill_state or "", "requested"),
        "recovered": view.recovered,
        "downstream_count": len(impact.downstream),
    }
    return render("watch/incident_alert.json.j2", page)


_BACKFILL_WORDS = {
    "previewed": "waiting for approval (see the thread)",
    "approved": "approved",
    "running": "running (progress in the thread)",
    "succeeded": "succeeded",
    "failed": "failed (Retry is in the thread)",
    "cancelled": "cancelled",
}
_URL_MAX = 3000  # Slack's limit for a button's url


def _url(url: str | None) -> str:
    """A link the bot built, if Slack can carry it (a longer one is left out, not the alert)."""
    return url if url and len(url) <= _URL_MAX else ""


def _facts(view: AlertView) -> str:
    """When it failed and which try, for the responder (plain text, escaped in the template)."""
    parts = []
    if view.failed_at is not None:
        parts.append(f"Last failed {view.failed_at:%Y-%m-%d %H:%M} UTC")
    if view.try_number is not None:
        parts.append(f"try {view.try_number}")
    return " · ".join(parts)


def _proposal_words(proposal: Proposal) -> str:
    runs = plural(proposal.runs, "run")
    head = f"{plural(proposal.dags, 'DAG')} · about {runs}"
    if proposal.estimate is None:
        return f"{head} · no run history to estimate the time from"
    took = duration_text(proposal.estimate)
    if proposal.unknown:
        return f"{head} · at least {took} ({plural(proposal.unknown, 'DAG')} without run history)"
    return f"{head} · about {took}, from run history"


def _confirm_words(view: AlertView) -> str:
    """The confirm dialog of Approve backfill / Backfill downstream: what starts at once."""
    others = len(view.impact.downstream)
    dag = escape_code(clip(view.dag_id, NAME))
    if view.recovered:
        what = f"Rerun the {plural(others, 'DAG')} downstream of `{dag}`"
    else:
        what = f"Rerun `{dag}` and {plural(others, 'DAG')} downstream"
    when = escape_mrkdwn(view.interval)
    return f"{what} for {when}? It starts at once; progress follows in the thread."


# --- replies in the alert's thread ----------------------------------------------------------


def _reply(line: str) -> dict[str, Any]:
    """A thread reply whose `line` is mrkdwn already escaped where it needed to be."""
    return render("watch/incident_reply.json.j2", {"text": line})


def _mentions(items: Sequence[str], budget: int) -> str:
    """The mentions the bot built, live, separated by spaces, within `budget` characters."""
    shown: list[str] = []
    size = 0
    for item in items:
        text = mention(clip(item, NAME))
        if size + len(text) + 1 > budget:
            break
        shown.append(text)
        size += len(text) + 1
    more = len(items) - len(shown)
    return " ".join(shown) + (f" and {more} more" if more else "")


def _code(value: str, limit: int = NAME) -> str:
    return f"`{escape_code(clip(value, limit))}`"


def reply(text: str) -> dict[str, Any]:
    """A thread reply; `text` is the bot's own sentence (mentions kept, the rest escaped)."""
    return _reply(escape_keeping_mentions(clip(text, SENTENCE)))


def impact_known(downstream: int, mentions: Sequence[str]) -> dict[str, Any]:
    """The impact was edited into the alert: an edit notifies nobody, so the reply mentions
    the affected teams."""
    head = f"Impact worked out: {plural(downstream, 'downstream DAG')}. Affects "
    return _reply(head + _mentions(mentions, SENTENCE - len(head)))


def failed_again() -> dict[str, Any]:
    """A resolved incident failed again (the alert is edited back to open)."""
    return _reply("It failed again after it had resolved.")


def grouped(count: int, dag_ids: Sequence[str]) -> dict[str, Any]:
    """`count` failures downstream joined the incident; the first distinct DAGs by name."""
    names = sorted(set(dag_ids))
    listed = ", ".join(_code(n, _GROUPED_NAME) for n in names[:_GROUPED])
    more = f" and {len(names) - _GROUPED} more" if len(names) > _GROUPED else ""
    return _reply(f"{count} failure(s) downstream joined this incident: {listed}{more}")


def resolved(dag_id: str, interval: str, backfill: str | None) -> dict[str, Any]:
    """The DAG succeeded for the failed interval (after a backfill, when one was asked for)."""
    by = f" (backfill {escape_mrkdwn(clip(backfill, 64))})" if backfill else ""
    when = escape_mrkdwn(clip(interval, NAME))
    return _reply(f"Resolved: {_code(dag_id)} succeeded for {when}{by}.")


def snoozed(user: str, hours: int) -> dict[str, Any]:
    return _reply(f"{user_mention(user)} snoozed this incident for {hours} h.")


def unsnoozed(user: str) -> dict[str, Any]:
    return _reply(f"{user_mention(user)} ended the snooze: new failures alert again.")


def acknowledged(user: str) -> dict[str, Any]:
    return _reply(f":eyes: {user_mention(user)} is on it.")


def backfill_asked(user: str, request_id: str) -> dict[str, Any]:
    return _reply(
        f"{user_mention(user)} asked for backfill {_code(request_id, 64)}; "
        "its plan is in this thread."
    )
