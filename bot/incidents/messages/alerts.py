"""Messages of the watcher: an incident's alert (posted once, then edited in place) and the
replies in its thread. View models here, layout in templates/incidents/incident_alert.json.j2 and
templates/incidents/incident_reply.json.j2.

Replies are built here from the facts: the DAG ids, request ids and intervals in them are
escaped (and cannot end a code span), the mentions the bot built stay live."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from bot.backfill.messages.backfill import IN_ALERT
from bot.backfill.rules.progress import duration_text
from bot.incidents.rules.proposal import Proposal
from bot.lineage.rules.impact import ImpactSnapshot, ImpactStatus
from bot.slack.messages.render import (
    LIST,
    NAME,
    SENTENCE,
    Mrkdwn,
    as_mrkdwn,
    clip,
    clip_sentence,
    code,
    mention,
    plural,
    render,
    sentence,
    user_mention,
    web_url,
)

_LISTED = 8  # DAGs or reports named in an alert before "and N more"
_MENTIONS = 20  # mentions in an alert's "Affects" line
_GROUPED = 20  # DAGs named in a "joined this incident" reply
_GROUPED_NAME = 130  # each of them, so that 20 fit one section
_INTERVAL = 200  # an interval in words (outage_words of two manual runs is about 170)
_CONFIRM_DAG = 60  # the DAG id in the confirm dialog, which holds 300 characters
_PROBLEMS = 2_600  # a data incident's findings, one section


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
    problems: tuple[tuple[Mrkdwn, bool], ...] = ()
    """A data incident's findings in words, each with whether a later run put it right."""
    data: bool = False
    """A data incident: the runs completed, with bad data (`problems`)."""


def _names(items: Sequence[str], noun: str, total: int | None = None) -> str:
    """The first names and how many more (`total`: all there are, when `items` is the first
    of them)."""
    if not items:
        return "none"
    shown = ", ".join(items[:_LISTED])
    more = (len(items) if total is None else max(total, len(items))) - _LISTED
    return f"{shown} and {more} more {noun}" if more > 0 else shown


def _downstream(impact: ImpactSnapshot) -> str:
    if impact.status == ImpactStatus.PENDING:
        return "being worked out…"
    if impact.status == ImpactStatus.UNAVAILABLE:
        return f"unknown ({impact.error})" if impact.error else "unknown"
    downstream = [d.dag_id for d in impact.downstream]
    return (
        _names(downstream, "DAGs", impact.downstream_count) if downstream else "nothing downstream"
    )


def alert(view: AlertView) -> dict[str, Any]:
    """The incident's alert as it should look now (posted once, then sent with chat.update)."""
    impact = view.impact
    reports = [f"{r.name} ({r.team or 'no team'})" for r in impact.reports]
    page = {
        "incident_id": view.incident_id,
        "dag_id": clip(view.dag_id, NAME),
        "namespace": clip(view.namespace, NAME),
        "interval": clip(view.interval, _INTERVAL),
        "emoji": ":rotating_light:" if view.open else ":white_check_mark:",
        "headline": _headline(view),
        "owners": clip(", ".join(impact.root_owners) or "no team", LIST),
        "failures": view.failures,
        "error": clip(view.error, 1500) if view.error else "",
        "error_job": clip(view.error_job, NAME)
        if view.error and view.error_job and view.error_job != view.dag_id
        else "",
        "downstream": clip(_downstream(impact), 1200),
        "reports": clip(_names(reports, "reports"), 800),
        "datasets": str(impact.datasets_count),
        "mentions": _mentions(view.mentions[:_MENTIONS], 1000),
        "grouped": view.grouped,
        "grouped_text": plural(view.grouped, "downstream failure") + " joined",
        "grouped_dags": clip(_names(list(view.grouped_dags), "DAGs"), 800),
        "backfill": clip(view.backfill, 64) if view.backfill else "",
        "snoozed": view.snoozed_until.strftime("%Y-%m-%d %H:%M UTC")
        if view.open and view.snoozed_until
        else "",
        "snoozed_by": user_mention(view.snoozed_by) if view.snoozed_by else "",
        "open": view.open,
        "marquez_url": web_url(view.marquez_url),
        "facts": _facts(view),
        "airflow_url": web_url(view.airflow_url),
        "log_url": web_url(view.log_url),
        "acknowledged_by": user_mention(view.acknowledged_by) if view.acknowledged_by else "",
        "proposal": _proposal_words(view.proposal) if view.proposal else "",
        "confirm": _confirm_words(view),
        "backfill_state": IN_ALERT.get(view.backfill_state or "", "requested"),
        "recovered": view.recovered,
        "downstream_count": impact.downstream_count,
        "problems": _problems(view.problems),
        "data": view.data,
    }
    return render("incidents/incident_alert.json.j2", page)


def _headline(view: AlertView) -> str:
    what = "wrote bad data" if view.data else "failed"
    if view.open:
        return what
    return f"{what}, now resolved on its own" if view.recovered else f"{what}, now resolved"


def _problems(problems: Sequence[tuple[Mrkdwn, bool]]) -> Mrkdwn:
    """A data incident's findings, one per line, those put right marked so (within a section's
    3,000 characters)."""
    lines = [Mrkdwn(f"• {line}" + (" _(put right)_" if right else "")) for line, right in problems]
    shown: list[str] = []
    size = 0
    for line in lines:
        if size + len(line) + 1 > _PROBLEMS:
            shown.append(f"… and {len(lines) - len(shown)} more")
            break
        shown.append(line)
        size += len(line) + 1
    return Mrkdwn("\n".join(shown))


