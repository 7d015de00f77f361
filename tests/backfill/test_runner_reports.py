"""How often a running backfill reports in Slack, through the Runner and the outbox rows it
writes, on SQLite and PostgreSQL, with a fake clock and a backend whose runs progress in fake
time: status edits only when the status changed and the report gap (bot/backfill/rules/progress.py)
has passed, thread lines gathered into one reply per report, the final state reported at once with
everything still owed, a failure reported sooner, and nothing lost across a restart."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.backfill.rules.progress import Counts, report_gap
from bot.backfill.rules.states import RequestState
from bot.backfill.run.backends import Finding, Progress, State, StepWork
from bot.backfill.run.runner import Runner
from bot.backfill.store import repository
from bot.backfill.store.models import BackfillRequest
from bot.config import Execution
from bot.core.db import make_engine, session_factory, upgrade
from bot.core.model import DagRef
from bot.slack.store.models import OutboxMessage, OutboxRole
from tests.support.factories import runner as make_runner

T0 = datetime(2021, 6, 7, 9, 0, tzinfo=UTC)
MIN = timedelta(minutes=1)


@dataclass
class Clock:
    now: datetime = T0

    def __call__(self) -> datetime:
        return self.now


@dataclass
class Timed:
    """Each DAG's runs finish evenly over its duration (fake time); DAGs in `fail` end with
    two failed runs."""

    clock: Clock
    durations: dict[str, timedelta]
    fail: set[str] = field(default_factory=set)
    name: str = "timed"
    started: dict[str, datetime] = field(default_factory=dict)

    async def check(self, dags: Sequence[DagRef]) -> dict[DagRef, Finding]:
        return {}

    async def submit(self, work: StepWork) -> State:
        self.started.setdefault(work.dag.dag_id, self.clock())
        return {"handle": work.dag.dag_id}

    def ends_at(self, dag_id: str) -> datetime:
        return self.started[dag_id] + self.durations[dag_id]

    async def poll(self, work: StepWork) -> Progress:
        runs = len(work.intervals)
        dag = work.dag.dag_id
        if self.clock() >= self.ends_at(dag):
            if dag in self.fail:
                counts = Counts(succeeded=runs - 2, failed=2)
                return Progress(counts, done=True, message=f"2 of {runs} runs failed")
            return Progress(Counts(succeeded=runs), done=True, ok=True)
        done = int(runs * ((self.clock() - self.started[dag]) / self.durations[dag]))
        return Progress(Counts(queued=runs - done - 1, running=1, succeeded=done))

    async def cancel(self, work: StepWork) -> State | None:
        return None

    def link(self, work: StepWork) -> str | None:
        return None

    async def close(self) -> None:
        return None


def plan(steps: dict[str, list[str]], runs: int = 30) -> dict[str, object]:
    """A plan of `steps` (DAG → upstream DAGs, in plan order), `runs` daily runs each."""
    days = [
        {"start": (T0 + i * timedelta(days=1)).isoformat(),
         "end": (T0 + (i + 1) * timedelta(days=1)).isoformat()}
        for i in range(runs)
    ]  # fmt: skip
    first = next(iter(steps))
    return {
        "dag_id": first,
        "namespace": "ns",
        "start": days[0]["start"],
        "end": days[-1]["end"],
        "steps": [
            {"dag_id": dag, "namespace": "ns", "intervals": days, "upstream": upstream}
            for dag, upstream in steps.items()
        ],
    }


@dataclass(frozen=True)
class Sent:
    at: datetime  # the fake time of the pass that owed it
    role: str
    text: str
    """The mrkdwn of its blocks."""


def block_text(payload: dict[str, object]) -> str:
    blocks = payload.get("blocks")
    assert isinstance(blocks, list)
    return "\n".join(str(b["text"]["text"]) for b in blocks if isinstance(b.get("text"), dict))


@dataclass
class Backfill:
    """A running request, its runner, and what its passes owed Slack."""

    sessions: async_sessionmaker[AsyncSession]
    runner: Runner
    clock: Clock
    request_id: str = ""
    sent: list[Sent] = field(default_factory=list)
    passes: list[datetime] = field(default_factory=list)
    _last: int = 0

    async def start(self, steps: dict[str, list[str]], runs: int = 30) -> None:
        async with self.sessions.begin() as session:
            row = await repository.create_request(
                session, plan=plan(steps, runs), requester="U1", channel="C1"
            )
            await repository.transition_request(
                session, row.id, expected={"previewed"}, to="approved", actor="U2"
            )
            await self.runner.start(session, await repository.get_request(session, row.id))
            self.request_id = row.id

    async def load(self) -> BackfillRequest:
        async with self.sessions() as session:
            return await repository.get_request(session, self.request_id)

    async def step(self, every: timedelta) -> bool:
        """One pass `every` after the last; True once the request finished."""
        self.clock.now += every
        await self.runner.advance(self.request_id)
        self.passes.append(self.clock.now)
        async with self.sessions() as session:
            rows = await session.scalars(
                select(OutboxMessage)
                .where(OutboxMessage.id > self._last, OutboxMessage.request_id == self.request_id)
                .order_by(OutboxMessage.id)
            )
            for row in rows:
                self._last = row.id
                self.sent.append(Sent(self.clock.now, row.role, block_text(row.payload)))
        return (await self.load()).finished_at is not None

    async def run(self, every: timedelta, *, limit: int = 2000) -> None:
        for _ in range(limit):
            if await self.step(every):
                return
        raise AssertionError("the backfill did not finish")

    def edits(self) -> list[datetime]:
        return [s.at for s in self.sent if s.role == OutboxRole.STATUS_UPDATE]

    def replies(self) -> list[Sent]:
        return [s for s in self.sent if s.role == OutboxRole.THREAD]


@pytest.fixture
async def sessions(database_url: str) -> AsyncIterator[async_sessionmaker[AsyncSession]]:
    upgrade(database_url)
    engine = make_engine(database_url)
    yield session_factory(engine)
    await engine.dispose()


def backfill(
    sessions: async_sessionmaker[AsyncSession],
    durations: dict[str, timedelta],
    *,
    base_s: float = 5,
    fail: set[str] | None = None,
) -> tuple[Backfill, Timed]:
    clock = Clock()
    backend = Timed(clock, durations, fail or set())
    settings = Execution(poll_interval_s=1, progress_update_s=base_s, max_parallel_steps=4)
    return Backfill(sessions, make_runner(sessions, backend, settings, clock=clock), clock), backend


def gaps(times: list[datetime]) -> list[timedelta]:
    return [b - a for a, b in itertools.pairwise(times)]


async def test_a_short_backfill_is_edited_about_every_progress_update_s(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    run, _ = backfill(sessions, {"a": timedelta(seconds=60)})
    await run.start({"a": []}, runs=120)  # a run finishes every half second: always news
    await run.run(timedelta(seconds=1))

    edits = run.edits()
    assert len(edits) >= 11  # one a minute would be 1; every 5 s from 5 s on, 12
    # it started a pass (1 s) before the first; the first report waits the 5 s base from there
    assert edits[0] == run.passes[0] + timedelta(seconds=4), "the first waits the base gap"
    assert all(timedelta(seconds=5) <= g <= timedelta(seconds=8) for g in gaps(edits[:-1]))
    assert edits[-1] == run.passes[-1], "the final state is edited in at once"


async def test_a_long_backfill_is_edited_less_and_less_often(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    run, _ = backfill(sessions, {"a": timedelta(hours=3)})
    await run.start({"a": []}, runs=400)  # its status changes at every pass
    await run.run(MIN)

    edits = run.edits()
    started = T0
    for before, after in itertools.pairwise(edits[:-1]):  # the final edit goes at once
        assert after - before >= report_gap(after - started, 5)
        # ... and not later than the first pass once it passed: the change is shown then
        assert after - before < report_gap(after - started, 5) + MIN
    assert len(edits) < 30  # every 5 s: 2160
    assert gaps(edits[:-1])[-1] >= timedelta(minutes=20)


async def test_thread_lines_are_gathered_into_few_replies_and_none_is_lost(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    # An hour-long root, then 8 short DAGs (4 at a time) and a report joining them: 20 lines
    # in about 10 minutes, when the report gap is 7.5 minutes.
    children = [f"c{i}" for i in range(8)]
    dags = {"root": [], **{c: ["root"] for c in children}, "report": children}
    durations = {"root": timedelta(hours=1), "report": MIN}
    durations |= {c: timedelta(minutes=1 + i % 3) for i, c in enumerate(children)}
    run, _ = backfill(sessions, durations)
    await run.start(dags)
    await run.run(MIN)

    replies = run.replies()
    text = "\n".join(r.text for r in replies)
    for dag in dags:
        assert text.count(f"`{dag}` started") == 1, dag
        assert text.count(f"`{dag}` succeeded in") == 1, dag
    # one for the root's start, then the 18 lines after the root in at most 3 replies (a
    # reply per pass that saw something would be 10)
    assert len(replies) <= 4
    last = replies[-1]
    assert "Backfill succeeded" in last.text
    assert last.at == run.passes[-1]
    # the last reply carries what was still gathered, then the summary
    assert last.text.index("`report` succeeded in") < last.text.index("Backfill succeeded")


async def test_gathered_lines_survive_a_restart(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    dags = {"a": [], "b": ["a"], "c": []}
    durations = {"a": timedelta(minutes=30), "b": timedelta(minutes=30), "c": timedelta(hours=1)}
    run, backend = backfill(sessions, durations)
    await run.start(dags)
    while not (await run.load()).pending_lines:
        await run.step(MIN)
    owed = list((await run.load()).pending_lines or [])

    # A new process: a new runner (same backend: the work goes on in Airflow meanwhile).
    settings = Execution(poll_interval_s=1, progress_update_s=5, max_parallel_steps=4)
    run.runner = make_runner(sessions, backend, settings, clock=run.clock)
    await run.run(MIN)

    text = "".join(r.text for r in run.replies())
    for line in owed:
        assert line in text
    for dag in dags:
        assert text.count(f"`{dag}` started") == 1, dag
        assert text.count(f"`{dag}` succeeded") == 1, dag
    assert (await run.load()).state == RequestState.SUCCEEDED


async def test_a_failure_is_reported_soon_but_not_more_than_once_per_base(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    # After an hour the gap is 7.5 min. a fails, b 10 s later, c 2 min later; a's downstream
    # is skipped; the base (progress_update_s) is a minute.
    durations = {
        "long": timedelta(hours=1, minutes=10),
        "a": timedelta(hours=1),
        "b": timedelta(hours=1, seconds=10),
        "c": timedelta(hours=1, minutes=2),
        "after_a": timedelta(minutes=5),
    }
    run, backend = backfill(sessions, durations, base_s=60, fail={"a", "b", "c"})
    await run.start({"long": [], "a": [], "b": [], "c": [], "after_a": ["a"]}, runs=200)
    while run.clock.now < T0 + timedelta(minutes=55):
        await run.step(MIN)
    await run.run(timedelta(seconds=10))

    def reply_telling(text: str) -> Sent:
        return next(r for r in run.replies() if text in r.text)

    soon = timedelta(seconds=60 + 10)  # the base, and the pass that sees it
    for dag in ("a", "b", "c"):
        told = reply_telling(f"`{dag}` failed")
        assert told.at - backend.ends_at(dag) <= soon, dag
        assert "2 of 200 runs failed" in told.text
    assert "Skipped `after_a`" in reply_telling("`a` failed").text
    assert reply_telling("`c` failed") is not reply_telling("`a` failed")
    # ... but never two replies within the base, however many DAGs fail
    assert all(g >= timedelta(seconds=60) for g in gaps([r.at for r in run.replies()][:-1]))
    request = await run.load()
    assert request.state == RequestState.FAILED
    assert "Backfill failed" in run.replies()[-1].text
