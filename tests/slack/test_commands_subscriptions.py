"""`/backfill subscribe`, `subscriptions` and `unsubscribe` as typed: the commands they parse to,
and errors that name the fix."""

from __future__ import annotations

import pytest

from bot.config.hub import EVENT_CLASSES
from bot.slack.rules.commands import (
    PATTERN_CHARS,
    CommandError,
    PlanCommand,
    SubscribeCommand,
    SubscriptionsCommand,
    UnsubscribeCommand,
    parse_command,
)


def test_subscribe_without_flags_takes_every_event_class() -> None:
    assert parse_command("subscribe example.etl_*") == SubscribeCommand(
        "example.etl_*", EVENT_CLASSES, False
    )
    assert EVENT_CLASSES == ("failures", "sla", "backfills", "reports")


@pytest.mark.parametrize(
    ("text", "events", "downstream"),
    [
        ("subscribe example.* --failures", ("failures",), False),
        ("subscribe --sla example.*", ("sla",), False),
        ("subscribe example.* --reports --failures", ("failures", "reports"), False),
        ("subscribe example.* --sla --sla --failures --sla", ("failures", "sla"), False),
        ("subscribe example.* --downstream", EVENT_CLASSES, True),
        ("subscribe example.* --downstream --backfills --downstream", ("backfills",), True),
        ("SUBSCRIBE example.* --FAILURES", ("failures",), False),
        ("subscribe example.* \u2014failures", ("failures",), False),  # an autocorrected --
        (
            "subscribe example.* --failures --sla --backfills --reports",
            EVENT_CLASSES,
            False,
        ),
    ],
)
def test_subscribe_flags(text: str, events: tuple[str, ...], downstream: bool) -> None:
    assert parse_command(text) == SubscribeCommand("example.*", events, downstream)


@pytest.mark.parametrize(
    "pattern",
    [
        "example.etl_orders",
        "*",
        "food_delivery::example.*",
        "postgres://db:5432::public.*",
        "example.etl_[ab]?",
        "Example.ETL",
        "x" * PATTERN_CHARS,
    ],
)
def test_subscribe_keeps_the_pattern_as_typed(pattern: str) -> None:
    parsed = parse_command(f"subscribe {pattern}")
    assert isinstance(parsed, SubscribeCommand)
    assert parsed.pattern == pattern


@pytest.mark.parametrize(
    ("text", "fix"),
    [
        ("subscribe", "Expected one DAG pattern, got no pattern"),
        ("subscribe --failures", "Expected one DAG pattern, got no pattern"),
        ("subscribe a.* b.*", "got 2 patterns"),
        ("subscribe example.* --failure", "Unknown option --failure"),
        ("subscribe example.* --failures=yes", "Unknown option --failures=yes"),
        ("subscribe example.* -f", "Unknown option -f"),
        ("subscribe example.* --only", "Unknown option --only"),
        ("subscribe " + "x" * (PATTERN_CHARS + 1), f"at most {PATTERN_CHARS}"),
        ("subscribe example.\x00etl", "spaces or control characters"),
        ("subscribe example.\u200betl", "spaces or control characters"),
        ("subscribe example.\x7f", "spaces or control characters"),
        ("subscribe ::example.*", "NS::GLOB needs a namespace"),
        ("subscribe food_delivery::", "NS::GLOB needs a namespace"),
        ("subscriptions now", "Usage: /backfill subscriptions"),
        ("unsubscribe", "Usage: /backfill unsubscribe ID"),
        ("unsubscribe 1a2b3c4d 5e6f7a8b", "Usage: /backfill unsubscribe ID"),
        ("unsubscribe 1a2b3c4", "8 hex characters"),
        ("unsubscribe 1a2b3c4d5", "8 hex characters"),
        ("unsubscribe xyz12345", "8 hex characters"),
    ],
)
def test_bad_input_names_the_fix(text: str, fix: str) -> None:
    with pytest.raises(CommandError) as raised:
        parse_command(text)
    assert fix in str(raised.value)


def test_usage_errors_show_the_usage() -> None:
    for text in ("subscribe", "subscribe x --bogus"):
        with pytest.raises(CommandError, match=r"/backfill subscribe PATTERN \[--failures\]"):
            parse_command(text)


def test_subscriptions_and_unsubscribe() -> None:
    assert parse_command("subscriptions") == SubscriptionsCommand()
    assert parse_command("Subscriptions") == SubscriptionsCommand()
    assert parse_command("unsubscribe 1a2b3c4d") == UnsubscribeCommand("1a2b3c4d")
    assert parse_command("unsubscribe `1A2B3C4D`") == UnsubscribeCommand("1a2b3c4d")


def test_other_commands_are_unchanged() -> None:
    assert parse_command("example.etl_orders 2021-06-04") == PlanCommand(
        "example.etl_orders", "2021-06-04"
    )
    # a DAG named like a subcommand's prefix is still a DAG
    assert parse_command("subscriber 2021-06-04") == PlanCommand("subscriber", "2021-06-04")