def _facts(view: AlertView) -> str:
    """When it failed and which try, for the responder (plain text, escaped in the template)."""
    parts = []
    if view.failed_at is not None:
        what = "Last bad run" if view.data else "Last failed"
        parts.append(f"{what} {view.failed_at:%Y-%m-%d %H:%M} UTC")
    if view.try_number is not None:
        parts.append(f"try {view.try_number}")
    return " · ".join(parts)


def _proposal_words(proposal: Proposal) -> str:
    runs = plural(proposal.runs, "run")
    if proposal.planned:
        head = f"{plural(proposal.dags, 'DAG')} · {runs}"
    else:  # the click plans with each DAG's own schedule: its counts may differ
        head = f"{plural(proposal.dags, 'DAG')} · about {runs} (estimated: planned on click)"
    if proposal.estimate is None:
        return f"{head} · no run history to estimate the time from"
    took = duration_text(proposal.estimate)
    if proposal.unknown:
        return f"{head} · at least {took} ({plural(proposal.unknown, 'DAG')} without run history)"
    return f"{head} · about {took}, from run history"


def _confirm_words(view: AlertView) -> Mrkdwn:
    """The confirm dialog of Approve backfill / Backfill downstream: what starts at once
    (within the dialog's 300 characters: the DAG id and the interval are cut)."""
    others = plural(view.impact.downstream_count, "DAG")
    dag = code(view.dag_id, _CONFIRM_DAG)
    when = clip(view.interval, 120)
    if view.recovered:
        what = sentence("Rerun the {} downstream of {}", others, dag)
    else:
        what = sentence("Rerun {} and {} downstream", dag, others)
    return sentence("{} for {}? It starts at once; progress follows in the thread.", what, when)


# --- replies in the alert's thread ----------------------------------------------------------


def _reply(line: Mrkdwn) -> dict[str, Any]:
    """A thread reply whose `line` is mrkdwn already escaped where it needed to be."""
    return render("incidents/incident_reply.json.j2", {"text": line})


def _mentions(items: Sequence[str], budget: int) -> Mrkdwn:
    """The mentions the bot built, live, separated by spaces, within `budget` characters
    (anything that is not a mention is shown escaped)."""
    shown: list[str] = []
    size = 0
    for item in items:
        text = mention(clip(item, NAME))
        if size + len(text) + 1 > budget:
            break
        shown.append(text)
        size += len(text) + 1
    more = len(items) - len(shown)
    return Mrkdwn(" ".join(shown) + (f" and {more} more" if more else ""))


def reply(text: str) -> dict[str, Any]:
    """A thread reply saying `text`: a plain `str` shown as written (escaped as a whole),
    `Mrkdwn` (`sentence`) with the mentions the bot built in it live."""
    return _reply(as_mrkdwn(clip_sentence(text, SENTENCE)))


def impact_known(downstream: int, mentions: Sequence[str]) -> dict[str, Any]:
    """The impact was edited into the alert: an edit notifies nobody, so the reply mentions
    the affected teams."""
    head = f"Impact worked out: {plural(downstream, 'downstream DAG')}. Affects "
    return _reply(sentence(head + "{}", _mentions(mentions, SENTENCE - len(head))))


def failed_again() -> dict[str, Any]:
    """A resolved incident failed again (the alert is edited back to open)."""
    return _reply(sentence("It failed again after it had resolved."))


def grouped(count: int, dag_ids: Sequence[str]) -> dict[str, Any]:
    """`count` failures downstream joined the incident; the first distinct DAGs by name."""
    names = sorted(set(dag_ids))
    listed = Mrkdwn(", ".join(code(n, _GROUPED_NAME) for n in names[:_GROUPED]))
    more = f" and {len(names) - _GROUPED} more" if len(names) > _GROUPED else ""
    line = sentence("{} failure(s) downstream joined this incident: {}{}", count, listed, more)
    return _reply(line)


def resolved(dag_id: str, interval: str, backfill: str | None) -> dict[str, Any]:
    """The DAG succeeded for the failed interval (after a backfill, when one was asked for)."""
    by = sentence(" (backfill {})", clip(backfill, 64)) if backfill else ""
    when = clip(interval, NAME)
    return _reply(sentence("Resolved: {} succeeded for {}{}.", code(dag_id), when, by))


def bad_data_again() -> dict[str, Any]:
    """A resolved data incident: a later run wrote bad data again."""
    return _reply(sentence("A later run wrote bad data again after it had resolved."))


def data_resolved(dag_id: str, interval: str, backfill: str | None) -> dict[str, Any]:
    """Later runs of the bad intervals put every finding right."""
    by = sentence(" (backfill {})", clip(backfill, 64)) if backfill else ""
    when = clip(interval, NAME)
    return _reply(
        sentence("Resolved: later runs of {} put its data right for {}{}.", code(dag_id), when, by)
    )


def snoozed(user: str, hours: int) -> dict[str, Any]:
    return _reply(sentence("{} snoozed this incident for {} h.", user_mention(user), hours))


def unsnoozed(user: str) -> dict[str, Any]:
    return _reply(sentence("{} ended the snooze: new failures alert again.", user_mention(user)))


def acknowledged(user: str) -> dict[str, Any]:
    return _reply(sentence(":eyes: {} is on it.", user_mention(user)))


def backfill_asked(user: str, request_id: str) -> dict[str, Any]:
    return _reply(
        sentence(
            "{} asked for backfill {}; its plan is in this thread.",
            user_mention(user),
            code(request_id, 64),
        )
    )
