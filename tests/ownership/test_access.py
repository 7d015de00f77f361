"""Who may subscribe a channel to a DAG pattern: `covers` (an ownership rule covering a
subscription pattern) and `may_subscribe` (DMs, `hub.subscriptions`, approvers, owning teams and
their user groups)."""

from __future__ import annotations

from typing import Any

import pytest

from bot.config import BotConfig, parse_config
from bot.ownership.rules import DenialKind, covering_teams, covers
from bot.ownership.service import may_subscribe


class Groups:
    def __init__(self, members: dict[str, frozenset[str]]) -> None:
        self.groups = members

    async def members(self, group_id: str) -> frozenset[str]:
        return self.groups.get(group_id, frozenset())


def config(**more: Any) -> BotConfig:
    return parse_config(
        {
            "teams": [
                {"name": "orders", "members": ["U0ORDERS01"]},
                {"name": "platform", "user_groups": ["S0PLATFORM"]},
                {"name": "food", "members": ["U0FOOD0001"]},
            ],
            "ownership": [
                {"pattern": "example.etl_orders*", "team": "orders"},
                {"pattern": "*", "team": "platform"},
                {"pattern": "food_delivery::example.*", "team": "food"},
            ],
            **more,
        }
    )


@pytest.mark.parametrize(
    ("rule", "pattern", "covered"),
    [
        ("example.*", "example.etl_*", True),
        ("example.*", "example.etl_orders", True),
        ("example.*", "example.*", True),
        ("example.*", "*", False),
        ("example.*", "ex*", False),
        ("example.*", "other.*", False),
        ("*", "*", True),
        ("*", "anything::at.all", True),
        ("example.etl_orders*", "example.etl_orders_7_days", True),
        ("example.etl_orders*", "example.etl_*", False),
        ("example.?", "example.*", False),  # one character does not cover any number
        ("example.?*", "example.*", False),  # nor at least one cover none
        ("*x*", "a[xy]b", False),  # `ayb` has no x
        ("example.*", "example.etl_[ab]*", True),
        ("example.*", "food_delivery::example.etl_*", True),  # a rule without NS: any NS
        ("food_delivery::example.*", "food_delivery::example.etl_*", True),
        ("food_delivery::example.*", "example.etl_*", False),  # every namespace
        ("food_delivery::example.*", "other::example.etl_*", False),
        ("*::example.*", "example.etl_*", True),
        ("a[bc]", "a[bc]", True),  # the same pattern
    ],
)
def test_covers(rule: str, pattern: str, covered: bool) -> None:
    assert covers(rule, pattern) is covered


def test_covering_teams_in_file_order() -> None:
    assert covering_teams(config(), "example.etl_orders") == ("orders", "platform")
    assert covering_teams(config(), "*") == ("platform",)
    assert covering_teams(config(), "food_delivery::example.x") == ("platform", "food")


async def test_owners_approvers_and_user_groups_may_subscribe_a_channel() -> None:
    groups = Groups({"S0PLATFORM": frozenset({"U0PLAT0001"}), "S0APPROVE": frozenset({"U0AP"})})
    cfg = config(approvers={"user_groups": ["S0APPROVE"]})

    async def denied(user: str, pattern: str, channel: str = "C0BACKFILL") -> Any:
        return await may_subscribe(cfg, groups, pattern, user=user, channel=channel)

    assert await denied("U0ORDERS01", "example.etl_orders") is None
    assert await denied("U0ORDERS01", "example.etl_orders_*") is None
    assert await denied("U0PLAT0001", "*") is None  # through its user group
    assert await denied("U0AP", "*") is None  # an approver, through a group
    refused = await denied("U0ORDERS01", "example.*")
    assert refused is not None
    assert (refused.kind, refused.dag_id, refused.teams) == (
        DenialKind.NOT_ALLOWED,
        "example.*",
        ("platform",),
    )
    assert await denied("U0NOBODY01", "*", channel="D0NOBODY01") is None  # a DM: anything


async def test_anyone_may_with_hub_subscriptions_anyone() -> None:
    cfg = config(hub={"subscriptions": "anyone"})
    assert await may_subscribe(cfg, Groups({}), "*", user="U0NOBODY01", channel="C0X") is None


async def test_nobody_configured() -> None:
    bare = parse_config({})
    refused = await may_subscribe(bare, Groups({}), "x.*", user="U0NOBODY01", channel="C0X")
    assert refused is not None
    assert refused.kind == DenialKind.NO_ONE
