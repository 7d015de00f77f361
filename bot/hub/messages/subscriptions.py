"""`/backfill subscribe`, `subscriptions` and `unsubscribe`: what the person who typed them sees
(ephemeral). A subscription added (or found already there: templates/hub/
subscription_added.json.j2), removed (subscription_removed) and the channel's list
(subscription_list); refusals are `common.refusal` sentences written here."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC
from typing import Any

from bot.hub.rules.subscriptions import (
    AlreadyRemoved,
    Outcome,
    RemoveDenied,
    Subscribed,
    SubscribeDenied,
    SubscriptionLine,
    SubscriptionsListed,
    TooMany,
    UnknownSubscription,
    Unsubscribed,
)
from bot.ownership.rules import Denial, DenialKind
from bot.slack.messages.common import action_result, refusal
from bot.slack.messages.render import NAME, Mrkdwn, clip, code, render, sentence, user_mention

LIST_BATCH = 8
"""Subscriptions per section of the list: 8 of the longest rows stay within a section's 3000."""
_TEAMS = 300  # the teams named in a refusal


def _where(dm: bool) -> str:
    return "your DM with the bot" if dm else "this channel"


def _where_cap(dm: bool) -> str:
    return "Your DM with the bot" if dm else "This channel"


def _view(line: SubscriptionLine, *, dm: bool, command: str) -> dict[str, Any]:
    return {
        "id": clip(line.id, 16),
        "pattern": clip(line.pattern, NAME),
        "events": ", ".join(clip(e, 20) for e in line.events),
        "downstream": line.downstream,
        "created_by": clip(line.created_by, 40),
        "created_at": line.created_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "where": _where(dm),
        "where_cap": _where_cap(dm),
        "command": clip(command, 40),
    }


def subscribed(
    line: SubscriptionLine, *, dm: bool, existing: bool = False, command: str = "/backfill"
) -> dict[str, Any]:
    """The answer to `/backfill subscribe`: the subscription added, or (`existing`) the one
    already there with the same pattern, events and `--downstream`."""
    view = {**_view(line, dm=dm, command=command), "existing": existing}
    return render("hub/subscription_added.json.j2", view)


def unsubscribed(line: SubscriptionLine, *, dm: bool, command: str = "/backfill") -> dict[str, Any]:
    """The answer to `/backfill unsubscribe ID`: what is no longer sent here."""
    return render("hub/subscription_removed.json.j2", _view(line, dm=dm, command=command))


def subscription_list(
    lines: Sequence[SubscriptionLine], *, dm: bool, command: str = "/backfill"
) -> dict[str, Any]:
    """`/backfill subscriptions`: every active subscription of the channel (or DM), oldest
    first, with its id, pattern, event classes, `downstream`, who added it and when."""
    rows = [_view(line, dm=dm, command=command) for line in lines]
    batches = [rows[i : i + LIST_BATCH] for i in range(0, len(rows), LIST_BATCH)]
    view = {
        "batches": batches,
        "total": len(rows),
        "where": _where(dm),
        "where_cap": _where_cap(dm),
        "title": "Subscriptions of your DM" if dm else "Subscriptions of this channel",
        "command": clip(command, 40),
    }
    return render("hub/subscription_list.json.j2", view)


def not_allowed(denial: Denial) -> Mrkdwn:
    """Why someone may not subscribe this channel to `denial.dag_id` (a pattern), and who may."""
    pattern = code(denial.dag_id)
    if denial.kind == DenialKind.NO_ONE or not denial.teams:
        return sentence(
            "No team's ownership covers {}, so only the configured approvers may subscribe a "
            "channel to it.",
            pattern,
        )
    teams = clip(", ".join(denial.teams), _TEAMS)
    return sentence(
        "Only members of the teams owning {} ({}) or the configured approvers may subscribe a "
        "channel to it.",
        pattern,
        teams,
    )


NOT_ALLOWED_HINT = (
    "Subscribe your DM with the bot instead, or set `hub.subscriptions: anyone` in BOT_CONFIG "
    "to let anyone subscribe channels."
)


REMOVE_HINT = (
    "Ask one of them, or set `hub.subscriptions: anyone` in BOT_CONFIG to let anyone manage "
    "channels' subscriptions."
)


def not_allowed_to_remove(denial: Denial, subscription_id: str) -> Mrkdwn:
    """Why someone may not remove a subscription of this channel."""
    teams = clip(", ".join(denial.teams), _TEAMS)
    who = sentence(", members of the teams owning it ({})", teams) if denial.teams else ""
    return sentence(
        "Only whoever added subscription {}{} or the configured approvers may remove it.",
        code(subscription_id, 16),
        Mrkdwn(who),
    )


def too_many(limit: int, *, dm: bool) -> str:
    """A channel (or DM) at its limit of subscriptions."""
    return (
        f"{_where_cap(dm)} has {limit} subscriptions already, the most it may have. "
        "Remove one with /backfill unsubscribe ID (see /backfill subscriptions), or subscribe "
        "a broader pattern."
    )


def unknown_subscription(given: str, *, dm: bool) -> str:
    """The answer to an id that names no subscription of this channel: the same whether no
    subscription has it or one of another channel does, so it reveals nothing."""
    return (
        f"No subscription of {_where(dm)} has the id {given}. "
        "See /backfill subscriptions for the ids here."
    )


def already_removed(subscription_id: str, removed_by: str | None) -> Mrkdwn:
    """Unsubscribing a subscription of this channel that was removed before."""
    if removed_by:
        return sentence(
            "Subscription {} was already removed, by {}.",
            code(subscription_id, 16),
            user_mention(removed_by),
        )
    return sentence("Subscription {} was already removed.", code(subscription_id, 16))


def answer(outcome: Outcome) -> dict[str, Any]:
    """The ephemeral reply to `/backfill subscribe`, `subscriptions` or `unsubscribe`."""
    match outcome:
        case Subscribed(line=line, dm=dm, existing=existing):
            return subscribed(line, dm=dm, existing=existing)
        case SubscribeDenied(denial=denial):
            return refusal(not_allowed(denial), hint=NOT_ALLOWED_HINT)
        case TooMany(limit=limit, dm=dm):
            return refusal(too_many(limit, dm=dm))
        case SubscriptionsListed(lines=lines, dm=dm):
            return subscription_list(lines, dm=dm)
        case UnknownSubscription(given=given, dm=dm):
            return refusal(unknown_subscription(given, dm=dm))
        case AlreadyRemoved(subscription_id=subscription_id, by=by):
            return action_result(already_removed(subscription_id, by))
        case RemoveDenied(denial=denial, subscription_id=subscription_id):
            return refusal(not_allowed_to_remove(denial, subscription_id), hint=REMOVE_HINT)
        case Unsubscribed(line=line, dm=dm):
            return unsubscribed(line, dm=dm)
    raise ValueError(f"no answer for {outcome!r}")
