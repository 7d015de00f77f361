"""Time from an OpenLineage FAIL event POSTed to the bot's receiver until its alert, with its
impact, arrives at the Slack stand-in: the whole path (receiver, store, incident processor with
the impact from the lineage index, outbox, sender), on the real `serve` app over loopback.

The bot is started as `serve` starts it (its web app: receiver, Slack endpoint and background
tasks, so the lineage index reconciles fully with the Marquez stand-in at start); events are
sent only once the index is ready. Events are sent one at a time, spaced by `--gap` seconds so
Slack's per-channel pace (about 1 message a second) is not what is measured.

Default: the stand-in holds the food_delivery seed; each event is one failed day of
example.etl_orders, 10 days apart (days next to each other would be one outage, one alert). With
`--jobs N` it holds N jobs of synthetic layered lineage (as bench/index_bench.py builds it) and
each event is the FAIL of a different job (spread over the layers, first to last) for a different
interval, 10 days apart so no failure joins another's incident. Per event the clock runs from just
before the POST until the alert at the Slack stand-in carries its impact (the posted alert, or the
chat.update that edits the impact in). The Marquez stand-in runs in its own process, as Marquez
does: in the bot's process its objects (~560k at 10,000 jobs) would make the bot's full garbage
collections ~3x longer (`--in-process` shows that).

With `--bad-day SEED` the Slack stand-in answers as Slack's edge does on a bad day (issue 24):
30% of chat.* calls 429 with Retry-After, 10% a 5xx (half Slack's JSON 500, half HTML 503 and
502 pages), some answers lost after Slack posted, and three calls that hang past the sender's
timeout; the figures then say how late alerts come under those faults (target: p99 <= 15 s).

Run: .venv/bin/python bench/alert_latency_bench.py [--jobs 10000] [--events 40] [--gap 1.2]
     [--bad-day SEED]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import multiprocessing
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
from typing import Any

import aiohttp
from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from index_bench import events as synthetic_events

from bot.app import build_services, create_bolt_app
from bot.config import parse_config
from bot.core.db import upgrade
from bot.settings import load_settings
from bot.slack.service.client import slack_client
from bot.web import create_web_app
from standins.marquez.server import running_standin
from standins.slack.faults import BadDay, Fault
from standins.slack.server import running_slack_standin
from standins.slack.state import Message

CHANNEL = "C0ORDERS01"
CONFIG = {
    "teams": [{"name": "orders", "channel": CHANNEL, "members": ["U0ALICE001"]}],
    "ownership": [{"pattern": "example.etl_orders*", "team": "orders"}],
    "watch": {"poll": False},
}
SYNTHETIC_NS = "bench"  # the namespace of bench/lineage_fetch_bench.py's jobs
PRODUCER = "https://github.com/example/bench"
FIRST_DAY = datetime(2030, 1, 1, tzinfo=UTC)
WAIT_S = 120.0  # per event, for its alert with the impact


@dataclass(frozen=True)
class Failure:
    namespace: str
    job: str
    day: datetime
    inputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()


@dataclass
class Timing:
    """Seconds after the POST began, per event."""

    job: str
    answered: float = 0.0  # 201 received
    impact_began: float | None = None  # the incident processor starts working out the impact
    impact_ended: float | None = None
    first_seen: float | None = None  # the alert at the Slack stand-in, with or without impact
    pending_first: bool = False  # first seen saying "being worked out…"
    with_impact: float | None = None  # the alert at the stand-in carrying the impact
    downstream: str = ""


@dataclass
class Run:
    timings: list[Timing] = field(default_factory=list)
    catalog: str = ""
    ready_s: float = 0.0
    marquez: Counter[str] = field(default_factory=Counter)
    slack: Counter[str] = field(default_factory=Counter)
    full_gcs: list[float] = field(default_factory=list)  # seconds each, in the measured phase
    objects: int = 0  # tracked by the garbage collector at the end of the measured phase
    faults: str = ""  # what the Slack stand-in did to calls (empty: a good day)
    met: Counter[str] = field(default_factory=Counter)  # the faults chat.* calls met


def fail_event(failure: Failure) -> dict[str, object]:
    day = failure.day
    body: dict[str, object] = {
        "eventType": "FAIL",
        "eventTime": (day + timedelta(days=1, hours=1)).isoformat(),
        "run": {
            "runId": str(uuid.uuid4()),
            "facets": {
                "nominalTime": {
                    "_producer": PRODUCER,
                    "_schemaURL": "https://openlineage.io/spec/facets/1-0-0/NominalTimeRunFacet.json",
                    "nominalStartTime": day.isoformat(),
                    "nominalEndTime": (day + timedelta(days=1)).isoformat(),
                }
            },
        },
        "job": {"namespace": failure.namespace, "name": failure.job},
        "producer": PRODUCER,
    }
    if failure.inputs or failure.outputs:  # as the job's real events carry them
        body["inputs"] = [{"namespace": failure.namespace, "name": n} for n in failure.inputs]
        body["outputs"] = [{"namespace": failure.namespace, "name": n} for n in failure.outputs]
    return body


def synthetic_failures(catalog: list[dict[str, Any]], jobs: int, count: int) -> list[Failure]:
    """`count` distinct jobs spread evenly from the first layer to the last, with the datasets
    the catalog says they read and write, each failing for its own day, 10 days apart."""
    io: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}
    for event in catalog:
        io[event["job"]["name"]] = (
            tuple(d["name"] for d in event["inputs"]),
            tuple(d["name"] for d in event["outputs"]),
        )
    picked = sorted({round(n * (jobs - 1) / max(1, count - 1)) for n in range(count)})
    return [
        Failure(
            SYNTHETIC_NS,
            f"job{index:05d}",
            FIRST_DAY + timedelta(days=10 * n),
            *io[f"job{index:05d}"],
        )
        for n, index in enumerate(picked)
    ]


def downstream_of(message: Message) -> str:
    """The alert's "*Downstream:*" line."""
    for block in message.blocks:
        text = (block.get("text") or {}).get("text", "")
        if "*Downstream:*" in text:
            return str(text.split("\n", 1)[0])
    return ""


