"""A DAG is told as started in the backfill's thread only once its backend accepted the
backfill: not when the bot decided to submit it. Airflow answering 503 until the retries run
out must leave no "started" line behind; a submission that succeeds after a few refusals is told
once."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.backfill.rules.states import RequestState
from bot.backfill.run.runner import Runner
from bot.backfill.run.submit_retry import SubmitRetry
from bot.slack.store.models import OutboxMessage, OutboxRole
from standins.airflow.server import FOOD_DELIVERY_DAGS, running_airflow_standin
from tests.support.airflow_runner import FAST, ROOT, Clock, approved, backend, load, runner

from .test_runner_airflow_refusals import sessions

__all__ = ["sessions"]


async def thread_lines(sessions: async_sessionmaker[AsyncSession], request_id: str) -> str:
    """Every reply owed in the backfill's thread, as one text (its blocks: `text` repeats
    the first line as the notification's fallback)."""
    async with sessions() as session:
        payloads = await session.scalars(
            select(OutboxMessage.payload).where(
                OutboxMessage.request_id == request_id, OutboxMessage.role == OutboxRole.THREAD
            )
        )
        return "\n".join(json.dumps(p["blocks"]) for p in payloads)


async def run_until_done(
    run: Runner, request_id: str, clock: Clock, sessions: async_sessionmaker[AsyncSession]
) -> None:
    for _ in range(60):
        clock.advance(600)
        await run.advance(request_id)
        if (await load(sessions, request_id)).finished_at is not None:
            return


@pytest.mark.parametrize("api", [3, 2])
async def test_a_dag_airflow_never_took_is_never_told_as_started(
    sessions: async_sessionmaker[AsyncSession], api: int
) -> None:
    async with running_airflow_standin(api=api, dags=FOOD_DELIVERY_DAGS) as server:
        clock = Clock()
        airflow = backend(server)
        run = runner(sessions, airflow, retry=SubmitRetry(attempts=2, backoff_s=10), clock=clock)
        request_id = await approved(sessions, run)
        server.state.outage(503)  # every call, from now on
        await run_until_done(run, request_id, clock, sessions)
        await airflow.close()
    assert (await load(sessions, request_id)).state == RequestState.FAILED
    said = await thread_lines(sessions, request_id)
    assert ROOT in said  # its failure is told
    assert "started" not in said


@pytest.mark.parametrize("api", [3, 2])
async def test_a_dag_airflow_took_after_refusals_is_told_as_started_once(
    sessions: async_sessionmaker[AsyncSession], api: int
) -> None:
    async with running_airflow_standin(api=api, dags=FOOD_DELIVERY_DAGS, run_seconds=0.01) as (
        server
    ):
        server.state.outage(503, times=FAST.attempts)  # the first submission fails
        clock = Clock()
        airflow = backend(server)
        run = runner(sessions, airflow, retry=SubmitRetry(attempts=4, backoff_s=10), clock=clock)
        request_id = await approved(sessions, run)
        await run.advance(request_id)
        assert "started" not in await thread_lines(sessions, request_id)
        await run_until_done(run, request_id, clock, sessions)
        await airflow.close()
    assert (await load(sessions, request_id)).state == RequestState.SUCCEEDED
    said = await thread_lines(sessions, request_id)
    assert said.count(f"{ROOT}` started") == 1, said
