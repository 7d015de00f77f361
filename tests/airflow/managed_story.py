"""A backfill's options, pause and schedule against a real Airflow of either version: the step
runner (bot/backfill/run/runner.py) on the Airflow backend, driven pass by pass (`Runner.tick`)
over a request approved straight into a SQLite store, the way test_airflow2_cap.py drives the
backend alone. test_managed_backfills.py runs these stories on Airflow 3, test_airflow2_managed.py
on Airflow 2.11.

- `--rerun failed`: the DAG's history in Airflow has succeeded, failed and missing intervals;
  only the failed and missing ones run again, the succeeded runs are left as they were.
- Pause and resume (`max_active` 1): a paused request starts no new run (Airflow 3 pauses its
  backfill, Airflow 2 triggers nothing more) while the running one finishes; after the resume the
  rest run and the request succeeds.
- `--at`: a request scheduled for later stays `scheduled`, with nothing in Airflow, until a fake
  clock passes its time; the next pass starts it.
- The budget: three backfills of three DAGs, 3 runs at once asked each, under a budget of 4: by
  Airflow's own start and end dates no more than 4 ran together, and all succeeded.
- Retry failed tasks: a run failed in its second task; clearing only the failed tasks reruns
  that task in the same run, and the first task keeps its try.

Each story has its own DAG of tests/airflow/dags/bot_test_dags.py (Airflow 3 allows one active
backfill per DAG and marks one completed about 30 s after its last run) and its own dates, away
from the other tests' June 2021. The shared Airflow 3 keeps what these stories leave: they run
after test_airflow_client.py (files run in name order, as `./dev test` runs tests/airflow), which
asserts that bot_test.quick has no manual run and bot_test.idle no backfill.
"""

from __future__ import annotations

import asyncio
import itertools
import time
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.backfill.rules.progress import Counts
from bot.backfill.rules.states import RequestState
from bot.backfill.run.airflow import AirflowBackend
from bot.backfill.run.runner import Runner
from bot.backfill.store import control, repository
from bot.backfill.store.models import BackfillRequest
from bot.clients.airflow import Airflow3Client, AirflowClient, DagRunInfo, connect_airflow
from bot.config import AirflowExecution, Execution
from bot.config.execution import Budget
from bot.core.db import make_engine, session_factory, upgrade
from bot.core.model import Interval, iso
from bot.core.run_options import RunOptions
from bot.core.tables import utcnow
from tests.airflow.airflow2 import IDLE, QUICK, until
from tests.airflow.harness import RealAirflow
from tests.support.factories import runner as make_runner

SLOW = "bot_test.slow"
"""`sleep 5`: long enough to pause the backfill while its first run runs."""
NAMESPACE = "bot_test"
PASS_S = 0.5
"""Wall time between two runner passes while Airflow works."""
QUIET_S = 5.0
"""How long a paused backfill is watched after its running run ended: Airflow's scheduler
starts a queued run within a loop or two (about a second each)."""


class MovingClock:
    """The runner's clock: the real time, plus however far a test moved it on."""

    def __init__(self) -> None:
        self.offset = timedelta(0)

    def __call__(self) -> datetime:
        return utcnow() + self.offset

    def advance(self, by: timedelta) -> None:
        self.offset += by


def days(first: datetime, count: int) -> tuple[Interval, ...]:
    starts = [first + timedelta(days=n) for n in range(count + 1)]
    return tuple(Interval(a, b) for a, b in itertools.pairwise(starts))


def one_dag_plan(dag_id: str, intervals: tuple[Interval, ...]) -> dict[str, object]:
    """A plan of one step (as `/backfill DAG ... --only` makes)."""
    return {
        "dag_id": dag_id,
        "namespace": NAMESPACE,
        "start": iso(intervals[0].start),
        "end": iso(intervals[-1].end),
        "steps": [
            {
                "dag_id": dag_id,
                "namespace": NAMESPACE,
                "intervals": [{"start": iso(i.start), "end": iso(i.end)} for i in intervals],
                "upstream": [],
            }
        ],
    }


