"""Every message the bot sends, rendered with values from outside that try to ping people, link
elsewhere, break out of code spans and blocks, and overflow Slack's limits.

Slack makes exactly one thing in mrkdwn live: a `<…>` sequence (`&lt;…&gt;` is text). So the
payload of each message (its `text`, every mrkdwn text object at any depth, confirm dialogs
included) may hold no `<…>` but the mentions and links the bot built: mentions of the ids it
was given as ids (BOT_CONFIG's people, group and channel, the clicking user), links to the
URLs it built. `KINDS` must name every public message function of the capabilities' messages
modules (bot/*/messages) and render every Slack template, so a message added later is checked as
soon as it exists.
"""

from __future__ import annotations

import inspect
import json
import logging
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from types import ModuleType
from typing import Any

import pytest

from bot.backfill.messages import answers as backfill_answers
from bot.backfill.messages import backfill, options_form, progress
from bot.backfill.messages import notices as teams
from bot.backfill.messages import verification as verifying
from bot.backfill.rules import outcomes
from bot.backfill.rules.capacity import Held
from bot.backfill.rules.progress import Counts
from bot.backfill.rules.restated import ReportRestated, verification
from bot.backfill.rules.status import Queued, ReportEstimate, RequestStatus, StepStatus
from bot.backfill.store.models import BackfillRequest, BackfillStep
from bot.core.model import DagRef, DateRange, Interval
from bot.core.templates import environment
from bot.events import messages as ops
from bot.home import messages as home
from bot.hub.messages import health, subscriptions
from bot.hub.rules import subscriptions as subscribing
from bot.incidents.messages import alerts as watch
from bot.incidents.messages import answers as incident_answers
from bot.incidents.messages import subscribers as hub_slack
from bot.incidents.rules import outcomes as alerts_outcomes
from bot.incidents.rules.proposal import Proposal
from bot.lineage.rules.impact import DagImpact, ImpactSnapshot, ImpactStatus, ReportImpact
from bot.lineage.rules.planner import Plan, PlanNote, PlanStep
from bot.ownership import messages as ownership_words
from bot.ownership.rules import Denial, DenialKind
from bot.quality.messages import finding_line
from bot.quality.rules.checks import Finding, FindingKind
from bot.quality.rules.verify import Rewrite, Verdict, Why
from bot.sla import messages as sla
from bot.sla.rules import Miss, NoticeAcknowledged
from bot.slack.messages import common
from bot.slack.messages import ops as ops_notices
from bot.slack.messages import render as _render
from bot.slack.messages.limits import BUTTON_URL, CONFIRM_TEXT
from bot.slack.messages.render import Mrkdwn, channel_mention, code, sentence, user_mention
from tests.support.golden import Case, assert_golden, check, elements, slack_templates

MODULES: tuple[ModuleType, ...] = (
    backfill, backfill_answers, common, health, home, hub_slack, incident_answers, ops,
    ops_notices, options_form, progress, sla, subscriptions, teams, verifying, watch,
)  # fmt: skip
OWNER, GROUP, CHANNEL = "U0OWNER01", "S0GROUP01", "C0ORDERS01"
AIRFLOW = "http://airflow.example.com/"
MARQUEZ = "http://marquez.example.com:3000/"
T0 = datetime(2021, 6, 7, 9, 0, tzinfo=UTC)
DAY = Interval(datetime(2021, 6, 4, tzinfo=UTC), datetime(2021, 6, 5, tzinfo=UTC))
LIVE = re.compile(r"<([^<>]*)>")


@dataclass(frozen=True)
class Values:
    """What outside data may put in a message, one field per kind of place it lands."""

    dag: str
    namespace: str
    error: str
    report: str
    team: str
    user: str
    """What arrives where a Slack user (or channel) id is expected."""
    ident: str
    """A request, incident or SLA miss id, as stored."""
    url: str
    """A URL the bot built from outside ids (percent-encoded or not)."""
    ts: str
    """A Slack message ts."""
    rows: int


HOSTILE = Values(
    dag="etl`<!channel> <@U0EVIL> <!subteam^S0EVIL> <#C0EVIL>`x",
    namespace="ns <!here> & <#C0EVIL> `x",
    error=(
        "Traceback ```\n<!channel> <@U0EVIL> <!subteam^S0EVIL> & <http://evil.example|click>\n"
        "``` then `<!here>` and ``"
    ),
    report="KPIs <http://evil.example|click> <!here> *bold*",
    team="<!subteam^S0EVIL> & co",
    user="U0EVIL> <!channel",
    ident="id`<!channel>|<@U0EVIL>",
    url=AIRFLOW + "dags/x|<!channel> <@U0EVIL>/runs/a b",
    ts="1622764800.000100|<!channel>",
    rows=3,
)
# As long as the receiver lets a name be (1,024 characters), every character one that grows
# when escaped or percent-encoded; errors of any length; more rows than any message shows.
_LONG_NAME = "etl`<!channel>`" + "é&<x>😀" * 168
LONG = Values(
    dag=_LONG_NAME,
    namespace=_LONG_NAME[::-1],
    error=HOSTILE.error * 80,
    report=_LONG_NAME,
    team=_LONG_NAME,
    user="U0" + "A" * 1022,
    ident="f" * 1024,
    url=AIRFLOW + "dags/" + "é" * 600,
    ts="1622764800." + "9" * 1000,
    rows=70,
)


