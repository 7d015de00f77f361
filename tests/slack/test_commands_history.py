"""`/backfill history DAG|DATASET|REPORT` as typed: the command it parses to, and errors that
name the fix; a DAG named `history` can still be planned."""

from __future__ import annotations

import pytest

from bot.slack.rules.commands import (
    HISTORY_CHARS,
    CommandError,
    HistoryCommand,
    PlanCommand,
    parse_command,
)


@pytest.mark.parametrize(
    ("text", "subject"),
    [
        ("history example.etl_orders", "example.etl_orders"),
        ("HISTORY public.orders", "public.orders"),
        ("history food_delivery::public.orders", "food_delivery::public.orders"),
        ("history Weekly KPIs", "Weekly KPIs"),  # a report's name, spaces and all
        ('history "Weekly KPIs"', "Weekly KPIs"),
    ],
)
def test_history_takes_a_dag_a_dataset_or_a_report(text: str, subject: str) -> None:
    assert parse_command(text) == HistoryCommand(subject)


def test_history_without_a_subject_shows_the_usage() -> None:
    with pytest.raises(CommandError, match=r"Usage: /backfill history DAG\|DATASET\|REPORT"):
        parse_command("history")


def test_a_subject_too_long_is_refused() -> None:
    with pytest.raises(CommandError, match="at most 1024 characters"):
        parse_command("history " + "x" * (HISTORY_CHARS + 1))


def test_a_dag_named_history_is_still_planned() -> None:
    parsed = parse_command("history 2021-06-04..2021-06-06")
    assert isinstance(parsed, PlanCommand)
    assert (parsed.dag, parsed.range_text) == ("history", "2021-06-04..2021-06-06")
