"""Failures downstream of an open incident, POSTed to the receiver in bursts that the incident
processor handles in several passes, are ONE reply in the alert's thread: posted by the first
pass, edited in place by the later ones, saying how many joined in all and which DAGs."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp

from standins.marquez.server import StandInServer
from tests.incidents.test_incidents import ORDERS
from tests.incidents.test_watch_flow import alerts, config, run_event, shown
from tests.support.e2e import Bot, eventually, running_bot

DAY = datetime(2021, 6, 10, tzinfo=UTC)
DOWNSTREAM = ("example.etl_orders_7_days", "example.etl_delivery_7_days")


async def post(bot: Bot, *events: dict[str, Any]) -> None:
    async with aiohttp.ClientSession() as http:
        for body in events:
            async with http.post(f"{bot.url}/api/v1/lineage", json=body) as reply:
                assert reply.status == 201


def grouped_replies(bot: Bot, alert: Any) -> list[Any]:
    thread = bot.slack.state.thread(ORDERS, alert.ts)
    return [r for r in thread if "joined this incident" in shown(r)]


async def says(bot: Bot, alert: Any, joined: int) -> None:
    """Wait until the grouped reply counts `joined` failures: the receiver wakes the incident
    processor, whose passes may still be under way when this one ends."""
    while await bot.services.incidents.process():
        pass
    await bot.settle()
    head = f"{joined} failure(s) downstream joined"
    await eventually(lambda: any(r.text.startswith(head) for r in grouped_replies(bot, alert)))


async def test_failures_joining_over_several_passes_are_one_edited_reply(
    tmp_path: Any, food_delivery_marquez: StandInServer
) -> None:
    database = f"sqlite:///{tmp_path / 'bot.db'}"
    async with running_bot(database, food_delivery_marquez, config()) as bot:
        await post(bot, run_event("FAIL", DAY, run_id=str(uuid.uuid4()), error="disk full"))
        [alert] = await eventually(lambda: alerts(bot), timeout_s=20)

        for burst in range(3):  # one DAG, then the other, then both
            storm = [
                run_event(
                    "FAIL",
                    DAY + timedelta(days=n % 3),
                    run_id=str(uuid.uuid4()),
                    dag=DOWNSTREAM[burst] if burst < 2 else DOWNSTREAM[n % 2],
                )
                for n in range(20)
            ]
            await post(bot, *storm)
            await says(bot, alert, 20 * (burst + 1))
            assert len(grouped_replies(bot, alert)) == 1  # one post, edited every time

        [alert] = alerts(bot)
        assert "60 downstream failures joined" in shown(alert)
        [reply] = grouped_replies(bot, alert)
        assert reply.edited is not None  # brought up to date in place by the later passes
        assert reply.text == (
            "60 failure(s) downstream joined this incident: "
            "`example.etl_delivery_7_days`, `example.etl_orders_7_days`"
        )
