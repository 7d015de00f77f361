"""Watcher figures: what an idle Marquez poll costs beside a scan of failed jobs, which of the two
sees flapping failures, and how fast a failure POSTed to the OpenLineage receiver is stored.

1. A Marquez stand-in in its own process holds `--jobs` jobs and `--runs` runs (START plus
   COMPLETE or FAIL each, ingested straight into its state). Per idle cycle: HTTP requests, bot
   CPU (this process: HTTP client, parsing, database) and stand-in CPU, for one poll of
   `GET /api/v1/events/lineage` without and with the late-event sweep (its whole 24 h window
   counted), and for one scan of `GET /api/v1/jobs?lastRunStates=FAILED`; the sweep's first
   poll, and polls that each find one FAIL reaching Marquez 1 to 23 h after its eventTime.
   Then `--flap-cycles` poll intervals in each of which `--flaps` jobs fail and succeed again
   (a new run) before the next poll: failures caught by each approach.
2. `--events` FAIL events POSTed one by one to the receiver on a loopback aiohttp server:
   time until the row is committed (the receiver's wake-up call) and until the 201 arrives.

Run: .venv/bin/python bench/watch_bench.py [--postgres-admin-url postgresql://postgres@127.0.0.1/postgres]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from sqlalchemy import func, select

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.clients.marquez import MarquezClient
from bot.config import Watch
from bot.core.after_commit import wake_on_commit
from bot.core.db import make_engine, session_factory, upgrade
from bot.core.metrics import Metrics
from bot.events.service.poller import MarquezPoller
from bot.events.service.receiver import PATH, add_receiver
from bot.events.store.models import RunEvent
from bot.events.store.run_events import OWED as RUN_EVENTS
from standins.marquez.server import create_app
from standins.marquez.state import MarquezState

NS = "bench"
PRODUCER = "https://github.com/example/watch-bench"
END = datetime(2024, 3, 1, tzinfo=UTC)  # the history ends here; the bench's clock goes on
INTERVAL_S = 30.0
FAIL_SHARE = 0.01


def _time(value: datetime) -> str:
    return value.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def run_events(
    job: str, run_id: str, start: datetime, state: str, took: timedelta = timedelta(minutes=3)
) -> list[dict[str, Any]]:
    body = {
        "run": {"runId": run_id, "facets": {}},
        "job": {"namespace": NS, "name": job},
        "producer": PRODUCER,
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
    }
    last = {**body, "eventType": state, "eventTime": _time(start + took)}
    if state == "FAIL":
        facet = {"_producer": PRODUCER, "_schemaURL": "ErrorMessageRunFacet.json"}
        last["run"] = {"runId": run_id, "facets": {"errorMessage": {**facet, "message": "boom"}}}
    return [{**body, "eventType": "START", "eventTime": _time(start)}, last]


def history(jobs: int, runs: int, days: float, seed: int = 7) -> Iterator[dict[str, Any]]:
    """`runs` runs spread over `jobs` jobs and the `days` before END, in eventTime order."""
    rng = random.Random(seed)
    events: list[tuple[str, dict[str, Any]]] = []
    span = days * 86400
    for n in range(runs):
        start = END - timedelta(seconds=span * (n + 1) / (runs + 1), minutes=3)
        state = "FAIL" if rng.random() < FAIL_SHARE else "COMPLETE"
        job = f"job{rng.randrange(jobs) if n >= jobs else n:05d}"  # every job runs at least once
        for event in run_events(job, str(uuid.UUID(int=n + 1)), start, state):
            events.append((event["eventTime"], event))
    events.sort(key=lambda pair: pair[0])
    return (event for _, event in events)


# -- the stand-in's process ---------------------------------------------------------------------


def _serve_standin(jobs: int, runs: int, days: float, conn: Any) -> None:
    asyncio.run(_standin(jobs, runs, days, conn))


async def _standin(jobs: int, runs: int, days: float, conn: Any) -> None:
    state = MarquezState()
    for event in history(jobs, runs, days):
        state.ingest(event)
    runner = web.AppRunner(create_app(state), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    conn.send((runner.addresses[0][1], len(state.events)))
    await asyncio.get_running_loop().run_in_executor(None, conn.recv)  # until told to stop
    await runner.cleanup()


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


# -- 1. idle polls, failed-job scans, flapping failures -----------------------------------------


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


async def compare(args: argparse.Namespace, url: str, pid: int, db_url: str) -> None:
    requests = 0

    async def counted(*_: Any) -> None:
        nonlocal requests
        requests += 1

    trace = aiohttp.TraceConfig()
    trace.on_request_start.append(counted)
    upgrade(db_url)
    engine = make_engine(db_url)
    sessions = session_factory(engine)
    clock = Clock(END + timedelta(minutes=1))
    # The sweep's poller starts an hour before its 24 h window, so all of it is swept.
    start = clock.now - timedelta(seconds=Watch().late_window_s + 3600)
    watch = Watch(poll_interval_s=INTERVAL_S, overlap_s=args.overlap, page_size=100,
                  start_from=start)  # fmt: skip
    plain_watch = Watch(
        poll_interval_s=INTERVAL_S, overlap_s=args.overlap, page_size=100, late_window_s=0
    )
    async with aiohttp.ClientSession(trace_configs=[trace]) as http:
        poller = MarquezPoller(
            sessions,
            lambda: MarquezClient(url, session=http),
            watch,
            clock=clock,
            metrics=Metrics(),
        )
        plain = MarquezPoller(
            sessions,
            lambda: MarquezClient(url, session=http),
            plain_watch,
            clock=clock,
            cursor_name="plain",
            metrics=Metrics(),
        )

        async def cycle(work: Any) -> tuple[int, float, float, float, Any]:
            nonlocal requests
            requests, cpu, standin, wall = 0, time.process_time(), _cpu_s(pid), time.perf_counter()
            result = await work()
            return (requests, time.process_time() - cpu, _cpu_s(pid) - standin,
                    time.perf_counter() - wall, result)  # fmt: skip

        async def poll() -> int:
            clock.now += timedelta(seconds=INTERVAL_S)
            return await poller.poll_once()

        async def scan() -> set[str]:
            async with MarquezClient(url, session=http) as client:
                jobs = await client.list_jobs(last_run_states=["FAILED"])
            return {job["name"] for job in jobs}

        async def plain_poll() -> int:
            clock.now += timedelta(seconds=INTERVAL_S)
            return await plain.poll_once()

        async def arrive_late(age: timedelta) -> None:
            async with MarquezClient(url, session=http) as client:
                body = run_events("job00000", str(uuid.uuid4()), clock.now - age, "FAIL")[1]
                await client.emit(body)  # reaches Marquez now, `age` after its eventTime

        first_plain = await plain.poll_once()  # reads lookback_s (1 h) back
        first = await cycle(poller.poll_once)  # counts the window's buckets, reads 25 h
        plains = [await cycle(plain_poll) for _ in range(args.cycles)]
        polls = [await cycle(poll) for _ in range(args.cycles)]
        scans = [await cycle(scan) for _ in range(args.cycles)]
        ages = [timedelta(hours=h) for h in (1, 3, 6, 12, 23)]
        lates = []
        for age in ages:
            await arrive_late(age)
            lates.append(await cycle(poll))
        assert all(row[4] == 1 for row in lates), [row[4] for row in lates]
        idle = [await cycle(poll) for _ in range(args.cycles)]  # and idle again after
        print(f"\n1. Idle cycle against {args.jobs:,} jobs / {args.runs:,} runs (first poll "
              f"stored {first_plain} events of the last hour; overlap {args.overlap:g} s, "
              f"late window {watch.late_window_s:g} s in {watch.late_bucket_s:g} s buckets, "
              f"means of {args.cycles} cycles of {INTERVAL_S:g} s)")  # fmt: skip
        for name, rows in (
            ("events poll, no sweep", plains),
            ("events poll + sweep", polls),
            ("  again after finds", idle),
            ("FAILED scan", scans),
            ("sweep's first poll", [first]),
            ("poll finding 1 late FAIL", lates),
        ):
            reqs, bot, standin, wall = (statistics.mean(r[i] for r in rows) for i in range(4))
            most = max(r[0] for r in rows)
            print(f"   {name:24} {reqs:6.2f} requests (max {most:3d})  bot CPU "
                  f"{bot * 1e3:7.1f} ms  stand-in CPU {standin * 1e3:8.1f} ms  "
                  f"wall {wall * 1e3:8.1f} ms")  # fmt: skip
        print(f"   (the sweep's first poll stored {first[4]} events of 25 h; the late FAILs "
              f"were {', '.join(f'{a.total_seconds() / 3600:g} h' for a in ages)} late, "
              f"each stored by the poll that followed; the scan lists {len(scans[-1][4])} "
              f"jobs whose latest run failed)")  # fmt: skip

        caught_poll = caught_scan = 0
        rng = random.Random(3)
        for _ in range(args.flap_cycles):
            began = clock.now
            flapping = {f"job{n:05d}" for n in rng.sample(range(args.jobs), args.flaps)}
            async with MarquezClient(url, session=http) as client:
                for index, job in enumerate(sorted(flapping)):
                    # Both runs start and end inside this interval, before the next poll.
                    at = began + timedelta(seconds=INTERVAL_S * index / (len(flapping) + 1))
                    second = timedelta(seconds=INTERVAL_S / (4 * len(flapping) + 4))
                    failed = run_events(job, str(uuid.uuid4()), at, "FAIL", second)
                    retried = run_events(
                        job, str(uuid.uuid4()), at + 2 * second, "COMPLETE", second
                    )
                    for event in (*failed, *retried):
                        await client.emit(event)
            async with sessions() as session:
                before = await session.scalar(_fails())
            await poll()
            async with sessions() as session:
                caught_poll += (await session.scalar(_fails()) or 0) - (before or 0)
            caught_scan += len(flapping & await scan())
        total = args.flap_cycles * args.flaps
        print(f"   flapping failures (FAIL, then a COMPLETE run within one {INTERVAL_S:g} s "
              f"interval): {total}; events poll caught {caught_poll}, "
              f"FAILED scan caught {caught_scan}")  # fmt: skip
    await engine.dispose()


def _fails() -> Any:
    return select(func.count()).select_from(RunEvent).where(RunEvent.event_type == "FAIL")


# -- 2. receiver latency ------------------------------------------------------------------------


async def receiver_latency(count: int, db_url: str) -> None:
    upgrade(db_url)
    engine = make_engine(db_url)
    committed: list[float] = []
    app = web.Application()
    sessions = session_factory(engine)
    add_receiver(app, sessions=sessions, api_key="bench-key", metrics=Metrics())
    # when each new event is committed: what wakes the incident watcher in the bot
    wake_on_commit(sessions, RUN_EVENTS, lambda: committed.append(time.perf_counter()))
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}{PATH}"
    headers = {"Authorization": "Bearer bench-key"}
    stored, answered = [], []
    async with aiohttp.ClientSession() as http:
        for n in range(count):
            (_, event) = run_events(
                f"job{n % 100:05d}", str(uuid.uuid4()), END + timedelta(seconds=n), "FAIL"
            )
            began = time.perf_counter()
            async with http.post(url, json=event, headers=headers) as resp:
                assert resp.status == 201, await resp.text()
            answered.append(time.perf_counter() - began)
            stored.append(committed[-1] - began)
    await runner.cleanup()
    await engine.dispose()
    kind = db_url.split(":", 1)[0]
    for name, values in (("row committed", stored), ("201 received", answered)):
        ms = sorted(v * 1e3 for v in values)
        p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
        print(f"   {kind:10} {name:14} median {statistics.median(ms):6.2f} ms  p99 {p99:6.2f} ms")


async def measure(args: argparse.Namespace, port: int, pid: int, events: int) -> None:
    url = f"http://127.0.0.1:{port}"
    print(f"Marquez stand-in (pid {pid}) holds {events:,} events at {url}")
    async with database(args.postgres_admin_url) as db_url:
        await compare(args, url, pid, db_url)
    print(f"\n2. FAIL event POSTed to the receiver → stored ({args.events} events, one at a time)")
    async with database(None) as db_url:
        await receiver_latency(args.events, db_url)
    if args.postgres_admin_url:
        async with database(args.postgres_admin_url) as db_url:
            await receiver_latency(args.events, db_url)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--days", type=float, default=30.0, help="the history's span")
    parser.add_argument("--overlap", type=float, default=300.0, help="watch.overlap_s")
    parser.add_argument("--cycles", type=int, default=20, help="idle cycles measured")
    parser.add_argument("--flaps", type=int, default=10, help="flapping jobs per interval")
    parser.add_argument("--flap-cycles", type=int, default=10)
    parser.add_argument("--events", type=int, default=1000)
    parser.add_argument("--postgres-admin-url", default=None)
    args = parser.parse_args()
    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    process = context.Process(
        target=_serve_standin, args=(args.jobs, args.runs, args.days, child), daemon=True
    )
    began = time.perf_counter()
    process.start()
    port, events = parent.recv()
    print(f"(history generated and ingested in {time.perf_counter() - began:.0f} s)")
    try:
        asyncio.run(measure(args, port, process.pid or 0, events))
    finally:
        parent.send("stop")
        process.join(timeout=30)


if __name__ == "__main__":
    main()
