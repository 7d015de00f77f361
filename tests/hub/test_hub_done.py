"""The hub, end to end, as the issue's "Done means" asks: one failure reaches the owning
team's channel, a DM subscribed with `/backfill subscribe`, a PagerDuty page (resolved by the
COMPLETE), an e-mail and a signed webhook, each once, across a restart too; quiet hours hold
a team's notices and send them as one digest when they end; an escalation fires only for an
outage nobody acknowledged in time."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bot.config import BotConfig, parse_config
from bot.hub.store import subscriptions as subscription_store
from bot.slack.rules.ids import ActionId
from standins.marquez.server import StandInServer
from standins.sinks.pagerduty import PagerDutyStandin, running_pagerduty_standin
from standins.sinks.webhook import WebhookReceiver, running_webhook_receiver
from standins.slack.server import SlackStandIn, running_slack_standin
from tests.hub.test_hub_sinks import ROUTING_KEY, SECRET, actions, delivered, types
from tests.sla.test_sla import DAY, T0, dag_run
from tests.support import e2e
from tests.support.e2e import CHANNEL, CONFIG, Bot, running_bot, start_bot
from tests.support.execution import approve, request_backfill
from tests.support.smtp import PASSWORD, USER, Mailbox, smtp_server
from tests.support.story import (
    ANALYTICS,
    BOB,
    CAROL,
    DAYS,
    LOGISTICS,
    ORDERS,
    OWNER,
    alerts,
    click,
    post_events,
    run_event,
    story_config,
)

ALICE = "U0ALICE001"  # in no team: subscribes her own DM
PLATFORM = "C0PLATFRM1"
OPS = "C0OPS00001"
ONCALL_KEY = "0NCALL0KEY000000000000000000000B"


def config(
    pagerduty: PagerDutyStandin,
    hook: WebhookReceiver,
    mail_port: int,
    ca: Path,
    *,
    orders: dict[str, Any] | None = None,
) -> BotConfig:
    return story_config(
        teams=[
            {"name": "orders", "channel": ORDERS, "members": [OWNER],
             "sinks": ["orders-pager", "data-hook", "orders-mail"], **(orders or {})},
            {"name": "platform", "channel": PLATFORM, "members": ["U0PLATFRM1"]},
            {"name": "logistics", "channel": LOGISTICS, "members": [BOB]},
            {"name": "analytics", "channel": ANALYTICS, "members": [CAROL]},
        ],
        sinks=[
            {"name": "orders-pager", "kind": "pagerduty", "routing_key": ROUTING_KEY,
             "url": pagerduty.enqueue_url},
            {"name": "oncall-pager", "kind": "pagerduty", "routing_key": ONCALL_KEY,
             "url": pagerduty.enqueue_url},
            {"name": "data-hook", "kind": "webhook", "url": hook.url_for("data"),
             "secret": SECRET},
            {"name": "orders-mail", "kind": "email", "host": "127.0.0.1", "port": mail_port,
             "username": USER, "password": PASSWORD, "sender": "bot@example.com",
             "to": ["orders@example.com"], "ca_file": str(ca)},
        ],
        hub={"retry_base_s": 0.05, "retry_max_s": 0.2},
        # group_wait_s 0: Slack alerts are sent at once (the sinks are the subject here, not
        # how the watcher gathers its Slack calls), so no settle waits out 2 s of gathering.
        watch={"marquez_web_url": "http://marquez.example.com:3000", "poll": False,
               "ops_channel": OPS, "group_wait_s": 0},
    )  # fmt: skip


World = tuple[PagerDutyStandin, WebhookReceiver, Mailbox, int, Path, SlackStandIn]


@asynccontextmanager
async def world(
    tmp_path: Path,
) -> AsyncIterator[World]:
    with smtp_server(tmp_path) as (mailbox, port, ca):
        async with (
            running_pagerduty_standin() as pagerduty,
            running_webhook_receiver(SECRET) as hook,
            running_slack_standin() as slack,
        ):
            yield pagerduty, hook, mailbox, port, ca, slack


@asynccontextmanager
async def bot_on(
    database: str, slack: SlackStandIn, marquez: StandInServer, config: BotConfig
) -> AsyncIterator[Bot]:
    """The bot on a Slack workspace that outlives it (a restart keeps the workspace)."""
    services, runner, url = await start_bot(database, slack, marquez, config)
    slack.set_events_url(f"{url}/slack/events")
    try:
        yield Bot(url, services, slack, marquez)
    finally:
        await runner.cleanup()


def dm(bot: Bot, user: str) -> list[Any]:
    """The bot's DM with `user` (the stand-in keeps a DM the bot opened by user id under it)."""
    return bot.slack.state.messages(user)


