"""Issue 25's targets: `backfill-bot serve`, run as its own process against the Marquez stand-in
holding N synthetic jobs, from a cold start (empty database) through the full reconcile, 20
`/backfill` previews and 20 FAIL alerts; its RSS read from /proc all along.

Per size: the stand-in (its own process) is loaded with N jobs of layered lineage (as
bench/lineage_fetch_bench.py builds it: 100 jobs a layer, each reading 1-2 outputs of the layer
above, two daily runs each); the Slack stand-in runs in this process; `serve` gets a fresh
database and the settings of README's table, with alert_latency_bench's BOT_CONFIG (one team
owns every job; Marquez's event feed is not polled: FAIL events come to the receiver).

The clock of the first previews starts when serve answers /healthz: from then on three
`/backfill DAG 2021-06-04..2021-06-05` are typed one after another, each timed until its
preview reaches its channel at the Slack stand-in (a refusal counts as an answer, and is
shown). Ready is /readyz's `lineage_index` check saying "current" (else serve's "full reconcile
read" log line; else previews until one asks Marquez at most twice). Then 20 warm previews and
20 FAIL events (one at a time, `--gap` apart so Slack's per-channel pace is not what is
measured), each timed until its alert carries the impact. Previewed DAGs have plans that fit
`limits.max_plan_dags` (500; most DAGs here have thousands downstream): half are spread over
the layers where such DAGs are, half over the bigger plans (the biggest first). Marquez
requests leave out /readyz's own ping (`GET /api/v1/namespaces?limit=1`).

`--latency`: the stand-in takes 2 s per `/jobs` page and 10 s per deep `/lineage` (the default
20 hops; a shallower one in proportion: standins/marquez/middleware.py); memory must not grow,
and cold previews must still answer within 15 s. `--both`: without, then with. `watch.group_wait_s`
(2 s by default) holds every new alert that long for failures arriving together:
`--group-wait 0` measures the path without it.

Run: .venv/bin/python bench/scale_bench.py [--jobs 10000 50000 100000] [--latency | --both]
     [--database sqlite|postgresql] [--previews 20] [--alerts 20]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import re
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from alert_latency_bench import Failure, downstream_of, fail_event
from scale_processes import (
    Marquez,
    Pick,
    Picks,
    Serve,
    by_route,
    choose,
    free_port,
    fresh_database,
    marquez_process,
    readyz,
)

from standins.slack.server import SlackStandIn, running_slack_standin

CHANNEL = "C0ORDERS01"  # the team's: alerts
USER = "U0REQUEST1"
RANGE = "2021-06-04..2021-06-05"
PING = "GET /api/v1/namespaces?limit=1"  # /readyz's Marquez check, not the preview's
LATENCY = {"jobs": 2.0, "lineage": 10.0}
ALERT_WAIT_S = 60.0
NOT_ANSWERS = ("Still asking", "posted for approval")  # a notice; the receipt of a preview
TARGETS: dict[int, tuple[float, float, float, float, float]] = {
    # jobs: peak MB, cold preview s, full reconcile s, warm preview median s, alert p99 s
    10_000: (300, 2, 30, 0.5, 0.5),
    50_000: (400, 3, 120, 1.0, 0.5),
    100_000: (600, 5, 240, 1.5, 1.0),
}
TODAY: dict[int, dict[str, str]] = {  # before issue 25's fix
    10_000: {"peak": "1,439 MB", "cold": "36.8 s (median of 3)", "requests": "321"},
    50_000: {"peak": "6,557 MB", "cold": "316.7 s, 225.4 s, then 0.25 s"},
}


@dataclass
class Answer:
    pick: Pick
    seconds: float | None = None  # None: no answer in time
    kind: str = "no answer"
    ack_s: float | None = None
    still_planning: bool = False
    requests: Counter[str] = field(default_factory=Counter)


@dataclass
class Run:
    jobs: int
    latency: bool
    database: str
    phase: str = "start"
    began: float = field(default_factory=time.perf_counter)
    up_s: float = 0.0
    ready_s: float | None = None
    ready_how: str = ""
    index_seen: bool = False  # /readyz had a lineage_index check
    index: dict[str, Any] = field(default_factory=dict)
    log_ready_s: float | None = None
    log_jobs: int | None = None  # "full reconcile read N jobs"
    rss: dict[str, float] = field(default_factory=dict)  # phase -> highest VmRSS sampled
    peak_mb: float = 0.0
    idle_mb: float = 0.0
    cold: list[Answer] = field(default_factory=list)
    warm: list[Answer] = field(default_factory=list)
    alerts: list[float | None] = field(default_factory=list)
    marquez: Counter[str] = field(default_factory=Counter)
    problems: list[str] = field(default_factory=list)  # serve's ERROR/WARNING lines
    took_s: float = 0.0
    log: Path | None = None  # serve's, kept

    def now(self) -> float:
        return time.perf_counter() - self.began


def config_yaml(cap: int, group_wait_s: float | None) -> str:
    watch: dict[str, Any] = {"poll": False}
    if group_wait_s is not None:  # else the default: each alert is held 2 s to gather
        watch["group_wait_s"] = group_wait_s
    return json.dumps(  # JSON is YAML
        {
            "teams": [{"name": "orders", "channel": CHANNEL, "members": [USER, "U0ALICE001"]}],
            "ownership": [{"pattern": "bench::job*", "team": "orders"}],
            "watch": watch,
            "limits": {"max_plan_dags": cap},
        }
    )


async def watch(run: Run, serve: Serve, url: str) -> None:
    """RSS and serve's log every 0.2 s, a progress line now and then until ready; /readyz
    every second beside (a slow answer must not stop the sampling)."""
    poller = asyncio.create_task(poll_readyz(run, serve, url))
    said = 0.0
    try:
        while serve.process.poll() is None:
            rss = serve.rss_mb() or 0.0
            run.rss[run.phase] = max(run.rss.get(run.phase, 0.0), rss)
            for line in serve.new_log_lines():
                found = re.search(r"full reconcile read (\d+) jobs", line)
                if found and run.log_ready_s is None:
                    run.log_ready_s, run.log_jobs = run.now(), int(found[1])
                if " ERROR " in line or " WARNING " in line or line.startswith("Traceback"):
                    run.problems.append(line)
            if run.now() - said >= max(5.0, run.now() / 10) and run.ready_s is None:
                said, index = run.now(), run.index
                what = (
                    f"lineage_index {index.get('state')}, {index.get('jobs_read')} of "
                    f"{index.get('jobs_total')} jobs read"
                    if run.index_seen
                    else "no lineage_index in /readyz"
                )
                print(f"  {said:7.1f} s  {run.phase:13} {what}; RSS {rss:,.0f} MB", flush=True)
            await asyncio.sleep(0.2)
    finally:
        poller.cancel()


async def poll_readyz(run: Run, serve: Serve, url: str) -> None:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http:
        while serve.process.poll() is None:
            if run.up_s:
                found = await readyz(http, url)
                if found is not None:
                    run.index_seen, run.index = True, found
            await asyncio.sleep(1.0)


async def preview(
    slack: SlackStandIn, marquez: Marquez, pick: Pick, n: int, wait_s: float
) -> Answer:
    """Type `/backfill` in a channel of its own (the per-channel pace is not measured); the
    answer is its preview in the channel, or a refusal told to the person."""
    channel = f"C0PREV{n:04d}"
    slack.state.add_channel(channel, f"preview-{n}")
    answer = Answer(pick)
    since, _ = await marquez.requests(sys.maxsize)
    ephemerals = len(slack.state.ephemerals)
    began = time.perf_counter()

    async def typed() -> None:
        await slack.slash_command(f"{pick.name} {RANGE}", user_id=USER, channel_id=channel)
        answer.ack_s = time.perf_counter() - began

    typing = asyncio.create_task(typed())
    while time.perf_counter() - began < wait_s:
        if slack.state.messages(channel):
            answer.seconds, answer.kind = time.perf_counter() - began, "preview"
            break
        told = [e for e in slack.state.ephemerals[ephemerals:] if e.source == "response_url"]
        answer.still_planning = any("Still asking" in e.text for e in told)
        refused = [e.text for e in told if not any(w in e.text for w in NOT_ANSWERS)]
        if refused:
            answer.seconds, answer.kind = time.perf_counter() - began, f"refused: {refused[0]}"
            break
        await asyncio.sleep(0.005)
    with contextlib.suppress(TimeoutError):  # an ack that never came is in `ack_s` (None)
        await asyncio.wait_for(typing, 30)
    _, asked = await marquez.requests(since)
    answer.requests = by_route([r for r in asked if r != PING])
    return answer


async def send_alerts(
    run: Run, slack: SlackStandIn, url: str, failures: list[Failure], gap: float
) -> None:
    async with aiohttp.ClientSession() as http:
        for failure in failures:
            seen = len(slack.state.messages(CHANNEL))
            began = time.perf_counter()
            async with http.post(f"{url}/api/v1/lineage", json=fail_event(failure)) as reply:
                assert reply.status == 201, await reply.text()
            took: float | None = None
            while took is None and time.perf_counter() - began < ALERT_WAIT_S:
                posted = slack.state.messages(CHANNEL)
                text = downstream_of(posted[seen]) if len(posted) > seen else ""
                if text and "being worked out" not in text:
                    took = time.perf_counter() - began
                await asyncio.sleep(0.002)
            run.alerts.append(took)
            await asyncio.sleep(gap)


async def wait_ready(run: Run, serve: Serve, timeout_s: float) -> None:
    while run.now() < timeout_s and serve.process.poll() is None:
        if run.index_seen and run.index.get("state") == "current":
            run.ready_s, run.ready_how = run.now(), "/readyz lineage_index current"
            return
        if not run.index_seen and run.log_ready_s is not None:
            run.ready_s = run.log_ready_s
            run.ready_how = "no lineage_index in /readyz: serve's 'full reconcile read' log line"
            return
        await asyncio.sleep(0.2)


async def measure(jobs: int, latency: bool, args: argparse.Namespace) -> Run:
    run = Run(jobs, latency, args.database)
    delays = LATENCY if latency else {}
    what = f"stand-in latency {delays}" if latency else "no stand-in latency"
    print(f"\n== {jobs:,} jobs, {what}, {args.database}", flush=True)
    began = time.perf_counter()
    cold_picks, warm_picks, failures = await asyncio.to_thread(
        choose, jobs, args.max_plan_dags, args.cold, args.previews, args.alerts
    )
    async with marquez_process(jobs, delays) as marquez:
        setup = time.perf_counter() - began
        print(
            f"  Marquez stand-in: {jobs:,} jobs, {marquez.datasets:,} datasets, loaded in "
            f"{marquez.load_s:.1f} s (bench set-up {setup:.1f} s)"
        )
        gc.collect()
        with (
            tempfile.TemporaryDirectory() as scratch,
            fresh_database(args.database, Path(scratch)) as database,
        ):
            picks = (cold_picks, warm_picks, failures)
            await with_serve(run, marquez, database, Path(scratch), picks, args)
    run.took_s = time.perf_counter() - began
    return run


async def with_serve(
    run: Run, marquez: Marquez, database: str, scratch: Path, picks: Picks, args: argparse.Namespace
) -> None:
    (scratch / "bot.yml").write_text(config_yaml(args.max_plan_dags, args.group_wait))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    async with running_slack_standin(ack_timeout=None) as slack:
        slack.state.add_channel(CHANNEL, "orders")
        env = {
            "MARQUEZ_URL": marquez.url, "DATABASE_URL": database,
            "BOT_CONFIG": str(scratch / "bot.yml"), "SLACK_BOT_TOKEN": slack.bot_token,
            "SLACK_SIGNING_SECRET": slack.signing_secret, "SLACK_API_URL": f"{slack.url}/api/",
            "BOT_HOST": "127.0.0.1", "BOT_PORT": str(port), "BOT_EXECUTOR": "manual",
        }  # fmt: skip
        slack.set_events_url(f"{url}/slack/events")
        run.began = time.perf_counter()
        serve = Serve(env, scratch / "serve.log")
        watcher = asyncio.create_task(watch(run, serve, url))
        try:
            await phases(run, serve, slack, marquez, url, picks, args)
            run.peak_mb = serve.peak_mb() or 0.0
            _, everything = await marquez.requests(0)
            run.marquez = by_route([r for r in everything if r != PING])
        finally:
            watcher.cancel()
            code = await asyncio.to_thread(serve.stop)
            if code not in (0, -15, None):
                run.problems.append(f"serve exited with {code}")
            args.logs.mkdir(parents=True, exist_ok=True)
            variant = "latency" if run.latency else "plain"
            run.log = args.logs / f"serve-{run.jobs}-{variant}-{run.database}.log"
            shutil.copyfile(serve.log, run.log)


async def phases(
    run: Run,
    serve: Serve,
    slack: SlackStandIn,
    marquez: Marquez,
    url: str,
    picks: Picks,
    args: argparse.Namespace,
) -> None:
    cold, warm, failures = picks
    await serve.answering(url)
    run.up_s, run.phase = run.now(), "cold previews"
    print(f"  serve up (/healthz) {run.up_s:.1f} s after spawn", flush=True)
    for n, pick in enumerate(cold):
        run.cold.append(await preview(slack, marquez, pick, n, args.preview_timeout))
        show("cold", run.cold[-1], run.now())
    run.phase = "reconcile"
    await wait_ready(run, serve, args.ready_timeout)
    run.phase = "warm previews"
    if run.ready_s is None:  # neither signal: preview until one asks Marquez at most twice
        run.ready_how = "no readiness signal: previews until one made <= 2 Marquez requests"
        for n in range(20):
            pick = warm[n % len(warm)]
            probe = await preview(slack, marquez, pick, 900 + n, args.preview_timeout)
            if sum(probe.requests.values()) <= 2:
                run.ready_s = run.now()
                break
            await asyncio.sleep(5)
    rss = serve.rss_mb() or 0.0
    print(f"  ready {_s(run.ready_s)} after spawn ({run.ready_how}); RSS {rss:,.0f} MB", flush=True)
    await asyncio.sleep(1)
    for n, pick in enumerate(warm):
        run.warm.append(await preview(slack, marquez, pick, 100 + n, args.preview_timeout))
        show("warm", run.warm[-1], run.now())
    run.phase = "alerts"
    await asyncio.sleep(args.gap)
    await send_alerts(run, slack, url, failures, args.gap)
    run.phase = "idle"
    await asyncio.sleep(5)
    run.idle_mb = serve.rss_mb() or 0.0


def show(what: str, answer: Answer, at: float) -> None:
    asked = sum(answer.requests.values())
    routes = ", ".join(f"{n} {r}" for r, n in answer.requests.most_common(4))
    pick, notice = answer.pick, "; told still planning" if answer.still_planning else ""
    print(
        f"  {at:7.1f} s  {what} /backfill {pick.name} (layer {pick.layer}, {pick.dags} DAGs): "
        f"{_s(answer.seconds)} {answer.kind[:90]}; ack {_s(answer.ack_s)}; {asked} Marquez "
        f"requests ({routes or 'none'}){notice}",
        flush=True,
    )


def _s(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f} s"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def report(run: Run, plain: Run | None, group_wait: float | None) -> None:
    target = TARGETS.get(run.jobs)
    today = TODAY.get(run.jobs, {}) if not run.latency else {}
    cold = [a.seconds for a in run.cold if a.seconds is not None]
    warm = [a.seconds for a in run.warm if a.seconds is not None]
    asked = [sum(a.requests.values()) for a in run.warm]
    alerts = [a for a in run.alerts if a is not None]
    cold_asked = ", ".join(str(sum(a.requests.values())) for a in run.cold)

    def goal(value: float | None, unit: str) -> str:
        return "—" if value is None else f"≤ {value:g}{unit}"

    peak_goal = goal(target and target[0], " MB")
    if run.latency and plain is not None:
        peak_goal = f"≤ {plain.peak_mb:,.0f} MB (no latency)"
    rows = [
        ("serve peak RSS (VmHWM)", peak_goal, today.get("peak", "—"),
         f"{run.peak_mb:,.0f} MB (idle after {run.idle_mb:,.0f} MB)"),
        ("first preview after cold start",
         "≤ 15 s" if run.latency else goal(target and target[1], " s"), today.get("cold", "—"),
         ", ".join(_s(a.seconds) for a in run.cold)
         + (f" (median {statistics.median(cold):.2f} s)" if cold else "")),
        ("  Marquez requests around each", "—", today.get("requests", "—"), cold_asked or "—"),
        ("full reconcile, start to ready", "—" if run.latency else goal(target and target[2], " s"),
         "—", f"{_s(run.ready_s)} ({run.ready_how})" + (
             f"; log line at {run.log_ready_s:.1f} s" if run.index_seen and run.log_ready_s else ""
         )),
        ("warm preview median / requests",
         f"{goal(target and target[3], ' s')} / ≤ 2" if target else "— / ≤ 2", "—",
         f"{_s(statistics.median(warm) if warm else None)} (max {_s(max(warm, default=None))}) "
         f"/ median {statistics.median(asked) if asked else '—'}, max {max(asked, default=0)}"),
        ("FAIL → alert with impact, p99", goal(target and target[4], " s"), "—",
         f"p99 {_s(pct(alerts, 0.99) if alerts else None)}, p50 "
         f"{_s(pct(alerts, 0.5) if alerts else None)} ({len(alerts)} of {len(run.alerts)}; "
         f"watch.group_wait_s {'2 (default)' if group_wait is None else f'{group_wait:g}'})"),
    ]  # fmt: skip
    title = f"{run.jobs:,} jobs, {'with' if run.latency else 'no'} stand-in latency, {run.database}"
    print(f"\n{title} (run took {run.took_s / 60:.1f} min)")
    print(f"  {'measure':34} {'target':26} {'today':32} now")
    for row in rows:
        print(f"  {row[0]:34} {row[1]:26} {row[2]:32} {row[3]}")
    phases = ", ".join(f"{p} {mb:,.0f}" for p, mb in run.rss.items())
    print(f"  RSS highest sampled per phase (MB): {phases}")
    if run.log_jobs is not None:
        print(f"  serve's log: the full reconcile read {run.log_jobs:,} of {run.jobs:,} jobs")
    if run.index_seen:
        print(f"  /readyz lineage_index, last seen: {json.dumps(run.index)}")
    refused = [a for a in run.cold + run.warm if a.kind != "preview"]
    for a in refused:
        print(f"  not a preview: {a.pick.name}: {a.kind[:160]}")
    routes = ", ".join(f"{n} {r}" for r, n in run.marquez.most_common(6))
    print(f"  Marquez requests in all: {sum(run.marquez.values()):,} ({routes})")
    if run.problems:
        first = " | ".join(p[:200] for p in run.problems[:3])
        print(f"  serve logged {len(run.problems)} ERROR/WARNING line(s), first: {first}")
    print(f"  serve's log kept at {run.log}")


async def main_async(args: argparse.Namespace) -> None:
    task = asyncio.current_task()
    if task is not None:  # SIGTERM stops everything started, as Ctrl-C does
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    variants = [False, True] if args.both else [args.latency]
    for jobs in args.jobs:
        plain: Run | None = None
        for latency in variants:
            run = await measure(jobs, latency, args)
            report(run, plain, args.group_wait)
            plain = plain or (run if not latency else None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, nargs="+", default=[10_000])
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--latency", action="store_true", help="2 s per /jobs, 10 s per /lineage")
    which.add_argument("--both", action="store_true", help="without latency, then with")
    parser.add_argument("--database", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--cold", type=int, default=3, help="previews right after start")
    parser.add_argument("--previews", type=int, default=20, help="warm previews")
    parser.add_argument("--alerts", type=int, default=20)
    parser.add_argument("--gap", type=float, default=1.2, help="seconds between FAIL events")
    parser.add_argument("--max-plan-dags", type=int, default=500)
    parser.add_argument(
        "--group-wait", type=float, default=None, metavar="S",
        help="watch.group_wait_s (the default holds each alert 2 s to gather what follows)",
    )  # fmt: skip
    parser.add_argument("--preview-timeout", type=float, default=900.0)
    parser.add_argument("--ready-timeout", type=float, default=3600.0)
    parser.add_argument("--logs", type=Path, default=Path(tempfile.gettempdir(), "scale_bench"))
    # Started in the background by a shell, Python would ignore Ctrl-C (SIGINT) altogether.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        asyncio.run(main_async(parser.parse_args()))
    except (KeyboardInterrupt, asyncio.CancelledError):
        print("\ninterrupted: everything started was stopped", file=sys.stderr)
        sys.exit(130)


if __name__ == "__main__":
    main()