def plan(v: Values, *, blocked: bool = False) -> Plan:
    root = DagRef(v.namespace, v.dag)
    steps = [PlanStep(root, (DAY,), (), "daily", (v.team,))]
    for i in range(1, v.rows):
        dag = DagRef(v.namespace, f"{v.dag}{i}")
        steps.append(PlanStep(dag, (DAY,) * (i % 5), (steps[i - 1].dag,), "daily", (v.team,)))
    notes = (PlanNote(v.dag, v.error, blocking=blocked), PlanNote(f"{v.dag}1", v.error))
    return Plan(
        root,
        DateRange(date(2021, 6, 4), date(2021, 6, 4)),
        tuple(steps),
        excluded=(DagRef(v.namespace, v.dag + "_excluded"),),
        notes=notes,
        lineage_as_of=T0,
    )


def status(v: Values) -> RequestStatus:
    states = ["failed", "running", "pending", v.error, "succeeded"]
    return RequestStatus(
        request_id=v.ident,
        root_dag=v.dag,
        range_text=v.error,
        state=v.error,
        requester=v.user,
        approvers=(OWNER, v.user) * v.rows,
        steps=tuple(
            StepStatus(f"{v.dag}{i}", states[i % 5], 3, Counts(succeeded=1, failed=2), v.error)
            for i in range(v.rows)
        ),
        cancellable=True,
        awaiting=(v.team,) * v.rows,
    )


def queued_status(v: Values) -> RequestStatus:
    """A running request waiting for the budget, with its reports' estimates."""
    held = tuple(Held(kind, f"{v.team}{i}", i, i)
                 for i, kind in enumerate(["total", "team", "pool"] * v.rows))  # fmt: skip
    return replace(
        status(v),
        state="running",
        queued=Queued(v.rows + 1, v.rows + 2, held, idle=bool(v.rows % 2), steps=v.rows),
        estimates=tuple(report_estimates(v)),
    )


def stored(v: Values, state: str = "failed") -> BackfillRequest:
    return BackfillRequest(
        id=v.ident,
        requester=v.user,
        root_dag=v.dag,
        root_namespace=v.namespace,
        start_date=date(2021, 6, 4),
        end_date=date(2021, 6, 4),
        plan={},
        state=state,
        approvers=[OWNER, v.user],
        started_at=T0,
        finished_at=T0 + timedelta(minutes=5),
        steps=[
            BackfillStep(
                position=i,
                dag_id=f"{v.dag}{i}",
                namespace=v.namespace,
                intervals=[{}],
                state=("failed", "succeeded", "skipped")[i % 3],
                counts={"succeeded": 1, "failed": 1},
                message=v.error if i % 2 else None,
                started_at=T0,
                finished_at=T0 + timedelta(minutes=i),
            )
            for i in range(v.rows)
        ],
    )


def thread_reply(v: Values) -> dict[str, Any]:
    events: list[progress.Event] = []
    for i in range(v.rows):
        dag = f"{v.dag}{i}"
        events += [
            progress.Started(dag, 3, v.url),
            progress.Finished(
                dag, "failed", Counts(failed=1), timedelta(minutes=1), v.error, v.url
            ),
            progress.Skipped(((dag, v.error),)),
        ]
    return progress.thread_reply(stored(v), [*events, progress.Summary("failed")])


def alert_view(v: Values) -> watch.AlertView:
    impact = ImpactSnapshot(
        ImpactStatus.KNOWN,
        root_owners=(v.team,) * v.rows,
        downstream=tuple(DagImpact(v.namespace, f"{v.dag}{i}", (v.team,)) for i in range(v.rows)),
        datasets=(v.report,),
        reports=tuple(ReportImpact(v.report, v.namespace, v.team) for _ in range(v.rows)),
        teams=(v.team,),
    )
    return watch.AlertView(
        incident_id=v.ident,
        namespace=v.namespace,
        dag_id=v.dag,
        interval=v.error,
        open=True,
        failures=3,
        error=v.error,
        error_job=v.dag + ".task",
        impact=impact,
        mentions=(f"<!subteam^{GROUP}>", f"<@{OWNER}>", v.user, v.dag, "<!channel>") * v.rows,
        grouped=v.rows,
        grouped_dags=tuple(f"{v.dag}{i}" for i in range(v.rows)),
        backfill=None,
        snoozed_until=T0,
        snoozed_by=v.user,
        marquez_url=MARQUEZ + "lineage/job/" + v.url[len(AIRFLOW) :],
        airflow_url=v.url,
        log_url=v.url + "?try_number=1",
        acknowledged_by=None,
        failed_at=T0,
        try_number=2,
        proposal=Proposal(dags=v.rows, runs=v.rows * 3, estimate=timedelta(minutes=5)),
    )


