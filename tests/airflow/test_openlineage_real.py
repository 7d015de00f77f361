"""The watcher on a real Airflow 3.3.2: the OpenLineage provider's HTTP transport sends each DAG
run's and task's events to the bot's `POST /api/v1/lineage` (through the recorder of the
`openlineage_airflow` fixture, which passes the bot's answers back). A failed DAG run becomes
exactly one alert in the owning team's channel, naming the DAG (not the task), with the task's
own error message and the run's data interval; a DAG run that succeeds alerts nobody.

The DAGs are in tests/airflow/dags/openlineage_dags.py. What the provider sends is recorded in
tests/fixtures/openlineage/airflow-3.3.2/ (tests/airflow/capture_openlineage.py).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from bot.config import parse_config
from bot.events.store.models import RunEvent
from standins.marquez.server import running_standin
from tests.airflow.harness import OPENLINEAGE_NAMESPACE
from tests.airflow.openlineage import (
    PATH,
    OpenLineageAirflow,
    dag_of,
    run_reported,
    task_instances,
    trigger,
    wait_for_run,
)
from tests.support.e2e import OWNER, Bot, eventually, running_bot

pytestmark = pytest.mark.airflow

FAILING, SUCCEEDING = "ol_test.failing", "ol_test.success"
FAILING_MESSAGE = "load_orders: 3 of 120 rows have no order_id; refusing to load"
"""What task `load` of ol_test.failing raises (tests/airflow/dags/openlineage_dags.py)."""
DAY = datetime(2021, 6, 10, tzinfo=UTC)
ORDERS, PLATFORM = "C0ORDERS01", "C0PLATFRM1"
CONFIG = {
    "teams": [
        {"name": "orders", "channel": ORDERS, "members": [OWNER]},
        {"name": "platform", "channel": PLATFORM, "members": ["U0PLATFRM1"]},
    ],
    # The DAGs by their exact names: an incident filed under a task's name would not match
    # and would go to the platform team's catch-all channel instead.
    "ownership": [
        {"pattern": f"{OPENLINEAGE_NAMESPACE}::{FAILING}", "team": "orders"},
        {"pattern": f"{OPENLINEAGE_NAMESPACE}::{SUCCEEDING}", "team": "orders"},
    ],
    "watch": {"poll": False, "alert_channel": PLATFORM},
}


@asynccontextmanager
async def bot_receiving(setup: OpenLineageAirflow, tmp_path: Path) -> AsyncIterator[Bot]:
    """A bot (empty Marquez stand-in, SQLite) that the Airflow's OpenLineage events reach."""
    database = f"sqlite:///{tmp_path / 'bot.db'}"
    async with (
        running_standin() as marquez,
        running_bot(database, marquez, parse_config(CONFIG)) as bot,
    ):
        setup.recorder.clear()
        setup.recorder.forward_to = f"{bot.url}{PATH}"
        try:
            yield bot
        finally:
            setup.recorder.forward_to = None


async def run_once(setup: OpenLineageAirflow, bot: Bot, dag_id: str) -> dict[str, Any]:
    """Run `dag_id` for [DAY, DAY + 1 day) and wait until the bot has stored every event of the
    run and handled them; the DAG run as Airflow's API returns it."""
    airflow, recorder = setup.airflow, setup.recorder
    run_id = await asyncio.to_thread(
        trigger, airflow, dag_id, logical_date=DAY, interval=(DAY, DAY + timedelta(days=1))
    )
    run = await asyncio.to_thread(wait_for_run, airflow, dag_id, run_id)
    tasks = [t["task_id"] for t in await asyncio.to_thread(task_instances, airflow, dag_id, run_id)]
    sent = await asyncio.to_thread(
        recorder.wait_for,
        lambda events: run_reported(events, dag_id, tasks),
        timeout_s=60,
        quiet_s=1.0,
        what=f"the terminal events of {dag_id} and its tasks {tasks}",
    )
    mine = [e for e in sent if dag_of(e, {dag_id})]
    await eventually(lambda: _stored_at_least(bot, len(mine)), timeout_s=30)
    while await bot.services.incidents.process():
        pass
    await bot.settle()
    return run


async def _stored_at_least(bot: Bot, count: int) -> bool:
    return len(await stored(bot)) >= count


