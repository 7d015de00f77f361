"""Plans name DAGs, never tasks, against Marquez as it really behaves (0.50+).

Marquez 0.50+ gives an Airflow task's lineage node its DAG run as `latestRun` (the task's
current run is its parent's: OpenLineageDao.upsertJob), `airflowDagRun` facet and all; the
stand-in does the same (tests/standins/test_marquez_fidelity_runs.py). Events here are the
Airflow provider's own shapes (tests/support/airflow_events.py), for a diamond whose middle
DAG `core.sessions` carries its datasets on its tasks, as the provider reports them.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import date, timedelta
from pathlib import Path

import aiohttp
import pytest

from bot.clients.marquez import MarquezClient
from bot.config import BotConfig, parse_config
from bot.lineage.service.planning import Planner
from standins.marquez.server import StandInServer, running_standin
from tests.cli.test_cli import cli
from tests.support.airflow_events import dag_run_events
from tests.support.e2e import CHANNEL, REQUESTER, eventually, running_bot

DAGS = {
    "core.raw": {"ingest": ((), ("raw.sessions",))},
    "core.sessions": {
        "extract": (("raw.sessions",), ("staging.sessions",)),
        "load": (("staging.sessions",), ("warehouse.sessions",)),
    },
    "core.daily": {"aggregate": (("warehouse.sessions",), ("marts.daily",))},
    "core.weekly": {"aggregate": (("warehouse.sessions",), ("marts.weekly",))},
    "core.report": {"build": (("marts.daily", "marts.weekly"), ("reports.sessions",))},
}
RECORDED = Path(__file__).resolve().parents[1] / "fixtures/openlineage/airflow-3.3.2"
PLANNED = ["core.raw", "core.sessions", "core.daily", "core.weekly", "core.report"]


@pytest.fixture
async def provider_marquez() -> AsyncIterator[StandInServer]:
    """Six days of daily runs of every DAG, sent as the Airflow provider sends them."""
    async with running_standin() as marquez, aiohttp.ClientSession() as http:
        for offset in range(6):
            for dag_id, tasks in DAGS.items():
                for body in dag_run_events(dag_id, tasks, date(2021, 6, 1) + timedelta(offset)):
                    async with http.post(f"{marquez.url}/api/v1/lineage", json=body) as reply:
                        assert reply.status == 201, await reply.text()
        yield marquez


async def test_the_stand_in_shows_each_task_its_dag_run(provider_marquez: StandInServer) -> None:
    # What makes the rest of this file mean something: the task's node reads like a DAG run.
    async with aiohttp.ClientSession() as http:
        params = {"nodeId": "job:airflow:core.sessions.extract"}
        async with http.get(f"{provider_marquez.url}/api/v1/lineage", params=params) as reply:
            graph = await reply.json()
    node = next(n for n in graph["graph"] if n["id"] == params["nodeId"])
    assert "airflowDagRun" in node["data"]["latestRun"]["facets"]


async def test_plan_lists_only_dag_ids(provider_marquez: StandInServer) -> None:
    result = await cli(
        "plan", "core.raw", "2021-06-04..2021-06-05", "--json",
        env={"MARQUEZ_URL": provider_marquez.url},
    )  # fmt: skip
    assert result.code == 0, result.err
    steps = result.json()["steps"]
    names = [step["dag_id"] for step in steps]
    assert sorted(names) == sorted(PLANNED)
    assert (names[0], names[1], names[-1]) == ("core.raw", "core.sessions", "core.report")
    assert steps[1]["intervals"] == [
        {"start": "2021-06-04T00:00:00Z", "end": "2021-06-05T00:00:00Z"},
        {"start": "2021-06-05T00:00:00Z", "end": "2021-06-06T00:00:00Z"},
    ]


async def test_the_backfill_preview_from_serves_index_lists_only_dag_ids(
    tmp_path: Path, provider_marquez: StandInServer
) -> None:
    config = parse_config({"teams": [{"name": "core", "channel": CHANNEL, "members": [REQUESTER]}]})
    async with running_bot(f"sqlite:///{tmp_path / 'bot.db'}", provider_marquez, config) as bot:
        reply = await bot.slack.slash_command(
            "core.raw 2021-06-04..2021-06-05", user_id=REQUESTER, channel_id=CHANNEL
        )
        assert reply.status == 200
        await eventually(lambda: bot.slack.state.messages(CHANNEL))
        await bot.settle()
        text = json.dumps(bot.slack.state.messages(CHANNEL)[-1].blocks)
    assert "Lineage from the bot's index" in text  # planned from serve's index, not a crawl
    for dag in PLANNED:
        assert dag in text
    for task in ("core.sessions.extract", "core.sessions.load", "core.raw.ingest"):
        assert task not in text


async def test_a_triggered_dag_is_its_own_dag_not_the_name_marquez_files_it_under() -> None:
    # Airflow 3.3.2's own events (tests/fixtures/openlineage/airflow-3.3.2/trigger.json): the
    # triggered DAG run carries a `parent` facet naming the triggering task, so Marquez files
    # it as `ol_test.parent.trigger_child.ol_test.child`; its `airflowDagRun` facet names the DAG.
    async with running_standin() as marquez, aiohttp.ClientSession() as http:
        for name in ("trigger", "success", "failure"):
            for body in json.loads((RECORDED / f"{name}.json").read_text()):
                async with http.post(f"{marquez.url}/api/v1/lineage", json=body) as reply:
                    assert reply.status == 201, await reply.text()
        async with MarquezClient(marquez.url) as client:
            catalog = await Planner(client, BotConfig()).catalog()
    assert [dag.dag_id for dag in catalog.dags] == [
        "ol_test.child",
        "ol_test.failing",
        "ol_test.parent",
        "ol_test.success",
    ]