def data_problems(v: Values) -> tuple[tuple[Mrkdwn, bool], ...]:
    """Every kind of data finding, about datasets, columns and checks named from outside."""
    kinds = [
        Finding(FindingKind.ZERO_ROWS, v.namespace, v.report, 0, v.rows * 1000),
        Finding(FindingKind.FEW_ROWS, v.namespace, v.dag, 3, None, "bytes"),
        Finding(FindingKind.ASSERTION, v.namespace, v.report, assertion=v.error, column=v.user),
        Finding(
            FindingKind.COLUMNS, v.namespace, v.report,
            lost=((v.user, v.error),) * v.rows, changed=((v.dag, v.error, v.user),),
            readers=((v.dag, v.error),) * v.rows, reader_dags=v.rows * 3, others=v.rows,
            table_level=(v.dag,) * v.rows,
        ),
        Finding(FindingKind.LIFECYCLE, v.namespace, v.dag, lifecycle="DROP"),
        Finding(FindingKind.NO_STATISTICS, v.namespace, v.report, None, v.rows * 1000),
    ]  # fmt: skip
    return tuple((finding_line(f, v.error), i % 2 == 0) for i, f in enumerate(kinds * v.rows))


def miss(v: Values) -> Miss:
    return Miss(DAY, T0, "late", v.error)


def links(v: Values) -> sla.NoticeLinks:
    return sla.NoticeLinks(miss_id=v.ident[:100], airflow_url=v.url, marquez_url=MARQUEZ + v.url)


def rerun(v: Values, *, channel: str = "") -> teams.TeamRerun:
    dags = [(f"{v.dag}{i}", i + 1) for i in range(v.rows)]
    return teams.TeamRerun(v.ident, v.dag, v.error, dags, channel or v.user, v.ts)


def report_estimates(v: Values) -> list[ReportEstimate]:
    at = datetime(2021, 6, 7, 8, 0, tzinfo=UTC)
    return [
        ReportEstimate(f"{v.report}{i}", v.team, at, at + timedelta(minutes=10 * i - 30),
                       timedelta(hours=i)) if i % 3 else
        ReportEstimate(f"{v.report}{i}", v.team, None, None, None)
        for i in range(v.rows)
    ]  # fmt: skip


def home_view(v: Values) -> dict[str, Any]:
    n = range(v.rows)
    return home.home_view(
        [v.team] * v.rows,
        [home.HomeIncident(f"{v.dag}{i}", v.error, i, v.ident) for i in n],
        [
            home.HomeBackfill(
                v.ident, f"{v.dag}{i}", date(2021, 6, 4), date(2021, 6, 4), v.error, i
            )
            for i in n
        ],
        [home.HomeSlaMiss(f"{v.dag}{i}", v.error, v.error, T0) for i in n],
        [
            home.HomeRestated(v.ident, (v.dag,) * (i + 1), (date(2021, 6, 4),), i, 1, 2, T0)
            for i in n
        ],
    )


def rewrites(v: Values) -> list[Rewrite]:
    """Reruns of every verdict, named from outside."""
    found = []
    for i in range(v.rows):
        dag = DagRef(v.namespace, f"{v.dag}{i}")
        verdict, why = [
            (Verdict.WRONG, Why.ZERO_ROWS), (Verdict.WRONG, Why.UNCHANGED),
            (Verdict.RIGHT, None), (Verdict.UNKNOWN, Why.NO_STATISTICS),
            (Verdict.UNKNOWN, Why.NOT_ARRIVED),
        ][i % 5]  # fmt: skip
        found.append(Rewrite(dag, DAY, v.namespace, v.error, 5, 0, "rows", verdict, why, 41_000))
    return found


def restated(v: Values) -> list[ReportRestated]:
    days = tuple(date(2021, 6, 1) + timedelta(days=2 * i) for i in range(v.rows))
    return [ReportRestated(v.report, v.team, days, days[:2]) for _ in range(v.rows)]


