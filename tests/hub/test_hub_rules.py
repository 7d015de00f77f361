"""The hub's routing rules from plain data: routes by event class, DAG pattern and severity,
quiet hours (held until they end, never a page, urgent notices through), subscriptions (their
patterns, `--downstream`, event classes, one message per channel, none where the bot posts
anyway) and escalation (its targets only, and only when nobody acknowledged in time)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import yaml

from bot.config import BotConfig, parse_config
from bot.config.base import ConfigError
from bot.core.model import DagRef
from bot.hub.rules.routing import (
    HubEvent,
    Subscription,
    escalation_due,
    quiet_until,
    route,
    severity_of,
)

KEY = "K" * 32
NOON = datetime(2021, 6, 4, 12, tzinfo=UTC)
ORDERS = DagRef("food_delivery", "example.etl_orders")
DELIVERY = DagRef("food_delivery", "example.delivery_times")


def config(orders: dict[str, Any] | None = None, **more: Any) -> BotConfig:
    data: dict[str, Any] = {
        "teams": [
            {"name": "orders", "channel": "C0ORDERS", "sinks": ["pager"], **(orders or {})},
            {"name": "platform", "channel": "C0PLATFORM"},
        ],
        "ownership": [{"pattern": "example.*", "team": "orders"}],
        "sinks": [
            {"name": "pager", "kind": "pagerduty", "routing_key": KEY},
            {"name": "oncall", "kind": "pagerduty", "routing_key": KEY},
            {"name": "mail", "kind": "email", "host": "smtp.example.com", "sender": "b@x.io",
             "to": ["orders@x.io"]},
            {"name": "hook", "kind": "webhook", "url": "https://h.example.com/x",
             "secret": "s" * 20},
        ],
        **more,
    }  # fmt: skip
    return parse_config(data)


def event(
    kind: Any = "failure.opened", dag: DagRef = ORDERS, *, severity: Any = "minor", **more: Any
) -> HubEvent:
    owners = more.pop("owners", ("orders",))
    return HubEvent(
        kind=kind, dag=dag, at=NOON, intervals="2021-06-04", owners=owners, severity=severity,
        **more,
    )  # fmt: skip


def sinks(e: HubEvent, c: BotConfig, *, now: datetime = NOON, **more: Any) -> list[str]:
    return [t.sink.name for t in route(e, c, now=now, **more).sinks]


def test_severity_grows_with_what_is_downstream() -> None:
    assert severity_of(downstream=0, reports=0) == "minor"
    assert severity_of(downstream=3, reports=0) == "major"
    assert severity_of(downstream=3, reports=1) == "critical"


def test_routes_pick_by_event_class_pattern_and_severity() -> None:
    rules = {"routes": [
        {"events": ["failures"], "severity": "critical", "to": ["oncall"]},
        {"events": ["sla", "backfills"], "dags": "example.etl_*", "to": ["mail"]},
        {"events": ["reports"], "to": ["hook"]},
    ]}  # fmt: skip
    c = config(rules)
    assert sinks(event(), c) == ["pager"]  # a leaf's failure: the team's own sinks
    assert sinks(event(severity="critical", reports=("KPIs",)), c) == ["pager", "oncall", "hook"]
    assert sinks(event("sla.missed"), c) == ["mail"]
    assert sinks(event("sla.missed", DELIVERY), c) == []  # the pattern leaves it out
    assert sinks(event("sla.missed", DELIVERY, reports=("KPIs",)), c) == ["hook"]
    assert sinks(event("backfill.ended"), c) == ["mail"]
    # a backfill is about every DAG it reruns: a route by pattern hears of it by any of them
    rerun = event("backfill.ended", DagRef("food_delivery", "other.root"), dags=(ORDERS,))
    assert sinks(rerun, c) == ["mail"]
    assert sinks(event(owners=()), c) == []  # nobody owns it: no team's rules apply


def test_pagerduty_pages_failures_only() -> None:
    with pytest.raises(ConfigError, match="PagerDuty pages failures only"):
        config({"routes": [{"events": ["failures", "sla"], "to": ["pager"]}]})
    with pytest.raises(ConfigError, match="sink 'nope', which is not declared"):
        config({"routes": [{"to": ["nope"]}]})
    with pytest.raises(ConfigError, match="sink 'nope', which is not declared"):
        config({"escalation": {"after": "30m", "sinks": ["nope"]}})


BERLIN = {"start": "22:00", "end": "07:00", "timezone": "Europe/Berlin"}


def test_quiet_hours_hold_a_sink_until_they_end_in_their_own_time_zone() -> None:
    c = config({"sinks": ["pager", "mail"], "quiet_hours": BERLIN})
    night = datetime(2021, 6, 4, 21, 30, tzinfo=UTC)  # 23:30 in Berlin (CEST, UTC+2)
    [page, mail] = route(event(), c, now=night).sinks
    assert (page.sink.name, page.held_until) == ("pager", None)  # a page is never held
    assert (mail.sink.name, mail.held_until) == ("mail", datetime(2021, 6, 5, 5, tzinfo=UTC))
    morning = datetime(2021, 6, 5, 4, 59, tzinfo=UTC)  # 06:59 in Berlin
    assert route(event(), c, now=morning).sinks[1].held_until == datetime(2021, 6, 5, 5, tzinfo=UTC)
    assert route(event(), c, now=morning + timedelta(minutes=1)).sinks[1].held_until is None
    assert route(event(), c, now=NOON).sinks[1].held_until is None
    # in winter Berlin is UTC+1: 07:00 is 06:00 UTC
    winter = datetime(2021, 12, 1, 23, tzinfo=UTC)
    assert route(event(), c, now=winter).sinks[1].held_until == datetime(2021, 12, 2, 6, tzinfo=UTC)


def test_urgent_notices_and_a_team_awake_are_not_held() -> None:
    quiet = {"sinks": ["mail"], "quiet_hours": {**BERLIN, "urgent": "major"}}
    c = config(quiet)
    night = datetime(2021, 6, 4, 21, 30, tzinfo=UTC)
    assert route(event(), c, now=night).sinks[0].held_until is not None
    assert route(event(severity="major"), c, now=night).sinks[0].held_until is None
    both = config(
        {"sinks": ["mail"], "quiet_hours": BERLIN},
        teams=[
            {"name": "orders", "sinks": ["mail"], "quiet_hours": BERLIN},
            {"name": "platform", "sinks": ["mail"]},  # routes it too, and is awake
        ],
    )
    awake = event(owners=("orders", "platform"))
    assert route(awake, both, now=night).sinks[0].held_until is None


def test_quiet_hours_within_one_day_and_as_yaml_writes_them() -> None:
    lunch = config({"sinks": ["mail"], "quiet_hours": {"start": "12:00", "end": "13:30"}})
    quiet = lunch.teams[0].quiet_hours
    assert quiet is not None
    assert quiet_until(quiet, NOON) == NOON + timedelta(minutes=90)
    assert quiet_until(quiet, NOON - timedelta(seconds=1)) is None
    assert quiet_until(quiet, NOON + timedelta(minutes=90)) is None
    # unquoted, YAML 1.1 reads 22:00 as the number 1320
    loaded = yaml.safe_load("start: 22:00\nend: 07:00\n")
    assert loaded == {"start": 1320, "end": "07:00"}
    night = config({"quiet_hours": loaded}).teams[0].quiet_hours
    assert night is not None
    assert (night.start.hour, night.end.hour) == (22, 7)
    for wrong, message in (
        ({"start": "22:00", "end": "22:00"}, "same time"),
        ({"start": "25:00", "end": "07:00"}, "not a time of day"),
        ({**BERLIN, "timezone": "Mars/Olympus"}, "not an IANA time zone"),
        ({"start": "22:00+02:00", "end": "07:00"}, "carries an offset"),
    ):
        with pytest.raises(ConfigError, match=message):
            config({"quiet_hours": wrong})


def sub(
    id: str, channel: str, pattern: str, *events: Any, downstream: bool = False
) -> Subscription:
    return Subscription(id, channel, pattern, frozenset(events or ("failures",)), downstream)


def test_subscriptions_add_channels_each_once_never_where_the_bot_posts_anyway() -> None:
    subs = [
        sub("a1", "D0ALICE", "*"),
        sub("a2", "D0ALICE", "example.etl_*"),  # the same DM twice: one message
        sub("b1", "C0ORDERS", "example.*"),  # the alert's channel already has it
        sub("c1", "C0OPS", "reporting.*"),
        sub("d1", "C0SLA", "*", "sla"),
    ]
    decision = route(event(), config(), now=NOON, subscriptions=subs, reached=["C0ORDERS"])
    assert decision.channels == ("D0ALICE",)
    assert decision.subscriptions == ("a1", "a2", "b1")
    late = route(event("sla.missed"), config(), now=NOON, subscriptions=subs)
    assert late.channels == ("C0SLA",)


def test_downstream_subscriptions_follow_the_lineage_and_reports_ride_along() -> None:
    subs = [
        sub("up", "C0UP", "example.etl_orders", downstream=True),
        sub("exact", "C0EXACT", "example.etl_orders"),
        sub("kpi", "C0KPI", "*", "reports"),
    ]
    below = event(dag=DELIVERY, upstream=frozenset({ORDERS}))
    assert route(below, config(), now=NOON, subscriptions=subs).channels == ("C0UP",)
    risky = event(dag=DELIVERY, reports=("Weekly KPIs",))
    assert route(risky, config(), now=NOON, subscriptions=subs).channels == ("C0KPI",)
    # a backfill is about every DAG it reruns
    rerun = event("backfill.approved", dag=DELIVERY, dags=(DELIVERY, ORDERS))
    assert route(rerun, config(), now=NOON, subscriptions=[*subs, sub("bf", "C0BF", "*",
                 "backfills")]).channels == ("C0BF",)  # fmt: skip


def test_an_escalation_goes_to_its_targets_only() -> None:
    c = config(
        {"sinks": ["pager", "mail"],
         "escalation": {"after": "30m", "sinks": ["oncall"], "channel": "C0PLATFORM"}}
    )  # fmt: skip
    subs = [sub("a1", "D0ALICE", "*")]
    escalated = route(event("failure.escalated"), c, now=NOON, subscriptions=subs)
    assert [t.sink.name for t in escalated.sinks] == ["oncall"]
    assert escalated.channels == ("C0PLATFORM",)
    # what the escalation paged hears of the end of the outage
    assert sinks(event("failure.resolved"), c, paged=["pager", "oncall"]) == [
        "pager", "mail", "oncall",
    ]  # fmt: skip
    with pytest.raises(ConfigError, match="needs sinks, a channel, or both"):
        config({"escalation": {"after": "30m"}})
    with pytest.raises(ConfigError, match="at least 1m"):
        config({"escalation": {"after": 10, "channel": "C1"}})


@pytest.mark.parametrize(
    ("minutes", "acknowledged", "escalated", "snoozed", "due"),
    [
        (29, False, False, False, False),
        (30, False, False, False, True),
        (90, True, False, False, False),
        (90, False, True, False, False),
        (90, False, False, True, False),
    ],
)
def test_escalation_is_due_only_when_nobody_acknowledged_in_time(
    minutes: int, acknowledged: bool, escalated: bool, snoozed: bool, due: bool
) -> None:
    assert (
        escalation_due(
            timedelta(minutes=30),
            failed_at=NOON,
            now=NOON + timedelta(minutes=minutes),
            acknowledged=acknowledged,
            escalated=escalated,
            snoozed=snoozed,
        )
        is due
    )
