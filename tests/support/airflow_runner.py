"""Helpers for tests of the step runner on the Airflow backend against the Airflow stand-in: a
request approved straight into the store, a runner over it, and readers of the outcome."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from itertools import pairwise

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.backfill.run.airflow import AirflowBackend
from bot.backfill.run.runner import Runner
from bot.backfill.run.submit_retry import SubmitRetry
from bot.backfill.store import repository
from bot.backfill.store.models import BackfillRequest
from bot.clients.airflow import RetryPolicy
from bot.config import AirflowExecution, Execution
from bot.core.db import make_engine, session_factory, upgrade
from bot.core.tables import utcnow
from standins.airflow.server import AirflowStandin
from tests.support.factories import runner as make_runner

ROOT, CHILD = "example.etl_orders", "example.etl_customers"  # both daily in the stand-in
DAY = {"start": "2021-06-04T00:00:00Z", "end": "2021-06-05T00:00:00Z"}
FAST = RetryPolicy(attempts=3, backoff_s=0.001, max_backoff_s=0.005)
Interval = dict[str, str]


def days(first: int, count: int) -> list[Interval]:
    """`count` daily intervals of June 2021 from the `first`th."""
    starts = [datetime(2021, 6, first, tzinfo=UTC) + timedelta(days=n) for n in range(count + 1)]
    text = [s.isoformat().replace("+00:00", "Z") for s in starts]
    return [{"start": a, "end": b} for a, b in pairwise(text)]


def plan(
    root: str = ROOT, intervals: Sequence[Interval] = (DAY,), *, child: bool = True
) -> dict[str, object]:
    """A plan of `root` over `intervals`, and `CHILD` downstream over the same ones."""

    def step(dag_id: str, upstream: list[str]) -> dict[str, object]:
        return {"dag_id": dag_id, "namespace": "food_delivery", "intervals": list(intervals),
                "upstream": upstream}  # fmt: skip

    steps = [step(root, []), *([step(CHILD, [root])] if child else [])]
    return {
        "dag_id": root,
        "namespace": "food_delivery",
        "start": intervals[0]["start"],
        "end": intervals[-1]["end"],
        "steps": steps,
    }


class Clock:
    def __init__(self) -> None:
        self.now = utcnow()

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
async def sessions(database_url: str) -> AsyncIterator[async_sessionmaker[AsyncSession]]:
    upgrade(database_url)
    engine = make_engine(database_url)
    yield session_factory(engine)
    await engine.dispose()


def backend(
    server: AirflowStandin,
    password: str | None = None,
    settings: AirflowExecution | None = None,
) -> AirflowBackend:
    chosen = server.password if password is None else password
    airflow = settings or Execution().airflow
    return AirflowBackend(server.url, server.username, chosen, airflow, retry=FAST)


@asynccontextmanager
async def opened(airflow: AirflowBackend) -> AsyncIterator[AirflowBackend]:
    """`airflow`, closed on the way out (its client's HTTP session with it)."""
    try:
        yield airflow
    finally:
        await airflow.close()


def runner(
    sessions: async_sessionmaker[AsyncSession],
    airflow: AirflowBackend,
    *,
    retry: SubmitRetry | None = None,
    clock: Callable[[], datetime] = utcnow,
) -> Runner:
    return make_runner(
        sessions, airflow, Execution(poll_interval_s=0.01), submit_retry=retry, clock=clock
    )


async def approved(
    sessions: async_sessionmaker[AsyncSession],
    run: Runner,
    root: str = ROOT,
    planned: dict[str, object] | None = None,
) -> str:
    async with sessions.begin() as session:
        request = await repository.create_request(
            session, plan=planned or plan(root), requester="U1", channel="C1"
        )
        await repository.transition_request(
            session, request.id, expected={"previewed"}, to="approved", actor="U2"
        )
        await run.start(session, await repository.get_request(session, request.id))
        return request.id


async def load(sessions: async_sessionmaker[AsyncSession], request_id: str) -> BackfillRequest:
    async with sessions() as session:
        return await repository.get_request(session, request_id)


async def passes(run: Runner, request_id: str, count: int, clock: Clock | None = None) -> None:
    for _ in range(count):
        if clock is not None:
            clock.advance(600)
        await run.advance(request_id)