def ledger_rows(v: Values) -> list[verifying.Restated]:
    return [
        verifying.Restated(
            f"{v.ident}{i % 4}",
            v.dag,
            date(2021, 6, 4),
            v.error if i % 3 else None,
            i,
            i * 2,
            "rows",
            ["right", "wrong", "unknown"][i % 3],
            None,
            T0,
            v.error,
            v.ident,
            v.user,
        )
        for i in range(v.rows)
    ]


def denials(v: Values) -> Iterator[str]:
    for kind in DenialKind:
        yield ownership_words.denied(Denial(kind, v.dag, (v.team,)), action="approve")
        yield ownership_words.denied(Denial(kind, v.dag, (v.team,)), action="cancel")


Build = Callable[[Values], dict[str, Any]]


# Each public message function, and how to render it from outside values (some more than once).
def hub_notice(v: Values) -> hub_slack.FailureNotice:
    return hub_slack.FailureNotice(
        v.dag, v.error, "acknowledged", v.user, failures=v.rows, error=v.error,
        acknowledged_by=v.user, reports=[v.report] * v.rows, subscription=v.ident,
        pattern=v.dag, waited=v.error,
    )  # fmt: skip


def subscription_line(v: Values) -> subscriptions.SubscriptionLine:
    return subscriptions.SubscriptionLine(v.ident, v.dag, ("failures", "sla"), True, v.user, T0)


def backfill_outcomes(v: Values) -> list[Any]:
    """An outcome of each kind the backfill services answer, carrying outside values."""
    o = outcomes
    denial = Denial(DenialKind.NOT_ALLOWED, v.dag, (v.team,))
    return [
        o.NotFound(v.ident), o.NotFound(v.ident, prefix=True), o.Ambiguous(v.ident),
        o.Unchanged(v.ident, "approved", by=v.user), o.Unchanged(v.ident, "previewed"),
        o.Denied(denial, "cancel"), o.Busy(v.dag, v.ident, "running"),
        o.Unplannable("marquez_unavailable", v.error), o.Unplannable("planning", v.error),
        o.Blocked(v.ident), o.Previewed(v.ident), o.Approved(v.ident),
        o.ApprovalRecorded(v.ident, (v.team,) * v.rows), o.AlreadyApproved(v.ident, (v.team,)),
        o.StartedFromAlert(v.ident, v.rows, v.rows), o.SecondPersonAsked(v.ident, denial),
        o.Cancelled(v.ident), o.RetryRefused("open", v.ident, other=v.ident, other_state="x"),
        o.RetryPosted(v.ident, of=v.ident),
    ]  # fmt: skip


def incident_outcomes(v: Values) -> list[Any]:
    """An outcome of each kind the alert's buttons answer, carrying outside values."""
    denial = Denial(DenialKind.NOT_ALLOWED, v.dag, (v.team,))
    return [
        alerts_outcomes.Gone(), alerts_outcomes.SnoozeDenied(denial, unsnooze=True),
        alerts_outcomes.BackfillUnderWay(v.ident, v.error), alerts_outcomes.NoInterval(v.dag),
        alerts_outcomes.NoPlan(v.error, planning=False), alerts_outcomes.Snoozed(v.rows),
    ]  # fmt: skip


def subscription_outcomes(v: Values) -> list[Any]:
    """An outcome of each kind the subscription commands answer, carrying outside values."""
    denial = Denial(DenialKind.NOT_ALLOWED, v.dag, (v.team,) * v.rows)
    line = subscription_line(v)
    return [
        subscribing.Subscribed(line, dm=False), subscribing.SubscribeDenied(denial),
        subscribing.TooMany(v.rows, dm=True), subscribing.UnknownSubscription(v.ident, dm=False),
        subscribing.AlreadyRemoved(v.ident, v.user), subscribing.RemoveDenied(denial, v.ident),
        subscribing.Unsubscribed(line, dm=True),
        subscribing.SubscriptionsListed([line] * min(v.rows, 50), dm=False),
    ]  # fmt: skip


def answered(answer: Callable[[Any], dict[str, Any]], said: list[Any]) -> dict[str, Any]:
    """Every answer in one payload's blocks (each is checked for what is live in it)."""
    payloads = [answer(outcome) for outcome in said]
    return {
        "text": " ".join(p["text"] for p in payloads),
        "blocks": [b for p in payloads for b in p.get("blocks", [])][:50],
    }


