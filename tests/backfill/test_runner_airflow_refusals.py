"""The step runner on the Airflow backend against the Airflow stand-in, when Airflow refuses or is
unavailable: refusals that will not pass (wrong password, a user without permissions, an unknown
DAG) fail the step at once with Airflow's reason and without logging in again and again; what
may pass (503, 429, the server down) is retried with growing pauses, and fails the step when
the retries run out."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.backfill.rules.states import RequestState
from bot.backfill.run.submit_retry import SubmitRetry
from standins.airflow.server import FOOD_DELIVERY_DAGS, AirflowStandin, running_airflow_standin
from tests.support.airflow_runner import (
    CHILD,
    FAST,
    ROOT,
    Clock,
    approved,
    backend,
    load,
    passes,
    runner,
    sessions,
)

__all__ = ["sessions"]  # the fixture, shared with the other runner-on-Airflow tests


def logins(server: AirflowStandin) -> int:
    """Login attempts the stand-in saw: token requests (Airflow 3) or requests refused 401."""
    if server.api == 3:
        return sum(1 for _, path, _ in server.state.requests if path == "/auth/token")
    return sum(1 for _, _, status in server.state.requests if status == 401)


@pytest.mark.parametrize("api", [3, 2])
async def test_a_wrong_password_fails_the_step_after_one_login(
    sessions: async_sessionmaker[AsyncSession], api: int
) -> None:
    async with running_airflow_standin(api=api, dags=FOOD_DELIVERY_DAGS) as server:
        airflow = backend(server, password="not-the-password")
        run = runner(sessions, airflow)
        request_id = await approved(sessions, run)
        await passes(run, request_id, 10)
        await airflow.close()

        request = await load(sessions, request_id)
        assert request.state == RequestState.FAILED
        assert {s.dag_id: s.state for s in request.steps} == {ROOT: "failed", CHILD: "skipped"}
        message = request.steps[0].message or ""
        assert "AIRFLOW_PASSWORD" in message
        if api == 3:
            assert f"refused the login of '{server.username}'" in message
            assert "Invalid credentials" in message
        else:
            assert "Unauthorized" in message or "401" in message
        assert logins(server) <= 3  # it was 1 per pass (every few seconds, forever) before
        assert not server.state.backfills
        assert not server.state.runs_of(ROOT)


async def test_logins_stay_bounded_across_steps_and_backfills(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    async with running_airflow_standin(dags=FOOD_DELIVERY_DAGS) as server:
        airflow = backend(server, password="not-the-password")
        run = runner(sessions, airflow)
        requests = [await approved(sessions, run) for _ in range(4)]
        for request_id in requests:
            await passes(run, request_id, 3)
        await airflow.close()
        for request_id in requests:
            assert (await load(sessions, request_id)).state == RequestState.FAILED
        assert logins(server) == 1  # refused credentials are not offered again for a while


@pytest.mark.parametrize("api", [3, 2])
async def test_a_user_without_permissions_fails_the_step_with_the_reason(
    sessions: async_sessionmaker[AsyncSession], api: int
) -> None:
    async with running_airflow_standin(api=api, dags=FOOD_DELIVERY_DAGS) as server:
        server.state.forbid()
        airflow = backend(server)
        run = runner(sessions, airflow)
        request_id = await approved(sessions, run)
        await passes(run, request_id, 10)
        await airflow.close()

        request = await load(sessions, request_id)
        assert {s.dag_id: s.state for s in request.steps} == {ROOT: "failed", CHILD: "skipped"}
        message = request.steps[0].message or ""
        assert "Forbidden" in message
        assert "permissions" in message
        assert logins(server) <= 3  # the first token, and one fresh one that was refused too
        assert sum(1 for _, _, status in server.state.requests if status == 403) <= 2


@pytest.mark.parametrize("api", [3, 2])
async def test_an_unknown_dag_fails_the_step_with_the_reason(
    sessions: async_sessionmaker[AsyncSession], api: int
) -> None:
    async with running_airflow_standin(api=api, dags=FOOD_DELIVERY_DAGS) as server:
        airflow = backend(server)
        run = runner(sessions, airflow)
        request_id = await approved(sessions, run, root="example.not_in_airflow")
        await passes(run, request_id, 10)
        await airflow.close()

        request = await load(sessions, request_id)
        assert request.state == RequestState.FAILED
        [step] = [s for s in request.steps if s.dag_id == "example.not_in_airflow"]
        assert step.state == "failed"
        assert step.message == "example.not_in_airflow does not exist in Airflow"
        asked = [r for r in server.state.requests if "example.not_in_airflow" in r[1]]
        assert [status for _, _, status in asked] == [404]  # asked once, never again


@pytest.mark.parametrize("api", [3, 2])
async def test_a_503_for_a_while_is_retried_and_the_backfill_succeeds(
    sessions: async_sessionmaker[AsyncSession], api: int
) -> None:
    async with running_airflow_standin(api=api, dags=FOOD_DELIVERY_DAGS, run_seconds=0.01) as (
        server
    ):
        # Two submissions fail (each asks three times: the client's own retries), then it is up.
        server.state.outage(503, times=2 * FAST.attempts)
        clock = Clock()
        airflow = backend(server)
        run = runner(sessions, airflow, retry=SubmitRetry(attempts=4, backoff_s=10), clock=clock)
        request_id = await approved(sessions, run)

        await run.advance(request_id)
        step = (await load(sessions, request_id)).steps[0]
        assert step.message is not None
        assert step.message.startswith("will retry (1 of 4 attempts failed): ")
        assert "503" in step.message
        first_retry = datetime.fromisoformat(step.executor_state["retry_at"])
        assert timedelta(seconds=5) <= first_retry - clock.now <= timedelta(seconds=10)

        seen = len(server.state.requests)
        clock.advance(4)
        await run.advance(request_id)  # too early: nothing is sent
        assert len(server.state.requests) == seen

        clock.now = first_retry
        await run.advance(request_id)
        step = (await load(sessions, request_id)).steps[0]
        assert step.message is not None
        assert step.message.startswith("will retry (2 of 4 attempts failed): ")
        second_retry = datetime.fromisoformat(step.executor_state["retry_at"])
        assert timedelta(seconds=10) <= second_retry - clock.now <= timedelta(seconds=20)

        for _ in range(200):
            clock.advance(60)
            await run.advance(request_id)
            request = await load(sessions, request_id)
            if request.finished_at is not None:
                break
            await _pause()
        await airflow.close()

        assert request.state == RequestState.SUCCEEDED, [s.message for s in request.steps]
        assert all(s.message is None or "retry" not in s.message for s in request.steps)
        assert "submit_failures" not in (request.steps[0].executor_state or {})


@pytest.mark.parametrize(("api", "status"), [(3, 503), (2, 503), (3, 429)])
async def test_an_outage_that_lasts_fails_the_step_when_the_retries_run_out(
    sessions: async_sessionmaker[AsyncSession], api: int, status: int
) -> None:
    async with running_airflow_standin(api=api, dags=FOOD_DELIVERY_DAGS) as server:
        clock = Clock()
        airflow = backend(server)
        run = runner(sessions, airflow, retry=SubmitRetry(attempts=3, backoff_s=10), clock=clock)
        request_id = await approved(sessions, run)
        server.state.outage(status)  # every call, from now on

        await passes(run, request_id, 10, clock)
        await airflow.close()

        request = await load(sessions, request_id)
        assert request.state == RequestState.FAILED
        assert {s.dag_id: s.state for s in request.steps} == {ROOT: "failed", CHILD: "skipped"}
        message = request.steps[0].message or ""
        assert message.startswith("gave up after 3 attempts over 20 min: ")
        assert str(status) in message
        # three submissions, each asking at most FAST.attempts times (429 is not re-sent at once)
        assert len(server.state.requests) <= 3 * FAST.attempts


async def test_the_retries_give_up_at_the_deadline_too(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    async with running_airflow_standin(dags=FOOD_DELIVERY_DAGS) as server:
        server.state.outage(502)
        clock = Clock()
        airflow = backend(server)
        retry = SubmitRetry(attempts=100, backoff_s=60, give_up_after_s=600)
        run = runner(sessions, airflow, retry=retry, clock=clock)
        request_id = await approved(sessions, run)
        await run.advance(request_id)
        clock.advance(599)
        await run.advance(request_id)
        assert (await load(sessions, request_id)).steps[0].state == "submitted"
        clock.advance(1)
        await run.advance(request_id)
        await airflow.close()
        step = (await load(sessions, request_id)).steps[0]
        assert step.state == "failed"
        assert (step.message or "").startswith("gave up after 3 attempts over 10 min: ")
        assert "502" in (step.message or "")


async def test_a_password_refused_while_following_the_runs_fails_the_step(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    async with running_airflow_standin(dags=FOOD_DELIVERY_DAGS, run_seconds=30) as server:
        airflow = backend(server)
        run = runner(sessions, airflow)
        request_id = await approved(sessions, run)
        await run.advance(request_id)
        assert server.state.backfills
        server.state.forbid()  # e.g. the bot's user lost its role while the runs go on
        await passes(run, request_id, 5)
        await airflow.close()

        step = (await load(sessions, request_id)).steps[0]
        assert step.state == "failed"
        assert "Forbidden" in (step.message or "")
        assert "cannot follow the runs any more" in (step.message or "")
        assert logins(server) <= 3


def test_submit_retry_pauses_grow_and_are_capped() -> None:
    retry = SubmitRetry(backoff_s=2, max_backoff_s=30)
    for failures, ceiling in [(1, 2), (2, 4), (3, 8), (4, 16), (5, 30), (40, 30)]:
        for _ in range(20):
            pause = retry.delay(failures, poll_interval_s=5).total_seconds()
            assert ceiling / 2 <= pause <= ceiling
    default = SubmitRetry()
    assert default.delay(1, poll_interval_s=5).total_seconds() <= 5  # the poll interval
    with pytest.raises(ValueError, match="invalid SubmitRetry"):
        SubmitRetry(attempts=0)


async def _pause() -> None:
    import asyncio

    await asyncio.sleep(0.02)
