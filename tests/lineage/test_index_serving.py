"""serve plans from the local lineage index from the first second: before it holds a full
reconcile with Marquez (a first start, Marquez down at start), each plan walks its DAG's
downstream in Marquez (a bounded number of shallow requests, never the whole catalog), plans
what Marquez's crawl would, and says on the plan that the index was still loading."""

from __future__ import annotations

from pathlib import Path

from bot.app import build_services
from bot.clients.marquez import MarquezClient
from bot.config import parse_config
from bot.core.db import upgrade
from bot.lineage.service.index_planner import IndexPlanner
from bot.lineage.service.neighbourhood import MAX_REQUESTS
from bot.lineage.service.planning import Planner, PlanRequest
from bot.settings import load_settings
from bot.slack.service.client import slack_client
from standins.marquez.server import StandInServer

REQUEST = PlanRequest("example.etl_orders", "2021-06-04..2021-06-06")


async def test_plans_come_from_the_index_at_once_and_say_while_it_loads(
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
    requests = food_delivery_marquez.requests
    try:
        assert services.reconciler is not None
        async with MarquezClient(food_delivery_marquez.url) as client:
            # the reference: the crawl `backfill-bot plan` makes (every job, then lineage)
            crawled = await Planner(client, parse_config({})).plan(REQUEST)
        before = len(requests)
        async with services.backfills.planners() as planner:
            assert isinstance(planner, IndexPlanner)  # never reconciled, yet no crawl
            cold = await planner.plan(REQUEST)
        asked = requests[before:]
        assert not any(r.startswith("GET /api/v1/jobs?") for r in asked)  # no catalog listing
        assert sum(r.startswith("GET /api/v1/lineage?") for r in asked) <= MAX_REQUESTS
        assert all("depth=2" in r for r in asked if r.startswith("GET /api/v1/lineage?"))
        assert [s.dag for s in cold.steps] == [s.dag for s in crawled.steps]
        assert cold.lineage_loading is not None
        assert cold.lineage_loading.complete
        assert cold.lineage_loading.fetched_dags == len(cold.steps)
        assert cold.to_json()["lineage_loading"]["jobs_read"] == 0

        await services.reconciler.full()
        before = len(requests)
        async with services.backfills.planners() as planner:
            indexed = await planner.plan(REQUEST)
        assert requests[before:] == []  # a loaded index plans alone
        assert indexed.lineage_loading is None
        assert indexed.lineage_as_of is not None
        assert [s.dag for s in indexed.steps] == [s.dag for s in crawled.steps]
    finally:
        await services.engine.dispose()
