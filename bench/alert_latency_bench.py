"""Time from an OpenLineage FAIL event POSTed to the bot's receiver until its alert arrives at
the Slack stand-in: the whole path (receiver, store, incident processor with the impact read
from the Marquez stand-in, outbox, sender), on the real `serve` app over loopback.

Events are one failed interval each of example.etl_orders, sent one at a time and spaced by
`--gap` seconds so Slack's per-channel pace (about 1 message a second) is not what is measured.

Run: .venv/bin/python bench/alert_latency_bench.py [--events 40] [--gap 1.2]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import aiohttp
from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.app import build_services, create_bolt_app, create_web_app, slack_client
from bot.config import parse_config
from bot.settings import load_settings
from bot.standins.marquez import running_standin
from bot.standins.slack import running_slack_standin
from bot.store.db import upgrade

CHANNEL = "C0ORDERS01"
CONFIG = {
    "teams": [{"name": "orders", "channel": CHANNEL, "members": ["U0ALICE001"]}],
    "ownership": [{"pattern": "example.etl_orders*", "team": "orders"}],
    "watch": {"poll": False},
}


def fail_event(day: datetime) -> dict[str, object]:
    producer = "https://github.com/example/bench"
    return {
        "eventType": "FAIL",
        "eventTime": (day + timedelta(days=1, hours=1)).isoformat(),
        "run": {
            "runId": str(uuid.uuid4()),
            "facets": {
                "nominalTime": {
                    "_producer": producer,
                    "_schemaURL": "https://openlineage.io/spec/facets/1-0-0/NominalTimeRunFacet.json",
                    "nominalStartTime": day.isoformat(),
                    "nominalEndTime": (day + timedelta(days=1)).isoformat(),
                }
            },
        },
        "job": {"namespace": "food_delivery", "name": "example.etl_orders"},
        "producer": producer,
    }


async def measure(events: int, gap: float) -> list[float]:
    scratch = tempfile.TemporaryDirectory()
    database = f"sqlite:///{Path(scratch.name) / 'bench.db'}"
    async with running_standin(seed="food_delivery") as marquez, running_slack_standin() as slack:
        settings = load_settings(
            {
                "MARQUEZ_URL": marquez.url,
                "DATABASE_URL": database,
                "SLACK_BOT_TOKEN": slack.bot_token,
                "SLACK_SIGNING_SECRET": slack.signing_secret,
                "SLACK_API_URL": f"{slack.url}/api/",
                "BOT_EXECUTOR": "manual",
            }
        )
        upgrade(database)
        services = build_services(settings, parse_config(CONFIG), slack_client(settings))
        runner = web.AppRunner(create_web_app(create_bolt_app(services), services))
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        url = f"http://127.0.0.1:{runner.addresses[0][1]}/api/v1/lineage"
        latencies: list[float] = []
        try:
            async with aiohttp.ClientSession() as http:
                for n in range(events):
                    seen = len(slack.state.messages(CHANNEL))
                    body = fail_event(datetime(2030, 1, 1, tzinfo=UTC) + timedelta(days=n))
                    started = time.perf_counter()
                    async with http.post(url, json=body) as reply:
                        assert reply.status == 201, await reply.text()
                    # The stand-in offers no event to wait on: poll its state finely.
                    while len(slack.state.messages(CHANNEL)) == seen:  # noqa: ASYNC110
                        await asyncio.sleep(0.002)
                    latencies.append(time.perf_counter() - started)
                    await asyncio.sleep(gap)
        finally:
            await runner.cleanup()
            scratch.cleanup()
    return latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=40)
    parser.add_argument("--gap", type=float, default=1.2)
    args = parser.parse_args()
    latencies = sorted(asyncio.run(measure(args.events, args.gap)))
    p99 = latencies[min(len(latencies) - 1, round(0.99 * (len(latencies) - 1)))]
    print(
        f"FAIL POSTed → alert at the Slack stand-in, {len(latencies)} events: "
        f"median {statistics.median(latencies) * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms, "
        f"max {latencies[-1] * 1000:.0f} ms"
    )


if __name__ == "__main__":
    main()
