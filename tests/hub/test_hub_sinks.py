"""The hub beyond Slack, end to end: one failure of a DAG whose owning team routes to a
PagerDuty service and a signed webhook reaches each once (one page per outage: trigger,
Acknowledge in Slack acknowledges it, the incident's resolution resolves it), also across a
restart and while a sink is down, which is told once in the ops channel and in /metrics."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import aiohttp
from sqlalchemy import select

from bot.config import BotConfig
from bot.hub.store import deliveries
from bot.hub.store.models import SinkDelivery
from bot.slack.rules.ids import ActionId
from standins.marquez.server import StandInServer
from standins.sinks.pagerduty import PagerDutyStandin, running_pagerduty_standin
from standins.sinks.teams import running_teams_standin
from standins.sinks.webhook import WebhookReceiver, running_webhook_receiver
from tests.support.e2e import Bot, eventually, running_bot
from tests.support.smtp import PASSWORD, USER, smtp_server
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

ROUTING_KEY = "R0UTINGKEY0ORDERS0000000000000AB"  # 32 characters, as PagerDuty's are
SECRET = "data-hook-signing-secret"
OPS = "C0OPS00001"


def hub_config(
    pagerduty: PagerDutyStandin,
    hook: WebhookReceiver,
    *,
    retry_s: float = 0.05,
    orders: tuple[str, ...] = ("orders-pager", "data-hook"),
    more: tuple[dict[str, Any], ...] = (),
) -> BotConfig:
    """Orders routes to `orders` (PagerDuty and the webhook by default), logistics to the
    webhook; `more` adds sinks (their secrets through `${VAR}`s, as a deployment would)."""
    return story_config(
        teams=[
            {"name": "orders", "channel": ORDERS, "members": [OWNER], "sinks": list(orders)},
            {"name": "logistics", "channel": LOGISTICS, "members": [BOB], "sinks": ["data-hook"]},
            {"name": "analytics", "channel": ANALYTICS, "members": [CAROL]},
        ],
        sinks=[
            {
                "name": "orders-pager",
                "kind": "pagerduty",
                "routing_key": ROUTING_KEY,
                "url": pagerduty.enqueue_url,
                "severity": "critical",
            },
            {"name": "data-hook", "kind": "webhook", "url": hook.url_for("data"), "secret": SECRET},
            *more,
        ],
        hub={"retry_base_s": retry_s, "retry_max_s": 4 * retry_s},
        # group_wait_s 0: Slack alerts are sent at once (the sinks are the subject here, not
        # how the watcher gathers its Slack calls), so no settle waits out 2 s of gathering.
        watch={"marquez_web_url": "http://marquez.example.com:3000", "poll": False,
               "ops_channel": OPS, "group_wait_s": 0},
    )  # fmt: skip


@asynccontextmanager
async def sinks() -> AsyncIterator[tuple[PagerDutyStandin, WebhookReceiver]]:
    async with (
        running_pagerduty_standin() as pagerduty,
        running_webhook_receiver(SECRET) as hook,
    ):
        yield pagerduty, hook


async def delivered(bot: Bot) -> None:
    """Until nothing is owed to any sink (retries included)."""
    assert bot.services.sinks is not None
    await bot.settle()  # a click's listener runs after its ack: what it owes is a row first

    sender = bot.services.sinks

    async def nothing_owed() -> bool | None:
        await sender.deliver_due()
        async with bot.services.sessions() as session:
            return True if not await deliveries.pending_by_sink(session) else None

    await eventually(nothing_owed, timeout_s=20)
    await bot.settle()


def tried(bot: Bot, pagerduty: PagerDutyStandin, *, times: int) -> bool | None:
    """Whether PagerDuty was asked `times` times; if not, wakes the sink sender, whose own next
    pass is up to 5 s away: each retry is then made once its backoff is over."""
    assert bot.services.sinks is not None
    if pagerduty.requests >= times:
        return True
    bot.services.sinks.wake()
    return None


def actions(pagerduty: PagerDutyStandin) -> list[str]:
    return [str(e["event_action"]) for e in pagerduty.events]


def types(hook: WebhookReceiver) -> list[str]:
    return [str(d["type"]) for d in hook.documents("data")]


async def test_one_outage_is_one_page_and_one_document_per_step(
    tmp_path: Path, food_delivery_marquez: StandInServer
) -> None:
    async with sinks() as (pagerduty, hook):
        database = f"sqlite:///{tmp_path / 'bot.db'}"
        async with running_bot(database, food_delivery_marquez, hub_config(pagerduty, hook)) as bot:
            await post_events(bot, [run_event("FAIL", day) for day in DAYS])
            await delivered(bot)
            # three failed days of one DAG: one outage, one page, one document
            assert actions(pagerduty) == ["trigger"]
            [alert] = pagerduty.alerts.values()
            assert (alert.status, alert.severity) == ("triggered", "critical")
            assert "example.etl_orders failed for 2021-06-04" in alert.summary  # when it opened
            assert "disk full" in alert.summary
            [document] = hook.documents("data")
            assert document["version"] == "1"
            assert document["type"] == "failure.opened"
            assert document["incident"]["dag_id"] == "example.etl_orders"
            assert document["incident"]["owners"] == ["orders"]

            [slack_alert] = alerts(bot)
            await click(bot, slack_alert, ActionId.INCIDENT_ACK, OWNER)
            await delivered(bot)
            assert alert.status == "acknowledged"
            assert types(hook) == ["failure.opened", "failure.acknowledged"]
            assert hook.documents("data")[1]["incident"]["acknowledged_by"] == OWNER

            await post_events(bot, [run_event("COMPLETE", day) for day in DAYS])
            await delivered(bot)
            assert actions(pagerduty) == ["trigger", "acknowledge", "resolve"]
            assert alert.status == "resolved"
            assert types(hook) == ["failure.opened", "failure.acknowledged", "failure.resolved"]
            # no secret went into the database
            stored = await stored_bodies(bot)
            assert ROUTING_KEY not in stored
            assert SECRET not in stored
            # a DAG no team routes to a sink pages nobody
            await post_events(bot, [run_event("FAIL", DAYS[0], dag="reporting.weekly_kpis")])
            await delivered(bot)
            assert actions(pagerduty) == ["trigger", "acknowledge", "resolve"]


async def stored_bodies(bot: Bot) -> str:
    async with bot.services.sessions() as session:
        rows = await session.scalars(select(SinkDelivery))
        return repr([(r.body, r.error) for r in rows])


async def test_a_sink_that_is_down_loses_nothing_and_is_told_once(
    tmp_path: Path, food_delivery_marquez: StandInServer
) -> None:
    async with sinks() as (pagerduty, hook):
        pagerduty.fail_next(503, times=5)
        database = f"sqlite:///{tmp_path / 'bot.db'}"
        async with running_bot(database, food_delivery_marquez, hub_config(pagerduty, hook)) as bot:
            await post_events(bot, [run_event("FAIL", day) for day in DAYS])
            await delivered(bot)
            assert actions(pagerduty) == ["trigger"]  # once, after five refusals
            assert types(hook) == ["failure.opened"]  # the webhook did not wait for it
            ops = [m.text for m in bot.slack.state.messages(OPS)]
            assert len([t for t in ops if "Sink orders-pager failing" in t]) == 1
            assert len([t for t in ops if "Sink orders-pager recovered" in t]) == 1
            async with (
                aiohttp.ClientSession() as http,
                http.get(f"{bot.url}/metrics") as reply,
            ):
                text = await reply.text()
            assert (
                'backfill_bot_sink_deliveries_total{outcome="retry",sink="orders-pager"} 5.0'
                in text
            )
            assert (
                'backfill_bot_sink_deliveries_total{outcome="delivered",sink="data-hook"} 1.0'
                in text
            )
            assert 'backfill_bot_sink_failing{sink="orders-pager"} 0.0' in text


async def test_what_is_owed_survives_a_restart_and_is_sent_once(
    tmp_path: Path, food_delivery_marquez: StandInServer
) -> None:
    async with sinks() as (pagerduty, hook):
        database = f"sqlite:///{tmp_path / 'bot.db'}"
        config = hub_config(pagerduty, hook)
        pagerduty.fail_next(503, times=10_000)  # down for the whole first run
        hook.fail_next(503, times=10_000)
        async with running_bot(database, food_delivery_marquez, config) as bot:
            await post_events(bot, [run_event("FAIL", day) for day in DAYS])
            assert bot.services.sinks is not None
            await bot.services.sinks.deliver_due()
        assert actions(pagerduty) == []
        pagerduty.recover()
        hook.recover()
        async with running_bot(database, food_delivery_marquez, config) as bot:
            await delivered(bot)
            assert actions(pagerduty) == ["trigger"]
            assert types(hook) == ["failure.opened"]
            assert len({r.delivery_id for r in hook.deliveries}) == 1


async def test_an_acknowledgement_and_a_resolution_wait_for_the_page_they_follow(
    tmp_path: Path, food_delivery_marquez: StandInServer
) -> None:
    async with sinks() as (pagerduty, hook):
        pagerduty.fail_next(503, times=10_000)  # PagerDuty down while the outage plays out
        database = f"sqlite:///{tmp_path / 'bot.db'}"
        config = hub_config(pagerduty, hook, retry_s=1.0)  # the trigger waits out its backoff
        async with running_bot(database, food_delivery_marquez, config) as bot:
            await post_events(bot, [run_event("FAIL", day) for day in DAYS])
            # the page has failed three times: its next try is 4 s away, later than theirs
            await eventually(lambda: tried(bot, pagerduty, times=3), timeout_s=15)
            [slack_alert] = alerts(bot)
            await click(bot, slack_alert, ActionId.INCIDENT_ACK, OWNER)
            # A click is answered before it is decided: the resolve below comes after the
            # acknowledgement once that is recorded (as for a person, who clicks, then waits).
            await bot.settle()
            await post_events(bot, [run_event("COMPLETE", day) for day in DAYS])
            assert actions(pagerduty) == []
            pagerduty.recover()
            await delivered(bot)
            # newer rows were due first, but none overtook the page they follow
            assert actions(pagerduty) == ["trigger", "acknowledge", "resolve"]
            [alert] = pagerduty.alerts.values()
            assert alert.status == "resolved"


async def test_an_outage_that_fails_again_is_a_new_page_acknowledged_anew(
    tmp_path: Path, food_delivery_marquez: StandInServer
) -> None:
    async with sinks() as (pagerduty, hook):
        database = f"sqlite:///{tmp_path / 'bot.db'}"
        async with running_bot(database, food_delivery_marquez, hub_config(pagerduty, hook)) as bot:
            await post_events(bot, [run_event("FAIL", DAYS[0])])
            [slack_alert] = alerts(bot)
            await click(bot, slack_alert, ActionId.INCIDENT_ACK, OWNER)
            await bot.settle()  # the click is decided before the run's success comes
            await post_events(bot, [run_event("COMPLETE", DAYS[0])])
            later = DAYS[0] + timedelta(days=2)
            await post_events(bot, [run_event("FAIL", DAYS[0], at=later)])
            await delivered(bot)
            assert actions(pagerduty) == ["trigger", "acknowledge", "resolve", "trigger"]
            assert [a.status for a in pagerduty.past_alerts] == ["resolved"]
            [alert] = pagerduty.alerts.values()
            assert alert.status == "triggered"  # a new page for the new outage
            reopened = hook.documents("data")[-1]
            assert (reopened["type"], reopened["incident"]["acknowledged_by"]) == (
                "failure.opened",
                None,
            )
            # the same person acknowledges the new outage: it is not "acknowledged already"
            [slack_alert] = alerts(bot)
            await click(bot, slack_alert, ActionId.INCIDENT_ACK, OWNER)
            await delivered(bot)
            assert actions(pagerduty)[-1] == "acknowledge"
            assert alert.status == "acknowledged"


async def test_a_failure_and_its_resolution_reach_an_inbox_and_a_teams_channel_once_each(
    tmp_path: Path, food_delivery_marquez: StandInServer
) -> None:
    async with sinks() as (pagerduty, hook), running_teams_standin() as teams:
        with smtp_server(tmp_path) as (mailbox, port, ca):
            mail = {
                "name": "orders-mail", "kind": "email", "host": "127.0.0.1", "port": port,
                "username": USER, "password": PASSWORD, "sender": "bot@example.com",
                "to": ["orders@example.com"], "ca_file": str(ca),
            }  # fmt: skip
            channel = {"name": "orders-teams", "kind": "teams", "url": teams.workflow_url}
            config = hub_config(
                pagerduty, hook, orders=("orders-mail", "orders-teams"), more=(mail, channel)
            )
            database = f"sqlite:///{tmp_path / 'bot.db'}"
            async with running_bot(database, food_delivery_marquez, config) as bot:
                await post_events(bot, [run_event("FAIL", day) for day in DAYS])
                await delivered(bot)
                await post_events(bot, [run_event("COMPLETE", day) for day in DAYS])
                await delivered(bot)
            subjects = [m["Subject"] for m in mailbox.messages]
            assert subjects == [
                "[backfill-bot] example.etl_orders failed for 2021-06-04",
                "[backfill-bot] example.etl_orders resolved for 2021-06-04 to 2021-06-06",
            ]
            assert mailbox.recipients == [["orders@example.com"]] * 2
            cards = [m["attachments"][0]["content"] for m in teams.messages]
            titles = [card["body"][0]["text"] for card in cards]
            assert titles == [
                "example.etl\\_orders failed for 2021-06-04",  # Markdown escaped, as the card shows
                "example.etl\\_orders resolved for 2021-06-04 to 2021-06-06",
            ]
            assert [card["body"][0]["color"] for card in cards] == ["attention", "good"]
            assert actions(pagerduty) == []  # orders now routes to the inbox and Teams only
            assert types(hook) == []
