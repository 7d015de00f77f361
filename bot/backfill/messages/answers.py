"""What the person who acted on a backfill sees (ephemeral): each outcome of the backfill
services (`bot.backfill.rules.outcomes`) in words. `reason` is the sentence alone, which the
audit log keeps for a refusal; `answer` the whole reply."""

from __future__ import annotations

from typing import Any

from bot.backfill.messages.backfill import (
    plan_preview,
    request_status,
    status_list,
    unknown_backfill,
)
from bot.backfill.rules.outcomes import (
    AlreadyApproved,
    Ambiguous,
    ApprovalRecorded,
    Approved,
    Blocked,
    Busy,
    Cancelled,
    Denied,
    DryRun,
    NotFound,
    NotPausable,
    OptionsChanged,
    Outcome,
    Paused,
    Previewed,
    Resumed,
    RetryPosted,
    RetryRefused,
    SecondPersonAsked,
    StartedFromAlert,
    StatusListed,
    StatusShown,
    ToReview,
    Unchanged,
    Unplannable,
)
from bot.backfill.rules.states import RequestState
from bot.ownership.messages import denied
from bot.slack.messages.common import acknowledgement, action_result, refusal
from bot.slack.messages.render import code, plural, sentence, user_mention

STATE_WORDS = {
    RequestState.APPROVED: "was already approved",
    RequestState.SCHEDULED: "is scheduled and has not started",
    RequestState.RUNNING: "is already running",
    RequestState.PAUSED: "is paused",
    RequestState.SUCCEEDED: "has already finished",
    RequestState.FAILED: "has already failed",
    RequestState.CANCELLED: "was cancelled",
    RequestState.REFUSED: "was refused",
}
"""Why a click on a request in that state changed nothing."""

REFUSALS = (NotFound, Ambiguous, Denied, Busy, Unplannable, Blocked, RetryRefused, NotPausable)
"""Outcomes answered as a refusal (the rest as a result)."""


def reason(outcome: Outcome) -> str:
    """The outcome's sentence: what a refusal's audit row records, and what the reply says."""
    match outcome:
        case NotFound(given=given, prefix=prefix):
            return unknown_backfill(given, prefix=prefix)
        case Ambiguous(given=given):
            return f"More than one backfill id starts with {given}."
        case Unchanged():
            return _unchanged(outcome)
        case Denied(denial=denial, verb=verb):
            return denied(denial, action=verb)
        case Busy(dag_id=dag, blocking=other, state=state):
            return (
                f"{dag} is already being backfilled over some of these intervals by "
                f"backfill {other} ({state}); one backfill per DAG at a time. "
                f"Wait for it to finish or cancel it (`/backfill status {other}`)."
            )
        case Unplannable(why="marquez_unavailable", detail=detail):
            return f"Marquez is unreachable, so no plan can be made right now ({detail})."
        case Unplannable(why="marquez_error", detail=detail):
            return f"Marquez answered badly: {detail}"
        case Unplannable(detail=detail):
            return detail
        case Blocked():
            return "This plan cannot run as it is; see its preview."
        case Previewed(request_id=request_id):
            return f"Plan {request_id} posted for approval."
        case Approved(request_id=request_id):
            return f"Approved backfill {request_id}."
        case ApprovalRecorded(request_id=request_id, waiting=waiting):
            return (
                f"Your approval of backfill {request_id} is recorded; it starts once "
                f"{', '.join(waiting)} approve as well."
            )
        case AlreadyApproved(waiting=waiting):
            return f"You approved already; still waiting for {', '.join(waiting)}."
        case StartedFromAlert(request_id=request_id, dags=dags, runs=runs):
            return (
                f"Approved backfill {request_id}: {plural(dags, 'DAG')}, "
                f"{plural(runs, 'run')}. Progress follows in the alert's thread."
            )
        case SecondPersonAsked(request_id=request_id, denial=denial):
            return (
                f"{denied(denial, action='approve')} The plan ({request_id}) is in the "
                "alert's thread for them."
            )
        case Cancelled(request_id=request_id):
            return f"Cancelled backfill {request_id}."
        case Paused(request_id=request_id):
            return (
                f"Paused backfill {request_id}: nothing new starts, what runs finishes. "
                f"Resume it with the button or `/backfill resume {request_id}`."
            )
        case Resumed(request_id=request_id):
            return f"Resumed backfill {request_id}."
        case NotPausable():
            return _not_pausable(outcome)
        case OptionsChanged(request_id=request_id, described=described, approvals_cleared=cleared):
            again = " Approvals given before start over: approve it again." if cleared else ""
            return f"Updated backfill {request_id}: {'; '.join(described)}.{again}"
        case ToReview(of=of):
            return f"Backfill {of} is open for review."
        case RetryRefused():
            return _retry_refused(outcome)
        case RetryPosted(request_id=request_id, of=of):
            return f"Retry plan {request_id} for backfill {of} posted for approval."
    raise ValueError(f"no sentence for {outcome!r}")


