"""`GET /metrics` as Prometheus scrapes it, after the bot did real work over HTTP: events pushed
to its receiver and polled from Marquez, alerts and notices, Slack calls (the sender's and bolt's
listeners'), the outbox, the poll cursor, backfills and steps by state, Airflow and Marquez
errors. Each test runs on SQLite and on PostgreSQL."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import update

from bot.config import BotConfig, parse_config
from bot.core.tables import utcnow
from bot.slack.rules.ids import ActionId
from bot.slack.store import outbox
from bot.slack.store.models import OutboxMessage
from standins.airflow.dags import FOOD_DELIVERY_DAGS, food_delivery_history
from standins.airflow.server import running_airflow_standin
from standins.marquez.server import StandInServer, start_standin
from tests.support.e2e import CHANNEL, Bot, running_bot
from tests.support.story import (
    DAYS,
    OWNER,
    SEND_AT_ONCE,
    alerts,
    backfill_of_incident,
    click,
    post_events,
    run_event,
    story_config,
)

LATER = {"text": "later"}
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


async def scrape(bot: Bot) -> Samples:
    async with aiohttp.ClientSession() as http, http.get(f"{bot.url}/metrics") as reply:
        assert reply.status == 200
        assert reply.headers["Content-Type"].startswith("text/plain")
        text = await reply.text()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    """One series' value; a series the bot does not expose fails the test."""
    return samples[(name, tuple(sorted(labels.items())))]


def total(samples: Samples, name: str, **labels: str) -> float:
    """The sum of the series of `name` that have these labels (among others)."""
    wanted = set(labels.items())
    return sum(v for (n, found), v in samples.items() if n == name and wanted <= set(found))


@asynccontextmanager
async def story(
    database_url: str, marquez: StandInServer, config: BotConfig, *, password: str = "admin"
) -> AsyncIterator[Bot]:
    """The bot with the Airflow stand-in as its executor (`password`: the one the bot uses)."""
    async with running_airflow_standin(
        api=3, dags=FOOD_DELIVERY_DAGS, run_seconds=0.05, history=food_delivery_history()
    ) as airflow:
        env = {
            "AIRFLOW_URL": airflow.url,
            "AIRFLOW_USERNAME": "admin",
            "AIRFLOW_PASSWORD": password,
        }
        async with running_bot(database_url, marquez, config, env=env) as bot:
            yield bot


def logged(records: list[logging.LogRecord], **fields: Any) -> list[logging.LogRecord]:
    """INFO records carrying these fields (the ids a JSON log line shows)."""
    return [
        r
        for r in records
        if r.levelno == logging.INFO and all(getattr(r, k, None) == v for k, v in fields.items())
    ]


