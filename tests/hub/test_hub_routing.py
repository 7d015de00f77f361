"""The hub's routing and what it sends, from plain data: BOT_CONFIG's sinks (secrets from
`${VAR}`s, every reference checked), one routing decision per event, and the bodies each sink
gets (no secret stored)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.config import BotConfig, parse_config
from bot.config.base import ConfigError
from bot.config.sinks import PagerDutySink
from bot.core.model import DagRef
from bot.hub.messages.documents import body_for, dedup_key
from bot.hub.rules.routing import HubEvent, route

KEY = "K" * 32
AT = datetime(2021, 6, 5, 2, tzinfo=UTC)


def config(**more: Any) -> BotConfig:
    data: dict[str, Any] = {
        "teams": [
            {"name": "orders", "sinks": ["pager", "hook"]},
            {"name": "platform", "sinks": ["hook"]},
            {"name": "analytics"},
        ],
        "ownership": [
            {"pattern": "example.etl_orders*", "team": "orders"},
            {"pattern": "example.*", "team": "platform"},
            {"pattern": "reporting.*", "team": "analytics"},
        ],
        "sinks": [
            {"name": "pager", "kind": "pagerduty", "routing_key": "${PD_KEY}"},
            {"name": "hook", "kind": "webhook", "url": "https://hooks.example.com/x",
             "secret": "${HOOK_SECRET}"},
        ],
        **more,
    }  # fmt: skip
    return parse_config(data, environ={"PD_KEY": KEY, "HOOK_SECRET": "s" * 20})


def event(
    dag: str = "example.etl_orders", kind: Any = "failure.opened", lineage: tuple[str, ...] = ()
) -> HubEvent:
    ref = DagRef("food_delivery", dag)
    return HubEvent(
        kind=kind, incident_id="abc123", dag=ref, intervals="2021-06-04", at=AT,
        error="disk full", owners=(*config().owners_of(ref), *lineage),
    )  # fmt: skip


def sinks(event: HubEvent, config: BotConfig, **more: Any) -> list[str]:
    return [target.sink.name for target in route(event, config, now=AT, **more).sinks]


def test_each_sink_of_the_owning_teams_gets_the_event_once_in_config_order() -> None:
    assert sinks(event(), config()) == ["pager", "hook"]
    assert sinks(event("example.delivery"), config()) == ["hook"]
    assert sinks(event("reporting.weekly_kpis"), config()) == []
    assert sinks(event("nobody.owns_this"), config()) == []
    # an owner the lineage names (an OpenLineage ownership facet) routes like BOT_CONFIG's
    assert sinks(event("nobody.owns_this", lineage=("team:orders",)), config()) == [
        "pager",
        "hook",
    ]


def test_the_end_of_an_outage_reaches_every_sink_its_start_did() -> None:
    # the team dropped its pager while the page was open: the resolve still goes there
    moved = config(teams=[{"name": "orders", "sinks": ["hook"]}, {"name": "platform"},
                          {"name": "analytics"}])  # fmt: skip
    resolved = event(kind="failure.resolved")
    assert sinks(resolved, moved, paged=["pager"]) == ["hook", "pager"]
    # a new outage is routed afresh
    assert sinks(event(), moved, paged=["pager"]) == ["hook"]


def test_secrets_come_from_the_environment_and_are_never_shown() -> None:
    pager = config().sink("pager")
    assert isinstance(pager, PagerDutySink)
    assert pager.routing_key.get_secret_value() == KEY
    assert KEY not in repr(config())
    with pytest.raises(ConfigError, match=r"sinks: \$\{PD_KEY\} is not set"):
        parse_config(
            {"sinks": [{"name": "p", "kind": "pagerduty", "routing_key": "${PD_KEY}"}]},
            environ={},
        )
    # `${` elsewhere is just text
    assert parse_config({"teams": [{"name": "${x}"}]}).teams[0].name == "${x}"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"teams": [{"name": "orders", "sinks": ["nope"]}]},
         "team 'orders' sends to sink 'nope', which is not declared under sinks"),
        ({"sinks": [{"name": "a", "kind": "webhook", "url": "https://x", "secret": "s" * 16}] * 2},
         "sink names must be unique; repeated: a"),
        ({"sinks": [{"name": "p", "kind": "pagerduty", "routing_key": "short"}]},
         "a PagerDuty routing key is 32 characters"),
        ({"sinks": [{"name": "w", "kind": "webhook", "url": "ftp://x", "secret": "s" * 16}]},
         "String should match pattern"),
        ({"sinks": [{"name": "w", "kind": "webhook", "url": "https://x", "secret": "short"}]},
         "a webhook's signing secret is at least 16 characters"),
        ({"sinks": [{"name": "Bad Name", "kind": "webhook", "url": "https://x",
                     "secret": "s" * 16}]}, "String should match pattern"),
        ({"sinks": [{"name": "x", "kind": "sms"}]}, "does not match any of the expected tags"),
        ({"sinks": [{"name": "m", "kind": "email", "host": "smtp", "security": "none",
                     "username": "u", "password": "p", "sender": "a@b", "to": ["c@d"]}]},
         "a password is only sent over TLS"),
        ({"sinks": [{"name": "m", "kind": "email", "host": "smtp", "sender": "a@b",
                     "to": ["not an address"]}]}, "'not an address' is not an e-mail address"),
        ({"sinks": [{"name": "m", "kind": "email", "host": "smtp", "sender": "a@b",
                     "to": []}]}, "to"),
    ],
)  # fmt: skip
def test_a_bad_sink_is_refused_with_the_field_named(change: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config(change)
    assert message in str(raised.value)


def test_one_outage_is_one_pagerduty_alert_and_no_routing_key_is_stored() -> None:
    pager = config().sink("pager")
    assert pager is not None
    trigger = body_for(pager, event())
    assert "routing_key" not in trigger
    assert trigger["event_action"] == "trigger"
    assert trigger["dedup_key"] == dedup_key("abc123")
    assert trigger["payload"]["summary"] == "example.etl_orders failed for 2021-06-04: disk full"
    assert trigger["payload"]["source"] == "food_delivery"
    assert trigger["payload"]["group"] == "orders"
    for kind, action in (("failure.acknowledged", "acknowledge"), ("failure.resolved", "resolve")):
        body = body_for(pager, event(kind=kind))
        assert body == {"event_action": action, "dedup_key": dedup_key("abc123")}


def test_the_webhook_document_is_versioned_and_carries_the_incident() -> None:
    hook = config().sink("hook")
    assert hook is not None
    long_error = event()
    document = body_for(hook, HubEvent(**{**long_error.__dict__, "error": "x" * 5000}))
    assert document["version"] == "1"
    assert document["type"] == "failure.opened"
    assert document["occurred_at"] == "2021-06-05T02:00:00Z"
    assert document["incident"]["dag_id"] == "example.etl_orders"
    assert len(document["incident"]["error"]) == 1000  # bounded, whatever the error was


def test_a_data_incident_says_bad_data_to_every_sink() -> None:
    cfg = config(sinks=[
        {"name": "pager", "kind": "pagerduty", "routing_key": "${PD_KEY}"},
        {"name": "hook", "kind": "webhook", "url": "https://hooks.example.com/x",
         "secret": "${HOOK_SECRET}"},
        {"name": "mail", "kind": "email", "host": "smtp.example.com", "sender": "b@example.com",
         "to": ["o@example.com"], "security": "none"},
    ])  # fmt: skip
    words = "orders wrote 0 rows for 2021-06-04; it usually writes about 41,000 rows"
    bad = HubEvent(**{**event().__dict__, "incident_kind": "data", "error": words})
    hook, pager, mail = (cfg.sink(name) for name in ("hook", "pager", "mail"))
    assert hook is not None and pager is not None and mail is not None  # noqa: PT018
    document = body_for(hook, bad)
    assert (document["type"], document["incident"]["kind"]) == ("failure.opened", "data")
    assert document["incident"]["error"] == words
    assert body_for(hook, event())["incident"]["kind"] == "failure"
    page = body_for(pager, bad)["payload"]
    assert page["summary"].startswith("example.etl_orders wrote bad data for 2021-06-04: orders")
    assert page["class"] == "airflow_dag_bad_data"
    email = body_for(mail, bad)
    assert email["subject"] == "[backfill-bot] example.etl_orders wrote bad data for 2021-06-04"
    assert "Runs with bad data: 1" in email["text"]


def test_the_example_configs_sinks_work_once_uncommented() -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "bot-config.yml"
    lines = example.read_text().splitlines()
    start = lines.index("# sinks:")
    team: list[str] = []
    hub = False  # inside a team's commented hub block, up to its first line that is not
    for line in lines[:start]:
        hub = (hub and line.startswith("    # ")) and not line.strip().startswith("# The hub")
        team.append(line.replace("    # ", "    ", 1) if hub else line)
        hub = hub or line.strip().startswith("# The hub")
    text = "\n".join([*team, *(line.removeprefix("# ") for line in lines[start:])])
    loaded = parse_config(
        yaml.safe_load(text),
        environ={
            "PAGERDUTY_ORDERS_KEY": KEY,
            "PAGERDUTY_PLATFORM_KEY": KEY,
            "DATA_HOOK_SECRET": "s" * 24,
            "SMTP_PASSWORD": "p",
            "TEAMS_ORDERS_URL": "https://tenant.webhook.office.com/webhookb2/x",
        },
    )
    assert [s.kind for s in loaded.sinks] == ["pagerduty", "pagerduty", "webhook", "email", "teams"]
    assert sinks(event(), loaded) == ["orders-pager", "data-hook"]
    critical = HubEvent(**{**event().__dict__, "severity": "critical"})
    assert sinks(critical, loaded) == ["orders-pager", "data-hook", "orders-teams"]
    assert sinks(HubEvent(**{**event().__dict__, "kind": "sla.missed"}), loaded) == ["orders-mail"]
    escalated = HubEvent(**{**event().__dict__, "kind": "failure.escalated"})
    assert sinks(escalated, loaded) == ["platform-pager"]
    [orders] = [t for t in loaded.teams if t.name == "orders"]
    assert orders.quiet_hours is not None
    assert orders.quiet_hours.timezone == "Europe/Berlin"
