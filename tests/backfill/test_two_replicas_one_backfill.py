"""Two bot processes on one database follow the same running backfill (replicas behind a load
balancer): both ask Airflow and both record what they saw, and a replica whose observation went
stale while the other recorded it must step aside, not fail its pass. Each DAG is submitted
once and told as finished once."""

from __future__ import annotations

import asyncio
import json

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.backfill.rules.states import RequestState
from bot.backfill.run.airflow import AirflowBackend
from bot.backfill.run.backends import Progress, StepWork
from bot.slack.store.models import OutboxMessage, OutboxRole
from standins.airflow.server import FOOD_DELIVERY_DAGS, running_airflow_standin
from tests.support.airflow_runner import CHILD, ROOT, approved, backend, load, runner

from .test_runner_airflow_refusals import sessions

__all__ = ["sessions"]


class Lockstep(AirflowBackend):
    """The real Airflow backend, whose polls return only once the other replica has polled
    too; one of them then waits until the other has recorded what both saw."""

    def __init__(self, base: AirflowBackend, barrier: asyncio.Barrier) -> None:
        self.__dict__.update(base.__dict__)
        self.barrier = barrier

    async def poll(self, work: StepWork) -> Progress:
        seen = await super().poll(work)
        try:
            arrived = await asyncio.wait_for(self.barrier.wait(), 1.0)
        except TimeoutError:  # the other replica had nothing to ask this pass
            await self.barrier.reset()
            return seen
        if arrived == 0:
            await asyncio.sleep(0.3)  # the other records first
        return seen


async def test_two_replicas_advance_one_backfill_without_tripping_on_each_other(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    async with running_airflow_standin(api=3, dags=FOOD_DELIVERY_DAGS, run_seconds=0.05) as (
        server
    ):
        barrier = asyncio.Barrier(2)
        first, second = Lockstep(backend(server), barrier), Lockstep(backend(server), barrier)
        one, two = runner(sessions, first), runner(sessions, second)
        request_id = await approved(sessions, one)
        for _ in range(200):
            # Both ask Airflow before either records: the second records a stale view.
            await asyncio.gather(one.advance(request_id), two.advance(request_id))
            if (await load(sessions, request_id)).finished_at is not None:
                break
            await asyncio.sleep(0.02)
        await first.close()
        await second.close()
        backfills = [
            p for m, p, _ in server.state.requests if m == "POST" and p.endswith("/backfills")
        ]
    request = await load(sessions, request_id)
    assert request.state == RequestState.SUCCEEDED
    assert len(backfills) == 2  # one per DAG, whichever replica submitted it
    async with sessions() as session:
        replies = await session.scalars(
            select(OutboxMessage.payload).where(
                OutboxMessage.request_id == request_id, OutboxMessage.role == OutboxRole.THREAD
            )
        )
        said = "\n".join(json.dumps(p["blocks"]) for p in replies)
    for dag in (ROOT, CHILD):
        assert said.count(f"{dag}` succeeded") == 1, said