KINDS: dict[str, tuple[Callable[..., Any], Build]] = {
    "backfill_answers": (
        backfill_answers.answer,
        lambda v: answered(backfill_answers.answer, backfill_outcomes(v)),
    ),
    "still_planning": (
        backfill_answers.still_planning,
        lambda v: backfill_answers.still_planning(v.dag),
    ),
    "approval_pointer": (
        backfill_answers.approval_pointer,
        lambda v: backfill_answers.approval_pointer(v.ident, v.dag, v.error, v.error, v.user),
    ),
    "incident_answers": (
        incident_answers.answer,
        lambda v: answered(incident_answers.answer, incident_outcomes(v)),
    ),
    "subscription_answers": (
        subscriptions.answer,
        lambda v: answered(subscriptions.answer, subscription_outcomes(v)),
    ),
    "sla_answer": (sla.answer, lambda v: sla.answer(NoticeAcknowledged())),
    "ops_notice": (
        ops_notices.ops_notice,
        lambda v: ops_notices.ops_notice(":warning:", v.dag, v.error, [v.error] * v.rows),
    ),
    "ops_undeliverable": (
        ops_notices.undeliverable,
        lambda v: ops_notices.undeliverable(v.user, "incident_alert", v.error, T0),
    ),
    "plan_preview": (
        backfill.plan_preview,
        lambda v: backfill.plan_preview(
            plan(v),
            request_id=v.ident,
            requester=v.user,
            dry_run=False,
            awaiting=(v.team,) * v.rows,
            retry_of=v.ident,
        ),
    ),
    "plan_preview_blocked": (
        backfill.plan_preview,
        lambda v: backfill.plan_preview(
            plan(v, blocked=True), request_id=v.ident, requester=OWNER, dry_run=False
        ),
    ),
    "plan_preview_dry_run": (
        backfill.plan_preview,
        lambda v: backfill.plan_preview(
            plan(v), request_id=v.ident, requester=v.user, dry_run=True
        ),
    ),
    "plan_modal": (backfill.plan_modal, lambda v: backfill.plan_modal(plan(v), request_id=v.ident)),
    "options_modal": (
        options_form.options_modal,
        lambda v: options_form.options_modal(
            plan(v),
            metadata={"request": v.ident, "channel": CHANNEL},
            options={
                "rerun": "failed",
                "conf": {v.dag: v.error},
                "reason": v.error[:300],
                "counts": {"missing": 1, "failed": 2, "all": 3, "known": True},
            },
            start_at=T0,
            default_rerun="all",
            submit="Update plan",
        ),
    ),
    "request_status": (backfill.request_status, lambda v: backfill.request_status(status(v))),
    "request_status_queued": (
        backfill.request_status,
        lambda v: backfill.request_status(queued_status(v)),
    ),
    "status_list": (backfill.status_list, lambda v: backfill.status_list([status(v)] * v.rows)),
    "help_message": (backfill.help_message, lambda v: backfill.help_message(v.dag)),
    "refusal": (
        common.refusal,
        lambda v: common.refusal(f"Unknown DAG {v.dag} in {v.namespace}: {v.error}", hint=v.error),
    ),
    "refusal_denied": (
        common.refusal,
        lambda v: common.refusal(" ".join(denials(v))),
    ),
    "refusal_composed": (
        common.refusal,
        lambda v: common.refusal(
            sentence("{} may not approve {} ({}).", user_mention(v.user), code(v.dag), v.error),
            hint=sentence("Ask {} in {}.", user_mention(OWNER), channel_mention(CHANNEL)),
        ),
    ),
    "action_result": (
        common.action_result,
        lambda v: common.action_result(
            sentence(
                "Backfill {} of {} was approved by {}; {}",
                v.ident,
                v.dag,
                user_mention(OWNER),
                f"Already approved by <@{v.user}> <!channel>",
            )
        ),
    ),
    "acknowledgement": (
        common.acknowledgement,
        lambda v: common.acknowledgement(f"Planning {v.dag} {v.error} …"),
    ),
    "not_a_member": (common.not_a_member, lambda v: common.not_a_member(v.ident, v.dag, v.ident)),
    "run_by_hand": (
        progress.run_by_hand,
        lambda v: progress.run_by_hand([f"airflow dags backfill {v.dag} {v.error}"] * v.rows)[-1],
    ),
    "home_view": (home.home_view, home_view),
    "backfill_verified": (
        verifying.verified,
        lambda v: verifying.verified(
            v.ident, v.dag, verification(rewrites(v)), restated(v), within_s=1800
        ),
    ),
    "backfill_restated_notice": (
        verifying.restated_notice,
        lambda v: verifying.restated_notice(
            v.ident,
            v.dag,
            restated(v),
            channel=v.user,
            thread_ts=v.ts,
            reason=v.error,
            summary=verification(rewrites(v)),
        ),
    ),
    "backfill_history": (
        verifying.history,
        lambda v: verifying.history(v.dag, ledger_rows(v), more=True),
    ),
    "ops_unreachable": (ops.unreachable, lambda v: ops.unreachable(v.error, T0)),
    "ops_set_aside": (
        ops.set_aside,
        lambda v: ops.set_aside(
            [ops.SetAside(i, v.error, v.dag, T0, v.error) for i in range(v.rows)], tries=5
        ),
    ),
    "ops_recovered": (
        ops.recovered,
        lambda v: ops.recovered(
            (T0 + timedelta(minutes=4), T0 + timedelta(minutes=5)), T0, T0, v.rows
        ),
    ),
    # a sink's error is what its server answered: outside text
    "ops_sink_failing": (
        health.sink_failing,
        lambda v: health.sink_failing(v.team, "pagerduty", v.error, queued=v.rows),
    ),
    "ops_sink_refused": (
        health.sink_refused,
        lambda v: health.sink_refused(v.team, "webhook", v.error),
    ),
    "ops_sink_recovered": (
        health.sink_recovered,
        lambda v: health.sink_recovered(v.team, "webhook"),
    ),
    "progress_reply": (
        progress.reply,
        lambda v: progress.reply(
            progress.event_lines(stored(v), [progress.Skipped(((v.dag, v.error),))]) * v.rows
        ),
    ),
    "progress_thread_reply": (progress.thread_reply, thread_reply),
    "progress_status_payload": (
        progress.status_payload,
        lambda v: progress.status_payload(stored(v)),
    ),
    "sla_late_notice": (
        sla.late_notice,
        lambda v: sla.late_notice(v.dag, miss(v), cause=v.dag, links=links(v)),
    ),
    "sla_reports_late": (
        sla.reports_late,
        lambda v: sla.reports_late(
            [v.report] * v.rows, v.dag, miss(v), cause=v.namespace, links=links(v)
        ),
    ),
    "sla_acknowledged": (
        sla.acknowledged,
        lambda v: sla.acknowledged(
            sla.acknowledged(sla.late_notice(v.dag, miss(v), links=links(v)), OWNER), v.user
        ),
    ),
    "team_rerun_approved": (
        teams.rerun_approved,
        lambda v: teams.rerun_approved(rerun(v), approver=v.user),
    ),
    "team_rerun_approved_by_owner": (
        teams.rerun_approved,
        lambda v: teams.rerun_approved(rerun(v, channel=CHANNEL), approver=OWNER),
    ),
    "team_rerun_ended": (teams.rerun_ended, lambda v: teams.rerun_ended(rerun(v), state="failed")),
    "team_reports_started": (
        teams.reports_started,
        lambda v: teams.reports_started(rerun(v), report_estimates(v)),
    ),
    "hub_failure_notice": (
        hub_slack.failure_notice,
        lambda v: hub_slack.failure_notice(hub_notice(v)),
    ),
    "hub_escalation_notice": (
        hub_slack.failure_notice,
        lambda v: hub_slack.failure_notice(replace(hub_notice(v), state="escalated")),
    ),
    "subscription_added": (
        subscriptions.subscribed,
        lambda v: subscriptions.subscribed(subscription_line(v), dm=False),
    ),
    "subscription_existing": (
        subscriptions.subscribed,
        lambda v: subscriptions.subscribed(subscription_line(v), dm=True, existing=True),
    ),
    "subscription_removed": (
        subscriptions.unsubscribed,
        lambda v: subscriptions.unsubscribed(subscription_line(v), dm=False),
    ),
    "subscription_list": (
        subscriptions.subscription_list,
        lambda v: subscriptions.subscription_list(
            [subscription_line(v)] * min(v.rows, 50), dm=False
        ),
    ),
    "watch_alert": (watch.alert, lambda v: watch.alert(alert_view(v))),
    "watch_alert_recovered": (
        watch.alert,
        lambda v: watch.alert(
            replace(alert_view(v), open=False, recovered=True, acknowledged_by=OWNER)
        ),
    ),
    "watch_alert_backfill": (
        watch.alert,
        lambda v: watch.alert(
            replace(alert_view(v), backfill=v.ident, impact=ImpactSnapshot.unavailable(v.error))
        ),
    ),
    "watch_alert_data": (
        watch.alert,
        lambda v: watch.alert(
            replace(alert_view(v), error=None, data=True, problems=data_problems(v))
        ),
    ),
    "watch_bad_data_again": (watch.bad_data_again, lambda v: watch.bad_data_again()),
    "watch_data_resolved": (
        watch.data_resolved,
        lambda v: watch.data_resolved(v.dag, v.error, v.ident),
    ),
    "watch_reply": (watch.reply, lambda v: watch.reply(v.error)),
    "watch_impact_known": (
        watch.impact_known,
        lambda v: watch.impact_known(v.rows, [f"<!subteam^{GROUP}>", v.dag, v.user] * v.rows),
    ),
    "watch_failed_again": (watch.failed_again, lambda v: watch.failed_again()),
    "watch_grouped": (
        watch.grouped,
        lambda v: watch.grouped(v.rows, [f"{v.dag}{i}" for i in range(v.rows)]),
    ),
    "watch_resolved": (watch.resolved, lambda v: watch.resolved(v.dag, v.error, v.ident)),
    "watch_snoozed": (watch.snoozed, lambda v: watch.snoozed(v.user, 24)),
    "watch_unsnoozed": (watch.unsnoozed, lambda v: watch.unsnoozed(v.user)),
    "watch_acknowledged": (watch.acknowledged, lambda v: watch.acknowledged(v.user)),
    "watch_backfill_asked": (
        watch.backfill_asked,
        lambda v: watch.backfill_asked(OWNER, v.ident),
    ),
}


