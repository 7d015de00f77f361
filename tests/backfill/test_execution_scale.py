"""A 50-DAG × 30-day backfill runs to the end without a single 429 from Slack: replies of one
pass are one message, consecutive replies merge, and status edits are coalesced."""

from __future__ import annotations

import json
import random
import uuid
from pathlib import Path
from typing import Any

from bot.config import parse_config
from standins.airflow.dags import StandinDag
from standins.airflow.server import running_airflow_standin
from standins.marquez.server import running_standin
from tests.support.e2e import CHANNEL, CONFIG, running_bot
from tests.support.execution import airflow_env, approve, finished, request_backfill, status_message

PRODUCER = "https://github.com/example/scale-test"
NS = "scale"
DAGS = 50


def pipeline_events(jobs: int = DAGS, width: int = 8, seed: int = 5) -> list[dict[str, Any]]:
    """Two daily runs of a layered pipeline fed by job00: each job reads 1-2 outputs above."""
    rng = random.Random(seed)
    events: list[dict[str, Any]] = []
    for index in range(jobs):
        layer = 0 if index == 0 else (index - 1) // width + 1
        first = 0 if layer <= 1 else (layer - 2) * width + 1
        above = list(range(first, 1 if layer == 1 else first + width)) if layer else []
        reads = sorted(set(rng.sample(above, k=min(len(above), rng.randint(1, 2)))))
        for day in (1, 2):
            body = {
                "run": {
                    "runId": str(uuid.uuid5(uuid.NAMESPACE_URL, f"scale-{index}-{day}")),
                    "facets": {
                        "nominalTime": {
                            "_producer": PRODUCER,
                            "_schemaURL": "https://openlineage.io/spec/facets/1-0-0/NominalTimeRunFacet.json",
                            "nominalStartTime": f"2021-05-0{day}T00:00:00Z",
                            "nominalEndTime": f"2021-05-0{day + 1}T00:00:00Z",
                        }
                    },
                },
                "job": {"namespace": NS, "name": f"job{index:02d}"},
                "producer": PRODUCER,
                "inputs": [{"namespace": NS, "name": f"ds{r:02d}"} for r in reads],
                "outputs": [{"namespace": NS, "name": f"ds{index:02d}"}],
            }
            at = f"2021-05-0{day + 1}T01:0"
            events.append({**body, "eventType": "START", "eventTime": at + "0:00Z"})
            events.append({**body, "eventType": "COMPLETE", "eventTime": at + "5:00Z"})
    return events


async def test_a_50_dag_30_day_backfill_stays_under_slacks_rate_limits(tmp_path: Path) -> None:
    config = parse_config(
        {
            **CONFIG,
            "ownership": [{"pattern": "scale::*", "team": "orders"}],
            "execution": {
                "poll_interval_s": 0.1,
                "progress_update_s": 2,
                "max_parallel_steps": 8,
                "airflow": {"max_active_runs": 16},
            },
        }
    )
    dags = [StandinDag(f"job{i:02d}", schedule="0 0 * * *") for i in range(DAGS)]
    async with (
        running_standin() as marquez,
        running_airflow_standin(dags=dags, run_seconds=0.02) as airflow,
    ):
        for event in pipeline_events():
            marquez.state.ingest(event)
        database = f"sqlite:///{tmp_path / 'bot.db'}"
        async with running_bot(database, marquez, config, env=airflow_env(airflow.url)) as bot:
            preview = await request_backfill(bot, "job00 2021-06-01..2021-06-30")
            request = await finished(bot, await approve(bot, preview), timeout_s=240)
            await bot.services.sender.drain(timeout_s=240)

            assert request.state == "succeeded"
            assert len(request.steps) == DAGS
            assert {len(s.intervals) for s in request.steps} == {30}
            assert sum(len(airflow.state.runs_of(f"job{i:02d}")) for i in range(DAGS)) == 1500
            calls = [c for c in bot.slack.state.calls if c.method.startswith("chat.")]
            assert [c for c in calls if c.status == 429] == []
            assert all(c.status == 200 for c in calls)
            # every DAG's start and end is in the thread, in far fewer than 100 messages
            assert request.status_message_ts
            replies = bot.slack.state.thread(CHANNEL, request.status_message_ts)
            text = "".join(json.dumps(r.blocks) for r in replies)
            for i in range(DAGS):
                assert f"`job{i:02d}` started" in text
                assert f"`job{i:02d}` succeeded" in text
            assert len(replies) < 40
            assert "50 succeeded" in status_message(bot, request).text + json.dumps(
                status_message(bot, request).blocks
            )