async def stored(bot: Bot) -> list[RunEvent]:
    async with bot.services.sessions() as session:
        return list(await session.scalars(select(RunEvent).order_by(RunEvent.id)))


def posted(bot: Bot) -> dict[str, list[Any]]:
    """Top-level messages by channel, of every channel that has any."""
    state = bot.slack.state
    found = {channel: state.messages(channel) for channel in state.channels}
    return {channel: messages for channel, messages in found.items() if messages}


def shown(message: Any) -> str:
    return str(message.text) + json.dumps(message.blocks)


def interval_of(run: dict[str, Any]) -> tuple[datetime, datetime]:
    return (
        datetime.fromisoformat(run["data_interval_start"].replace("Z", "+00:00")),
        datetime.fromisoformat(run["data_interval_end"].replace("Z", "+00:00")),
    )


async def test_a_failed_dag_run_is_one_alert_naming_the_dag_with_the_tasks_error(
    tmp_path: Path, openlineage_airflow: OpenLineageAirflow
) -> None:
    async with bot_receiving(openlineage_airflow, tmp_path) as bot:
        run = await run_once(openlineage_airflow, bot, FAILING)
        assert run["state"] == "failed"

        # every event Airflow sent was accepted and stored, the tasks' rolled up to the DAG
        assert set(openlineage_airflow.recorder.answers()) == {201}
        rows = await stored(bot)
        by_job = {(r.job_name, r.event_type) for r in rows}
        assert by_job == {
            (FAILING, "START"),
            (FAILING, "FAIL"),
            (f"{FAILING}.prepare", "START"),
            (f"{FAILING}.prepare", "COMPLETE"),
            (f"{FAILING}.load", "START"),
            (f"{FAILING}.load", "FAIL"),
        }
        assert {(r.dag_namespace, r.dag_id) for r in rows} == {(OPENLINEAGE_NAMESPACE, FAILING)}
        start, end = interval_of(run)
        assert (start, end) == (DAY, DAY + timedelta(days=1))
        assert {(r.nominal_start, r.nominal_end) for r in rows} == {(start, end)}
        [task_fail] = [
            r for r in rows if r.job_name == f"{FAILING}.load" and r.event_type == "FAIL"
        ]
        assert task_fail.error_message == FAILING_MESSAGE

        # one alert, to the owners, for the DAG run (the task's FAIL and the DAG's are one)
        alerts = posted(bot)
        assert list(alerts) == [ORDERS], {c: [m.text for m in ms] for c, ms in alerts.items()}
        [alert] = alerts[ORDERS]
        text = shown(alert)
        # the alert is about the DAG and the run's data interval (a task may be named only as
        # where the error came from)
        assert alert.text == f":rotating_light: {FAILING} failed ({start.date().isoformat()})"
        headline = alert.blocks[0]["text"]["text"]
        assert f"`{FAILING}` failed* for {start.date().isoformat()}" in headline
        assert f"{FAILING}." not in headline
        [link] = [b["url"] for b in alert.blocks[-1]["elements"] if "url" in b]
        assert link.endswith(f"/lineage/job/{OPENLINEAGE_NAMESPACE}/{FAILING}")
        assert FAILING_MESSAGE in text
        assert "task_failure" not in text  # the DAG run's summary, not the task's error
        assert re.search(r"failed \d+ times", text) is None, text
        assert bot.slack.state.thread(ORDERS, alert.ts) == []


async def test_a_dag_run_that_succeeds_alerts_nobody(
    tmp_path: Path, openlineage_airflow: OpenLineageAirflow
) -> None:
    async with bot_receiving(openlineage_airflow, tmp_path) as bot:
        run = await run_once(openlineage_airflow, bot, SUCCEEDING)
        assert run["state"] == "success"

        assert set(openlineage_airflow.recorder.answers()) == {201}
        rows = await stored(bot)
        assert {r.job_name for r in rows} == {
            SUCCEEDING,
            f"{SUCCEEDING}.extract",
            f"{SUCCEEDING}.count",
        }
        assert {(r.dag_namespace, r.dag_id) for r in rows} == {(OPENLINEAGE_NAMESPACE, SUCCEEDING)}
        assert {r.event_type for r in rows} == {"START", "COMPLETE"}
        assert posted(bot) == {}
