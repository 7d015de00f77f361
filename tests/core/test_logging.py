"""What an operator reads in the bot's log: one line per thing that happened, with its ids
(JSON fields with LOG_FORMAT=json), nothing on every poll, no warning at start-up, and no line
that outside text could forge."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import socket
import sys
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bot.core import logs
from standins.marquez.server import StandInServer
from standins.slack.server import running_slack_standin
from tests.support.e2e import CHANNEL, Bot, eventually
from tests.support.story import post_events, run_event

DAY = datetime(2021, 6, 4, tzinfo=UTC)


@pytest.fixture
def operator_log() -> Iterator[io.StringIO]:
    """The process's log as `backfill-bot serve` configures it, written here; put back after."""
    root = logging.getLogger()
    names = ("alembic", *logs.PER_TICK_LOGGERS)
    before = root.level, list(root.handlers), {n: logging.getLogger(n).level for n in names}
    stream = io.StringIO()
    yield stream
    level, handlers, levels = before
    for handler in [h for h in root.handlers if h not in handlers]:
        root.removeHandler(handler)
    root.setLevel(level)
    for name, old in levels.items():
        logging.getLogger(name).setLevel(old)


def json_lines(stream: io.StringIO) -> list[dict[str, Any]]:
    lines = stream.getvalue().splitlines()
    assert lines
    return [json.loads(line) for line in lines]


async def test_json_lines_carry_the_ids_of_what_happened(
    bot: Bot, operator_log: io.StringIO
) -> None:
    logs.configure(logging.INFO, fmt="json", stream=operator_log)
    await post_events(bot, [run_event("FAIL", DAY)])
    [alert] = bot.slack.state.messages(CHANNEL)
    entries = json_lines(operator_log)

    for entry in entries:
        assert {"time", "level", "logger", "message"} <= entry.keys()
        assert datetime.fromisoformat(entry["time"]).tzinfo is not None
    [opened] = [e for e in entries if e.get("state") == "open"]
    assert opened["level"] == "INFO"
    assert opened["logger"] == "bot.incidents.service.watcher"
    assert opened["dag_id"] == "example.etl_orders"
    assert opened["message"] == (
        f"incident {opened['incident_id']} of example.etl_orders (2021-06-04) opened"
    )
    [posted] = [e for e in entries if e.get("ts") == alert.ts]
    assert (posted["incident_id"], posted["channel"]) == (opened["incident_id"], CHANNEL)


# A DAG id as the unauthenticated `POST /api/v1/lineage` may send it: an ANSI "clear screen", a
# bidi override (what follows shows reversed), a C1 control some terminals read as ESC [, and a
# newline followed by a forged record.
HOSTILE_DAG = "example.nobody\x1b[2J\u202eevil\x9b\n2021-06-04 00:00:00,000 ERROR bot: forged"
TERMINAL_CONTROLS = ("\x1b", "\u202e", "\x9b", "\r")


async def test_outside_text_cannot_forge_a_text_log_line(
    bot: Bot, operator_log: io.StringIO
) -> None:
    logs.configure(logging.INFO, fmt="text", stream=operator_log)
    await post_events(bot, [run_event("FAIL", DAY, dag=HOSTILE_DAG)])
    text = operator_log.getvalue()
    lines = text.splitlines()
    shown = "example.nobody\\x1b[2J\\u202eevil\\x9b\\n2021-06-04"
    assert any(shown in line for line in lines), text  # it was logged, escaped
    for control in TERMINAL_CONTROLS:
        assert control not in text, (control, text)
    for line in lines:
        assert line[:4].isdigit(), line  # every line is a record of its own, not the forgery
        assert " ERROR bot: forged" not in line.partition("\\n")[0]


async def test_outside_text_reaches_json_lines_escaped_and_intact(
    bot: Bot, operator_log: io.StringIO
) -> None:
    logs.configure(logging.INFO, fmt="json", stream=operator_log)
    await post_events(bot, [run_event("FAIL", DAY, dag=HOSTILE_DAG)])
    text = operator_log.getvalue()
    for control in (*TERMINAL_CONTROLS, "\n2021"):
        assert control not in text, (control, text)
    # Escaped, not mangled: a log reader decodes the very DAG id that was sent.
    assert any(entry.get("dag_id") == HOSTILE_DAG for entry in json_lines(operator_log)), text


