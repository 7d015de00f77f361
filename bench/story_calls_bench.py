"""Slack calls of the example story, from the first failure to the resolved alert.

    .venv/bin/python bench/story_calls_bench.py

Three failed days of `example.etl_orders` are posted to the bot's receiver, the owner clicks
**Approve backfill** in the one alert, the DAG and everything downstream rerun on the Airflow
stand-in (runs of `--run-seconds`, the runner polling every second and reporting at the default
`progress_update_s`), the other teams are told, and the reruns' COMPLETE events resolve the
alert. Prints every Slack Web API call the bot made, by method, and the total against the
target of 15. The story is the one tests/incidents/test_alert_story.py checks.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bot.slack.rules.ids import ActionId  # noqa: E402
from standins.marquez.server import running_standin  # noqa: E402
from tests.support.story import (  # noqa: E402
    ANALYTICS,
    DAYS,
    LOGISTICS,
    ORDERS,
    OWNER,
    alerts,
    backfill_of_incident,
    click,
    post_events,
    run_event,
    story_bot,
    story_config,
)

TARGET = 15


async def story(run_seconds: float) -> None:
    config = story_config(execution={"poll_interval_s": 1.0})
    with tempfile.TemporaryDirectory() as tmp:
        async with (
            running_standin(seed="food_delivery") as marquez,
            story_bot(Path(tmp), marquez, config, run_seconds=run_seconds) as (bot, _),
        ):
            before = len(bot.slack.state.calls)
            started = time.monotonic()
            await post_events(bot, [run_event("FAIL", day) for day in DAYS])
            [alert] = alerts(bot)
            await click(bot, alert, ActionId.INCIDENT_APPROVE, OWNER)
            request = await backfill_of_incident(bot, timeout_s=600)
            await post_events(bot, [run_event("COMPLETE", day) for day in DAYS])
            took = time.monotonic() - started
            calls = bot.slack.state.calls[before:]
            [alert] = alerts(bot)
            assert "now resolved" in alert.text, alert.text
            print(
                f"backfill {request.state}: {len(request.steps)} DAGs, "
                f"{sum(len(s.intervals) for s in request.steps)} runs, story took {took:.1f} s"
            )
            print("Slack calls by method:")
            for method, count in sorted(Counter(c.method for c in calls).items()):
                print(f"  {method:<24} {count}")
            posts = {
                channel: len(bot.slack.state.messages(channel))
                for channel in (ORDERS, LOGISTICS, ANALYTICS)
            }
            print(f"  top-level messages per channel: {posts}")
            print(
                f"  thread replies under the alert: {len(bot.slack.state.thread(ORDERS, alert.ts))}"
            )
            # auth.test is bolt's once-per-process check of the token, not the story's
            story_calls = [c for c in calls if c.method != "auth.test"]
            verdict = "within" if len(story_calls) <= TARGET else "OVER"
            print(
                f"Slack calls of the story: {len(story_calls)} ({verdict} the target of {TARGET}),"
                f" plus {len(calls) - len(story_calls)} auth.test"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-seconds", type=float, default=2.0, help="each Airflow run's time")
    args = parser.parse_args()
    asyncio.run(story(args.run_seconds))


if __name__ == "__main__":
    main()
