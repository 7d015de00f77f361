"""Slack calls for a storm of failures downstream of one failed root: `--events` FAIL events of
the DAGs downstream of example.etl_orders, POSTed to the bot's receiver within `--within`
seconds, after example.etl_orders failed and was alerted. Every one of them joins the root's
incident, so Slack should see no new alert, ONE "N failure(s) downstream joined" reply in the
alert's thread (posted once, then edited in place as more join) and a bounded number of
chat.update calls (the alert's and the reply's edits, each superseded while a newer one waits).

The bot runs as `serve` runs it (its web app: receiver, background incident processor and
outbox sender at Slack's real pace), against the Marquez stand-in with the food_delivery seed
and the Slack stand-in with Slack's rate limits. Events are sent on a schedule spread evenly
over `--within` seconds, at most `--concurrency` at a time; the figures are taken once every
event is handled and nothing is owed to Slack any more.

Run: .venv/bin/python bench/grouping_bench.py [--events 1000] [--within 60]
     [--postgres-admin-url postgresql://postgres@127.0.0.1/postgres]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import aiohttp
from aiohttp import web
from sqlalchemy import select

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from alert_latency_bench import Failure, downstream_of, fail_event

from bot.app import build_services, create_bolt_app
from bot.app_services import Services
from bot.config import parse_config
from bot.core.db import upgrade
from bot.incidents.store import incidents as incident_store
from bot.settings import load_settings
from bot.slack.service.client import slack_client
from bot.slack.store import outbox
from bot.slack.store.models import OutboxMessage, OutboxRole, OutboxState
from bot.web import create_web_app
from standins.marquez.server import running_standin
from standins.slack.server import running_slack_standin
from standins.slack.state import Message, SlackState

CHANNEL = "C0ORDERS01"
ROOT = "example.etl_orders"
CONFIG = {
    "teams": [{"name": "orders", "channel": CHANNEL, "members": ["U0ALICE001"]}],
    "ownership": [{"pattern": "example.etl_orders*", "team": "orders"}],
    "watch": {"poll": False},
}
DAY = datetime(2030, 1, 7, tzinfo=UTC)
SPREAD_DAYS = 5  # downstream failures for the root's day and the days after it
QUIET_S = 600.0  # at most, for every event handled and nothing owed to Slack


@dataclass
class Storm:
    dags: list[str] = field(default_factory=list)
    answered: list[float] = field(default_factory=list)  # seconds from POST to 201
    sent_s: float = 0.0  # first POST → last 201
    quiet_s: float = 0.0  # first POST → all handled, nothing owed
    calls: Counter[tuple[str, int]] = field(default_factory=Counter)  # (method, HTTP status)
    alerts: int = 0  # top-level messages posted during the storm
    replies: list[Message] = field(default_factory=list)  # thread replies posted then
    owed: Counter[str] = field(default_factory=Counter)  # outbox rows by what they were for
    alert_line: str = ""


@asynccontextmanager
async def database(postgres_admin_url: str | None) -> AsyncIterator[str]:
    if postgres_admin_url is None:
        with tempfile.TemporaryDirectory() as folder:
            yield f"sqlite:///{folder}/bench.db"
        return
    import psycopg

    name = f"bfb_bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(postgres_admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield postgres_admin_url.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with psycopg.connect(postgres_admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def measure(events: int, within: float, concurrency: int, db_url: str) -> Storm:
    storm = Storm()
    async with running_standin(seed="food_delivery") as marquez, running_slack_standin() as slack:
        settings = load_settings(
            {
                "MARQUEZ_URL": marquez.url,
                "DATABASE_URL": db_url,
                "SLACK_BOT_TOKEN": slack.bot_token,
                "SLACK_SIGNING_SECRET": slack.signing_secret,
                "SLACK_API_URL": f"{slack.url}/api/",
                "BOT_EXECUTOR": "manual",
            }
        )
        upgrade(db_url)
        services = build_services(settings, parse_config(CONFIG), slack_client(settings))
        assert services.reconciler is not None, "the lineage index is off"
        runner = web.AppRunner(create_web_app(create_bolt_app(services), services))
        await runner.setup()  # starts the background tasks, as `serve` does
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        url = f"http://127.0.0.1:{runner.addresses[0][1]}/api/v1/lineage"
        try:
            await asyncio.wait_for(services.reconciler.index.ready.wait(), 300)
            async with aiohttp.ClientSession() as http:
                alert = await root_alert(http, url, slack.state)
                storm.dags = await downstream_dags(services)
                await quiet(services)
                calls_before = len(slack.state.calls)
                replies_before = len(slack.state.thread(CHANNEL, alert.ts))
                async with services.sessions() as session:
                    last_row = await session.scalar(select(OutboxMessage.id).order_by(
                        OutboxMessage.id.desc()).limit(1))  # fmt: skip
                began = time.perf_counter()
                await send_storm(http, url, storm, events, within, concurrency)
                storm.sent_s = time.perf_counter() - began
            await quiet(services)
            storm.quiet_s = time.perf_counter() - began
            storm.calls.update((c.method, c.status) for c in slack.state.calls[calls_before:])
            storm.alerts = len(slack.state.messages(CHANNEL)) - 1
            storm.replies = slack.state.thread(CHANNEL, alert.ts)[replies_before:]
            storm.alert_line = joined_line(slack.state.find_message(CHANNEL, alert.ts))
            storm.owed = await owed_rows(services, after=last_row or 0)
        finally:
            await runner.cleanup()
    return storm


async def root_alert(http: aiohttp.ClientSession, url: str, slack: SlackState) -> Message:
    """The root fails; its alert arrives with its impact (the downstream DAGs)."""
    async with http.post(url, json=fail_event(Failure("food_delivery", ROOT, DAY))) as reply:
        assert reply.status == 201, await reply.text()
    deadline = time.perf_counter() + 120
    while time.perf_counter() < deadline:
        posted = slack.messages(CHANNEL)
        if posted and "being worked out" not in downstream_of(posted[0]):
            return posted[0]
        await asyncio.sleep(0.05)  # the stand-in offers no event to wait on
    raise TimeoutError("the root's alert never arrived with its impact")


async def downstream_dags(services: Services) -> list[str]:
    async with services.sessions() as session:
        [root] = await incident_store.open_roots(session)
        impact = incident_store.impact_of(root)
    return sorted(d.dag_id for d in impact.downstream if d.namespace == "food_delivery")


async def send_storm(
    http: aiohttp.ClientSession,
    url: str,
    storm: Storm,
    events: int,
    within: float,
    concurrency: int,
) -> None:
    """Event n leaves at n/events of `within` (or as soon as a slot frees after that)."""
    slots = asyncio.Semaphore(concurrency)
    loop = asyncio.get_running_loop()
    start = loop.time()

    async def one(n: int) -> None:
        await asyncio.sleep(max(0.0, start + n * within / events - loop.time()))
        day = DAY + timedelta(days=n % SPREAD_DAYS)
        body = fail_event(Failure("food_delivery", storm.dags[n % len(storm.dags)], day))
        async with slots:
            posted = time.perf_counter()
            async with http.post(url, json=body) as reply:
                assert reply.status == 201, await reply.text()
            storm.answered.append(time.perf_counter() - posted)

    await asyncio.gather(*(one(n) for n in range(events)))


async def quiet(services: Services) -> None:
    """Wait until every stored event is handled and nothing is owed to Slack."""
    deadline = time.perf_counter() + QUIET_S
    while time.perf_counter() < deadline:
        await services.incidents.settled()
        async with services.sessions() as session:
            unhandled = await incident_store.unhandled(session, limit=1)
            pending = await outbox.pending_count(session)
        if not unhandled and pending == 0:
            return
        services.incidents.wake()
        services.sender.wake()
        await asyncio.sleep(0.1)
    raise TimeoutError(f"not quiet after {QUIET_S:.0f} s")


async def owed_rows(services: Services, *, after: int) -> Counter[str]:
    """Outbox rows owed during the storm: what each was for, and what became of it."""
    found: Counter[str] = Counter()
    async with services.sessions() as session:
        rows = await session.scalars(select(OutboxMessage).where(OutboxMessage.id > after))
        for row in rows:
            if row.role == OutboxRole.STATUS_UPDATE:
                kind = "alert edits"
            elif row.edit_key is not None:
                kind = f"'{row.edit_key}' reply rows"
            else:
                kind = f"{row.role} rows"
            if row.state != OutboxState.SENT:
                fate = row.state
            else:  # sent: with the ts it posted or edited, or superseded by a newer row
                fate = "sent" if row.posted_ts else "superseded"
            found[f"{kind}: {fate}"] += 1
    return found


def joined_line(message: Message) -> str:
    """The alert's "N downstream failures joined" context line."""
    for block in message.blocks:
        for element in block.get("elements") or []:
            text = element.get("text", "") if isinstance(element, dict) else ""
            if "joined" in text:
                return str(text)
    return ""


