"""serve plans from the local lineage index from the first second: before it holds a full
reconcile with Marquez (a first start, Marquez down at start), each plan walks its DAG's
downstream in Marquez (a bounded number of shallow requests, never the whole catalog), plans
what Marquez's crawl would, and says on the plan that the index was still loading."""

from __future__ import annotations

import asyncio
from pathlib import Path

from bot.app import Services, build_services
from bot.clients.marquez import MarquezClient
from bot.config import parse_config
from bot.core.db import upgrade
from bot.lineage.service.index_planner import IndexPlanner
from bot.lineage.service.neighbourhood import MAX_REQUESTS
from bot.lineage.service.planning import Planner, PlanRequest
from bot.settings import load_settings
from bot.slack.service.client import slack_client
from standins.marquez.server import StandInServer, running_standin
from standins.marquez.state import MarquezState
from tests.support.e2e import eventually

REQUEST = PlanRequest("example.etl_orders", "2021-06-04..2021-06-06")


def services_on(tmp_path: Path, marquez: StandInServer) -> Services:
    database = f"sqlite:///{tmp_path / 'bot.db'}"
    upgrade(database)
    settings = load_settings(
        {
            "MARQUEZ_URL": marquez.url,
            "DATABASE_URL": database,
            "SLACK_BOT_TOKEN": "xoxb-test",
            "SLACK_SIGNING_SECRET": "secret",
            "BOT_EXECUTOR": "manual",
        }
    )
    return build_services(settings, parse_config({}), slack_client(settings))


async def test_plans_come_from_the_index_at_once_and_say_while_it_loads(
    tmp_path: Path, food_delivery_marquez: StandInServer
) -> None:
    services = services_on(tmp_path, food_delivery_marquez)
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


def filler(jobs: int) -> MarquezState:
    """A Marquez holding `jobs` unrelated jobs besides the sample: several pages to list."""
    state = MarquezState()
    for n in range(jobs):
        state.ingest(
            {
                "eventType": "COMPLETE",
                "eventTime": f"2021-06-05T01:{n // 60 % 60:02d}:{n % 60:02d}Z",
                "run": {"runId": f"00000000-0000-4000-8000-{n:012d}"},
                "job": {"namespace": "filler", "name": f"job_{n:04d}"},
                "producer": "https://github.com/example/filler",
                "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
                "outputs": [{"namespace": "filler", "name": f"out_{n:04d}"}],
            }
        )
    return state


async def test_a_plan_asking_marquez_goes_before_the_reconciles_next_page(
    tmp_path: Path,
) -> None:
    # a depth-2 /lineage takes 0.4 s: a walk of two rounds outlasts the listing of every page
    latency = {"lineage": 4.0, "jobs": 0.02}
    async with running_standin(seed="food_delivery", state=filler(600), latency=latency) as m:
        services = services_on(tmp_path, m)
        try:
            assert services.reconciler is not None
            full = asyncio.create_task(services.reconciler.full())
            await eventually(lambda: any(r.startswith("GET /api/v1/jobs?") for r in m.requests))
            before = len(m.requests)
            async with services.backfills.planners() as planner:
                plan = await planner.plan(REQUEST)
            during = m.requests[before:]
            assert plan.lineage_loading is not None  # it walked Marquez
            assert sum(r.startswith("GET /api/v1/lineage?") for r in during) >= 2
            # the page asked for as the plan began, at most: the rest waited for its answer
            assert sum(r.startswith("GET /api/v1/jobs?") for r in during) <= 1
            result = await full
            assert result is not None
            assert result.jobs_read > 600
        finally:
            await services.engine.dispose()