# -- the Marquez stand-in, in its own process (as Marquez is): its heap is not the bot's ------


def _serve_standin(jobs: int | None, conn: Any) -> None:
    asyncio.run(_standin(jobs, conn))


async def _standin(jobs: int | None, conn: Any) -> None:
    async with running_standin(seed="food_delivery" if jobs is None else None) as server:
        for item in synthetic_events(jobs) if jobs is not None else ():
            server.state.ingest(item)
        conn.send((server.url, len(server.state.datasets)))
        loop = asyncio.get_running_loop()
        while (since := await loop.run_in_executor(None, conn.recv)) is not None:
            conn.send(server.requests[since:])  # until told to stop (None)


@dataclass
class Marquez:
    """The running stand-in: its URL, dataset count, and the requests it received."""

    url: str
    datasets: int
    requests: Any  # async (since: int) -> list[str], as `METHOD /path?query`


@asynccontextmanager
async def marquez_standin(jobs: int | None, in_process: bool) -> AsyncIterator[Marquez]:
    if in_process:  # shares the bot's process, heap and garbage collector
        async with running_standin(seed="food_delivery" if jobs is None else None) as server:
            for item in synthetic_events(jobs) if jobs is not None else ():
                server.state.ingest(item)

            async def since(n: int) -> list[str]:
                return server.requests[n:]

            yield Marquez(server.url, len(server.state.datasets), since)
        return
    parent, child = multiprocessing.get_context("spawn").Pipe()
    process = multiprocessing.get_context("spawn").Process(
        target=_serve_standin, args=(jobs, child), daemon=True
    )
    process.start()
    lock = asyncio.Lock()

    async def ask(n: int) -> list[str]:
        async with lock:
            parent.send(n)
            return await asyncio.to_thread(parent.recv)

    try:
        url, datasets = await asyncio.to_thread(parent.recv)
        yield Marquez(url, datasets, ask)
    finally:
        parent.send(None)
        await asyncio.to_thread(process.join, 30)


def bad_day(seed: int) -> BadDay:
    hang, lost_hang = Fault.HANG, Fault.LOST_HANG
    return BadDay(
        seed=seed,
        ratelimited=0.30,
        server_errors=0.05,
        unavailable=0.03,
        bad_gateway=0.02,
        lost_errors=0.01,
        lost_resets=0.01,
        script=(None, None, hang, None, None, None, lost_hang, None, None, None, hang),
    )