def report(storm: Storm, events: int, within: float, db_url: str) -> None:
    ms = sorted(a * 1000 for a in storm.answered)
    p99 = ms[min(len(ms) - 1, round(0.99 * (len(ms) - 1)))]
    print(
        f"{events:,} FAIL events of {len(storm.dags)} DAGs downstream of {ROOT} "
        f"({', '.join(storm.dags)}), {SPREAD_DAYS} days, POSTed to the receiver over "
        f"{storm.sent_s:.1f} s (scheduled over {within:.0f} s; 201 in median "
        f"{statistics.median(ms):.0f} ms, p99 {p99:.0f} ms); database {db_url.split(':', 1)[0]}"
    )
    print(f"  quiet (every event handled, nothing owed to Slack) {storm.quiet_s:.1f} s after")
    posts = storm.calls[("chat.postMessage", 200)]
    grouped = [r for r in storm.replies if "joined this incident" in r.text]
    print("Slack calls during the storm (HTTP 200):")
    print(
        f"  chat.postMessage  {posts}: alerts {storm.alerts}, thread reply posts "
        f"{len(storm.replies)} (grouped replies {len(grouped)})"
    )
    print(f"  chat.update       {storm.calls[('chat.update', 200)]}")
    others = {k: n for k, n in storm.calls.items() if k[1] != 200 or k[0] not in (
        "chat.postMessage", "chat.update")}  # fmt: skip
    if others:
        print(f"  other answers     {', '.join(f'{n} {m} {s}' for (m, s), n in others.items())}")
    print("Outbox rows owed during the storm:")
    for kind, n in sorted(storm.owed.items()):
        print(f"  {kind:40} {n}")
    for reply in grouped:
        print(f"The grouped reply now says: {reply.text[:160]}")
    print(f"The alert now says: {storm.alert_line[:160]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1000)
    parser.add_argument("--within", type=float, default=60.0, help="seconds to send them in")
    parser.add_argument("--concurrency", type=int, default=16, help="POSTs in flight at most")
    parser.add_argument("--postgres-admin-url", default=None)
    args = parser.parse_args()

    async def run() -> None:
        async with database(args.postgres_admin_url) as db_url:
            storm = await measure(args.events, args.within, args.concurrency, db_url)
            report(storm, args.events, args.within, db_url)

    asyncio.run(run())


if __name__ == "__main__":
    main()