@dataclass
class Managed:
    """A bot store and runner on a real Airflow, with a client to look at Airflow."""

    airflow: RealAirflow
    sessions: async_sessionmaker[AsyncSession]
    runner: Runner
    client: AirflowClient
    clock: Callable[[], datetime]
    backend: AirflowBackend

    @property
    def v3(self) -> bool:
        return isinstance(self.client, Airflow3Client)

    async def approve(
        self,
        dag_id: str,
        intervals: tuple[Interval, ...],
        options: RunOptions,
        *,
        start_at: datetime | None = None,
    ) -> str:
        """Record the request, approve it and hand it to the runner, in one transaction (as
        the approval click does)."""
        plan = one_dag_plan(dag_id, intervals)
        return await self.approve_plan(plan, options, start_at=start_at)

    async def approve_plan(
        self, plan: Mapping[str, Any], options: RunOptions, *, start_at: datetime | None = None
    ) -> str:
        async with self.sessions.begin() as session:
            request = await repository.create_request(
                session,
                plan=plan,
                requester="U1",
                channel="C1",
                options=options.to_json(),
                start_at=start_at,
            )
            await repository.transition_request(
                session, request.id, expected={"previewed"}, to="approved", actor="U2"
            )
            await self.runner.start(session, await repository.get_request(session, request.id))
            return request.id

    async def load(self, request_id: str) -> BackfillRequest:
        async with self.sessions() as session:
            return await repository.get_request(session, request_id)

    async def passes_until(
        self, check: Callable[[], Awaitable[bool]], what: str, timeout_s: float = 120
    ) -> None:
        """Runner passes, `PASS_S` apart, until `check` holds."""
        deadline = time.monotonic() + timeout_s
        while True:
            await self.runner.tick()
            if await check():
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: not within {timeout_s:g}s")
            await asyncio.sleep(PASS_S)

    async def passes_for(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            await self.runner.tick()
            await asyncio.sleep(PASS_S)

    async def finished(self, request_id: str, timeout_s: float = 150) -> BackfillRequest:
        async def done() -> bool:
            return (await self.load(request_id)).finished_at is not None

        await self.passes_until(done, f"backfill {request_id} finished", timeout_s)
        return await self.load(request_id)

    async def runs(
        self, dag_id: str, intervals: tuple[Interval, ...]
    ) -> dict[datetime, list[DagRunInfo]]:
        """Every run of `dag_id` in Airflow for these intervals, by interval start."""
        found = await self.client.list_dag_runs(
            dag_id, logical_date_gte=intervals[0].start, logical_date_lte=intervals[-1].start
        )
        by_start: dict[datetime, list[DagRunInfo]] = {i.start: [] for i in intervals}
        for run in found:
            if run.logical_date in by_start:
                by_start[run.logical_date].append(run)
        return by_start


@asynccontextmanager
async def managed(
    tmp_path: Path,
    airflow: RealAirflow,
    clock: Callable[[], datetime] = utcnow,
    *,
    budget: Budget | None = None,
) -> AsyncIterator[Managed]:
    database = f"sqlite:///{tmp_path / 'bot.db'}"
    upgrade(database)
    engine = make_engine(database)
    sessions = session_factory(engine)
    # A 409 from Airflow 3 (another backfill of the DAG not completed yet) is retried soon.
    settings = Execution(
        poll_interval_s=PASS_S, conflict_retry_s=2.0, airflow=AirflowExecution(),
        budget=budget or Budget(),
    )  # fmt: skip
    backend = AirflowBackend(airflow.url, airflow.username, airflow.password, settings.airflow)
    client = await connect_airflow(airflow.url, airflow.username, airflow.password)
    try:
        runner = make_runner(sessions, backend, settings, clock=clock)
        yield Managed(airflow, sessions, runner, client, clock, backend)
    finally:
        await client.close()
        await backend.close()
        await engine.dispose()


# --- run history made in Airflow before a backfill ------------------------------------------


def _runs_path(airflow: RealAirflow, dag_id: str) -> str:
    return f"{airflow.kind.api}/dags/{urllib.parse.quote(dag_id, safe='')}/dagRuns"


def trigger(
    airflow: RealAirflow,
    dag_id: str,
    run_id: str,
    interval: Interval,
    conf: dict[str, object] | None = None,
) -> None:
    """A manual run of `interval` (its data interval spelled out), as someone made by hand."""
    airflow.api(
        "POST",
        _runs_path(airflow, dag_id),
        {
            "dag_run_id": run_id,
            "logical_date": iso(interval.start),
            "data_interval_start": iso(interval.start),
            "data_interval_end": iso(interval.end),
            "conf": conf or {},
        },
    )


def set_run_state(airflow: RealAirflow, dag_id: str, run_id: str, state: str) -> None:
    airflow.api("PATCH", f"{_runs_path(airflow, dag_id)}/{run_id}", {"state": state})


def run_state(airflow: RealAirflow, dag_id: str, run_id: str) -> str:
    return str(airflow.api("GET", f"{_runs_path(airflow, dag_id)}/{run_id}")["state"])


# --- the stories -----------------------------------------------------------------------------


async def rerun_failed_redoes_only_failed_and_missing(tmp_path: Path, airflow: RealAirflow) -> None:
    intervals = days(datetime(2021, 7, 5, tzinfo=UTC), 4)
    ok1, failed, missing, ok2 = intervals
    history = {i.start: f"history__{i.start:%Y%m%d}" for i in (ok1, failed, ok2)}
    for interval in (ok1, failed, ok2):
        trigger(airflow, QUICK, history[interval.start], interval)

    async def history_done() -> bool:
        return all(run_state(airflow, QUICK, run_id) == "success" for run_id in history.values())

    await until(history_done, "the history's runs succeeded")
    # Failed once it has ended: a run the scheduler is still working on can answer 500.
    set_run_state(airflow, QUICK, history[failed.start], "failed")

    async with managed(tmp_path, airflow) as bot:
        before = await bot.runs(QUICK, intervals)
        assert [[r.state for r in before[i.start]] for i in intervals] == [
            ["success"], ["failed"], [], ["success"],
        ]  # fmt: skip
        begun = utcnow()
        request_id = await bot.approve(QUICK, intervals, RunOptions(rerun="failed"))
        request = await bot.finished(request_id)
        after = await bot.runs(QUICK, intervals)

        [step] = request.steps
        assert request.state == RequestState.SUCCEEDED, (step.state, step.message)
        assert step.state == "succeeded"
        assert Counts.from_json(step.counts) == Counts(succeeded=2)
        # the succeeded intervals were not touched: the same run, not started again
        assert after[ok1.start] == before[ok1.start]
        assert after[ok2.start] == before[ok2.start]
        # the failed interval's run ran again; the missing one got its first run
        [old] = before[failed.start]
        [again] = after[failed.start]
        assert (again.run_id, again.state) == (old.run_id, "success")
        assert again.start_date is not None
        assert again.start_date >= begun
        [new] = after[missing.start]
        assert new.state == "success"
        assert new.start_date is not None
        assert new.start_date >= begun
        assert new.data_interval_end == missing.end

        if bot.v3:
            assert isinstance(bot.client, Airflow3Client)
            # one backfill over the whole range: Airflow chose what to redo
            ours = [b for b in await bot.client.list_backfills(QUICK) if b.from_date == ok1.start]
            assert [(b.to_date, b.reprocess_behavior) for b in ours] == [(ok2.start, "failed")]
            assert (again.run_type, new.run_type) == ("backfill", "backfill")
            assert (step.executor_state or {})["expected"] == [
                iso(failed.start),
                iso(missing.start),
            ]
        else:
            # the bot chose from the history: the failed run cleared, the missing one triggered
            assert (step.executor_state or {})["skipped"] == [iso(ok1.start), iso(ok2.start)]
            assert new.run_id.startswith("backfill_bot__")
            assert step.message == "2 intervals left alone (--rerun failed)"


async def pause_holds_new_runs_and_resume_runs_the_rest(
    tmp_path: Path, airflow: RealAirflow
) -> None:
    intervals = days(datetime(2021, 8, 2, tzinfo=UTC), 2)
    first, later = intervals
    async with managed(tmp_path, airflow) as bot:
        request_id = await bot.approve(SLOW, intervals, RunOptions(rerun="all", max_active=1))

        async def first_running() -> bool:
            runs = (await bot.runs(SLOW, intervals))[first.start]
            return [r.state for r in runs] == ["running"]

        await bot.passes_until(first_running, "the first interval's run running", 90)
        async with bot.sessions.begin() as session:
            paused = await control.pause(
                session, request_id, by="U1", reason="paused by <@U1>", at=bot.clock()
            )
            assert paused

        async def first_done() -> bool:
            runs = (await bot.runs(SLOW, intervals))[first.start]
            return [r.state for r in runs] == ["success"]

        await bot.passes_until(first_done, "the first interval's run finished", 90)
        await bot.passes_for(QUIET_S)

        request = await bot.load(request_id)
        [step] = request.steps
        assert request.state == RequestState.PAUSED
        assert step.state == "running"
        assert (step.executor_state or {})["paused_sent"] is True
        held = await bot.runs(SLOW, intervals)
        if bot.v3:
            assert isinstance(bot.client, Airflow3Client)
            backfill = await bot.client.get_backfill((step.executor_state or {})["backfill_id"])
            assert backfill.is_paused
            # Airflow made every run of the backfill at once: the later one waits, queued
            assert [r.state for r in held[later.start]] == ["queued"]
        else:
            assert held[later.start] == []  # never triggered
            assert (step.executor_state or {})["triggered"] == [iso(first.start)]

        async with bot.sessions.begin() as session:
            assert await control.resume(session, request_id, by="U1")
        resumed = utcnow()
        request = await bot.finished(request_id)
        ran = await bot.runs(SLOW, intervals)

        [step] = request.steps
        assert request.state == RequestState.SUCCEEDED, (step.state, step.message)
        assert Counts.from_json(step.counts) == Counts(succeeded=2)
        assert [[r.state for r in ran[i.start]] for i in intervals] == [["success"]] * 2
        in_order = [ran[i.start][0] for i in intervals]
        assert in_order[0].end_date is not None
        assert in_order[0].end_date <= resumed
        for run in in_order[1:]:
            assert run.start_date is not None
            assert run.start_date >= resumed, "a run started while the backfill was paused"
        for earlier, later in itertools.pairwise(in_order):  # max_active 1: one at a time
            assert earlier.end_date is not None
            assert later.start_date is not None
            assert later.start_date >= earlier.end_date
        if bot.v3:
            assert isinstance(bot.client, Airflow3Client)
            backfill = await bot.client.get_backfill((step.executor_state or {})["backfill_id"])
            assert not backfill.is_paused
            assert backfill.max_active_runs == 1


async def scheduled_backfill_waits_for_its_time(tmp_path: Path, airflow: RealAirflow) -> None:
    intervals = days(datetime(2021, 9, 6, tzinfo=UTC), 3)
    clock = MovingClock()
    start_at = clock() + timedelta(hours=1)
    async with managed(tmp_path, airflow, clock) as bot:
        request_id = await bot.approve(IDLE, intervals, RunOptions(rerun="all"), start_at=start_at)
        request = await bot.load(request_id)
        assert request.state == RequestState.SCHEDULED
        assert (request.resume_at, request.started_at) == (start_at, None)

        clock.advance(timedelta(minutes=59))  # not yet
        for _ in range(3):
            assert await bot.runner.tick() == 0  # nothing to follow
        request = await bot.load(request_id)
        assert request.state == RequestState.SCHEDULED
        assert [s.state for s in request.steps] == ["pending"]
        assert await bot.runs(IDLE, intervals) == {i.start: [] for i in intervals}
        if bot.v3:
            assert isinstance(bot.client, Airflow3Client)
            backfills = await bot.client.list_backfills(IDLE)
            assert [b for b in backfills if b.from_date == intervals[0].start] == []

        clock.advance(timedelta(minutes=2))  # its time has come
        woke = clock()
        request = await bot.finished(request_id)
        ran = await bot.runs(IDLE, intervals)

        [step] = request.steps
        assert request.state == RequestState.SUCCEEDED, (step.state, step.message)
        assert request.started_at is not None
        assert start_at <= request.started_at <= woke + timedelta(minutes=1)
        assert request.resume_at is None
        assert [[r.state for r in ran[i.start]] for i in intervals] == [["success"]] * 3


async def budget_caps_runs_across_backfills(tmp_path: Path, airflow: RealAirflow) -> None:
    """Three backfills of three DAGs, each asking for 3 runs at once, under a budget of 4: at
    no moment do more than 4 of their runs run in Airflow, and all of them finish."""
    intervals = {
        QUICK: days(datetime(2021, 10, 4, tzinfo=UTC), 3),
        IDLE: days(datetime(2021, 10, 4, tzinfo=UTC), 3),
        SLOW: days(datetime(2021, 10, 4, tzinfo=UTC), 1),
    }
    async with managed(tmp_path, airflow, budget=Budget(total=4)) as bot:
        begun = utcnow()
        requests = [
            await bot.approve(dag_id, dates, RunOptions(rerun="all", max_active=3))
            for dag_id, dates in intervals.items()
        ]
        spans: list[tuple[datetime, datetime]] = []
        for request_id in requests:
            request = await bot.finished(request_id, timeout_s=300)
            [step] = request.steps
            assert request.state == RequestState.SUCCEEDED, (step.state, step.message)
        for dag_id, dates in intervals.items():
            for runs in (await bot.runs(dag_id, dates)).values():
                ours = [r for r in runs if r.start_date is not None and r.start_date >= begun]
                assert [r.state for r in ours] == ["success"], (dag_id, runs)
                [run] = ours
                assert run.start_date is not None
                assert run.end_date is not None
                spans.append((run.start_date, run.end_date))
        assert len(spans) == 7
        assert 1 < peak(spans) <= 4, "more runs ran at once than the budget allows"


def peak(spans: list[tuple[datetime, datetime]]) -> int:
    """The most spans that overlap at one moment (an end before a start at the same instant)."""
    edges = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    most = running = 0
    for _, change in edges:
        running += change
        most = max(most, running)
    return most


CLEAR_FAILED = "bot_test.clear_failed"
"""`extract >> load`; `load` fails on its first try when the run's conf says `fail_load`."""


async def retry_failed_tasks_reruns_only_the_failed_task(
    tmp_path: Path, airflow: RealAirflow
) -> None:
    """A run failed in `load`; a request that clears only the failed tasks (Retry failed
    tasks) reruns `load` in that same run, and `extract`, which succeeded, is not run again."""
    [interval] = days(datetime(2021, 11, 1, tzinfo=UTC), 1)
    run_id = f"history__clear__{utcnow():%Y%m%d%H%M%S}"
    trigger(airflow, CLEAR_FAILED, run_id, interval, conf={"fail_load": True})

    async def failed() -> bool:
        return run_state(airflow, CLEAR_FAILED, run_id) == "failed"

    await until(failed, "the run failed in load")
    async with managed(tmp_path, airflow) as bot:
        before = {t.task_id: (t.state, t.try_number)
                  for t in await bot.client.list_task_instances(CLEAR_FAILED, run_id)}  # fmt: skip
        assert before == {"extract": ("success", 1), "load": ("failed", 1)}
        options = RunOptions(rerun="all", clear_failed=(CLEAR_FAILED,))
        request = await bot.finished(await bot.approve(CLEAR_FAILED, (interval,), options))
        [step] = request.steps
        assert request.state == RequestState.SUCCEEDED, (step.state, step.message)
        assert step.message == "1 failed task cleared and run again"
        after = {t.task_id: (t.state, t.try_number)
                 for t in await bot.client.list_task_instances(CLEAR_FAILED, run_id)}  # fmt: skip
        assert after == {"extract": ("success", 1), "load": ("success", 2)}
        runs = (await bot.runs(CLEAR_FAILED, (interval,)))[interval.start]
        assert [(r.run_id, r.state) for r in runs] == [(run_id, "success")]  # no new run
