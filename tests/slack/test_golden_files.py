"""The golden files as a whole: every Slack template has at least one, and none is left over
from a case that no longer exists."""

from __future__ import annotations

from tests.backfill import (
    test_messages,
    test_messages_notices,
    test_messages_progress,
    test_messages_verification,
)
from tests.hub import test_messages_hub, test_subscription_messages
from tests.incidents import test_messages_watch
from tests.slack import test_messages_hostile
from tests.support.golden import GOLDEN, Case, slack_templates

MODULES = (
    test_messages,
    test_messages_hostile,
    test_messages_hub,
    test_messages_notices,
    test_messages_progress,
    test_messages_verification,
    test_messages_watch,
    test_subscription_messages,
)


def all_cases() -> dict[str, Case]:
    cases: dict[str, Case] = {}
    for module in MODULES:
        twice = set(cases) & set(module.CASES)
        assert not twice, f"{module.__name__} reuses golden names {sorted(twice)}"
        cases.update(module.CASES)
    return cases


def test_no_stale_golden_files() -> None:
    assert {p.stem for p in GOLDEN.glob("*.json")} == set(all_cases())


def test_every_slack_template_has_a_golden_file() -> None:
    covered = {case.template for case in all_cases().values()}
    assert slack_templates() - covered == set()
    assert covered - slack_templates() == set()