async def measure(
    jobs: int | None, events: int, gap: float, in_process: bool, faults: int | None = None
) -> Run:
    scratch = tempfile.TemporaryDirectory()
    database = f"sqlite:///{Path(scratch.name) / 'bench.db'}"
    config: dict[str, Any] = dict(CONFIG)
    run = Run()
    if jobs is None:
        failures = [
            Failure("food_delivery", "example.etl_orders", FIRST_DAY + timedelta(days=10 * n))
            for n in range(events)
        ]
    else:
        catalog = synthetic_events(jobs)
        failures = synthetic_failures(catalog, jobs, events)
        del catalog
        config["ownership"] = [{"pattern": f"{SYNTHETIC_NS}::job*", "team": "orders"}]
    standin = marquez_standin(jobs, in_process)
    async with standin as marquez, running_slack_standin() as slack:
        if faults is not None:
            slack.state.add_channel(CHANNEL, "orders")  # invited: lost posts are looked for
            slack.state.bad_day(bad_day(faults))
            run.faults = f"a bad day at Slack's edge (seed {faults})"
        where = "in the bot's process" if in_process else "in its own process"
        run.catalog = (
            "the food_delivery seed"
            if jobs is None
            else f"{jobs:,} synthetic jobs ({marquez.datasets:,} datasets)"
        ) + f", {where}"
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
        services = build_services(settings, parse_config(config), slack_client(settings))
        assert services.reconciler is not None, "the lineage index is off"
        began = time.perf_counter()
        runner = web.AppRunner(create_web_app(create_bolt_app(services), services))
        await runner.setup()  # starts the background tasks: the index's first full reconcile
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        slack.set_events_url(f"http://127.0.0.1:{runner.addresses[0][1]}/slack/events")
        url = f"http://127.0.0.1:{runner.addresses[0][1]}/api/v1/lineage"
        try:
            await asyncio.wait_for(services.reconciler.index.ready.wait(), 3600)
            run.ready_s = time.perf_counter() - began
            await asyncio.sleep(gap)  # let the start-up settle (sender, first scheduler jobs)
            run.timings = await send_all(services, slack.state, marquez, url, failures, gap, run)
        finally:
            await runner.cleanup()
            scratch.cleanup()
    return run


async def send_all(
    services: Any,
    slack: Any,
    marquez: Marquez,
    url: str,
    failures: list[Failure],
    gap: float,
    run: Run,
) -> list[Timing]:
    # The impact's own time, seen from the incident processor (wrapped, not changed).
    incidents = services.incidents
    original = incidents.impact_of
    marks: dict[str, float] = {}

    async def timed_impact(*args: Any, **kwargs: Any) -> Any:
        marks["began"] = time.perf_counter()
        try:
            return await original(*args, **kwargs)
        finally:
            marks["ended"] = time.perf_counter()

    incidents.impact_of = timed_impact
    marquez_before = len(await marquez.requests(0))
    began: dict[int, float] = {}

    def collected(phase: str, info: dict[str, int]) -> None:  # the collector's pauses
        if phase == "start":
            began[0] = time.perf_counter()
        elif info["generation"] == 2:
            run.full_gcs.append(time.perf_counter() - began[0])

    gc.callbacks.append(collected)
    slack_before = len(slack.calls)
    timings: list[Timing] = []
    async with aiohttp.ClientSession() as http:
        for failure in failures:
            seen = len(slack.messages(CHANNEL))
            marks.clear()
            timing = Timing(failure.job)
            body = fail_event(failure)
            started = time.perf_counter()
            async with http.post(url, json=body) as reply:
                assert reply.status == 201, await reply.text()
            timing.answered = time.perf_counter() - started
            deadline = started + WAIT_S
            # The stand-in offers no event to wait on: poll its state finely.
            while timing.with_impact is None and time.perf_counter() < deadline:
                posted = slack.messages(CHANNEL)
                if len(posted) > seen:
                    now = time.perf_counter() - started
                    text = downstream_of(posted[seen])
                    if timing.first_seen is None:
                        timing.first_seen = now
                        timing.pending_first = "being worked out" in text
                    if text and "being worked out" not in text:
                        timing.with_impact, timing.downstream = now, text
                        break
                await asyncio.sleep(0.002)
            if "began" in marks:
                timing.impact_began = marks["began"] - started
            if "ended" in marks:
                timing.impact_ended = marks["ended"] - started
            timings.append(timing)
            await asyncio.sleep(gap)
    gc.callbacks.remove(collected)
    run.objects = len(gc.get_objects())
    requests = await marquez.requests(marquez_before)
    run.marquez.update(r.split("?", 1)[0] for r in requests)
    run.slack.update(c.method for c in slack.calls[slack_before:])
    run.met.update(str(c.fault) for c in slack.calls[slack_before:] if c.fault)
    return timings


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def figures(values: list[float]) -> str:
    ms = [v * 1000 for v in values]
    return (
        f"median {statistics.median(ms):.0f} ms, p95 {pct(ms, 0.95):.0f} ms, "
        f"p99 {pct(ms, 0.99):.0f} ms, max {max(ms):.0f} ms"
    )


