"""The whole loop on a real Airflow 3.3.2: `/backfill example.etl_orders 2021-06-04..2021-06-06`
is planned from the pipeline's lineage, approved in Slack (the stand-in), and run by Airflow as
backfills of the food_delivery DAGs, whose tasks run the real PySpark jobs. A second request is
cancelled mid-way. The same story on Airflow 2.11 is test_airflow2_bot.py (see bot_story.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from standins.marquez.server import StandInServer
from tests.airflow.bot_story import ROOT, bot_runs, cancel_mid_way, run_the_planned_backfill
from tests.airflow.harness import RealAirflow

pytestmark = pytest.mark.airflow


async def test_the_bot_runs_a_planned_backfill_on_real_airflow(
    tmp_path: Path, real_airflow: RealAirflow, pipeline_marquez: StandInServer
) -> None:
    await run_the_planned_backfill(tmp_path, real_airflow, pipeline_marquez)


async def test_cancel_on_real_airflow_fails_queued_runs_and_skips_the_rest(
    tmp_path: Path, real_airflow: RealAirflow, pipeline_marquez: StandInServer
) -> None:
    # one run at a time, so Cancel finds queued runs of etl_orders
    request = await cancel_mid_way(tmp_path, real_airflow, pipeline_marquez, {"max_active_runs": 1})
    assert {s.dag_id: s.state for s in request.steps}[ROOT] in {"cancelled", "succeeded"}
    runs = await bot_runs(real_airflow, ROOT, request.created_at)
    assert "failed" in {r.state for r in runs}  # the queued ones, failed by the cancel