def test_a_traceback_keeps_its_lines_and_loses_terminal_controls(
    operator_log: io.StringIO,
) -> None:
    logs.configure(logging.INFO, fmt="text", stream=operator_log)
    try:
        raise ValueError(f"no DAG {HOSTILE_DAG}")
    except ValueError:
        logging.getLogger("bot.test").exception("could not plan")
    text = operator_log.getvalue()
    for control in TERMINAL_CONTROLS:
        assert control not in text, (control, text)
    lines = text.splitlines()
    assert lines[0].endswith(" ERROR bot.test: could not plan"), text
    assert lines[1] == "Traceback (most recent call last):", text
    assert "ValueError: no DAG example.nobody\\x1b[2J\\u202eevil\\x9b" in text, text


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_serve_starts_and_polls_quietly(
    tmp_path: Path, food_delivery_marquez: StandInServer
) -> None:
    config = tmp_path / "bot.yml"
    config.write_text(
        json.dumps(
            {
                "teams": [{"name": "orders", "channel": CHANNEL, "members": ["U0ORDERS01"]}],
                "ownership": [{"pattern": "example.etl_orders*", "team": "orders"}],
                "watch": {"poll_interval_s": 0.2},
            }
        )
    )
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    async with running_slack_standin() as slack:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("MARQUEZ_", "BOT_", "DATABASE_", "SLACK_", "AIRFLOW_", "LOG_"))
        }
        env.update(
            SLACK_BOT_TOKEN=slack.bot_token,
            SLACK_SIGNING_SECRET=slack.signing_secret,
            SLACK_API_URL=f"{slack.url}/api/",
            MARQUEZ_URL=food_delivery_marquez.url,
            DATABASE_URL=f"sqlite:///{tmp_path / 'bot.db'}",
            BOT_CONFIG=str(config),
            BOT_PORT=str(port),
            BOT_EXECUTOR="manual",
            LOG_FORMAT="json",
        )
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot", "serve", env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        try:
            async with aiohttp.ClientSession() as http:

                async def polled(times: int) -> bool:
                    try:
                        async with http.get(f"{url}/readyz") as ready:  # probed like /metrics
                            if ready.status != 200:
                                return False
                        async with http.get(f"{url}/metrics") as reply:
                            text = await reply.text()
                    except aiohttp.ClientConnectionError:
                        return False  # not listening yet
                    line = 'backfill_bot_marquez_polls_total{outcome="ok"} '
                    found = [
                        float(x.removeprefix(line)) for x in text.splitlines() if x.startswith(line)
                    ]
                    return bool(found) and found[0] >= times

                await eventually(lambda: polled(5), timeout_s=60)
                event = run_event("FAIL", DAY)
                async with http.post(f"{url}/api/v1/lineage", json=event) as reply:
                    assert reply.status == 201
                await eventually(lambda: slack.state.messages(CHANNEL), timeout_s=60)
                await eventually(lambda: polled(10), timeout_s=60)
        finally:
            process.terminate()
            _, err = await asyncio.wait_for(process.communicate(), timeout=60)

    entries = [json.loads(line) for line in err.decode().splitlines()]
    assert entries, "serve logged nothing"
    loud = [e for e in entries if e["level"] not in ("DEBUG", "INFO")]
    assert loud == [], "start-up and work must not warn (bolt's unused-token warning included)"
    assert not [e for e in entries if e["logger"].startswith(("apscheduler", "aiohttp.access"))]
    # ten polls, probes and scrapes and more: no line comes once per poll or per request
    repeated = Counter(e["message"] for e in entries)
    assert max(repeated.values()) == 1, repeated.most_common(3)
    assert any(e.get("incident_id") and e.get("state") == "open" for e in entries)
    [alert] = slack.state.messages(CHANNEL)
    assert any(e.get("ts") == alert.ts and e.get("channel") == CHANNEL for e in entries)
