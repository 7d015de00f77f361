"""Who may approve or cancel a backfill, snooze an alert, or subscribe a channel to DAGs' events,
from BOT_CONFIG teams, approvers and Slack user groups."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from bot.config import BotConfig
from bot.core.model import DagRef
from bot.ownership.rules import (
    Denial,
    DenialKind,
    covering_teams,
    owners,
    requires_all_owners,
    requires_second_person,
)
from bot.slack.rules.ids import is_direct_message


class GroupDirectory(Protocol):
    """Members of Slack user groups."""

    async def members(self, group_id: str) -> frozenset[str]: ...


async def _in_any(
    user: str, users: tuple[str, ...], groups: tuple[str, ...], directory: GroupDirectory
) -> bool:
    if user in users:
        return True
    for group in groups:
        if user in await directory.members(group):
            return True
    return False


async def may_approve(
    config: BotConfig,
    directory: GroupDirectory,
    root: DagRef,
    *,
    requester: str,
    user: str,
    also: Iterable[str] = (),
) -> Denial | None:
    """None if `user` may approve (or cancel) a backfill of `root`, else why they may not.
    `also` names more teams whose members may approve (the downstream owners an
    `approve: all_owners` rule asks for)."""
    names = dict.fromkeys([*owners(config, root), *also])
    owning = [team for name in names if (team := config.team(name))]
    teams = tuple(t.name for t in owning)
    approvers = config.approvers
    if user == requester and requires_second_person(config, root):
        return Denial(DenialKind.SECOND_PERSON, root.dag_id, teams)
    allowed = await _in_any(user, approvers.users, approvers.user_groups, directory)
    for team in owning:
        allowed = allowed or await _in_any(user, team.members, team.user_groups, directory)
    if allowed:
        return None
    if not owning and not approvers.users and not approvers.user_groups:
        return Denial(DenialKind.NO_ONE, root.dag_id)
    return Denial(DenialKind.NOT_ALLOWED, root.dag_id, teams)


async def still_to_approve(
    config: BotConfig,
    directory: GroupDirectory,
    root: DagRef,
    plan_owners: Iterable[str],
    approvers: Sequence[str],
) -> tuple[str, ...]:
    """The teams whose approval a backfill of `root` still needs, in plan order: under an
    `approve: all_owners` rule, each configured team owning a DAG of the plan none of whose
    members approved yet (nothing once a global approver approved); otherwise none."""
    if not requires_all_owners(config, root):
        return ()
    for user in approvers:
        if await _in_any(user, config.approvers.users, config.approvers.user_groups, directory):
            return ()
    waiting: list[str] = []
    for name in _teams(config, root, plan_owners):
        team = config.team(name)
        assert team is not None
        approved = False
        for user in approvers:
            approved = approved or await _in_any(user, team.members, team.user_groups, directory)
        if not approved:
            waiting.append(name)
    return tuple(waiting)


def _teams(config: BotConfig, root: DagRef, plan_owners: Iterable[str]) -> tuple[str, ...]:
    names = dict.fromkeys([*owners(config, root), *plan_owners])
    return tuple(name for name in names if config.team(name) is not None)


async def may_snooze(
    config: BotConfig,
    directory: GroupDirectory,
    root: DagRef,
    *,
    user: str,
    also: Iterable[str] = (),
) -> Denial | None:
    """None if `user` may Snooze (or Unsnooze) an alert of `root`, else why not. By default the
    rules of Approve (no second person: a snooze has no requester); `watch.snooze:
    anyone_in_channel` lets anyone who can click in the alert's channel."""
    if config.watch.snooze == "anyone_in_channel":
        return None
    return await may_approve(config, directory, root, requester="", user=user, also=also)


async def may_subscribe(
    config: BotConfig,
    directory: GroupDirectory,
    pattern: str,
    *,
    user: str,
    channel: str,
) -> Denial | None:
    """None if `user` may subscribe `channel` to the events of DAGs matching `pattern` (or
    remove such a subscription), else why not (`Denial.dag_id` is the pattern, `teams` those
    covering it). Anyone may in a DM, and anywhere with BOT_CONFIG `hub.subscriptions:
    anyone`; otherwise (`owners`) a configured approver, or a member of a team whose
    ownership covers the pattern."""
    if is_direct_message(channel) or config.hub.subscriptions == "anyone":
        return None
    approvers = config.approvers
    if await _in_any(user, approvers.users, approvers.user_groups, directory):
        return None
    teams = covering_teams(config, pattern)
    for name in teams:
        team = config.team(name)
        assert team is not None
        if await _in_any(user, team.members, team.user_groups, directory):
            return None
    if not teams and not approvers.users and not approvers.user_groups:
        return Denial(DenialKind.NO_ONE, pattern)
    return Denial(DenialKind.NOT_ALLOWED, pattern, teams)
