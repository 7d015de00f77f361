"""The step runner against a scripted backend, on SQLite and PostgreSQL: the recovery paths that
a real Airflow or Spark makes hard to provoke on cue (a run lost in a restart, a rejection while
polling, a busy DAG, a cancel of work that never started)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.backfill.rules.progress import Counts
from bot.backfill.rules.states import RequestState
from bot.backfill.run.backends import Busy, Progress, StepRejected, StepWork
from bot.backfill.run.runner import Runner
from bot.backfill.store import repository
from bot.backfill.store.models import BackfillRequest
from bot.config import Execution
from bot.core.db import make_engine, session_factory, upgrade
from bot.core.tables import utcnow
from tests.support.factories import runner as make_runner
from tests.support.scripted import DONE, RUNNING, Scripted

DAY = {"start": "2021-06-04T00:00:00Z", "end": "2021-06-05T00:00:00Z"}
PLAN = {
    "dag_id": "a",
    "namespace": "ns",
    "start": DAY["start"],
    "end": DAY["end"],
    "steps": [
        {"dag_id": "a", "namespace": "ns", "intervals": [DAY], "upstream": []},
        {"dag_id": "b", "namespace": "ns", "intervals": [DAY], "upstream": ["a"]},
    ],
}


@pytest.fixture
async def sessions(database_url: str) -> AsyncIterator[async_sessionmaker[AsyncSession]]:
    upgrade(database_url)
    engine = make_engine(database_url)
    yield session_factory(engine)
    await engine.dispose()


async def running_request(sessions: async_sessionmaker[AsyncSession], runner: Runner) -> str:
    async with sessions.begin() as session:
        request = await repository.create_request(session, plan=PLAN, requester="U1", channel="C1")
        await repository.transition_request(
            session, request.id, expected={"previewed"}, to="approved", actor="U2"
        )
        await runner.start(session, await repository.get_request(session, request.id))
        return request.id


async def load(sessions: async_sessionmaker[AsyncSession], request_id: str) -> BackfillRequest:
    async with sessions() as session:
        return await repository.get_request(session, request_id)


def states(request: BackfillRequest) -> dict[str, str]:
    return {s.dag_id: s.state for s in request.steps}


def fast() -> Execution:
    return Execution(poll_interval_s=0.01, conflict_retry_s=0.01)


async def test_steps_run_in_order_and_the_request_succeeds(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    backend = Scripted(polls={"a": [RUNNING, DONE]})
    runner = make_runner(sessions, backend, fast())
    request_id = await running_request(sessions, runner)
    await runner.advance(request_id)
    assert backend.submitted == ["a"]  # b waits for a
    await runner.advance(request_id)
    assert states(await load(sessions, request_id))["a"] == "running"
    for _ in range(3):
        await runner.advance(request_id)
    request = await load(sessions, request_id)
    assert backend.submitted == ["a", "b"]
    assert request.state == RequestState.SUCCEEDED
    assert request.finished_at is not None


async def test_a_run_lost_in_a_restart_is_submitted_again_by_the_next_process(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    first = Scripted(polls={"a": [RUNNING]})
    runner = make_runner(sessions, first, fast())
    request_id = await running_request(sessions, runner)
    await runner.advance(request_id)
    await runner.advance(request_id)
    assert states(await load(sessions, request_id))["a"] == "running"

    # a new process: its backend no longer has the run (local Spark died with the old one)
    second = Scripted(polls={"a": [Progress(Counts(queued=1), lost=True), DONE]})
    restarted = make_runner(sessions, second, fast())
    for _ in range(4):
        await restarted.advance(request_id)
    assert second.submitted == ["a", "b"]
    assert (await load(sessions, request_id)).state == RequestState.SUCCEEDED


async def test_a_lost_run_of_a_cancelled_request_ends_it(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    backend = Scripted(polls={"a": [RUNNING]})
    runner = make_runner(sessions, backend, fast())
    request_id = await running_request(sessions, runner)
    await runner.advance(request_id)
    async with sessions.begin() as session:
        await repository.transition_request(
            session, request_id, expected={"running"}, to="cancelled", actor="U2"
        )
    backend.polls["a"] = [Progress(Counts(queued=1), lost=True)]
    await runner.advance(request_id)
    request = await load(sessions, request_id)
    assert states(request) == {"a": "cancelled", "b": "skipped"}
    assert request.finished_at is not None
    assert backend.cancelled == ["a"]


async def test_a_rejection_while_polling_fails_the_step_and_skips_downstream(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    backend = Scripted()
    runner = make_runner(sessions, backend, fast())
    request_id = await running_request(sessions, runner)
    await runner.advance(request_id)

    async def paused(work: StepWork) -> Progress:
        raise StepRejected("a is paused in Airflow")

    backend.poll = paused  # type: ignore[method-assign]
    await runner.advance(request_id)
    request = await load(sessions, request_id)
    assert states(request) == {"a": "failed", "b": "skipped"}
    assert request.state == RequestState.FAILED
    assert request.steps[0].message == "a is paused in Airflow"


async def test_a_busy_dag_is_retried_and_a_rejected_submit_fails(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    backend = Scripted(submit_errors={"a": [Busy("backfill 7 of a is running")]})
    now = [utcnow()]
    runner = make_runner(sessions, backend, Execution(conflict_retry_s=30), clock=lambda: now[0])
    request_id = await running_request(sessions, runner)
    await runner.advance(request_id)
    step = (await load(sessions, request_id)).steps[0]
    assert step.state == "submitted"
    assert step.message == "backfill 7 of a is running"
    await runner.advance(request_id)
    assert backend.submitted == []  # not before conflict_retry_s
    now[0] += timedelta(seconds=31)
    await runner.advance(request_id)
    assert backend.submitted == ["a"]

    other = Scripted(submit_errors={"a": [StepRejected("no DAG a in Airflow")]})
    runner = make_runner(sessions, other, fast())
    rejected = await running_request(sessions, runner)
    await runner.advance(rejected)
    assert states(await load(sessions, rejected)) == {"a": "failed", "b": "skipped"}


async def test_cancelling_before_the_hand_off_ends_the_request_at_once(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    runner = make_runner(sessions, Scripted(), fast())
    async with sessions.begin() as session:
        request = await repository.create_request(session, plan=PLAN, requester="U1", channel="C1")
        await repository.transition_request(
            session, request.id, expected={"previewed"}, to="approved", actor="U2"
        )
    async with sessions.begin() as session:
        cancelled = await repository.transition_request(
            session, request.id, expected={"approved"}, to="cancelled", actor="U1"
        )
        await runner.cancel(session, cancelled)
    request = await load(sessions, request.id)
    assert states(request) == {"a": "skipped", "b": "skipped"}
    assert request.finished_at is not None
    assert request.finished_at - utcnow() < timedelta(seconds=5)
