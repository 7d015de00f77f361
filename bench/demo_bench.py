"""The demo's responsiveness: how long the `chat` REPL takes to return after each kind of
command (it returns once the bot has answered: no listener at work, nothing owed to Slack, the
workspace quiet for 0.3 s), how long a workspace change takes to reach the page's live stream,
and how long the whole scripted story takes headless.

Before issue 13 the REPL waited up to ~33 s after a command the bot answered with an ephemeral
alone (help, status, a refusal): it polled for a channel post that never came.

Run: .venv/bin/python bench/demo_bench.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

from bot.config import load_config
from bot.settings import load_settings
from standins.demo.chat import Conversation
from standins.demo.run import EXAMPLE_CONFIG, REQUESTER, running_demo
from standins.demo.story import play

COMMANDS = {
    "help (ephemeral only)": "/backfill help",
    "status (ephemeral only)": "/backfill status",
    "refusal (unknown DAG)": "/backfill example.no_such_dag 2021-06-04",
    "plan preview (7 DAGs)": "/backfill example.etl_orders 2021-06-04..2021-06-06",
}


async def main(rounds: int) -> None:
    quiet = lambda _: None  # noqa: E731 - the transcript is not what is measured
    with tempfile.TemporaryDirectory() as scratch:
        settings = load_settings({"DATABASE_URL": f"sqlite:///{Path(scratch) / 'bot.db'}"})
        config = load_config(EXAMPLE_CONFIG)
        async with running_demo(settings, config, quiet) as demo:
            talk = Conversation(demo)
            print(f"chat: seconds from Enter to the prompt, median of {rounds}")
            for label, line in COMMANDS.items():
                times = []
                for _ in range(rounds):
                    started = time.perf_counter()
                    await talk.type(REQUESTER, line)
                    times.append(time.perf_counter() - started)
                print(f"  {label:28} {statistics.median(times):6.2f}  (max {max(times):.2f})")

            lags = []
            async with (
                aiohttp.ClientSession() as http,
                http.get(f"{demo.slack.url}/ui/api/stream") as stream,
            ):
                await stream.content.readline()
                await stream.content.readline()
                for n in range(50):
                    started = time.perf_counter()
                    demo.slack.state.post("C0BACKFILL", text=f"ping {n}")
                    while await stream.content.readline() != b"\n":
                        pass
                    lags.append((time.perf_counter() - started) * 1000)
            lags.sort()
            print(
                f"page live stream: change → event received, 50 changes: median "
                f"{statistics.median(lags):.2f} ms, max {lags[-1]:.2f} ms"
            )

    with tempfile.TemporaryDirectory() as scratch:
        settings = load_settings({"DATABASE_URL": f"sqlite:///{Path(scratch) / 'bot.db'}"})
        started = time.perf_counter()
        async with running_demo(settings, load_config(EXAMPLE_CONFIG), quiet) as demo:
            problem = await play(demo)
        print(
            f"headless story, start-up to SLA miss: {time.perf_counter() - started:.1f} s"
            f" ({'finished' if problem is None else problem})"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    asyncio.run(main(parser.parse_args().rounds))
    sys.exit(0)
