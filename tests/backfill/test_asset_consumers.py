"""The preview warns of DAGs outside the plan that Airflow schedules on assets the plan's DAGs
produce (every rerun interval triggers them: apache/airflow#33272), over signed Slack requests
with the Airflow stand-in on both APIs (Airflow 2 calls them datasets)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from standins.airflow.dags import FOOD_DELIVERY_DAGS, StandinDag
from standins.airflow.server import running_airflow_standin
from standins.marquez.server import StandInServer
from tests.support.e2e import running_bot
from tests.support.execution import airflow_env, execution_config, request_backfill

ROOT = "example.etl_orders"
ORDERS = "x-lake://orders"


@pytest.mark.parametrize("api", [3, 2])
async def test_the_preview_names_the_dags_a_rerun_triggers_through_assets(
    tmp_path: Path, food_delivery_marquez: StandInServer, api: int
) -> None:
    dags = [
        *(replace(d, outlets=(ORDERS,)) if d.dag_id == ROOT else d for d in FOOD_DELIVERY_DAGS),
        StandinDag("finance.orders_audit", asset_schedule=(ORDERS,)),
        StandinDag("finance.unrelated", asset_schedule=("x-lake://other",)),
    ]
    async with (
        running_airflow_standin(api=api, dags=dags) as airflow,
        running_bot(
            f"sqlite:///{tmp_path / 'bot.db'}", food_delivery_marquez, execution_config(),
            env=airflow_env(airflow.url),
        ) as bot,
    ):  # fmt: skip
        preview = await request_backfill(bot, f"{ROOT} 2021-06-04..2021-06-05 --only")
        text = json.dumps(preview.blocks)
        assert "apache/airflow#33272" in text
        assert f"{ROOT} updates asset" in text
        assert "which schedules finance.orders_audit" in text
        assert "finance.unrelated" not in text

        # A plan whose DAGs produce nothing anyone is scheduled on says nothing of it.
        quiet = await request_backfill(bot, "example.etl_menus 2021-06-04..2021-06-05 --only")
        assert "apache/airflow#33272" not in json.dumps(quiet.blocks)