async def test_one_failure_reaches_every_target_once_across_a_restart(
    tmp_path: Path, food_delivery_marquez: StandInServer
) -> None:
    async with world(tmp_path) as (pagerduty, hook, mailbox, port, ca, slack):
        database = f"sqlite:///{tmp_path / 'bot.db'}"
        hub = config(pagerduty, hook, port, ca)
        pagerduty.fail_next(503, times=10_000)  # PagerDuty is down until the restart
        async with bot_on(database, slack, food_delivery_marquez, hub) as bot:
            reply = await slack.slash_command(
                "subscribe example.etl_orders --failures",
                user_id=ALICE, channel_id=slack.dm_of(ALICE),
            )  # fmt: skip
            assert reply.status == 200
            await bot.settle()
            [answer] = [e.text for e in slack.state.ephemerals if e.user == ALICE]
            assert "example.etl_orders" in answer, answer
            before = len(dm(bot, ALICE))
            await post_events(bot, [run_event("FAIL", day) for day in DAYS])
            await bot.settle()
            assert bot.services.sinks is not None
            await bot.services.sinks.deliver_due()
            assert len(alerts(bot)) == 1
            [notice] = dm(bot, ALICE)[before:]
            assert "failed for 2021-06-04" in notice.text
            assert actions(pagerduty) == []  # owed, not sent
        pagerduty.recover()
        async with bot_on(database, slack, food_delivery_marquez, hub) as bot:
            await delivered(bot)
            assert actions(pagerduty) == ["trigger"]
            assert types(hook) == ["failure.opened"]  # verified: signed with the secret
            assert len(mailbox.messages) == 1
            assert len(alerts(bot)) == 1
            assert len(dm(bot, ALICE)) == before + 1  # nothing posted twice after the restart

            await post_events(bot, [run_event("COMPLETE", day) for day in DAYS])
            await delivered(bot)
            assert actions(pagerduty) == ["trigger", "resolve"]
            [page] = pagerduty.alerts.values()
            assert page.status == "resolved"
            assert types(hook) == ["failure.opened", "failure.resolved"]
            assert [m["Subject"].split("] ")[1] for m in mailbox.messages] == [
                "example.etl_orders failed for 2021-06-04",
                "example.etl_orders resolved for 2021-06-04 to 2021-06-06",
            ]
            [notice] = dm(bot, ALICE)[before:]  # the DM's one message, edited
            assert "recovered for 2021-06-04 to 2021-06-06" in notice.text
            assert len(alerts(bot)) == 1


async def test_quiet_hours_hold_then_send_one_digest(
    tmp_path: Path, food_delivery_marquez: StandInServer
) -> None:
    now = datetime.now(UTC)
    quiet = {  # quiet since an hour ago, for two hours more
        "start": (now - timedelta(hours=1)).strftime("%H:%M"),
        "end": (now + timedelta(hours=2)).strftime("%H:%M"),
        "timezone": "UTC",
    }
    async with world(tmp_path) as (pagerduty, hook, mailbox, port, ca, slack):
        database = f"sqlite:///{tmp_path / 'bot.db'}"
        hub = config(pagerduty, hook, port, ca, orders={"quiet_hours": quiet})
        async with bot_on(database, slack, food_delivery_marquez, hub) as bot:
            await post_events(bot, [run_event("FAIL", day) for day in DAYS])
            await post_events(bot, [run_event("COMPLETE", day) for day in DAYS])
            sender = bot.services.sinks
            assert sender is not None
            for _ in range(3):
                await sender.deliver_due()
            assert actions(pagerduty) == ["trigger", "resolve"]  # a page is never held
            assert mailbox.messages == []
            assert hook.documents("data") == []
            assert len(alerts(bot)) == 1  # Slack is not held either

            sender.clock = lambda: datetime.now(UTC) + timedelta(hours=3)  # they have ended
            await delivered(bot)
            [mail] = mailbox.messages  # one digest, with both notices in order
            body = mail.get_body(("plain",))
            assert body is not None
            text = body.get_content()
            assert text.index("failed for 2021-06-04") < text.index("resolved for 2021-06-04")
            [digest] = hook.documents("data")
            assert digest["type"] == "digest"
            assert [e["type"] for e in digest["events"]] == ["failure.opened", "failure.resolved"]


