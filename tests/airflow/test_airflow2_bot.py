"""The whole loop on a real Airflow 2.11.2 (no backfill endpoint: the bot triggers one DAG run
per interval through /api/v1 with basic auth): `/backfill example.etl_orders
2021-06-04..2021-06-06` planned from the pipeline's lineage, approved in Slack (the stand-in),
and run by Airflow's food_delivery DAGs, whose tasks run the real PySpark jobs; and a request
cancelled while one DAG runs at a time (`max_active_runs_per_dag: 1`). See bot_story.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from standins.marquez.server import StandInServer
from tests.airflow.bot_story import ROOT, bot_runs, cancel_mid_way, run_the_planned_backfill
from tests.airflow.harness import RealAirflow

pytestmark = pytest.mark.airflow


async def test_the_bot_runs_a_planned_backfill_on_real_airflow2(
    tmp_path: Path, real_airflow2: RealAirflow, pipeline_marquez: StandInServer
) -> None:
    await run_the_planned_backfill(tmp_path, real_airflow2, pipeline_marquez)


async def test_cancel_on_real_airflow2_stops_the_runs_and_triggers_no_more(
    tmp_path: Path, real_airflow2: RealAirflow, pipeline_marquez: StandInServer
) -> None:
    # One run at a time: when Cancel lands, at least one of the three intervals is untriggered.
    request = await cancel_mid_way(
        tmp_path, real_airflow2, pipeline_marquez, {"max_active_runs_per_dag": 1}
    )
    [step] = [s for s in request.steps if s.dag_id == ROOT]
    assert step.state == "cancelled"
    assert "never triggered" in (step.message or "")
    runs = await bot_runs(real_airflow2, ROOT, request.created_at)
    assert 1 <= len(runs) < 3
    assert {r.state for r in runs} <= {"failed", "success"}  # nothing left queued or running
    assert step.executor_state["cap"] == 1
