"""serve plans from the local lineage index only once it holds a full reconcile with Marquez:
before that (a first start, Marquez down at start) it plans from Marquez directly, so no plan
or alert is ever made from less than Marquez knows."""

from __future__ import annotations

from pathlib import Path

from bot.app import build_services
from bot.config import parse_config
from bot.core.db import upgrade
from bot.lineage.service.index_planner import IndexPlanner
from bot.lineage.service.planning import Planner, PlanRequest
from bot.settings import load_settings
from bot.slack.service.client import slack_client
from standins.marquez.server import StandInServer

REQUEST = PlanRequest("example.etl_orders", "2021-06-04..2021-06-06")


async def test_plans_come_from_marquez_until_the_index_is_complete(
    tmp_path: Path, food_delivery_marquez: StandInServer
) -> None:
    database = f"sqlite:///{tmp_path / 'bot.db'}"
    upgrade(database)
    settings = load_settings(
        {
            "MARQUEZ_URL": food_delivery_marquez.url,
            "DATABASE_URL": database,
            "SLACK_BOT_TOKEN": "xoxb-test",
            "SLACK_SIGNING_SECRET": "secret",
            "BOT_EXECUTOR": "manual",
        }
    )
    services = build_services(settings, parse_config({}), slack_client(settings))
    try:
        assert services.reconciler is not None
        async with services.backfills.planners() as planner:
            assert isinstance(planner, Planner)  # the index never reconciled: crawl
            crawled = await planner.plan(REQUEST)
        assert crawled.lineage_as_of is None

        await services.reconciler.full()
        async with services.backfills.planners() as planner:
            assert isinstance(planner, IndexPlanner)
            indexed = await planner.plan(REQUEST)
        assert indexed.lineage_as_of is not None
        assert [s.dag for s in indexed.steps] == [s.dag for s in crawled.steps]
    finally:
        await services.engine.dispose()
