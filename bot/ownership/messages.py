"""Why someone may not act, and whom to ask instead: a `Denial` (`bot.ownership.rules`) in
words, for a backfill's Approve and Cancel and an alert's Snooze. (A subscription's refusals are
`bot.hub.messages.subscriptions`'.)"""

from __future__ import annotations

from typing import Literal

from bot.ownership.rules import Denial, DenialKind
from bot.slack.messages.render import LIST, NAME, clip, join_clipped


def denied(
    denial: Denial, *, action: Literal["approve", "cancel", "pause", "resume", "change"]
) -> str:
    """Why someone may not approve (or cancel, pause, resume) a backfill, and whom to ask."""
    dag, who = denial.dag_id, ", ".join(denial.teams) or "none"
    if action != "approve":  # cancel, pause and resume: the requester, owners or approvers
        if denial.kind == DenialKind.NO_ONE:
            return (
                f"No team owns {dag} and no approvers are configured, so only its requester "
                f"may {action} this backfill. Add an ownership rule or approvers to BOT_CONFIG."
            )
        return (
            f"You may not {action} backfills of {dag}: only the requester, members of its "
            f"owning teams ({who}) or the configured approvers may. Ask one of them to click "
            f"{action.capitalize()}."
        )
    if denial.kind == DenialKind.SECOND_PERSON:
        return (
            f"Backfills of {dag} need a second person: someone other than the requester "
            "must approve."
        )
    if denial.kind == DenialKind.NO_ONE:
        return (
            f"No team owns {dag} and no approvers are configured, so nobody may approve "
            "its backfills yet. Add an ownership rule or approvers to BOT_CONFIG."
        )
    return (
        f"You may not approve backfills of {dag}: only members of its owning teams "
        f"({who}) or the configured approvers may. Ask one of them to click Approve."
    )


def snooze_denied(denial: Denial, *, unsnooze: bool = False) -> str:
    """Why someone may not Snooze (or Unsnooze) an alert, and who may (the rules of Approve)."""
    verb, button = ("unsnooze", "Unsnooze") if unsnooze else ("snooze", "Snooze")
    dag = clip(denial.dag_id, NAME)
    if denial.kind == DenialKind.NO_ONE:
        return (
            f"No team owns {dag} and no approvers are configured, so nobody may {verb} its "
            "alerts. Add an ownership rule or approvers to BOT_CONFIG, or set "
            "watch.snooze: anyone_in_channel."
        )
    who = join_clipped(denial.teams, LIST) or "none"
    return (
        f"You may not {verb} alerts of {dag}: only members of its owning teams ({who}) or the "
        f"configured approvers may, as for Approve. Ask one of them to click {button}; "
        "Acknowledge is open to anyone."
    )