def mrkdwn_strings(payload: Any) -> Iterator[str]:
    """What Slack reads as mrkdwn: a message's `text` and every mrkdwn text object."""
    if isinstance(payload, dict):
        if isinstance(payload.get("text"), str) and payload.get("type") in (None, "mrkdwn"):
            yield payload["text"]
        for value in payload.values():
            if isinstance(value, dict | list):
                yield from mrkdwn_strings(value)
    elif isinstance(payload, list):
        for value in payload:
            yield from mrkdwn_strings(value)


def built_by_the_bot(sequence: str) -> bool:
    inner = sequence[1:-1]
    if inner in {f"@{OWNER}", f"!subteam^{GROUP}", f"#{CHANNEL}"}:
        return True
    url, bar, label = inner.partition("|")
    return (
        bool(bar)
        and url.startswith((AIRFLOW, "https://slack.com/archives/"))
        and label in {"Airflow", "thread"}
        and not re.search(r"[\s<>|]", url)
    )


def live_problems(payload: dict[str, Any]) -> list[str]:
    return [
        match.group()
        for text in mrkdwn_strings(payload)
        for match in LIVE.finditer(text)
        if not built_by_the_bot(match.group())
    ]


def public_message_functions() -> set[str]:
    """Every public function of the capabilities' messages modules that returns a payload."""
    found = set()
    for module in MODULES:
        for name, function in inspect.getmembers(module, inspect.isfunction):
            returns = inspect.signature(function).return_annotation
            public = function.__module__ == module.__name__ and not name.startswith("_")
            if public and returns in ("dict[str, Any]", dict[str, Any]):
                found.add(f"{module.__name__}.{name}")
    return found


