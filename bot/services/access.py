"""Who may approve or cancel a backfill, snooze an alert, or subscribe a channel to DAGs' events,
from BOT_CONFIG teams, approvers and user groups; and from where a backfill may be seen or
clicked."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Protocol

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.config import BotConfig
from bot.config.base import matches
from bot.core.model import DagRef

if TYPE_CHECKING:
    from bot.store.models import BackfillRequest

logger = logging.getLogger(__name__)


class DenialKind(StrEnum):
    SECOND_PERSON = "second_person"  # the requester, where an ownership rule asks for another
    NO_ONE = "no_one"  # no owning team and no approvers configured
    NOT_ALLOWED = "not_allowed"  # neither in an owning team nor an approver


@dataclass(frozen=True)
class Denial:
    """Why a user may not act on a backfill of `dag_id`; bot.messages says it in words."""

    kind: DenialKind
    dag_id: str
    teams: tuple[str, ...] = ()
    """The owning teams, whose members may act."""


class GroupDirectory(Protocol):
    """Members of Slack user groups."""

    async def members(self, group_id: str) -> frozenset[str]: ...


class SlackGroups:
    """`usergroups.users.list`, cached for a few minutes (group changes are rare)."""

    def __init__(self, client: AsyncWebClient, *, ttl_s: float = 300.0) -> None:
        self.client = client
        self.ttl_s = ttl_s
        self._cache: dict[str, tuple[float, frozenset[str]]] = {}

    async def members(self, group_id: str) -> frozenset[str]:
        cached = self._cache.get(group_id)
        if cached and time.monotonic() - cached[0] < self.ttl_s:
            return cached[1]
        try:
            reply = await self.client.usergroups_users_list(usergroup=group_id)
            users = frozenset(str(u) for u in reply.get("users") or ())
        except SlackApiError as exc:
            # Fail closed: an unknown group grants nothing, and the refusal says who may act.
            logger.warning("cannot list user group %s: %s", group_id, exc.response.get("error"))
            users = frozenset()
        self._cache[group_id] = (time.monotonic(), users)
        return users


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
    names = dict.fromkeys([*config.owners_of(root), *also])
    owners = [team for name in names if (team := config.team(name))]
    teams = tuple(t.name for t in owners)
    approvers = config.approvers
    if user == requester and requires_second_person(config, root):
        return Denial(DenialKind.SECOND_PERSON, root.dag_id, teams)
    allowed = await _in_any(user, approvers.users, approvers.user_groups, directory)
    for team in owners:
        allowed = allowed or await _in_any(user, team.members, team.user_groups, directory)
    if allowed:
        return None
    if not owners and not approvers.users and not approvers.user_groups:
        return Denial(DenialKind.NO_ONE, root.dag_id)
    return Denial(DenialKind.NOT_ALLOWED, root.dag_id, teams)


def requires_all_owners(config: BotConfig, root: DagRef) -> bool:
    """Whether an ownership rule for `root` asks every team owning a DAG of the plan to approve."""
    return any(
        rule.approve == "all_owners" and matches(rule.pattern, root.namespace, root.dag_id)
        for rule in config.ownership
    )


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
    names = dict.fromkeys([*config.owners_of(root), *plan_owners])
    return tuple(name for name in names if config.team(name) is not None)


def requires_second_person(config: BotConfig, root: DagRef) -> bool:
    """Whether an ownership rule for `root` asks for an approver other than the requester."""
    return any(
        rule.second_approver and matches(rule.pattern, root.namespace, root.dag_id)
        for rule in config.ownership
    )


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


def _one_char_classes(glob: str) -> str:
    """`glob` with each `[…]` class written `?` (one character, as fnmatch reads classes)."""
    out: list[str] = []
    i, n = 0, len(glob)
    while i < n:
        char = glob[i]
        i += 1
        if char != "[":
            out.append(char)
            continue
        j = i + (i < n and glob[i] == "!")
        j += j < n and glob[j] == "]"
        while j < n and glob[j] != "]":
            j += 1
        if j >= n:
            out.append("[")  # no closing bracket: a literal `[`
        else:
            out.append("?")
            i = j + 1
    return "".join(out)


def covers(rule: str, pattern: str) -> bool:
    """Whether the ownership pattern `rule` covers the subscription pattern `pattern`: `rule`
    matches `pattern` taken as text (a missing namespace part read as `*`, a `[…]` class as
    `?`) and its shortest instance (every `*` matching nothing). So `example.*` covers
    `example.etl_*` and `example.etl_orders`, and only `*` covers `*`. Exact for rules of
    literals and `*`; a rule with `?` or `[…]` of its own is matched against the text as is."""
    if rule == pattern:
        return True
    namespace, _, name = pattern.partition("::") if "::" in pattern else ("*", "", pattern)
    namespace, name = _one_char_classes(namespace), _one_char_classes(name)
    shortest = (namespace.replace("*", ""), name.replace("*", ""))
    return matches(rule, namespace, name) and matches(rule, *shortest)


def covering_teams(config: BotConfig, pattern: str) -> tuple[str, ...]:
    """The teams whose ownership rules cover `pattern` (see `covers`), in file order, once each."""
    names = [rule.team for rule in config.ownership if covers(rule.pattern, pattern)]
    return tuple(name for name in dict.fromkeys(names) if config.team(name) is not None)


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


def is_direct_message(channel: str) -> bool:
    """Whether a channel id is a direct message (Slack's DM ids start with D)."""
    return channel.startswith("D")


def lives_in(request: BackfillRequest, channel: str) -> bool:
    """Whether the request's messages (preview, status, progress thread) are in `channel`: the
    channel it was asked in, or the one its status message went to (an alert's thread is in the
    alert's channel). Its buttons can only be clicked there."""
    return bool(channel) and channel in (request.channel, request.status_channel)


def may_see(request: BackfillRequest, *, user: str, channel: str, told: Iterable[str] = ()) -> bool:
    """Whether `/backfill status` (or cancel) typed in `channel` may name the request: where it
    lives or where the bot told a team about it (`told`), and, in a DM, to its requester and
    approvers. Anywhere else it is answered as if it did not exist."""
    if lives_in(request, channel) or (channel and channel in told):
        return True
    return is_direct_message(channel) and (
        user == request.requester or user in (request.approvers or ())
    )