async def test_a_backfill_story_is_counted_and_logged(
    database_url: str, food_delivery_marquez: StandInServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    config = story_config(watch=SEND_AT_ONCE)
    async with story(database_url, food_delivery_marquez, config) as bot:
        await post_events(bot, [run_event("FAIL", day) for day in DAYS])
        [alert] = alerts(bot)
        alerted = await scrape(bot)
        await click(bot, alert, ActionId.INCIDENT_APPROVE, OWNER)
        request = await backfill_of_incident(bot)
        await post_events(bot, [run_event("COMPLETE", day) for day in DAYS])
        final = await scrape(bot)

    ingested, calls = "backfill_bot_events_ingested_total", "backfill_bot_slack_api_calls_total"
    assert value(alerted, ingested, source="receiver", event_type="FAIL") == 3
    assert value(alerted, "backfill_bot_notices_total", kind="incident_alert") == 1
    assert value(alerted, calls, method="chat.postMessage", status="ok") == 1
    assert value(alerted, "backfill_bot_outbox_pending") == 0
    assert value(alerted, "backfill_bot_outbox_oldest_pending_age_seconds") == 0
    assert total(alerted, "backfill_bot_backfills") == 0

    assert request.state == "succeeded"
    steps = len(request.steps)
    assert value(final, "backfill_bot_backfills", state="succeeded") == 1
    assert total(final, "backfill_bot_backfills") == 1
    assert value(final, "backfill_bot_backfill_steps", state="succeeded") == steps
    assert total(final, "backfill_bot_backfill_steps") == steps
    assert value(final, ingested, source="receiver", event_type="COMPLETE") == 3
    assert value(final, "backfill_bot_notices_total", kind="incident_alert") == 1
    # logistics and analytics: told when it was approved and when it ended
    assert value(final, "backfill_bot_notices_total", kind="team_notice") == 4
    # each notice owed was posted; the backfill's status message is a post of its own
    posted = "backfill_bot_notices_posted_total"
    assert value(final, posted, kind="incident_alert") == 1
    assert value(final, posted, kind="team_notice") == 4
    assert value(final, posted, kind="backfill") >= 1
    # bolt's own client is counted too: it checks the token on the first click
    assert value(final, calls, method="auth.test", status="ok") >= 1
    assert total(final, calls, method="chat.update") >= 1
    assert total(final, "backfill_bot_request_errors_total") == 0
    assert value(final, "backfill_bot_outbox_failed_total") == 0

    records = caplog.records
    [alerted_line] = [r for r in records if "posted the alert of incident" in r.getMessage()]
    incident_id = vars(alerted_line)["incident_id"]
    assert vars(alerted_line)["channel"] == alert.channel
    assert vars(alerted_line)["ts"] == alert.ts
    [opened] = logged(records, incident_id=incident_id, state="open")
    assert opened.getMessage().endswith(" opened")
    assert vars(opened)["dag_id"] == "example.etl_orders"
    assert logged(records, incident_id=incident_id, state="resolved")
    moves = [
        vars(r)["state"]
        for r in logged(records, request_id=request.id)
        if "actor" in vars(r) and "step_id" not in vars(r)
    ]
    assert moves == ["previewed", "approved", "running", "succeeded"]
    for step in request.steps:
        states = [vars(r)["state"] for r in logged(records, step_id=step.id) if "state" in vars(r)]
        assert (states[0], states[-1]) == ("submitted", "succeeded"), states
        [submitted] = logged(records, step_id=step.id, executor="airflow")
        assert vars(submitted)["dag_id"] == step.dag_id


NOWHERE_DAG = "other.nightly_export"


async def test_slack_calls_and_notices_owed_and_posted_are_counted(
    database_url: str, food_delivery_marquez: StandInServer
) -> None:
    config = story_config(
        teams=[
            {"name": "orders", "channel": "C0ORDERS01", "members": [OWNER]},
            # a channel the bot cannot see: Slack answers channel_not_found
            {"name": "ghosts", "channel": "G0NOWHERE1", "members": ["U0GHOST001"]},
        ],
        ownership=[
            {"pattern": "example.etl_orders*", "team": "orders"},
            {"pattern": "other.*", "team": "ghosts"},
        ],
        watch=SEND_AT_ONCE,
    )
    async with story(database_url, food_delivery_marquez, config) as bot:
        bot.slack.state.fail_every(2)  # the 2nd chat.* call answers 429 (the 4th 500, …)
        await post_events(bot, [run_event("FAIL", DAYS[0])])  # the alert: posted
        await post_events(bot, [run_event("FAIL", DAYS[1])])  # its edit: 429, then edited
        bot.slack.state.fail_every(0)
        await post_events(bot, [run_event("FAIL", DAYS[0], dag=NOWHERE_DAG)])
        found = await scrape(bot)
    calls = "backfill_bot_slack_api_calls_total"
    assert value(found, calls, method="chat.update", status="http_429") == 1
    assert value(found, calls, method="chat.update", status="ok") == 1
    assert value(found, calls, method="chat.postMessage", status="ok") == 1
    assert value(found, calls, method="chat.postMessage", status="channel_not_found") == 1
    assert value(found, "backfill_bot_outbox_failed_total") == 1
    # Owed: both alerts. Posted (Slack accepted a new message): the first only; its edit is
    # no new post, and the alert for the channel the bot cannot see never posted.
    owed, posted = "backfill_bot_notices_total", "backfill_bot_notices_posted_total"
    assert value(found, owed, kind="incident_alert") == 2
    assert value(found, posted, kind="incident_alert") == 1
    for kind in ("incident_reply", "backfill", "team_notice", "notice"):
        assert value(found, posted, kind=kind) == 0


async def test_outbox_depth_and_the_age_of_its_oldest_pending_message(
    database_url: str, food_delivery_marquez: StandInServer
) -> None:
    config = parse_config({"watch": {"poll": False}})
    async with running_bot(database_url, food_delivery_marquez, config) as bot:
        async with bot.services.sessions.begin() as session:
            for _ in range(2):  # due in a day: the sender leaves them
                await outbox.enqueue(session, channel=CHANNEL, payload=LATER, gather_s=86400)
            await session.execute(
                update(OutboxMessage).values(created_at=utcnow() - timedelta(hours=2))
            )
        found = await scrape(bot)
    assert value(found, "backfill_bot_outbox_pending") == 2
    assert value(found, "backfill_bot_outbox_oldest_pending_age_seconds") >= 2 * 3600


async def test_poll_lag_events_by_source_and_marquez_down(database_url: str) -> None:
    marquez = await start_standin()
    stopped = False
    config = parse_config(
        {"watch": {"poll_interval_s": 3600, "lookback_s": 3600}, "index": {"enabled": False}}
    )
    try:
        async with running_bot(database_url, marquez, config) as bot:
            poller = bot.services.poller
            at = datetime.now(UTC) - timedelta(minutes=10)
            event = run_event("FAIL", DAYS[0], at=at)
            await post_events(bot, [event])  # pushed to the bot; Marquez has not got it yet
            await poller.poll_once()
            behind = await scrape(bot)

            async with (  # the pipeline's copy to Marquez
                aiohttp.ClientSession() as http,
                http.post(f"{marquez.url}/api/v1/lineage", json=event) as reply,
            ):
                assert reply.status == 201
            await poller.poll_once()
            caught_up = await scrape(bot)

            await marquez.stop()
            stopped = True
            await poller.poll_once()
            down = await scrape(bot)
    finally:
        if not stopped:
            await marquez.stop()

    lag, ahead = "backfill_bot_poll_lag_seconds", "backfill_bot_poll_behind_newest_event_seconds"
    # the cursor starts an hour back (lookback_s); the pushed event is 50 minutes ahead of it
    assert value(behind, lag, feed="marquez") >= 3600
    assert 49 * 60 <= value(behind, ahead, feed="marquez") <= 51 * 60
    # read from Marquez: the cursor is at the event, ten minutes back
    assert 10 * 60 <= value(caught_up, lag, feed="marquez") < 3600
    assert value(caught_up, ahead, feed="marquez") == 0
    ingested = "backfill_bot_events_ingested_total"
    assert value(caught_up, ingested, source="receiver", event_type="FAIL") == 1
    assert value(caught_up, ingested, source="marquez", event_type="FAIL") == 0  # the same one
    assert value(caught_up, "backfill_bot_marquez_polls_total", outcome="ok") >= 2
    assert value(caught_up, "backfill_bot_marquez_reachable", feed="marquez") == 1

    assert value(down, "backfill_bot_marquez_polls_total", outcome="failed") == 1
    assert value(down, "backfill_bot_marquez_reachable", feed="marquez") == 0
    errors = "backfill_bot_request_errors_total"
    assert value(down, errors, system="marquez", kind="unavailable") >= 1
    assert value(caught_up, errors, system="marquez", kind="unavailable") == 0


async def test_airflow_refusing_the_bot_is_counted(
    database_url: str, food_delivery_marquez: StandInServer
) -> None:
    config = story_config(watch=SEND_AT_ONCE)
    async with story(database_url, food_delivery_marquez, config, password="wrong") as bot:
        await post_events(bot, [run_event("FAIL", DAYS[0])])
        [alert] = alerts(bot)
        await click(bot, alert, ActionId.INCIDENT_APPROVE, OWNER)
        request = await backfill_of_incident(bot)
        found = await scrape(bot)
    assert request.state == "failed"
    errors = "backfill_bot_request_errors_total"
    assert value(found, errors, system="airflow", kind="auth") >= 1
    assert total(found, errors, system="marquez") == 0
    assert value(found, "backfill_bot_backfills", state="failed") == 1
