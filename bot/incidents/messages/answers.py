"""What the person who clicked an alert's button sees (ephemeral): each outcome of the alert's
actions (`bot.incidents.rules.outcomes`) in words, and the backfill's own outcomes through
`bot.backfill.messages.answers`."""

from __future__ import annotations

from typing import Any

from bot.backfill.messages import answers as backfill_answers
from bot.backfill.rules.outcomes import Outcome as BackfillOutcome
from bot.incidents.rules.outcomes import (
    Acknowledged,
    AlreadyAcknowledged,
    AlreadyResolved,
    BackfillUnderWay,
    Gone,
    NoInterval,
    NoPlan,
    NotRecovered,
    NotSnoozed,
    Outcome,
    Snoozed,
    SnoozeDenied,
    Unsnoozed,
)
from bot.ownership.messages import snooze_denied
from bot.slack.messages.common import action_result, refusal

GONE = "This incident no longer exists."


def reason(outcome: Outcome) -> str:
    """The outcome's sentence: what a refusal's audit row records, and what the reply says."""
    match outcome:
        case Gone():
            return GONE
        case AlreadyAcknowledged():
            return "You acknowledged this incident already."
        case Acknowledged():
            return "Acknowledged: the alert shows you are on it."
        case AlreadyResolved():
            return "This incident is resolved already."
        case NotRecovered():
            return "The DAG has not recovered yet."
        case Snoozed(hours=hours):
            return f"Snoozed for {hours} h."
        case NotSnoozed():
            return "This incident is not snoozed."
        case Unsnoozed():
            return "Snooze ended: new failures alert again."
        case SnoozeDenied(denial=denial, unsnooze=unsnooze):
            return snooze_denied(denial, unsnooze=unsnooze)
        case BackfillUnderWay(backfill=backfill, state=state):
            return (
                f"Backfill {backfill} of this incident is {state} already; its progress is in "
                "the alert's thread."
            )
        case NoInterval():
            return "The failed run reported no interval, so the range to backfill is unknown."
        case NoPlan(detail=detail, planning=True):
            return detail
        case NoPlan(detail=detail):
            return f"No plan can be made right now: {detail}"
    raise ValueError(f"no sentence for {outcome!r}")


def answer(outcome: Outcome | BackfillOutcome) -> dict[str, Any]:
    """The ephemeral reply to whoever clicked."""
    match outcome:
        case Gone(meanwhile=False) | SnoozeDenied() | NoPlan():
            return refusal(reason(outcome))
        case NoInterval(dag_id=dag_id):
            return refusal(
                reason(outcome),
                hint=f"Type /backfill {dag_id} START..END with the days to redo.",
            )
        case (
            Gone()
            | Acknowledged()
            | AlreadyAcknowledged()
            | AlreadyResolved()
            | NotRecovered()
            | Snoozed()
            | NotSnoozed()
            | Unsnoozed()
            | BackfillUnderWay()
        ):
            return action_result(reason(outcome))
    return backfill_answers.answer(outcome)
