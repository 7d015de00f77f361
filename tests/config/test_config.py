from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from bot.config import load_config, parse_config
from bot.config.base import ConfigError, matcher, matches
from bot.core.model import DagRef, DatasetRef
from bot.ownership.rules import reports

EXAMPLE = """
teams:
  - name: orders
    channel: C0ORDERS
    members: [U01]
  - name: analytics
    user_groups: [S01]
ownership:
  - pattern: "example.etl_orders*"
    team: orders
    second_approver: true
  - pattern: "reporting::*"
    team: analytics
reports:
  - name: Weekly delivery times
    url: https://bi.example.com/d/42
    team: analytics
    datasets: ["food_delivery::public.top_delivery_*"]
schedules:
  - pattern: "example.*_7_days"
    cron: "@weekly"
sla:
  - pattern: "example.etl_orders"
    deadline: 2h 30m
    notify: [analytics]
limits:
  max_range_days: 31
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "bot.yml"
    path.write_text(text, encoding="utf-8")
    return path


def test_full_example_loads_and_answers_questions(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, EXAMPLE))
    assert config.owners_of(DagRef("food_delivery", "example.etl_orders_7_days")) == ("orders",)
    assert config.owners_of(DagRef("reporting", "weekly_kpis")) == ("analytics",)
    assert config.owners_of(DagRef("food_delivery", "weekly_kpis")) == ()
    assert config.cron_for(DagRef("x", "example.etl_delivery_7_days")) == "@weekly"
    assert config.cron_for(DagRef("x", "example.etl_orders")) is None
    assert config.sla[0].deadline == timedelta(hours=2, minutes=30)
    assert config.limits.max_range_days == 31
    hits = reports(
        config,
        [
            DatasetRef("food_delivery", "public.orders"),
            DatasetRef("food_delivery", "public.top_delivery_times"),
        ],
    )
    assert [(r.name, d.name) for r, d in hits] == [
        ("Weekly delivery times", "public.top_delivery_times")
    ]


def test_no_file_and_empty_file_mean_defaults(tmp_path: Path) -> None:
    assert load_config(None).limits.max_range_days == 92
    assert load_config(write(tmp_path, "")).teams == ()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("teams: [{name: a}]\nownership: [{pattern: x, team: b}]", "refers to team 'b'"),
        ("teams: [{name: a}, {name: a}]", "repeated: a"),
        (
            "schedules: [{pattern: x, cron: 'every day'}]",
            "schedules.0.cron: Value error, 'every day' is not a cron",
        ),
        ("sla: [{pattern: x, deadline: soon}]", "'soon' is not a duration"),
        ("limits: {max_range_days: 0}", "limits.max_range_days"),
        ("teamz: []", "teamz: Extra inputs are not permitted"),
        ("- just a list", "the top level must be a mapping"),
        ("teams: [", "is not valid YAML"),
    ],
)
def test_invalid_files_name_the_file_and_the_field(
    tmp_path: Path, text: str, expected: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as error:
        load_config(path)
    assert str(path) in str(error.value)
    assert expected in str(error.value)


def test_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot be read"):
        load_config(tmp_path / "missing.yml")


def test_parse_config_accepts_parsed_yaml() -> None:
    assert parse_config({"approvers": {"users": ["U1"]}}).approvers.users == ("U1",)


def test_shipped_example_is_valid() -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "bot-config.yml"
    config = load_config(example)
    assert config.owners_of(DagRef("reporting", "reporting.weekly_kpis")) == ("analytics",)
    assert {r.name for r in config.reports} == {"Weekly delivery times", "Weekly KPIs"}


def test_the_late_event_sweep_keeps_a_bounded_number_of_buckets() -> None:
    with pytest.raises(ConfigError, match="raise late_bucket_s to at least 300"):
        parse_config({"watch": {"late_window_s": 86400, "late_bucket_s": 60}})
    watch = parse_config({"watch": {"late_window_s": 86400, "late_bucket_s": 300}}).watch
    assert watch.late_window_s / watch.late_bucket_s == 288


def test_snooze_defaults_to_the_approve_rules_and_can_be_widened() -> None:
    assert parse_config({}).watch.snooze == "owners"
    wide = parse_config({"watch": {"snooze": "anyone_in_channel"}})
    assert wide.watch.snooze == "anyone_in_channel"
    with pytest.raises(ConfigError, match=r"watch\.snooze"):
        parse_config({"watch": {"snooze": "everyone"}})


PATTERNS = ["example.*", "food_delivery::public.*", "re*::kpis.?eekly", "a::b::c", "[!x]*"]
NAMES = [
    ("food_delivery", "public.orders"),
    ("food_delivery", "example.etl_orders"),
    ("reporting", "kpis.weekly"),
    ("other", "public.orders"),
    ("a", "b::c"),
    ("xs", "x1"),
    ("", ""),
]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_a_matcher_answers_as_matches_does(pattern: str) -> None:
    # reports test tens of thousands of datasets with one matcher; it must not read otherwise
    for patterns in ([pattern], [pattern, "nothing"]):
        test = matcher(patterns)
        for namespace, name in NAMES:
            expected = any(matches(p, namespace, name) for p in patterns)
            assert test(namespace, name) == expected, (patterns, namespace, name)


def test_a_reports_ready_by_and_the_budget_are_checked() -> None:
    report = {"name": "KPIs", "datasets": ["kpis.*"], "team": None}
    parsed = parse_config({"reports": [{**report, "ready_by": "08:00", "days": "mon-fri",
                                        "timezone": "Europe/Berlin"}],
                           "execution": {"budget": {"total": 8, "per_team": 4,
                                                    "pools": [{"dags": "finance.*", "max": 2}],
                                                    "urgent_within": "6h"}}})  # fmt: skip
    deadline = parsed.reports[0].deadline()
    assert deadline is not None
    assert deadline.described() == "08:00 Europe/Berlin mon-fri"
    assert parsed.execution.budget.enforced
    assert parsed.execution.budget.urgent_within == timedelta(hours=6)
    assert not parse_config({}).execution.budget.enforced
    assert parse_config({"reports": [report]}).reports[0].deadline() is None
    for bad, says in [
        ({"reports": [{**report, "ready_by": "25:00"}]}, "reports.0.ready_by"),
        ({"reports": [{**report, "ready_by": "08:00", "days": "someday"}]}, "reports.0.days"),
        ({"reports": [{**report, "ready_by": "08:00", "timezone": "Mars/Base"}]}, "timezone"),
        ({"execution": {"budget": {"total": 0}}}, "execution.budget.total"),
        ({"execution": {"budget": {"pools": [{"dags": "x.*", "max": 0}]}}}, "pools.0.max"),
    ]:
        with pytest.raises(ConfigError, match=says):
            parse_config(bad)
