"""The data-quality detection pass: how long the incident watcher takes to judge `--events`
COMPLETE run events with output statistics (0 rows, an unusual row count, a lost column) and
open, group and extend the data incidents they show, with what that costs in memory and disk.

The events are those of `--datasets` daily Airflow DAGs, each one Spark task writing one dataset
(shaped as tests/quality/builders.py builds them: DAG START with `nominalTime`, the task's
COMPLETE with `outputStatistics {rowCount, size, fileCount}` and a `schema` facet, DAG
COMPLETE), over `--events / --datasets` days. Only the task COMPLETEs count toward `--events`;
each comes with its DAG's START and COMPLETE, so the store holds three rows per counted event
and the pass handles all three. The DAGs form chains of five (each task reads the dataset of
the DAG before it), so a bad upstream run explains a bad downstream one (grouping).

Row counts are a per-dataset base with ±5% noise. Bad runs, seeded so every run is the same:
spells of 1-4 days in which a DAG writes 0 rows or 10% of its usual, each passed on to the next
DAG of its chain for the same day with probability 1/2 (about 0.5% of runs each), and
`datasets / 200` datasets lose a column once (for good). What was generated is printed beside
what the pass found.

The bot is built as `serve` builds it (`bot.app.build_services`, the real schema from the
migrations, the default config but for one team owning every DAG so alerts are owed as outbox
rows; `watch.poll: false` as the other benches, events come to the receiver). The lineage index
is on, as in `serve`: the Marquez stand-in (in this process) holds one run of every DAG, the
index's first full reconcile reads it before anything is timed, and the impact of each new
incident comes from the index (`watch.impact_wait_s` is left at its default). No sender runs:
what is owed to Slack stays in the outbox and is counted.

1. Ingest (timed apart): the events, in eventTime order, parsed (`parse_run_event`) and stored
   through `store_events` in transactions of `--batch` events, then recorded in the lineage
   index (`record_lineage`), as the receiver does after its commit. Building the event bodies
   is not timed.
2. The pass: `IncidentService.process()` called until it returns 0, then the impacts still
   being worked out awaited. Per event handled: its time (the watcher's `_handle`, wrapped to
   time it, not changed); per `process()` call (500 rows) too.

The default (100,000 events, 1,000 datasets: 100 intervals each) is the target run; on SQLite
on 2 cores it takes about 50 minutes (ingest 5, the pass 48). `--events 20000 --datasets 200`
keeps 100 intervals of history per dataset and takes about a fifth of that. `--profile` adds a
cProfile of the pass (the database's own thread is not in it: waiting for it shows as `poll`).

Run: .venv/bin/python bench/quality_bench.py [--events 100000] [--datasets 1000]
     [--database sqlite|postgresql] [--batch 1000] [--profile]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import pstats
import random
import resource
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient
from sqlalchemy import event, func, select, text

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.app import build_services
from bot.app_services import Services
from bot.config import parse_config
from bot.core.db import upgrade
from bot.events.rules.event import ParsedEvent
from bot.events.rules.parse import parse_run_event
from bot.events.store.models import EventSource, RunEvent
from bot.events.store.run_events import store_events
from bot.incidents.rules.data import problems_from
from bot.incidents.store.incidents import runs_of
from bot.incidents.store.models import Incident
from bot.lineage.service.record import record_lineage
from bot.quality.store.models import Observation
from bot.settings import load_settings
from bot.slack.store.models import OutboxMessage
from standins.marquez.server import running_standin

NS = "bench"
PRODUCER = "https://github.com/OpenLineage/OpenLineage/tree/1.52.0/integration/spark"
SPEC = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
CHANNEL = "C0DATAPLAT"
CONFIG = {
    "teams": [{"name": "data", "channel": CHANNEL, "members": ["U0DATA0001"]}],
    "ownership": [{"pattern": "bench.dag_*", "team": "data"}],
    "watch": {"poll": False},
}
POSTGRES = "postgresql://postgres@127.0.0.1:5432"
LAST_DAY = date(2026, 6, 30)  # the last interval; the first is `days` before it
CHAIN = 5  # DAGs per chain: each task reads the dataset the DAG before it wrote
SPELL_START = 0.0036  # per DAG and day: a spell of bad runs begins (0 rows or 10%)
SPELL_DAYS = (1, 1, 1, 1, 1, 1, 2, 2, 3, 4)  # its length, drawn from these
PASSED_ON = 0.5  # a bad run makes the next DAG of its chain bad that day
FEW = 0.10  # a "few rows" run writes this share of its usual
FIELDS = ("id", "customer_id", "amount", "currency", "created_at", "updated_at")
TYPES = ("bigint", "bigint", "decimal(12,2)", "string", "timestamp", "timestamp")


# -- the events ----------------------------------------------------------------------------------


@dataclass
class Truth:
    """What the generated runs did wrong, to set beside what the pass found."""

    runs: int = 0
    zero: int = 0
    few: int = 0
    passed_on: int = 0  # bad runs that were bad because the DAG before them was
    lost_columns: list[tuple[str, int]] = field(default_factory=list)  # (dataset, day index)


def _time(value: datetime) -> str:
    return value.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _facet(name: str, **fields: Any) -> dict[str, Any]:
    return {
        "_producer": PRODUCER,
        "_schemaURL": f"https://openlineage.io/spec/facets/1-0-0/{name}.json#/$defs/{name}",
        **fields,
    }


def dag_name(index: int) -> str:
    return f"bench.dag_{index:05d}"


def dataset_name(index: int) -> str:
    return f"warehouse.table_{index:05d}"


def daily_run(
    index: int, day: date, rows: int, fields: tuple[int, ...], offset: timedelta
) -> list[dict[str, Any]]:
    """DAG START, task COMPLETE (its input, its output's statistics and schema), DAG COMPLETE
    of DAG `index`'s run for `day`, starting `offset` after the interval ends."""
    dag = dag_name(index)
    start = datetime(day.year, day.month, day.day, tzinfo=UTC)
    end = start + timedelta(days=1)
    began = end + offset
    dag_run = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{dag}/{day}"))
    task_run = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{dag}/{day}/task"))
    nominal = _facet(
        "NominalTimeRunFacet", nominalStartTime=_time(start), nominalEndTime=_time(end)
    )
    parent = _facet(
        "ParentRunFacet",
        run={"runId": dag_run},
        job={"namespace": NS, "name": dag},
        root={"run": {"runId": dag_run}, "job": {"namespace": NS, "name": dag}},
    )
    size = rows * 118
    stats = _facet(
        "OutputStatisticsOutputDatasetFacet",
        rowCount=rows,
        size=size,
        fileCount=max(1, size // 134_217_728),
    )
    schema = _facet(
        "SchemaDatasetFacet", fields=[{"name": FIELDS[f], "type": TYPES[f]} for f in fields]
    )
    output = {
        "namespace": NS,
        "name": dataset_name(index),
        "facets": {"schema": schema},
        "outputFacets": {"outputStatistics": stats},
    }
    inputs = [{"namespace": NS, "name": dataset_name(index - 1)}] if index % CHAIN else []

    def body(kind: str, at: datetime, job: str, run: str, facets: dict[str, Any]) -> Any:
        task = job != dag
        return {
            "eventType": kind,
            "eventTime": _time(at),
            "run": {"runId": run, "facets": facets},
            "job": {"namespace": NS, "name": job, "facets": {}},
            "inputs": inputs if task else [],
            "outputs": [output] if task else [],
            "producer": PRODUCER,
            "schemaURL": SPEC,
        }

    done = began + timedelta(minutes=4)
    return [
        body("START", began, dag, dag_run, {"nominalTime": nominal}),
        body("COMPLETE", done, f"{dag}.spark_job", task_run, {"parent": parent}),
        body("COMPLETE", done + timedelta(seconds=5), dag, dag_run, {"nominalTime": nominal}),
    ]


def days_of(events: int, datasets: int) -> int:
    return -(-events // datasets)


def generate(events: int, datasets: int, truth: Truth, seed: int = 17) -> Iterator[list[Any]]:
    """Each day's events in eventTime order (the last day may run only some DAGs, so that
    exactly `events` task COMPLETEs are made)."""
    rng = random.Random(seed)
    days = days_of(events, datasets)
    first = LAST_DAY - timedelta(days=days - 1)
    base = [rng.randint(2_000, 2_000_000) for _ in range(datasets)]
    # DAGs start a little apart, chain by chain: the n-th DAG of each chain after the (n-1)-th
    spacing = 600.0 / max(1, datasets // CHAIN)
    offsets = [
        timedelta(minutes=5 + 20 * (i % CHAIN), seconds=spacing * (i // CHAIN))
        for i in range(datasets)
    ]
    losers = rng.sample(range(datasets), k=max(1, datasets // 200))
    lose_on = {i: rng.randrange(days // 4, max(days // 4 + 1, 3 * days // 4)) for i in losers}
    truth.lost_columns = sorted((dataset_name(i), d) for i, d in lose_on.items())
    spell: list[tuple[str, int]] = [("", 0)] * datasets  # (kind, days left)
    left = events
    for n in range(days):
        day = first + timedelta(days=n)
        bad: list[str] = [""] * datasets
        out: list[dict[str, Any]] = []
        for i in range(min(datasets, left)):  # upstream first: a chain's n-th after (n-1)-th
            kind, remaining = spell[i]
            if remaining == 0 and rng.random() < SPELL_START:
                kind, remaining = rng.choice(("zero", "few")), rng.choice(SPELL_DAYS)
            if remaining:
                spell[i] = (kind, remaining - 1)
                bad[i] = kind
            elif i % CHAIN and bad[i - 1] and rng.random() < PASSED_ON:
                bad[i] = bad[i - 1]
                truth.passed_on += 1
            noise = rng.uniform(0.95, 1.05)
            rows = 0 if bad[i] == "zero" else round(base[i] * noise * (FEW if bad[i] else 1))
            truth.zero += bad[i] == "zero"
            truth.few += bad[i] == "few"
            truth.runs += 1
            kept = len(FIELDS) - (1 if i in lose_on and n >= lose_on[i] else 0)
            out += daily_run(i, day, rows, tuple(range(kept)), offsets[i])
        left -= min(datasets, left)
        out.sort(key=lambda e: e["eventTime"])
        yield out


def lineage_of(datasets: int) -> list[Any]:
    """One run of every DAG (a day before the measured ones): what Marquez holds of them."""
    day = LAST_DAY - timedelta(days=10_000)
    return [
        e
        for i in range(datasets)
        for e in daily_run(i, day, 1, tuple(range(len(FIELDS))), timedelta(seconds=i))
    ]


# -- the database --------------------------------------------------------------------------------


@asynccontextmanager
async def database(kind: str) -> AsyncIterator[tuple[str, Callable[[], int]]]:
    """A fresh database's URL, and how to read its size in bytes."""
    if kind == "sqlite":
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "bench.db"

            def sqlite_size() -> int:
                return sum(
                    p.stat().st_size for p in Path(folder).iterdir() if p.name.startswith(path.name)
                )

            yield f"sqlite:///{path}", sqlite_size
        return
    import psycopg

    name = f"bfb_bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(f"{POSTGRES}/postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        url = f"{POSTGRES}/{name}"

        def postgres_size() -> int:
            with psycopg.connect(url) as conn:
                row = conn.execute("SELECT pg_database_size(current_database())").fetchone()
            return int(row[0]) if row else 0

        yield url, postgres_size
    finally:
        with psycopg.connect(f"{POSTGRES}/postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def rss_mb(field_name: str = "VmRSS") -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(f"{field_name}:"):
                return int(line.split()[1]) / 1024
    return 0.0


# -- the measurement -----------------------------------------------------------------------------


@dataclass
class Run:
    database: str
    events: int
    datasets: int
    days: int
    truth: Truth = field(default_factory=Truth)
    reconcile_s: float = 0.0
    rows_stored: int = 0
    parse_s: float = 0.0
    store_s: float = 0.0
    record_s: float = 0.0
    generate_s: float = 0.0
    pass_s: float = 0.0
    settle_s: float = 0.0
    calls: list[tuple[int, float]] = field(default_factory=list)  # (rows, seconds) per process()
    handled: dict[str, list[float]] = field(default_factory=dict)  # seconds per event, by kind
    statements: Counter[str] = field(default_factory=Counter)  # SQL statements, by event kind
    commits: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    rss_before_mb: float = 0.0
    rss_after_mb: float = 0.0
    hwm_before_mb: float = 0.0
    hwm_after_mb: float = 0.0
    peak_mb: float = 0.0  # ru_maxrss
    incidents: Counter[str] = field(default_factory=Counter)
    findings: Counter[str] = field(default_factory=Counter)
    outages: Counter[int] = field(default_factory=Counter)  # intervals per incident
    impacts: Counter[str] = field(default_factory=Counter)  # of incidents with their own alert
    outbox: Counter[str] = field(default_factory=Counter)
    observations: int = 0
    unhandled: int = 0
    size_bytes: int = 0
    profile: str = ""


async def measure(args: argparse.Namespace) -> Run:
    days = days_of(args.events, args.datasets)
    run = Run(args.database, args.events, args.datasets, days)
    async with database(args.database) as (url, size), running_standin(seed=None) as marquez:
        for body in lineage_of(args.datasets):
            marquez.state.ingest(body)
        settings = load_settings(
            {
                "MARQUEZ_URL": marquez.url,
                "DATABASE_URL": url,
                "SLACK_BOT_TOKEN": "xoxb-quality-bench",
                "SLACK_API_URL": "http://127.0.0.1:9/api/",  # nothing listens: nothing is sent
                "BOT_EXECUTOR": "manual",
            }
        )
        upgrade(url)
        slack = AsyncWebClient(token="xoxb-quality-bench", base_url=settings.slack_api_url)
        services = build_services(settings, parse_config(CONFIG), slack)
        assert services.reconciler is not None, "the lineage index is off"
        try:
            began = time.perf_counter()
            # `serve`'s start: the index's first full reconcile, before any event here
            assert await services.reconciler.full() is not None, "no full reconcile"
            run.reconcile_s = time.perf_counter() - began
            await ingest(services, run, args.batch)
            await detect(services, run, args.profile)
            await count(services, run)
        finally:
            await services.engine.dispose()
        run.size_bytes = size()
    return run


async def ingest(services: Services, run: Run, batch: int) -> None:
    sessions = services.sessions
    began = time.perf_counter()
    for day in generate(run.events, run.datasets, run.truth):
        for at in range(0, len(day), batch):
            bodies = day[at : at + batch]
            t0 = time.perf_counter()
            parsed = [e for e in map(parse_run_event, bodies) if e is not None]
            t1 = time.perf_counter()
            stored: list[ParsedEvent] = []
            async with sessions.begin() as session:
                run.rows_stored += await store_events(
                    session, parsed, source=EventSource.RECEIVER, resolved=stored
                )
            t2 = time.perf_counter()
            await record_lineage(sessions, stored)  # as the receiver does, after its commit
            t3 = time.perf_counter()
            run.parse_s += t1 - t0
            run.store_s += t2 - t1
            run.record_s += t3 - t2
    run.generate_s = time.perf_counter() - began - run.parse_s - run.store_s - run.record_s


async def detect(services: Services, run: Run, profile: bool) -> None:
    incidents = services.incidents
    handle = incidents._handle  # timed, not changed
    sql = Counter[str]()  # what the engine was asked, counted (statements run in this thread)

    def statement(*_: Any) -> None:
        sql["statements"] += 1

    def commit(*_: Any) -> None:
        sql["commits"] += 1

    event.listen(services.engine.sync_engine, "before_cursor_execute", statement)
    event.listen(services.engine.sync_engine, "commit", commit)

    async def timed(row: RunEvent, batch: Any) -> None:
        kind = f"{row.event_type} {'task (with data)' if row.data else 'DAG'}"
        began, before = time.perf_counter(), sql.copy()
        try:
            await handle(row, batch)
        except Exception as exc:
            run.errors[f"{type(exc).__name__}: {exc}"[:200]] += 1
            raise
        finally:
            run.handled.setdefault(kind, []).append(time.perf_counter() - began)
            run.statements[kind] += sql["statements"] - before["statements"]
            run.commits[kind] += sql["commits"] - before["commits"]

    setattr(incidents, "_handle", timed)  # noqa: B010  (mypy: no assigning to a method)
    run.rss_before_mb, run.hwm_before_mb = rss_mb(), rss_mb("VmHWM")
    profiler = cProfile.Profile() if profile else None
    if profiler is not None:
        profiler.enable()
    began = time.perf_counter()
    while True:
        t0 = time.perf_counter()
        rows = await incidents.process()
        if not rows:
            break
        run.calls.append((rows, time.perf_counter() - t0))
    run.pass_s = time.perf_counter() - began
    await incidents.settled()
    run.settle_s = time.perf_counter() - began - run.pass_s
    if profiler is not None:
        profiler.disable()
        out = io.StringIO()
        stats = pstats.Stats(profiler, stream=out)
        stats.sort_stats("tottime").print_stats(25)
        stats.sort_stats("cumulative").print_stats(45)
        run.profile = out.getvalue()
    run.rss_after_mb, run.hwm_after_mb = rss_mb(), rss_mb("VmHWM")
    run.peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def count(services: Services, run: Run) -> None:
    async with services.sessions() as session:
        for incident in await session.scalars(select(Incident)):
            where = "grouped under an upstream incident" if incident.root_id else "own alert"
            run.incidents[f"{incident.kind}, {where}"] += 1
            kinds = {str(p.finding.kind) for p in problems_from(incident.findings)}
            for kind in kinds:
                run.findings[f"incidents with a {kind} finding"] += 1
            for problem in problems_from(incident.findings):
                run.findings[f"{problem.finding.kind} findings (dataset × interval)"] += 1
            run.outages[len(runs_of(incident))] += 1
            if incident.root_id is None:
                run.impacts[str((incident.impact or {}).get("status", "none"))] += 1
        for role, state, n in await session.execute(
            select(OutboxMessage.role, OutboxMessage.state, func.count()).group_by(
                OutboxMessage.role, OutboxMessage.state
            )
        ):
            run.outbox[f"{role} ({state})"] += n
        run.observations = await session.scalar(select(func.count()).select_from(Observation)) or 0
        run.unhandled = (
            await session.scalar(
                select(func.count()).select_from(RunEvent).where(RunEvent.processed_at.is_(None))
            )
            or 0
        )
        if run.database == "sqlite":  # what the file holds, not what it was given back
            await session.execute(text("PRAGMA wal_checkpoint(TRUNCATE)"))


# -- the report ----------------------------------------------------------------------------------


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def ms(values: list[float]) -> str:
    v = [x * 1000 for x in values]
    return (
        f"p50 {statistics.median(v):.2f} ms, p99 {pct(v, 0.99):.2f} ms, max {max(v):.0f} ms, "
        f"mean {statistics.fmean(v):.2f} ms"
    )


def report(run: Run) -> None:
    truth = run.truth
    counted = run.events
    ingest_s = run.parse_s + run.store_s + run.record_s
    print(
        f"{counted:,} task COMPLETE events with statistics ({run.datasets:,} datasets × "
        f"{run.days} daily intervals; chains of {CHAIN}), each with its DAG's START and "
        f"COMPLETE: {run.rows_stored:,} run_events rows; database {run.database}"
    )
    print(
        f"  generated bad runs: {truth.zero:,} wrote 0 rows ({truth.zero / truth.runs:.2%}), "
        f"{truth.few:,} wrote {FEW:.0%} of usual ({truth.few / truth.runs:.2%}); "
        f"{truth.passed_on:,} of them passed on from the DAG before; "
        f"{len(truth.lost_columns)} datasets lost a column "
        f"({', '.join(f'{n} on day {d}' for n, d in truth.lost_columns[:5])}"
        f"{', …' if len(truth.lost_columns) > 5 else ''})"
    )
    print(
        f"  lineage index: first full reconcile from the Marquez stand-in {run.reconcile_s:.1f} s"
    )
    print(
        f"Ingest: {ingest_s:.1f} s for {run.rows_stored:,} rows = "
        f"{run.rows_stored / ingest_s:,.0f} events/s ({counted / ingest_s:,.0f} counted events/s): "
        f"parse {run.parse_s:.1f} s, store_events {run.store_s:.1f} s, record_lineage "
        f"{run.record_s:.1f} s (building the bodies, not counted: {run.generate_s:.1f} s)"
    )
    handled = sum(len(v) for v in run.handled.values())
    print(
        f"Detection pass: {run.pass_s:.1f} s for {handled:,} rows handled = "
        f"{counted / run.pass_s:,.0f} counted events/s ({handled / run.pass_s:,.0f} rows/s); "
        f"impacts still being worked out after it: {run.settle_s:.2f} s; "
        f"rows left unhandled: {run.unhandled}"
    )
    for kind, values in sorted(run.handled.items()):
        print(
            f"  per {kind} event ({len(values):,}): {ms(values)}; per event "
            f"{run.statements[kind] / len(values):.1f} SQL statements, "
            f"{run.commits[kind] / len(values):.1f} commits"
        )
    if run.calls:
        per_call = [s for _, s in run.calls]
        rows = max(r for r, _ in run.calls)
        print(
            f"  per process() call ({len(run.calls)} calls of up to {rows} rows): "
            f"p50 {statistics.median(per_call):.2f} s, p99 {pct(per_call, 0.99):.2f} s, "
            f"first {per_call[0]:.2f} s, last {per_call[-1]:.2f} s"
        )
        tenth = max(1, len(run.calls) // 10)
        early = sum(r for r, _ in run.calls[:tenth]) / sum(s for _, s in run.calls[:tenth])
        late = sum(r for r, _ in run.calls[-tenth:]) / sum(s for _, s in run.calls[-tenth:])
        print(f"  rows/s in the first tenth of the pass {early:,.0f}, in the last {late:,.0f}")
    for error, n in run.errors.most_common(5):
        print(f"  HANDLING FAILED {n}×: {error}")
    print("Incidents:")
    for kind, n in sorted(run.incidents.items()):
        print(f"  {kind:48} {n:,}")
    for kind, n in sorted(run.findings.items()):
        print(f"  {kind:48} {n:,}")
    spans = ", ".join(f"{n:,} of {k}" for k, n in sorted(run.outages.items()))
    print(f"  intervals per incident (outages): {spans}")
    impacts = ", ".join(f"{n:,} {status}" for status, n in run.impacts.most_common())
    print(f"  impact of the incidents with their own alert: {impacts or 'none'}")
    print(f"Outbox rows owed: {sum(run.outbox.values()):,}")
    for kind, n in sorted(run.outbox.items()):
        print(f"  {kind:48} {n:,}")
    print(
        f"Memory: peak RSS (ru_maxrss) {run.peak_mb:,.0f} MB; RSS {run.rss_before_mb:,.0f} MB "
        f"before the pass, {run.rss_after_mb:,.0f} MB after "
        f"({run.rss_after_mb - run.rss_before_mb:+,.0f} MB); high-water mark "
        f"{run.hwm_before_mb:,.0f} → {run.hwm_after_mb:,.0f} MB"
    )
    print(
        f"Database: quality_observations {run.observations:,} rows; size "
        f"{run.size_bytes / 1024**2:,.0f} MB"
    )
    if run.profile:
        print("\nProfile of the pass (cProfile: its timings above are not the measurement)")
        print(run.profile)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000, help="task COMPLETEs counted")
    parser.add_argument("--datasets", type=int, default=1_000)
    parser.add_argument("--database", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--batch", type=int, default=1_000, help="events per store_events")
    parser.add_argument("--profile", action="store_true", help="cProfile the pass")
    args = parser.parse_args()
    report(asyncio.run(measure(args)))


if __name__ == "__main__":
    main()
