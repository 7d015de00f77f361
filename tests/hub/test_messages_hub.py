"""What subscribed channels and an escalation's channel see of a failure
(templates/incidents/subscriber_notice.json.j2), as golden files."""

from __future__ import annotations

import pytest

from bot.incidents.messages.subscribers import FailureNotice, failure_notice
from tests.support.golden import Case, assert_golden, mrkdwn_texts

HUB = "incidents/subscriber_notice.json.j2"
OPENED = FailureNotice(
    "example.etl_orders",
    "2021-06-04 to 2021-06-06",
    "failed",
    "C0ORDERS",
    failures=3,
    error="java.io.IOException: disk full",
    reports=["Weekly KPIs"],
    subscription="0a1b2c3d",
    pattern="example.*",
)
WEIRD = "<!channel> `tick` & <https://evil.example|click>"

CASES = {
    "hub_notice_failed": Case(HUB, lambda: failure_notice(OPENED)),
    "hub_notice_acknowledged": Case(
        HUB,
        lambda: failure_notice(
            FailureNotice(
                "example.etl_orders",
                "2021-06-04",
                "acknowledged",
                "C0ORDERS",
                acknowledged_by="U0ALICE",
                subscription="0a1b2c3d",
                pattern="*",
            )
        ),
    ),
    "hub_notice_resolved": Case(
        HUB,
        lambda: failure_notice(
            FailureNotice(
                "example.etl_orders",
                "2021-06-04",
                "resolved",
                None,
                subscription="0a1b2c3d",
                pattern="example.etl_orders",
            )
        ),
    ),
    "hub_notice_escalated": Case(
        HUB,
        lambda: failure_notice(
            FailureNotice(
                "example.etl_orders",
                "2021-06-04",
                "escalated",
                "C0ORDERS",
                error="boom",
                waited="30 minutes",
            )
        ),
    ),
    "hub_notice_escaping": Case(
        HUB,
        lambda: failure_notice(
            FailureNotice(
                WEIRD,
                WEIRD,
                "acknowledged",
                WEIRD,
                error=WEIRD * 40,
                acknowledged_by=WEIRD,
                reports=[WEIRD] * 12,
                subscription=WEIRD,
                pattern=WEIRD,
            )
        ),
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert_golden(name, CASES[name], monkeypatch)


def test_outside_text_never_pings_or_links() -> None:
    payload = failure_notice(
        FailureNotice(WEIRD, WEIRD, "acknowledged", WEIRD, error=WEIRD,
                      acknowledged_by=WEIRD, reports=[WEIRD], subscription=WEIRD, pattern=WEIRD)
    )  # fmt: skip
    for text in mrkdwn_texts(payload):
        assert "<!channel>" not in text
        assert "<https://evil" not in text


def test_a_notice_names_the_subscription_and_how_to_stop_it() -> None:
    [*_, where] = mrkdwn_texts(failure_notice(OPENED))
    assert "<#C0ORDERS>" in where
    assert "`/backfill unsubscribe 0a1b2c3d`" in where
    assert "Reports at risk: Weekly KPIs." in mrkdwn_texts(failure_notice(OPENED))[2]
