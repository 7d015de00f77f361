"""`/backfill subscribe`, `subscriptions` and `unsubscribe`'s answers (templates/hub/
subscription_*.json.j2): golden files, the sentences the e2e tests look for, escaping of what
people type (a pattern, a user id that is not one), and Slack's limits at 50 subscriptions."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from bot.config.hub import EVENT_CLASSES
from bot.hub.messages import subscriptions as words
from bot.hub.rules.subscriptions import SubscriptionLine
from bot.ownership.rules import Denial, DenialKind
from bot.slack.messages import common
from bot.slack.rules.commands import PATTERN_CHARS
from tests.support.golden import Case, assert_golden, check, mrkdwn_texts

ADDED = "hub/subscription_added.json.j2"
REMOVED = "hub/subscription_removed.json.j2"
LIST = "hub/subscription_list.json.j2"
AT = datetime(2021, 6, 8, 9, 30, tzinfo=UTC)
ORDERS = SubscriptionLine("1a2b3c4d", "example.etl_*", EVENT_CLASSES, False, "U0ORDERS01", AT)
FAILURES = SubscriptionLine(
    "5e6f7a8b", "food_delivery::example.*", ("failures",), True, "U0ALICE001", AT
)
HOSTILE = SubscriptionLine(
    "0badc0de", "<!channel>*`&<@U0EVIL>", ("failures", "sla"), True, "U0EVIL> <!here", AT
)
LONGEST = SubscriptionLine(
    "ffffffff", "&<" * (PATTERN_CHARS // 2), EVENT_CLASSES, True, "U0" + "A" * 1022, AT
)
LIVE = re.compile(r"<([^<>]*)>")


def listing(count: int, line: SubscriptionLine = ORDERS) -> list[SubscriptionLine]:
    return [replace(line, id=f"{i:08x}") for i in range(count)]


CASES: dict[str, Case] = {
    "subscription_added": Case(ADDED, lambda: words.subscribed(ORDERS, dm=False)),
    "subscription_added_existing": Case(
        ADDED, lambda: words.subscribed(FAILURES, dm=True, existing=True)
    ),
    "subscription_added_escaping": Case(ADDED, lambda: words.subscribed(HOSTILE, dm=False)),
    "subscription_removed": Case(REMOVED, lambda: words.unsubscribed(FAILURES, dm=False)),
    "subscription_removed_escaping": Case(REMOVED, lambda: words.unsubscribed(HOSTILE, dm=True)),
    "subscription_list": Case(LIST, lambda: words.subscription_list([ORDERS, FAILURES], dm=False)),
    "subscription_list_empty": Case(LIST, lambda: words.subscription_list([], dm=True)),
    "subscription_list_escaping": Case(
        LIST, lambda: words.subscription_list([HOSTILE, ORDERS], dm=False)
    ),
    "subscription_list_long": Case(LIST, lambda: words.subscription_list(listing(50), dm=False)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert_golden(name, CASES[name], monkeypatch)


def live(payload: dict[str, Any]) -> list[str]:
    """Every `<…>` Slack would make live, but the mentions of real user ids."""
    texts = [payload["text"], *mrkdwn_texts(payload)]
    found = [m.group() for text in texts for m in LIVE.finditer(text)]
    return [f for f in found if not re.fullmatch(r"<@U0[A-Z0-9]+>", f)]


def test_what_people_typed_is_never_live() -> None:
    owned = Denial(DenialKind.NOT_ALLOWED, HOSTILE.pattern, ("<!here>",))
    nobody = Denial(DenialKind.NO_ONE, HOSTILE.pattern)
    payloads = [
        words.subscribed(HOSTILE, dm=False),
        words.subscribed(HOSTILE, dm=True, existing=True),
        words.unsubscribed(HOSTILE, dm=False),
        words.subscription_list([HOSTILE] * 3, dm=False),
        common.refusal(words.not_allowed(owned)),
        common.refusal(words.not_allowed(nobody)),
        common.refusal(words.not_allowed_to_remove(owned, "x`<!here>")),
        common.action_result(words.already_removed(HOSTILE.id, HOSTILE.created_by)),
    ]
    for payload in payloads:
        check(payload)
        assert live(payload) == []
    shown = "\n".join(mrkdwn_texts(words.subscription_list([HOSTILE], dm=False)))
    assert "`&lt;!channel&gt;*ˋ&amp;&lt;@U0EVIL&gt;`" in shown
    assert "added by &lt;@U0EVIL&gt; &lt;!here&gt;" in shown


def test_fifty_of_the_longest_fit_one_message() -> None:
    payload = words.subscription_list(listing(50, LONGEST), dm=False)
    check(payload)
    rows = [line for text in mrkdwn_texts(payload) for line in text.split("\n")]
    assert len([r for r in rows if " · added by " in r]) == 50
    assert "… and" not in json.dumps(payload)


def test_the_list_shows_id_pattern_events_downstream_who_and_when() -> None:
    section, footer = mrkdwn_texts(words.subscription_list([ORDERS, FAILURES], dm=False))
    first, second = section.split("\n")
    assert (
        footer == "`/backfill unsubscribe ID` removes one; `/backfill subscribe PATTERN` adds one."
    )
    assert first == (
        "`1a2b3c4d` · `example.etl_*` · failures, sla, backfills, reports · added by "
        "<@U0ORDERS01> on 2021-06-08 09:30 UTC"
    )
    assert second == (
        "`5e6f7a8b` · `food_delivery::example.*` · failures · downstream · added by "
        "<@U0ALICE001> on 2021-06-08 09:30 UTC"
    )


def test_refusals_say_who_may_and_how_to_open_it_up() -> None:
    owned = words.not_allowed(Denial(DenialKind.NOT_ALLOWED, "example.*", ("platform", "data")))
    assert owned == (
        "Only members of the teams owning `example.*` (platform, data) or the configured "
        "approvers may subscribe a channel to it."
    )
    nobody = words.not_allowed(Denial(DenialKind.NO_ONE, "*"))
    assert "No team's ownership covers `*`" in nobody
    assert "`hub.subscriptions: anyone` in BOT_CONFIG" in words.NOT_ALLOWED_HINT
    assert words.unknown_subscription("1a2b3c4d", dm=False) == (
        "No subscription of this channel has the id 1a2b3c4d. "
        "See /backfill subscriptions for the ids here."
    )
