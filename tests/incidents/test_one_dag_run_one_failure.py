"""One failed DAG run is one failure, however many of its tasks failed: the Airflow provider
sends a FAIL per failed task (each with the `parent` facet naming the DAG run) and one for the
DAG run itself (tests/support/airflow_events.py builds them as Airflow 3.3.2 does)."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import aiohttp

from standins.marquez.server import StandInServer
from tests.support.airflow_events import dag_run_events
from tests.support.story import SEND_AT_ONCE, alerts, incident, post_events, story_bot, story_config

TASKS = dict.fromkeys(("extract", "clean", "join", "load", "publish"), ((), ()))
FAILED = ["clean", "join", "load", "publish"]


async def test_four_failed_tasks_of_one_dag_run_are_one_failure(
    tmp_path: Path, food_delivery_marquez: StandInServer
) -> None:
    # Slack calls sent at once (SEND_AT_ONCE): how many failures the run is, not how the watcher
    # gathers its Slack calls, is the subject.
    config = story_config(watch=SEND_AT_ONCE)
    async with story_bot(tmp_path, food_delivery_marquez, config) as (bot, _):
        events = dag_run_events(
            "example.etl_orders", TASKS, date(2021, 6, 4), namespace="food_delivery", failed=FAILED
        )
        await post_events(bot, events)
        [alert] = alerts(bot)
        assert (await incident(bot)).failures == 1
        assert "failed 4 times" not in alert.text + str(alert.blocks)
        assert "times" not in str(alert.blocks[0])


async def test_read_back_from_marquez_they_are_one_failure_too(
    tmp_path: Path, food_delivery_marquez: StandInServer
) -> None:
    # The same events as the watcher reads them from Marquez's feed (as Marquez re-serialises
    # them), after the seed's runs so they are new to the poller.
    events = dag_run_events(
        "example.etl_orders", TASKS, date(2021, 6, 20), namespace="food_delivery", failed=FAILED
    )
    watch = {"poll": False, "start_from": "2021-06-09T00:00:00Z", "group_wait_s": 0}
    async with story_bot(tmp_path, food_delivery_marquez, story_config(watch=watch)) as (bot, _):
        async with aiohttp.ClientSession() as http:
            for body in events:
                url = f"{food_delivery_marquez.url}/api/v1/lineage"
                async with http.post(url, json=body) as reply:
                    assert reply.status == 201, await reply.text()
        await bot.services.poller.poll_once()
        await post_events(bot, [])
        [alert] = alerts(bot)
        assert (await incident(bot)).failures == 1
        assert "times" not in str(alert.blocks[0])
