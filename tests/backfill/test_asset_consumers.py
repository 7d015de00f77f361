"""The preview warns of DAGs outside the plan that Airflow schedules on assets the plan's DAGs
produce (every rerun interval triggers them: apache/airflow#33272) and offers to include them;
`--with-asset-consumers` (or ticking it in Review plan) adds each as a step after its producers
that runs once per interval: on Airflow 3, which cannot backfill an asset-scheduled DAG, as
triggered runs. Over signed Slack requests with the Airflow stand-in on both APIs (Airflow 2
calls them datasets)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.slack.rules.ids import ActionId
from standins.airflow.dags import FOOD_DELIVERY_DAGS, StandinDag
from standins.airflow.server import running_airflow_standin
from standins.marquez.server import StandInServer
from tests.backfill.test_managed_slack import form, open_review
from tests.support.e2e import CHANNEL, REQUESTER, buttons, eventually, running_bot
from tests.support.execution import (
    airflow_env,
    approve,
    execution_config,
    finished,
    load,
    request_backfill,
)

ROOT = "example.etl_orders"
ORDERS = "x-lake://orders"
AUDIT = "finance.orders_audit"
SUMMARY = "finance.audit_summary"  # scheduled on what AUDIT produces
DAYS = [datetime(2021, 6, d, tzinfo=UTC) for d in (4, 5, 6)]


def _dags() -> list[StandinDag]:
    return [
        *(replace(d, outlets=(ORDERS,)) if d.dag_id == ROOT else d for d in FOOD_DELIVERY_DAGS),
        StandinDag(AUDIT, asset_schedule=(ORDERS,), outlets=("x-lake://audit",)),
        StandinDag(SUMMARY, asset_schedule=("x-lake://audit",)),
        StandinDag("finance.unrelated", asset_schedule=("x-lake://other",)),
    ]


@pytest.mark.parametrize("api", [3, 2])
async def test_the_preview_names_the_dags_a_rerun_triggers_through_assets(
    tmp_path: Path, food_delivery_marquez: StandInServer, api: int
) -> None:
    async with (
        running_airflow_standin(api=api, dags=_dags()) as airflow,
        running_bot(
            f"sqlite:///{tmp_path / 'bot.db'}", food_delivery_marquez, execution_config(),
            env=airflow_env(airflow.url),
        ) as bot,
    ):  # fmt: skip
        preview = await request_backfill(bot, f"{ROOT} 2021-06-04..2021-06-05 --only")
        text = json.dumps(preview.blocks)
        assert "apache/airflow#33272" in text
        assert f"{ROOT} updates asset" in text
        assert f"which schedules {AUDIT}" in text
        assert "Add --with-asset-consumers" in text
        assert "finance.unrelated" not in text

        # A plan whose DAGs produce nothing anyone is scheduled on says nothing of it.
        quiet = await request_backfill(bot, "example.etl_menus 2021-06-04..2021-06-05 --only")
        assert "apache/airflow#33272" not in json.dumps(quiet.blocks)


@pytest.mark.parametrize("api", [3, 2])
async def test_with_asset_consumers_runs_each_consumer_once_per_interval_after_its_producer(
    tmp_path: Path, food_delivery_marquez: StandInServer, api: int
) -> None:
    async with (
        running_airflow_standin(api=api, dags=_dags(), run_seconds=0.05) as airflow,
        running_bot(
            f"sqlite:///{tmp_path / 'bot.db'}", food_delivery_marquez, execution_config(),
            env=airflow_env(airflow.url),
        ) as bot,
    ):  # fmt: skip
        preview = await request_backfill(
            bot, f"{ROOT} 2021-06-04..2021-06-06 --only --with-asset-consumers"
        )
        text = json.dumps(preview.blocks)
        assert f"{AUDIT}, {SUMMARY} run once per interval here" in text
        assert "with 2 DAGs scheduled on its assets, one run per interval" in text
        assert "finance.unrelated" not in text
        request_id = await approve(bot, preview)
        done = await finished(bot, request_id)
        assert done.state == "succeeded", [(s.dag_id, s.message) for s in done.steps]
        assert [s.dag_id for s in done.steps] == [ROOT, AUDIT, SUMMARY]
        assert [s.upstream for s in done.steps[1:]] == [[ROOT], [AUDIT]]

        # One run of the consumer per interval, each with the interval's dates, all started
        # after the producer's runs ended (Airflow 3 ran the producer as a backfill).
        audits = sorted(airflow.state.all_runs(AUDIT), key=lambda r: r.logical_date or DAYS[0])
        assert [r.logical_date for r in audits] == DAYS
        assert [(r.data_interval_start, r.data_interval_end) for r in audits] == [
            (d, d + timedelta(days=1)) for d in DAYS
        ]
        assert {r.state for r in audits} == {"success"}
        producer = airflow.state.all_runs(ROOT)
        assert {r.run_type for r in producer} == {"backfill" if api == 3 else "manual"}
        last_end = max(r.end_date for r in producer if r.end_date is not None)
        assert all(r.start_date is not None and r.start_date >= last_end for r in audits)
        summaries = airflow.state.all_runs(SUMMARY)
        assert sorted(r.logical_date or DAYS[0] for r in summaries) == DAYS
        audited = max(r.end_date for r in audits if r.end_date is not None)
        assert all(r.start_date is not None and r.start_date >= audited for r in summaries)


async def test_review_plan_adds_and_drops_the_asset_consumers(
    tmp_path: Path, food_delivery_marquez: StandInServer
) -> None:
    async with (
        running_airflow_standin(api=3, dags=_dags()) as airflow,
        running_bot(
            f"sqlite:///{tmp_path / 'bot.db'}", food_delivery_marquez, execution_config(),
            env=airflow_env(airflow.url),
        ) as bot,
    ):  # fmt: skip
        preview = await request_backfill(
            bot, f"{ROOT} 2021-06-04..2021-06-05 --only --priority low"
        )
        request_id = buttons(preview)[ActionId.APPROVE]["value"]
        view = await open_review(bot, preview, REQUESTER)
        assert "--with-asset-consumers" in json.dumps(view.payload)

        ticked = form(rerun="all", flags=["with_asset_consumers"])
        await bot.slack.submit_view(view_id=view.id, user_id=REQUESTER, values=ticked)

        async def steps() -> list[str] | None:
            found = [s.dag_id for s in (await load(bot, request_id)).steps]
            return found if len(found) == 3 else None

        assert await eventually(steps) == [ROOT, AUDIT, SUMMARY]
        await bot.settle()
        redrawn = json.dumps(bot.slack.state.find_message(CHANNEL, preview.ts).blocks)
        assert AUDIT in redrawn
        assert "run once per interval here" in redrawn

        view = await open_review(bot, bot.slack.state.find_message(CHANNEL, preview.ts), REQUESTER)
        await bot.slack.submit_view(view_id=view.id, user_id=REQUESTER, values=form(rerun="all"))

        async def dropped() -> list[str] | None:
            found = [s.dag_id for s in (await load(bot, request_id)).steps]
            return found if len(found) == 1 else None

        assert await eventually(dropped) == [ROOT]
        request = await load(bot, request_id)
        assert [s["dag_id"] for s in request.plan["steps"]] == [ROOT]
        assert "asset_triggered" not in request.options
        assert request.options["priority"] == "low"  # the modal does not show it: kept
