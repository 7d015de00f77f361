"""The example story, driven as a user and Airflow would drive it: three failed days of
`example.etl_orders` posted to the bot's receiver as OpenLineage events, clicks on the alert as
signed Slack requests through the Slack stand-in, the backfill run on the Airflow stand-in.
Shared by tests/incidents/test_alert_story.py and bench/story_calls_bench.py."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
from sqlalchemy import select

from bot.backfill.store import repository
from bot.backfill.store.models import BackfillRequest
from bot.config import BotConfig, parse_config
from bot.incidents.store.models import Incident
from standins.airflow.dags import FOOD_DELIVERY_DAGS, food_delivery_history
from standins.airflow.server import AirflowStandin, running_airflow_standin
from standins.marquez.server import StandInServer
from tests.support.e2e import Bot, buttons, eventually, running_bot

ORDERS, ANALYTICS, LOGISTICS = "C0ORDERS01", "C0ANALYT01", "C0LOGIST01"
OWNER, BOB, CAROL = "U0ORDERS01", "U0BOB00001", "U0CAROL001"
PRODUCER = "https://github.com/apache/airflow/tree/providers-openlineage/2.3.0"
DAYS = [datetime(2021, 6, d, tzinfo=UTC) for d in (4, 5, 6)]
WATCH: dict[str, Any] = {"marquez_web_url": "http://marquez.example.com:3000", "poll": False}
# `watch=SEND_AT_ONCE`, for tests about something other than how the watcher gathers its Slack
# calls: each alert and edit is sent at once, so no settle waits out group_wait_s (2 s).
SEND_AT_ONCE: dict[str, Any] = {**WATCH, "group_wait_s": 0}


def story_config(**overrides: Any) -> BotConfig:
    """Three teams: orders owns the root, logistics and analytics own DAGs downstream."""
    return parse_config(story_config_data(**overrides))


def story_config_data(**overrides: Any) -> dict[str, Any]:
    """`story_config` as BOT_CONFIG's YAML would hold it (for a bot run as a process)."""
    return {
        "teams": [
            {"name": "orders", "channel": ORDERS, "members": [OWNER]},
            {"name": "logistics", "channel": LOGISTICS, "members": [BOB]},
            {"name": "analytics", "channel": ANALYTICS, "members": [CAROL]},
        ],
        "ownership": [
            {"pattern": "example.etl_orders*", "team": "orders"},
            {"pattern": "example.*delivery*", "team": "logistics"},
            {"pattern": "reporting.*", "team": "analytics"},
            {"pattern": "example.email_*", "team": "analytics"},
            {"pattern": "example.orders_*", "team": "analytics"},
        ],
        "watch": dict(WATCH),
        "execution": {"poll_interval_s": 0.2, "progress_update_s": 1.0},
        **overrides,
    }


@asynccontextmanager
async def story_bot(
    tmp_path: Path,
    marquez: StandInServer,
    config: BotConfig,
    *,
    run_seconds: float = 0.05,
    database: str | None = None,
) -> AsyncIterator[tuple[Bot, AirflowStandin]]:
    async with running_airflow_standin(
        api=3, dags=FOOD_DELIVERY_DAGS, run_seconds=run_seconds, history=food_delivery_history()
    ) as airflow:
        env = {"AIRFLOW_URL": airflow.url, "AIRFLOW_USERNAME": "admin", "AIRFLOW_PASSWORD": "admin"}
        database = database or f"sqlite:///{tmp_path / 'bot.db'}"
        async with running_bot(database, marquez, config, env=env) as bot:
            yield bot, airflow


def run_event(kind: str, day: datetime, *, dag: str = "example.etl_orders", **more: Any) -> Any:
    """A DAG-level OpenLineage event as the Airflow provider sends it."""
    end = day + timedelta(days=1)
    facets: dict[str, Any] = {
        "nominalTime": {
            "_producer": PRODUCER,
            "_schemaURL": "https://openlineage.io/spec/facets/1-0-0/NominalTimeRunFacet.json",
            "nominalStartTime": day.isoformat().replace("+00:00", "Z"),
            "nominalEndTime": end.isoformat().replace("+00:00", "Z"),
        },
        "airflowDagRun": {
            "_producer": PRODUCER,
            "_schemaURL": "https://openlineage.io/spec/facets/1-2-0/AirflowDagRunFacet.json",
            "dag": {"dag_id": dag},
            "dagRun": {"dag_id": dag, "run_id": f"scheduled__{day.isoformat()}"},
        },
    }
    if kind == "FAIL":
        facets["errorMessage"] = {
            "_producer": PRODUCER,
            "_schemaURL": "https://openlineage.io/spec/facets/1-0-0/ErrorMessageRunFacet.json",
            "message": more.get("error", "java.io.IOException: disk full"),
            "programmingLanguage": "python",
        }
    # a rerun's COMPLETE comes after the FAIL it resolves
    at = more.get("at") or end + timedelta(hours=2 if kind == "FAIL" else 3)
    return {
        "eventType": kind,
        "eventTime": at.isoformat().replace("+00:00", "Z"),
        "run": {"runId": str(uuid.uuid4()), "facets": facets},
        "job": {
            "namespace": "food_delivery",
            "name": dag,
            "facets": {
                "jobType": {
                    "_producer": PRODUCER,
                    "_schemaURL": "https://openlineage.io/spec/facets/2-0-3/JobTypeJobFacet.json",
                    "processingType": "BATCH",
                    "integration": "AIRFLOW",
                    "jobType": "DAG",
                }
            },
        },
        "producer": PRODUCER,
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        "inputs": [],
        "outputs": [],
    }


async def post_events(bot: Bot, events: list[Mapping[str, Any]], *, settle: bool = True) -> None:
    """POST events to the bot's receiver and let it alert (`settle`: and wait until Slack has
    everything it was owed, gathered alerts and edits included)."""
    async with aiohttp.ClientSession() as http:
        for body in events:
            async with http.post(f"{bot.url}/api/v1/lineage", json=body) as reply:
                assert reply.status == 201, await reply.text()
    while await bot.services.incidents.process():
        pass
    if settle:
        await bot.settle()


def alerts(bot: Bot, channel: str = ORDERS) -> list[Any]:
    return [m for m in bot.slack.state.messages(channel) if buttons(m).get("incident.open_marquez")]


async def incident(bot: Bot) -> Incident:
    async with bot.services.sessions() as session:
        [found] = list(await session.scalars(select(Incident).where(Incident.root_id.is_(None))))
        return found


async def request_of(bot: Bot, request_id: str) -> BackfillRequest:
    async with bot.services.sessions() as session:
        return await repository.get_request(session, request_id)


async def click(bot: Bot, message: Any, action_id: str, user: str, channel: str = ORDERS) -> Any:
    reply = await bot.slack.click(
        channel_id=channel,
        message_ts=message.ts,
        action_id=action_id,
        user_id=user,
        value=str(buttons(message)[action_id].get("value", "")),
    )
    assert reply.status == 200
    return reply


async def backfill_of_incident(bot: Bot, *, timeout_s: float = 60) -> BackfillRequest:
    """The incident's backfill once it has finished."""

    async def done() -> BackfillRequest | None:
        found = await incident(bot)
        if found.backfill_request_id is None:
            return None
        request = await request_of(bot, found.backfill_request_id)
        return request if request.finished_at is not None else None

    request = await eventually(done, timeout_s=timeout_s)
    await bot.settle()
    return await request_of(bot, request.id)
