"""Verified repairs at scale: one verification of a large backfill (`RepairVerifier.verify`,
bot/backfill/service/verify.py) timed, with its SQL, ledger rows and memory; then the ledger's
reads (`/backfill history`, the App Home's `restated_since`). Figures only, no assertions.

A fresh, migrated database holds `--dags` daily DAGs, each writing one dataset: `--days` intervals
of usual counts (40,000 ± 2%) taken in well before the backfill, but for the `--no-stats` share
of DAGs, which send no statistics. One finished, approved backfill reran every DAG's last
`--intervals` days; the reruns' statistics came after its start (1% of them 0 rows: still
wrong). It is owed as the runner owes it (`owe`) and verified once, every statistic being in;
its thread reply stays in the outbox (its size is printed).

Run: .venv/bin/python bench/verify_bench.py [--dags 1000] [--days 60] [--intervals 30]
     [--no-stats 0.3] [--database postgresql+psycopg://postgres@127.0.0.1:5432/NEW_DB]
(the PostgreSQL database is created here and dropped at the end: it must not exist yet).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import resource
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import UTC, date, datetime, timedelta
from itertools import islice
from pathlib import Path
from typing import Any

from sqlalchemy import event, func, insert, select
from sqlalchemy.engine import make_url

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.backfill.service.verify import RepairVerifier, restated_since
from bot.backfill.store.models import BackfillRequest, BackfillStep, Restatement
from bot.config import parse_config
from bot.core.db import make_engine, session_factory, upgrade
from bot.core.metrics import Metrics
from bot.core.tables import utcnow
from bot.quality.store.models import Observation, dataset_key
from bot.slack.store.models import OutboxMessage

NS = "bench"
CHANNEL = "C0BACKFILL"
CONFIG = {"teams": [{"name": "data", "channel": CHANNEL, "members": ["U0DATA0001"]}]}
USUAL = 40_000
ZERO = 0.01  # share of reruns that wrote 0 rows
CHUNK = 5_000  # observation rows per INSERT
DAY = timedelta(days=1)


def dag_name(index: int) -> str:
    return f"bench.dag_{index:05d}"


def table_name(index: int) -> str:
    return f"warehouse.table_{index:05d}"


def observation(index: int, day: date, rows: int, seen_at: datetime, run: str) -> dict[str, Any]:
    start = datetime(day.year, day.month, day.day, tzinfo=UTC)
    name = table_name(index)
    return {
        "dataset_key": dataset_key(NS, name), "namespace": NS, "name": name,
        "interval_key": start.isoformat(), "interval_start": start, "event_time": seen_at,
        "run_id": f"{index}/{day}/{run}", "dag_namespace": NS, "dag_id": dag_name(index),
        "rows": rows, "size": rows * 118, "usual": rows > 0, "seen_at": seen_at,
    }  # fmt: skip


@asynccontextmanager
async def database(url: str | None) -> AsyncIterator[str]:
    """A fresh database: a temporary SQLite file, or the PostgreSQL database `url` names,
    created here and dropped at the end."""
    if url is None:
        with tempfile.TemporaryDirectory() as folder:
            yield f"sqlite:///{folder}/bench.db"
        return
    import psycopg

    name, server = make_url(url).database, make_url(url).set(drivername="postgresql")
    admin = server.set(database="postgres").render_as_string(hide_password=False)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield url
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def measure(args: argparse.Namespace, url: str) -> None:
    began = time.perf_counter()
    await asyncio.to_thread(upgrade, url)
    engine = make_engine(url)
    sessions = session_factory(engine)
    sql: Counter[str] = Counter()

    def statement(_c: Any, _k: Any, text: str, _p: Any, _x: Any, many: bool) -> None:
        sql[text.lstrip().split(None, 1)[0].upper() + (" (executemany)" if many else "")] += 1

    rng = random.Random(7)
    now = utcnow()
    last = now.date() - 2 * DAY  # the last interval ends yesterday at 00:00
    days = [last - n * DAY for n in reversed(range(args.days))]
    reran = days[-args.intervals :]
    started = now - timedelta(hours=1)  # the backfill's start: after every original row
    silent = set(rng.sample(range(args.dags), k=round(args.no_stats * args.dags)))

    def generated() -> Iterator[dict[str, Any]]:
        for i in (i for i in range(args.dags) if i not in silent):
            for day in days:  # taken in the day after the interval
                seen = datetime(day.year, day.month, day.day, 1, tzinfo=UTC) + DAY
                yield observation(i, day, round(USUAL * rng.uniform(0.98, 1.02)), seen, "0")
            for n, day in enumerate(reran):
                wrote = 0 if rng.random() < ZERO else round(USUAL * rng.uniform(0.98, 1.02))
                seen = started + timedelta(milliseconds=1 + n * args.dags + i)
                yield observation(i, day, wrote, seen, "1")

    rows = generated()
    async with engine.begin() as conn:
        while batch := list(islice(rows, CHUNK)):
            await conn.execute(insert(Observation), batch)
        observed = await conn.scalar(select(func.count()).select_from(Observation)) or 0
        zero = Observation.seen_at >= started, Observation.rows == 0
        zeros = await conn.scalar(select(func.count()).where(*zero)) or 0

    midnights = [datetime(d.year, d.month, d.day, tzinfo=UTC) for d in reran]
    intervals = [{"start": m.isoformat(), "end": (m + DAY).isoformat()} for m in midnights]
    verifier = RepairVerifier(sessions, parse_config(CONFIG), metrics=Metrics(sink_names=[]))
    async with sessions.begin() as session:
        request = BackfillRequest(
            requester="U0DATA0001", channel=CHANNEL, root_dag=dag_name(0), root_namespace=NS,
            start_date=reran[0], end_date=reran[-1], options={}, plan={}, state="succeeded",
            approvers=["U0DATA0002"], started_at=started, finished_at=now,
            status_channel=CHANNEL, status_message_ts="1700000000.000100",
            steps=[
                BackfillStep(
                    position=i, dag_id=dag_name(i), namespace=NS, intervals=intervals,
                    state="succeeded", executor="manual",
                )
                for i in range(args.dags)
            ],
        )  # fmt: skip
        session.add(request)
    async with sessions.begin() as session:
        owed = await session.get(BackfillRequest, request.id)
        assert owed is not None
        await verifier.owe(session, owed)  # as the runner does at the end: due 30 min later
    setup_s = time.perf_counter() - began
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    judge, judging = verifier.rewrites.judge, [0.0]

    async def timed_judge(*args: Any, **kwargs: Any) -> Any:  # timed, not changed
        t = time.perf_counter()
        try:
            return await judge(*args, **kwargs)
        finally:
            judging[0] += time.perf_counter() - t

    setattr(verifier.rewrites, "judge", timed_judge)  # noqa: B010  (mypy: assigning a method)
    event.listen(engine.sync_engine, "before_cursor_execute", statement)
    t0 = time.perf_counter()
    done = await verifier.verify(request.id)
    verify_s = time.perf_counter() - t0
    verify_sql, peak_after = sql.copy(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    sql.clear()

    async with sessions() as session:
        by_verdict = select(Restatement.verdict, func.count()).group_by(Restatement.verdict)
        verdicts = dict(list(await session.execute(by_verdict)))
        owed_rows = select(OutboxMessage.payload).where(OutboxMessage.request_id == request.id)
        sizes = [
            len(json.dumps(p, ensure_ascii=False).encode())
            for p in await session.scalars(owed_rows)
        ]
    with_stats = next(i for i in range(args.dags) if i not in silent)

    async def timed(what: str, call: Any) -> None:
        sql.clear()
        t = time.perf_counter()
        result = await call
        print(f"  {what}: {(time.perf_counter() - t) * 1000:,.1f} ms, {sum(sql.values())} SQL; "
              f"{result}")  # fmt: skip

    async def home() -> str:
        async with sessions() as session:
            found = await restated_since(session, utcnow() - timedelta(days=30))
        return f"{len(found):,} (backfill, DAG, verdict) groups read"

    async def history(subject: str) -> str:
        answer = await verifier.history(subject)
        return f"answer {len(json.dumps(answer).encode()):,} bytes"

    judged = args.dags * args.intervals
    print(
        f"{args.dags:,} DAGs ({len(silent):,} without statistics) × {args.intervals} rerun "
        f"intervals = {judged:,} dataset intervals judged; {args.days} days of history; "
        f"{observed:,} quality_observations rows ({zeros:,} reruns wrote 0 rows); database "
        f"{make_url(url).get_backend_name()}; setup {setup_s:.1f} s"
    )
    per = verify_s / judged * 1e6
    print(
        f"verify(): {verify_s:.2f} s (returned {done}); {per:,.0f} µs per dataset interval; "
        f"Rewrites.judge {judging[0]:.2f} s, the rest (ledger rows, reply, commit) "
        f"{verify_s - judging[0]:.2f} s"
    )
    print(
        f"  SQL statements: {sum(verify_sql.values()):,} ("
        + ", ".join(f"{k} {n:,}" for k, n in verify_sql.most_common())
        + f"); {sum(verify_sql.values()) / judged:.2f} per dataset interval"
    )
    kinds = ", ".join(f"{k} {n:,}" for k, n in sorted(verdicts.items()))
    print(f"  restatements rows written: {sum(verdicts.values()):,} ({kinds})")
    print(f"  outbox rows owed: {len(sizes)}; payload bytes: {', '.join(f'{s:,}' for s in sizes)}")
    print(f"  peak RSS (ru_maxrss): {peak_before:,.0f} MB before, {peak_after:,.0f} MB after")
    print("Reads of the ledger afterwards:")
    await timed(f"history({dag_name(with_stats)!r})", history(dag_name(with_stats)))
    await timed(f"history({table_name(with_stats)!r})", history(table_name(with_stats)))
    await timed("restated_since(30 days) (App Home)", home())
    await engine.dispose()


async def run(args: argparse.Namespace) -> None:
    async with database(args.database) as url:
        await measure(args, url)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dags", type=int, default=1_000)
    parser.add_argument("--days", type=int, default=60, help="daily intervals of history")
    parser.add_argument("--intervals", type=int, default=30, help="the last days rerun")
    parser.add_argument("--no-stats", type=float, default=0.3, help="share of DAGs without")
    parser.add_argument("--database", help="a PostgreSQL URL to create (default: SQLite)")
    args = parser.parse_args()
    assert 0 < args.intervals <= args.days, "--intervals must be within --days"
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
