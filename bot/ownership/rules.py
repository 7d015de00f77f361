"""Whose a DAG is, which reports read a dataset, and what BOT_CONFIG's ownership rules ask of an
approval (pure: plain data in, answers out). The one place that works out a DAG's owners:
BOT_CONFIG's ownership rules first, then the teams its lineage's OpenLineage `ownership` facet
names. Who may act, with Slack's user groups, is `bot.ownership.service`."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from operator import attrgetter

from bot.config import BotConfig, Report, Team
from bot.config.base import matcher, matches
from bot.core.model import DagRef, DatasetRef


class DenialKind(StrEnum):
    SECOND_PERSON = "second_person"  # the requester, where an ownership rule asks for another
    NO_ONE = "no_one"  # no owning team and no approvers configured
    NOT_ALLOWED = "not_allowed"  # neither in an owning team nor an approver


FACET_TEAM = "team:"
"""How the OpenLineage `ownership` facet names a team (`team:orders`); shown as `orders`."""


def team_name(owner: str) -> str:
    """The team an owner names: the facet's `team:orders` is `orders`."""
    return owner.removeprefix(FACET_TEAM)


def owners(config: BotConfig, dag: DagRef, lineage: Iterable[str] = ()) -> tuple[str, ...]:
    """Who owns `dag`: the teams BOT_CONFIG's ownership rules name (in file order), then those
    the lineage names (its `ownership` facet), each once."""
    configured = config.owners_of(dag)
    if not lineage:
        return configured
    named = [team_name(owner) for owner in lineage]
    return tuple(dict.fromkeys([*configured, *named]))


def reports(config: BotConfig, datasets: Iterable[DatasetRef]) -> list[tuple[Report, DatasetRef]]:
    """Each BOT_CONFIG report that reads one of the datasets, with the first such dataset (in
    (namespace, name) order), in the file's order of reports."""
    if not config.reports:
        return []
    wanted = sorted(set(datasets), key=attrgetter("namespace", "name"))
    hits: list[tuple[Report, DatasetRef]] = []
    for report in config.reports:
        test = matcher(report.datasets)
        hit = next((d for d in wanted if test(d.namespace, d.name)), None)
        if hit is not None:
            hits.append((report, hit))
    return hits


def owning_teams(config: BotConfig, dag: DagRef, lineage: Iterable[str] = ()) -> tuple[Team, ...]:
    """The owners of `dag` that BOT_CONFIG declares as teams (the others have no members,
    channel or sinks the bot knows)."""
    return tuple(team for name in owners(config, dag, lineage) if (team := config.team(name)))


@dataclass(frozen=True)
class Denial:
    """Why a user may not act on a backfill of `dag_id`; bot.ownership.messages says it in words."""

    kind: DenialKind
    dag_id: str
    teams: tuple[str, ...] = ()
    """The owning teams, whose members may act."""


def requires_all_owners(config: BotConfig, root: DagRef) -> bool:
    """Whether an ownership rule for `root` asks every team owning a DAG of the plan to approve."""
    return any(
        rule.approve == "all_owners" and matches(rule.pattern, root.namespace, root.dag_id)
        for rule in config.ownership
    )


def also_approving(
    config: BotConfig, root: DagRef, downstream_owners: Iterable[str]
) -> tuple[str, ...]:
    """Teams that may approve a backfill of `root` besides its owners: under an
    `approve: all_owners` rule, the owners of the DAGs it reruns (`downstream_owners`, from the
    plan or the impact); none otherwise."""
    if not requires_all_owners(config, root):
        return ()
    return tuple(downstream_owners)


def requires_second_person(config: BotConfig, root: DagRef) -> bool:
    """Whether an ownership rule for `root` asks for an approver other than the requester."""
    return any(
        rule.second_approver and matches(rule.pattern, root.namespace, root.dag_id)
        for rule in config.ownership
    )


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