async def test_an_escalation_fires_only_when_nobody_acknowledged(
    tmp_path: Path, food_delivery_marquez: StandInServer
) -> None:
    policy = {"escalation": {"after": "30m", "sinks": ["oncall-pager"], "channel": PLATFORM}}
    async with world(tmp_path) as (pagerduty, hook, _, port, ca, slack):
        database = f"sqlite:///{tmp_path / 'bot.db'}"
        hub = config(pagerduty, hook, port, ca, orders=policy)
        async with bot_on(database, slack, food_delivery_marquez, hub) as bot:
            escalations = bot.services.incidents.escalations

            def at(minutes: int) -> None:
                later = datetime.now(UTC) + timedelta(minutes=minutes)
                escalations.clock = lambda: later

            # acknowledged in time: never escalated
            await post_events(bot, [run_event("FAIL", DAYS[0])])
            [alert] = alerts(bot)
            await click(bot, alert, ActionId.INCIDENT_ACK, OWNER)
            await bot.settle()
            at(45)
            assert await escalations.check() == 0
            await post_events(bot, [run_event("COMPLETE", DAYS[0])])
            await delivered(bot)
            assert [e["routing_key"] for e in pagerduty.events] == [ROUTING_KEY] * 3

            # nobody acknowledged: escalated once, when it is due
            later_day = DAYS[0] + timedelta(days=10)
            await post_events(bot, [run_event("FAIL", later_day)])
            at(29)
            assert await escalations.check() == 0
            at(31)
            assert await escalations.check() == 1
            assert await escalations.check() == 0  # once per outage
            await delivered(bot)
            oncall = [e for e in pagerduty.events if e["routing_key"] == ONCALL_KEY]
            assert [e["event_action"] for e in oncall] == ["trigger"]
            [posted] = slack.state.messages(PLATFORM)
            assert "nobody has acknowledged it for 3" in posted.text
            # acknowledging it now reaches the escalation's page too
            [_, second] = alerts(bot)
            await click(bot, second, ActionId.INCIDENT_ACK, OWNER)
            await delivered(bot)
            oncall = [e for e in pagerduty.events if e["routing_key"] == ONCALL_KEY]
            assert [e["event_action"] for e in oncall] == ["trigger", "acknowledge"]


async def test_sla_misses_and_backfills_reach_subscribers_and_routed_sinks_once(
    tmp_path: Path, food_delivery_marquez: StandInServer
) -> None:
    async with running_webhook_receiver(SECRET) as hook:
        config = parse_config({
            **CONFIG,
            "teams": [{**CONFIG["teams"][0],
                       "routes": [{"events": ["sla", "backfills"], "to": ["data-hook"]}]},
                      *CONFIG["teams"][1:]],
            "sinks": [{"name": "data-hook", "kind": "webhook", "url": hook.url_for("data"),
                       "secret": SECRET}],
            "sla": [{"pattern": "example.etl_orders", "deadline": "2h"}],
            "hub": {"retry_base_s": 0.05, "retry_max_s": 0.2},
        })  # fmt: skip
        database = f"sqlite:///{tmp_path / 'bot.db'}"
        async with running_bot(database, food_delivery_marquez, config) as bot:
            slack = bot.slack
            for user, channel, text in (
                (ALICE, slack.dm_of(ALICE), "subscribe * --sla --backfills"),
                # the owning team's own channel hears of its DAG anyway: one message, not two
                (e2e.OWNER, CHANNEL, "subscribe example.etl_orders --sla"),
            ):
                reply = await slack.slash_command(text, user_id=user, channel_id=channel)
                assert reply.status == 200
            await bot.settle()
            async with bot.services.sessions() as session:
                subscribed = await subscription_store.active(session)
            # Two commands acked back to back may be decided in either order.
            assert sorted(s.channel for s in subscribed) == sorted([ALICE, CHANNEL])
            async with bot.services.sessions.begin() as session:
                for n in range(7):  # runs for 06-01..06-07; nothing for 06-08
                    session.add_all(dag_run("example.etl_orders", n))
            due = T0 + 8 * DAY + timedelta(hours=2)
            bot.services.sla.clock = lambda: due + timedelta(minutes=1)
            assert await bot.services.sla.check() == 1
            await delivered(bot)

            def late(channel: str) -> list[str]:
                return [m.text for m in slack.state.messages(channel) if "no run yet" in m.text]

            assert len(late(CHANNEL)) == 1
            assert len(late(ALICE)) == 1
            # the owners' notice has Acknowledge; a subscriber's copy does not
            [owners] = [m for m in slack.state.messages(CHANNEL) if "no run yet" in m.text]
            [copy] = [m for m in slack.state.messages(ALICE) if "no run yet" in m.text]
            assert ActionId.SLA_ACK in json.dumps(owners.blocks)
            assert ActionId.SLA_ACK not in json.dumps(copy.blocks)
            assert types(hook) == ["sla.missed"]
            assert hook.documents("data")[0]["sla"]["dag_id"] == "example.etl_orders"

            preview = await request_backfill(bot)
            await approve(bot, preview)
            await delivered(bot)
            notices = [m.text for m in dm(bot, ALICE) if "Backfill" in m.text]
            assert len(notices) == 1
            assert "approved by" in notices[0]
            assert types(hook) == ["sla.missed", "backfill.approved"]
            assert hook.documents("data")[1]["backfill"]["range"] == "2021-06-04..2021-06-06"
