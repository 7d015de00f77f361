"""Pause, resume, `--stop-on-failure`, `--at` and off-peak windows in the step runner, against a
scripted backend and a driven clock (no wall-clock waits), on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.backfill.rules.options import RunOptions
from bot.backfill.rules.progress import Counts
from bot.backfill.rules.states import RequestState
from bot.backfill.run.backends import Progress
from bot.backfill.run.runner import Runner
from bot.backfill.store import control, execution, repository
from bot.backfill.store.models import BackfillRequest
from bot.config import Execution
from bot.core.audit import list_audit
from bot.core.db import make_engine, session_factory, upgrade
from bot.core.windows import Window, parse_clock, parse_days
from bot.lineage.rules.planner import interval_from_json
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
# A Friday evening in Berlin (UTC+2 in June).
FRIDAY_1900_UTC = datetime(2021, 6, 4, 19, 0, tzinfo=UTC)
NIGHTS = Window(parse_days("mon-fri"), parse_clock("20:00"), parse_clock("06:00"), "Europe/Berlin")


ONE_FAILED = Progress(Counts(running=1, failed=1))


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
async def sessions(database_url: str) -> AsyncIterator[async_sessionmaker[AsyncSession]]:
    upgrade(database_url)
    engine = make_engine(database_url)
    yield session_factory(engine)
    await engine.dispose()


async def approved(
    sessions: async_sessionmaker[AsyncSession],
    runner: Runner,
    *,
    options: dict[str, Any] | None = None,
    start_at: datetime | None = None,
) -> str:
    async with sessions.begin() as session:
        request = await repository.create_request(
            session, plan=PLAN, requester="U1", channel="C1", options=options, start_at=start_at
        )
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


async def pause(sessions: async_sessionmaker[AsyncSession], request_id: str, user: str) -> bool:
    async with sessions.begin() as session:
        return await control.pause(session, request_id, by=user, reason="", at=datetime.now(UTC))


async def resume(sessions: async_sessionmaker[AsyncSession], request_id: str, user: str) -> bool:
    async with sessions.begin() as session:
        return await control.resume(session, request_id, by=user)


async def test_a_paused_backfill_starts_nothing_new_and_resume_runs_it_to_the_end(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    backend = Scripted(polls={"a": [RUNNING]})
    runner = make_runner(sessions, backend, fast())
    request_id = await approved(sessions, runner)
    await runner.advance(request_id)
    assert backend.submitted == ["a"]

    assert await pause(sessions, request_id, "U3")
    assert not await pause(sessions, request_id, "U3")  # once
    backend.polls["a"] = [DONE]
    for _ in range(3):
        await runner.advance(request_id)
    request = await load(sessions, request_id)
    # What ran finished; b, which waited for it, did not start.
    assert states(request) == {"a": "succeeded", "b": "pending"}
    assert request.state == RequestState.PAUSED
    assert (request.paused_by, backend.submitted) == ("U3", ["a"])
    assert backend.pauses == [("a", True)]  # the backend was told to hold a's work

    assert await resume(sessions, request_id, "U4")
    for _ in range(3):
        await runner.advance(request_id)
    request = await load(sessions, request_id)
    assert request.state == RequestState.SUCCEEDED
    assert backend.submitted == ["a", "b"]
    assert request.paused_by is None

    async with sessions() as session:
        actions = [(r.action, r.actor) for r in await list_audit(session, request_id=request_id)]
    assert ("request.paused", "U3") in actions
    assert ("request.running", "U4") in actions


async def test_a_request_that_pauses_with_nothing_left_to_start_still_ends(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    backend = Scripted(polls={"a": [RUNNING], "b": [RUNNING]})
    runner = make_runner(sessions, backend, fast())
    request_id = await approved(sessions, runner)
    for _ in range(3):
        await runner.advance(request_id)
    backend.polls["a"] = [DONE]
    await runner.advance(request_id)
    await runner.advance(request_id)
    assert backend.submitted == ["a", "b"]
    assert await pause(sessions, request_id, "U3")
    backend.polls["b"] = [DONE]
    await runner.advance(request_id)
    # Its last step finished while paused: it succeeded, paused or not.
    assert (await load(sessions, request_id)).state == RequestState.SUCCEEDED


async def test_stop_on_failure_pauses_at_the_first_failed_run_and_not_again_for_it(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    backend = Scripted(polls={"a": [RUNNING]})
    runner = make_runner(sessions, backend, fast())
    options = RunOptions(rerun="all", stop_on_failure=True).to_json()
    request_id = await approved(sessions, runner, options=options)
    await runner.advance(request_id)
    backend.polls["a"] = [ONE_FAILED]
    await runner.advance(request_id)
    request = await load(sessions, request_id)
    assert request.state == RequestState.PAUSED
    assert (request.paused_by, request.failures_seen) == ("failure", 1)
    assert request.pause_reason == "stopped at a failed run of a"
    assert "Paused at a failed run" in "".join(request.pending_lines or [])

    # Resumed: the same failed run does not pause it again; the step ends failed, b is skipped.
    assert await resume(sessions, request_id, "U3")
    await runner.advance(request_id)
    assert (await load(sessions, request_id)).state == RequestState.RUNNING
    backend.polls["a"] = [Progress(Counts(succeeded=2, failed=1), done=True, ok=False)]
    await runner.advance(request_id)
    request = await load(sessions, request_id)
    assert states(request) == {"a": "failed", "b": "skipped"}
    assert request.state == RequestState.FAILED


async def test_without_stop_on_failure_a_failed_run_does_not_pause(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    backend = Scripted(polls={"a": [RUNNING]})
    runner = make_runner(sessions, backend, fast())
    request_id = await approved(sessions, runner)
    await runner.advance(request_id)
    backend.polls["a"] = [ONE_FAILED]
    await runner.advance(request_id)
    assert (await load(sessions, request_id)).state == RequestState.RUNNING


async def test_a_backfill_scheduled_for_later_starts_at_its_time_not_before(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    clock = Clock(datetime(2021, 6, 7, 12, 0, tzinfo=UTC))
    backend = Scripted()
    runner = make_runner(sessions, backend, fast(), clock=clock)
    start_at = datetime(2021, 6, 7, 20, 0, tzinfo=UTC)
    request_id = await approved(sessions, runner, start_at=start_at)
    request = await load(sessions, request_id)
    assert (request.state, request.resume_at, request.started_at) == ("scheduled", start_at, None)

    clock.now = start_at - timedelta(seconds=1)
    await runner.tick()
    assert (await load(sessions, request_id)).state == RequestState.SCHEDULED
    assert backend.submitted == []

    clock.now = start_at
    for _ in range(4):
        await runner.tick()
    request = await load(sessions, request_id)
    assert request.state == RequestState.SUCCEEDED
    assert backend.submitted == ["a", "b"]
    assert request.started_at == start_at


async def test_a_window_holds_the_start_pauses_at_closing_and_resumes_at_opening(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    clock = Clock(FRIDAY_1900_UTC)  # 21:00 in Berlin: the window is open
    backend = Scripted(polls={"a": [RUNNING]})
    runner = make_runner(sessions, backend, fast(), clock=clock)
    options = {**RunOptions(rerun="all").to_json(), "window": NIGHTS.to_json()}
    request_id = await approved(sessions, runner, options=options)
    await runner.tick()
    assert backend.submitted == ["a"]

    # Saturday 06:00 Berlin (04:00 UTC): the window closes; a finishes, b waits.
    clock.now = datetime(2021, 6, 5, 4, 0, tzinfo=UTC)
    backend.polls["a"] = [DONE]
    await runner.tick()
    request = await load(sessions, request_id)
    assert request.state == RequestState.PAUSED
    assert request.paused_by == "window"
    # No window on the weekend: it opens Monday 20:00 Berlin, 18:00 UTC.
    monday = datetime(2021, 6, 7, 18, 0, tzinfo=UTC)
    assert request.resume_at == monday
    await runner.tick()
    assert states(await load(sessions, request_id)) == {"a": "succeeded", "b": "pending"}

    clock.now = monday - timedelta(minutes=1)
    await runner.tick()
    assert (await load(sessions, request_id)).state == RequestState.PAUSED
    clock.now = monday
    for _ in range(4):
        await runner.tick()
    request = await load(sessions, request_id)
    assert request.state == RequestState.SUCCEEDED
    assert backend.submitted == ["a", "b"]
    async with sessions() as session:
        actions = [(r.action, r.actor) for r in await list_audit(session, request_id=request_id)]
    assert ("request.paused", "window") in actions
    assert ("request.running", "window") in actions


async def test_approved_outside_its_window_it_waits_for_the_opening(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    clock = Clock(datetime(2021, 6, 5, 10, 0, tzinfo=UTC))  # a Saturday
    backend = Scripted()
    runner = make_runner(sessions, backend, fast(), clock=clock)
    options = {**RunOptions(rerun="all").to_json(), "window": NIGHTS.to_json()}
    request_id = await approved(sessions, runner, options=options)
    request = await load(sessions, request_id)
    assert request.state == RequestState.SCHEDULED
    assert request.resume_at == datetime(2021, 6, 7, 18, 0, tzinfo=UTC)
    await runner.tick()
    assert backend.submitted == []


async def test_a_window_crossing_a_daylight_saving_change_opens_at_local_time(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    # Saturday 30 October 2021, Berlin is UTC+2; the next opening, Monday 1 November 20:00, is
    # after the change back to UTC+1: 19:00 UTC.
    clock = Clock(datetime(2021, 10, 30, 12, 0, tzinfo=UTC))
    runner = make_runner(sessions, Scripted(), fast(), clock=clock)
    options = {**RunOptions(rerun="all").to_json(), "window": NIGHTS.to_json()}
    request_id = await approved(sessions, runner, options=options)
    assert (await load(sessions, request_id)).resume_at == datetime(2021, 11, 1, 19, 0, tzinfo=UTC)


async def test_the_backend_sees_the_requests_options(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    backend = Scripted()
    runner = make_runner(sessions, backend, fast())
    chosen = RunOptions(rerun="failed", backwards=True, conf={"k": 1}, max_active=2)
    request_id = await approved(sessions, runner, options=chosen.to_json())
    await runner.advance(request_id)
    assert backend.works[0].options == chosen
    assert not backend.works[0].pausing


async def test_a_paused_backfill_stays_paused_across_a_restart_and_holds_its_intervals(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    backend = Scripted(polls={"a": [RUNNING]})
    runner = make_runner(sessions, backend, fast())
    request_id = await approved(sessions, runner)
    await runner.advance(request_id)
    assert await pause(sessions, request_id, "U3")

    # Another bot process (a restart): it follows the paused request and starts nothing new.
    restarted_backend = Scripted(polls={"a": [DONE]})
    restarted = make_runner(sessions, restarted_backend, fast())
    for _ in range(3):
        await restarted.tick()
    request = await load(sessions, request_id)
    assert (request.state, states(request)) == ("paused", {"a": "succeeded", "b": "pending"})
    assert restarted_backend.submitted == []
    # Paused, it still holds its DAG intervals: an overlapping backfill must wait.
    async with sessions() as session:
        found = await execution.overlapping(session, [("ns", "b", [interval_from_json(DAY)])])
    assert [o.request_id for o in found] == [request_id]

    assert await resume(sessions, request_id, "U3")
    for _ in range(3):
        await restarted.tick()
    assert (await load(sessions, request_id)).state == RequestState.SUCCEEDED
    assert restarted_backend.submitted == ["b"]