def report(run: Run) -> None:
    timings = run.timings
    # An impact that is an error ("unknown (…)") is final but is no impact: not counted.
    done = [t for t in timings if t.with_impact is not None and "unknown (" not in t.downstream]
    print(
        f"Marquez stand-in with {run.catalog}; index ready {run.ready_s:.1f} s after start; "
        f"{len(timings)} FAIL events of {len({t.job for t in timings})} distinct DAG(s)"
    )
    if run.faults:
        met = ", ".join(f"{n} {fault}" for fault, n in run.met.most_common())
        print(f"Slack: {run.faults}; the bot's calls met {met or 'no fault'}")
    if not done:
        print("no alert with its impact arrived")
        return
    print(
        f"FAIL POSTed → alert with its impact at the Slack stand-in, {len(done)} events: "
        f"{figures([t.with_impact for t in done if t.with_impact is not None])}"
    )
    first = [t.first_seen for t in timings if t.first_seen is not None]
    print(f"  first post of the alert (with or without impact): {figures(first)}")
    pending = sum(t.pending_first for t in timings)
    errors = sum("unknown (" in t.downstream for t in timings)
    missing = sum(t.with_impact is None for t in timings)
    print(
        f"  posted without the impact first: {pending} of {len(timings)}; impact missing "
        f"after {WAIT_S:.0f} s: {missing}; impact an error (left out above): {errors}"
    )
    stages = {  # each from the POST's start or the previous mark, whatever the order
        "POST → 201": [t.answered for t in timings],
        "POST → impact started": [t.impact_began for t in timings if t.impact_began is not None],
        "impact worked out": [
            t.impact_ended - t.impact_began
            for t in timings
            if t.impact_ended is not None and t.impact_began is not None
        ],
        "impact known → at Slack": [
            t.with_impact - t.impact_ended
            for t in done
            if t.with_impact is not None and t.impact_ended is not None
        ],
    }
    for name, values in stages.items():
        if values:
            print(f"  {name:24} {figures(values)}")
    worst = max(done, key=lambda t: t.with_impact or 0.0)
    print(
        f"  slowest: {worst.job}: 201 at {worst.answered * 1000:.0f} ms, impact "
        f"{_ms(worst.impact_began)}–{_ms(worst.impact_ended)} ms, first seen "
        f"{_ms(worst.first_seen)} ms, with impact {_ms(worst.with_impact)} ms "
        f"(downstream: …{worst.downstream[-40:]})"
    )
    total = sum(run.marquez.values())
    listed = ", ".join(f"{n} {path}" for path, n in run.marquez.most_common()) or "none"
    print(f"  Marquez requests during the measured phase: {total} ({listed})")
    print(f"  Slack calls: {', '.join(f'{n} {m}' for m, n in run.slack.most_common())}")
    pauses = ", ".join(f"{s * 1000:.0f} ms" for s in run.full_gcs) or "none"
    print(
        f"  full (generation 2) garbage collections in the measured phase: {pauses} "
        f"({run.objects:,} objects tracked at the end)"
    )


def _ms(value: float | None) -> str:
    return "?" if value is None else f"{value * 1000:.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--jobs", type=int, default=None, help="synthetic layered lineage of this many jobs"
    )
    parser.add_argument("--events", type=int, default=40)
    parser.add_argument("--gap", type=float, default=1.2)
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="run the Marquez stand-in in the bot's process (its objects in the bot's heap)",
    )
    parser.add_argument(
        "--bad-day", type=int, default=None, metavar="SEED",
        help="Slack's edge misbehaves: 429s, 5xx with HTML bodies, lost answers, hangs",
    )  # fmt: skip
    args = parser.parse_args()
    run = asyncio.run(measure(args.jobs, args.events, args.gap, args.in_process, args.bad_day))
    report(run)


if __name__ == "__main__":
    main()