@pytest.fixture
def no_defusing(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """The messages escape on their own: `render`'s safety net logs nothing."""
    caplog.set_level(logging.ERROR, logger="bot.slack.messages")
    yield
    assert [r.getMessage() for r in caplog.records if r.name.startswith("bot.slack.messages")] == []


@pytest.mark.usefixtures("no_defusing")
@pytest.mark.parametrize("values", [HOSTILE, LONG], ids=["hostile", "long"])
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_nothing_from_outside_is_live(kind: str, values: Values) -> None:
    payload = KINDS[kind][1](values)
    check(payload)  # and Slack's limits, whatever the lengths
    assert live_problems(payload) == []
    for element in elements(payload) if "blocks" in payload else []:
        url = element.get("url")
        if url is not None:
            assert len(url) <= BUTTON_URL
            assert url.startswith((AIRFLOW, MARQUEZ)), url
            assert not re.search(r"[\s<>|`]", url), url
        if "confirm" in element:
            assert len(element["confirm"]["text"]["text"]) <= CONFIRM_TEXT


def test_every_message_function_and_template_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    covered = {f"{f.__module__}.{f.__name__}" for f, _ in KINDS.values()}
    assert public_message_functions() - covered == set(), "add them to KINDS"
    env = environment()
    load = env.get_template
    loaded: set[str] = set()

    def recording(name: Any, *args: Any, **kwargs: Any) -> Any:
        loaded.add(str(name))
        return load(name, *args, **kwargs)

    monkeypatch.setattr(env, "get_template", recording)
    for _, build in KINDS.values():
        build(HOSTILE)
    assert slack_templates() - loaded == set()


def test_the_hostile_values_are_shown_as_text() -> None:
    alert = watch.alert(alert_view(HOSTILE))
    text = "\n".join(mrkdwn_strings(alert))
    assert (
        "`etlˋ&lt;!channel&gt; &lt;@U0EVIL&gt; &lt;!subteam^S0EVIL&gt; &lt;#C0EVIL&gt;ˋx`" in text
    )
    # the error's own ``` cannot end the block it is shown in: the bot's two are all there are
    [block] = [t for t in mrkdwn_strings(alert) if t.startswith("Error in")]
    assert block.count("```") == 2
    assert block.endswith("ˋˋˋ then ˋ&lt;!here&gt;ˋ and ˋˋ```")
    assert "Affects <!subteam^S0GROUP01> <@U0OWNER01> U0EVIL&gt; &lt;!channel etl`&lt;" in text
    assert ":zzz: Snoozed until 2021-06-07 09:00 UTC by &lt;@U0EVIL&gt; &lt;!channel&gt;" in text
    refused = common.refusal(f"Unknown DAG {HOSTILE.dag}")["text"]
    assert refused == (
        ":no_entry: Unknown DAG etl`&lt;!channel&gt; &lt;@U0EVIL&gt; &lt;!subteam^S0EVIL&gt; "
        "&lt;#C0EVIL&gt;`x"
    )


def test_links_the_bot_built_are_carried_safely_or_left_out() -> None:
    line = progress.event_lines(stored(HOSTILE), [progress.Started("a", 1, HOSTILE.url)])[0]
    assert line.endswith(
        " · <http://airflow.example.com/dags/x%7C%3C!channel%3E%20%3C@U0EVIL%3E/runs/a%20b|Airflow>"
    )
    too_long = progress.event_lines(stored(HOSTILE), [progress.Started("a", 1, LONG.url)])[0]
    assert too_long == ":arrow_forward: `a` started: 1 run"
    for url in ("javascript:alert(1)", "", "http:// x", AIRFLOW + "x" * 3000):
        assert _render.web_url(url) == ""
    odd = sla.NoticeLinks("1", "ftp://x", MARQUEZ + "a|b")
    payload = sla.late_notice("a", miss(HOSTILE), links=odd)
    assert [(e["action_id"], e.get("url")) for e in elements(payload)] == [
        ("sla.acknowledge", None),
        ("sla.open_marquez", MARQUEZ + "a%7Cb"),
    ]
    notice = json.dumps(teams.rerun_approved(rerun(HOSTILE), approver=OWNER))
    assert "/p1622764800000100%7C%3C%21channel%3E|thread>" in notice


def test_the_safety_net_shows_what_the_bot_never_builds_as_text(
    caplog: pytest.LogCaptureFixture,
) -> None:
    payload = {
        "text": "<!channel> <@U0OWNER01> <@U0X|label> <http://x.example>",
        "blocks": [
            {"type": "header", "text": {"type": "plain_text", "text": "<!here>"}},
            {
                "type": "section",
                "text": {"type": "mrkdwn", "text": "<!here> <#C0ORDERS01> <http://x.example|x>"},
            },
        ],
    }
    defused = _render.defuse(payload, "test")
    assert defused["text"] == (
        "&lt;!channel&gt; <@U0OWNER01> &lt;@U0X|label&gt; &lt;http://x.example&gt;"
    )
    assert defused["blocks"][0]["text"]["text"] == "<!here>"  # plain text: nothing is live
    assert (
        defused["blocks"][1]["text"]["text"] == "&lt;!here&gt; <#C0ORDERS01> <http://x.example|x>"
    )
    assert len([r for r in caplog.records if r.levelno == logging.ERROR]) == 4
    # A view value a template places as mrkdwn (|trusted) that is a plain str: escaped, logged.
    caplog.clear()
    reply = _render.render("incidents/incident_reply.json.j2", {"text": "<@U0EVIL> said so"})
    assert reply["text"] == "&lt;@U0EVIL&gt; said so"
    assert len([r for r in caplog.records if r.levelno == logging.ERROR]) == 1


# --- golden files of the hostile and the longest cases --------------------------------------

CASES: dict[str, Case] = {
    "refusal_escaping": Case("slack/notice.json.j2", lambda: KINDS["refusal"][1](HOSTILE)),
    "action_result_escaping": Case(
        "slack/notice.json.j2", lambda: KINDS["action_result"][1](HOSTILE)
    ),
    "incident_alert_long": Case(
        "incidents/incident_alert.json.j2", lambda: KINDS["watch_alert"][1](LONG)
    ),
    "incident_reply_long": Case(
        "incidents/incident_reply.json.j2", lambda: KINDS["watch_grouped"][1](LONG)
    ),
    "progress_links": Case(
        "backfill/progress.json.j2", lambda: thread_reply(replace(HOSTILE, rows=1))
    ),
    "sla_notice_long": Case("sla/sla_notice.json.j2", lambda: KINDS["sla_reports_late"][1](LONG)),
    "home_long_names": Case("home/home.json.j2", lambda: home_view(replace(LONG, rows=2))),
    "team_notice_long": Case(
        "backfill/team_notice.json.j2", lambda: KINDS["team_rerun_approved"][1](LONG)
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert_golden(name, CASES[name], monkeypatch)