def answer(outcome: Outcome) -> dict[str, Any]:
    """The ephemeral reply to whoever acted."""
    match outcome:
        case DryRun(plan=plan, requester=requester, options=options):
            return plan_preview(
                plan, request_id="", requester=requester, dry_run=True, options=options
            )
        case StatusShown(status=status):
            return request_status(status)
        case StatusListed(statuses=statuses):
            return status_list(list(statuses))
        case Ambiguous():
            return refusal(reason(outcome), hint="Type more of the id (see /backfill status).")
        case _ if isinstance(outcome, REFUSALS):
            return refusal(reason(outcome))
    return action_result(reason(outcome))


def _not_pausable(outcome: NotPausable) -> str:
    state = RequestState(outcome.state)
    until = f" at {outcome.until.strftime('%Y-%m-%d %H:%M UTC')}" if outcome.until else ""
    if state == RequestState.PREVIEWED:
        return f"Backfill {outcome.request_id} is still waiting for approval: nothing runs yet."
    if state == RequestState.SCHEDULED:
        return (
            f"Backfill {outcome.request_id} has not started: it starts by itself{until}. "
            "Cancel it if it should not run."
        )
    if outcome.verb == "pause" and state == RequestState.PAUSED:
        if outcome.by and outcome.by.startswith(("U", "W")):  # a person, not the bot
            return sentence(
                "Nothing changed: backfill {} is already paused by {}.",
                outcome.request_id,
                user_mention(outcome.by),
            )
        return f"Nothing changed: backfill {outcome.request_id} is already paused."
    if outcome.verb == "resume" and state == RequestState.RUNNING:
        return f"Nothing changed: backfill {outcome.request_id} is running, not paused."
    if outcome.verb == "resume" and state == RequestState.PAUSED:
        return (
            f"Backfill {outcome.request_id} waits for its off-peak window, which opens{until}; "
            "it resumes by itself then. To run it now, cancel it and ask again with `--now`."
        )
    return f"Nothing changed: backfill {outcome.request_id} {STATE_WORDS[state]}."


def _unchanged(outcome: Unchanged) -> str:
    state = RequestState(outcome.state)
    if state == RequestState.PREVIEWED:
        return f"Backfill {outcome.request_id} is still waiting for approval."
    if outcome.by and state == RequestState.APPROVED:
        return sentence(
            "Nothing changed: backfill {} {} by {}.",
            outcome.request_id,
            STATE_WORDS[state],
            user_mention(outcome.by),
        )
    return f"Nothing changed: backfill {outcome.request_id} {STATE_WORDS[state]}."


def _retry_refused(outcome: RetryRefused) -> str:
    if outcome.why == "not_failed":
        return f"Backfill {outcome.of} is {outcome.state}: only a failed backfill can be retried."
    if outcome.why == "all_succeeded":
        return f"Every DAG of backfill {outcome.of} succeeded: there is nothing to retry."
    if outcome.why == "gone":
        return f"Backfill {outcome.of} does not exist."
    return (
        f"Backfill {outcome.of} is already being retried by backfill {outcome.other} "
        f"({outcome.other_state}): approve or cancel that one first "
        f"(`/backfill status {outcome.other}`)."
    )


def approval_pointer(
    request_id: str, root_dag: str, start: str, end: str, approver: str | None
) -> dict[str, Any]:
    """What the preview shrinks to once its backfill is approved: a pointer to the status
    message that follows it."""
    who = user_mention(approver) if approver else "someone"
    return action_result(
        sentence(
            "Backfill {} of {} {}..{} was approved by {}; its status and progress follow in "
            "the message below.",
            request_id,
            code(root_dag),
            start,
            end,
            who,
        )
    )


def check_failed(executor: str, error: str) -> str:
    """The preview's note on a plan the executor could not check (not a refusal)."""
    return f"could not check this DAG with {executor}: {error}"[:300]


def still_planning(dag: str) -> dict[str, Any]:
    """Told once when a plan is slow to come: Marquez takes its time on a big lineage graph."""
    return acknowledgement(
        sentence(
            "Still asking Marquez about {} and what runs downstream of it: a big lineage graph "
            "takes a while. The plan follows here.",
            code(dag, 200),
        )
    )


def high_priority_refused(dag: str) -> str:
    """Why someone who may not approve a backfill of `dag` cannot ask for `--priority high`."""
    return (
        f"--priority high puts a backfill ahead of every other team's, so only someone who may "
        f"approve a backfill of {dag} can ask for it. Ask with --priority normal (the default), "
        "or ask an approver."
    )
