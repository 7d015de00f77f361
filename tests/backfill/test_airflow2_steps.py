"""Airflow 2 steps (one DAG run per interval) against the Airflow stand-in speaking /api/v1: the
cap on the bot's active runs of a DAG (from BOT_CONFIG, else the DAG's `max_active_runs`), shared
by every backfill of that DAG and not spent on runs the bot did not trigger, later intervals
triggered as earlier runs finish, across a restart of the bot, and Cancel stopping queued and
running runs while the untriggered intervals never run. Time is a ManualClock: nothing sleeps.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.backfill.rules.progress import Counts
from bot.backfill.rules.states import RequestState
from bot.backfill.run.backends import StepWork
from bot.backfill.run.runner import Runner
from bot.backfill.store import repository
from bot.backfill.store.models import BackfillRequest
from bot.config import AirflowExecution, parse_config
from bot.config.base import ConfigError
from bot.core.model import DagRef
from bot.lineage.rules.planner import interval_from_json
from standins.airflow.server import (
    AirflowStandin,
    DagRun,
    ManualClock,
    StandinDag,
    running_airflow_standin,
)
from tests.support.airflow_runner import (
    CHILD,
    ROOT,
    approved,
    backend,
    days,
    load,
    opened,
    plan,
    runner,
    sessions,
)

__all__ = ["sessions"]

T0 = datetime(2024, 3, 1, tzinfo=UTC)
RUN_S = 60.0
DAGS = (StandinDag(ROOT, max_active_runs=2, run_seconds=RUN_S), StandinDag(CHILD))


def capped(cap: int | None) -> AirflowExecution:
    return AirflowExecution(max_active_runs_per_dag=cap)


def work(
    count: int, state: dict[str, object] | None = None, *, cancelling: bool = False
) -> StepWork:
    return StepWork(
        request_id="r1",
        step_id="0123456789abcdef",
        dag=DagRef("food_delivery", ROOT),
        intervals=tuple(interval_from_json(i) for i in days(1, count)),
        state=state or {},
        cancelling=cancelling,
    )


def active(runs: Sequence[DagRun]) -> int:
    return sum(r.state in ("queued", "running") for r in runs)


def triggers(server: AirflowStandin) -> int:
    return sum(
        1 for method, path, _ in server.state.requests if method == "POST" and "dagRuns" in path
    )


async def until_finished(
    run: Runner,
    sessions: async_sessionmaker[AsyncSession],
    request_id: str,
    server: AirflowStandin,
    clock: ManualClock,
) -> tuple[BackfillRequest, int]:
    """Passes of the runner, a run's length apart; the request and the most runs active at once."""
    most = 0
    for _ in range(40):
        await run.advance(request_id)
        most = max(most, active(server.state.runs_of(ROOT)))
        request = await load(sessions, request_id)
        if request.finished_at is not None:
            return request, most
        clock.advance(RUN_S)
    raise AssertionError(f"not finished: {[(s.dag_id, s.state, s.counts) for s in request.steps]}")


def each_once(server: AirflowStandin, count: int) -> None:
    runs = server.state.runs_of(ROOT)
    assert [r.logical_date for r in runs] == [interval_from_json(i).start for i in days(1, count)]
    assert all(r.run_type == "manual" and r.state == "success" for r in runs), runs


async def test_the_dags_max_active_runs_caps_the_step_and_progress_counts_every_interval(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    clock = ManualClock(T0)
    async with (
        running_airflow_standin(api=2, dags=DAGS, clock=clock) as server,
        opened(backend(server)) as airflow,
    ):
        run = runner(sessions, airflow)
        request_id = await approved(sessions, run, planned=plan(ROOT, days(1, 5), child=False))
        await run.advance(request_id)  # claims and submits
        await run.advance(request_id)  # polls
        [step] = (await load(sessions, request_id)).steps
        assert step.executor_state["cap"] == 2
        assert Counts.from_json(step.counts) == Counts(queued=3, running=2)
        assert len(server.state.runs_of(ROOT)) == 2

        request, most = await until_finished(run, sessions, request_id, server, clock)

    assert request.state == RequestState.SUCCEEDED
    assert most == 2
    each_once(server, 5)
    assert Counts.from_json(request.steps[0].counts) == Counts(succeeded=5)


async def test_the_configured_cap_wins_over_the_dags_and_a_dag_without_one_gets_16() -> None:
    clock = ManualClock(T0)
    dags = (StandinDag(ROOT, max_active_runs=None, run_seconds=RUN_S),)
    async with (
        running_airflow_standin(api=2, dags=dags, clock=clock) as server,
        opened(backend(server)) as default,
    ):
        state = await default.submit(work(20))
        assert (state["cap"], len(state["triggered"])) == (16, 16)
        assert len(server.state.runs_of(ROOT)) == 16

    async with (
        running_airflow_standin(api=2, dags=DAGS, clock=clock) as server,
        opened(backend(server, settings=capped(1))) as one,
    ):
        state = await one.submit(work(3))
        assert (state["cap"], state["triggered"]) == (1, ["2021-06-01T00:00:00Z"])
        progress = await one.poll(work(3, state))
        assert progress.counts == Counts(queued=2, running=1)
        assert progress.state is None  # nothing new to trigger, nothing to record


async def test_a_crash_between_trigger_and_record_neither_repeats_nor_forgets_intervals() -> None:
    clock = ManualClock(T0)
    async with running_airflow_standin(api=2, dags=DAGS, clock=clock) as server:
        async with opened(backend(server, settings=capped(1))) as first:
            recorded = await first.submit(work(3))
            clock.advance(RUN_S)
            lost = await first.poll(work(3, recorded))  # triggers the 2nd; dies unrecorded
            assert lost.state is not None
            assert len(lost.state["triggered"]) == 2

        # The restarted bot, with what was recorded.
        async with opened(backend(server, settings=capped(1))) as second:
            progress = await second.poll(work(3, recorded))
            assert triggers(server) == 2  # the second interval's run was found, not triggered
            assert progress.counts == Counts(queued=1, running=1, succeeded=1)
            assert progress.state is not None
            state = {**recorded, **progress.state}
            assert len(state["triggered"]) == 2
            for _ in range(3):
                clock.advance(RUN_S)
                progress = await second.poll(work(3, state))
                state = {**state, **(progress.state or {})}

    assert (progress.done, progress.ok) == (True, True)
    assert triggers(server) == 3
    each_once(server, 3)


async def test_a_restarted_runner_carries_on_with_the_untriggered_intervals(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    clock = ManualClock(T0)
    async with running_airflow_standin(api=2, dags=DAGS, clock=clock) as server:
        async with opened(backend(server, settings=capped(1))) as before:
            run = runner(sessions, before)
            request_id = await approved(sessions, run, planned=plan(ROOT, days(1, 4)))
            for _ in range(3):
                await run.advance(request_id)
                clock.advance(RUN_S)
        assert 1 < len(server.state.runs_of(ROOT)) < 4

        async with opened(backend(server, settings=capped(1))) as after:
            restarted = runner(sessions, after)
            request, most = await until_finished(restarted, sessions, request_id, server, clock)

    assert request.state == RequestState.SUCCEEDED
    assert most == 1
    each_once(server, 4)
    assert [r.state for r in server.state.runs_of(CHILD)] == ["success"] * 4


async def test_cancel_stops_queued_and_running_runs_and_triggers_nothing_more(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    clock = ManualClock(T0)
    # The DAG runs one at a time, the cap lets two in: one running, one queued in Airflow.
    dags = (StandinDag(ROOT, max_active_runs=1, run_seconds=RUN_S), StandinDag(CHILD))
    async with (
        running_airflow_standin(api=2, dags=dags, clock=clock) as server,
        opened(backend(server, settings=capped(2))) as airflow,
    ):
        run = runner(sessions, airflow)
        request_id = await approved(sessions, run, planned=plan(ROOT, days(1, 4)))
        await run.advance(request_id)
        await run.advance(request_id)
        assert [r.state for r in server.state.runs_of(ROOT)] == ["running", "queued"]
        async with sessions.begin() as session:
            await repository.transition_request(
                session, request_id, expected={"running"}, to="cancelled", actor="U2"
            )
        await run.advance(request_id)
        clock.advance(10 * RUN_S)
        await run.advance(request_id)

    request = await load(sessions, request_id)
    assert request.state == RequestState.CANCELLED
    assert request.finished_at is not None
    assert {s.dag_id: s.state for s in request.steps} == {ROOT: "cancelled", CHILD: "skipped"}
    runs = server.state.runs_of(ROOT)
    assert [(r.state, r.start_date is not None) for r in runs] == [
        ("failed", True),
        ("failed", False),
    ]
    assert server.state.runs_of(CHILD) == []
    patched = [p for m, p, _ in server.state.requests if m == "PATCH"]
    assert len(patched) == 2
    message = "2 of 2 runs failed or were stopped, 2 intervals never triggered"
    assert request.steps[0].message == message


def bot_active(server: AirflowStandin) -> int:
    """The bot's runs of ROOT queued or running, whichever request triggered them."""
    runs = server.state.runs_of(ROOT)
    return active([r for r in runs if r.run_id.startswith("backfill_bot__")])


async def test_two_backfills_of_one_dag_share_the_cap_and_both_finish(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    clock = ManualClock(T0)
    # Airflow would run 16 at once: only the bot's cap of 2 holds the two requests back.
    dags = (StandinDag(ROOT, max_active_runs=None, run_seconds=RUN_S),)
    async with (
        running_airflow_standin(api=2, dags=dags, clock=clock) as server,
        opened(backend(server, settings=capped(2))) as airflow,
    ):
        run = runner(sessions, airflow)
        first = await approved(sessions, run, planned=plan(ROOT, days(1, 3), child=False))
        second = await approved(sessions, run, planned=plan(ROOT, days(10, 3), child=False))
        most, finished = 0, False
        for _ in range(40):
            for request_id in (first, second):
                await run.advance(request_id)
                most = max(most, bot_active(server))
            requests = [await load(sessions, r) for r in (first, second)]
            finished = all(r.finished_at is not None for r in requests)
            if finished:
                break
            clock.advance(RUN_S)

    assert finished, [(r.state, r.steps[0].counts) for r in requests]
    assert [r.state for r in requests] == [RequestState.SUCCEEDED] * 2
    assert most == 2
    starts = [interval_from_json(i).start for i in [*days(1, 3), *days(10, 3)]]
    runs = server.state.runs_of(ROOT)
    assert sorted(r.logical_date for r in runs if r.logical_date) == starts
    assert all(r.state == "success" for r in runs), runs


async def test_runs_the_bot_did_not_trigger_leave_the_cap_to_the_bots_runs() -> None:
    clock = ManualClock(T0)
    dags = (StandinDag(ROOT, max_active_runs=None, run_seconds=10 * RUN_S),)
    async with (
        running_airflow_standin(api=2, dags=dags, clock=clock) as server,
        opened(backend(server, settings=capped(2))) as airflow,
    ):
        # A scheduled and a manual run of the DAG, running while the backfill starts.
        for run_id, run_type, day in (
            ("scheduled__x", "scheduled", 20),
            ("manual__y", "manual", 21),
        ):
            start = datetime(2021, 6, day, tzinfo=UTC)
            interval = (start, start + timedelta(days=1))
            server.state.create_run(
                ROOT, run_id, run_type=run_type, logical_date=start, interval=interval, run_after=T0
            )
        server.state.touch()
        assert active(server.state.runs_of(ROOT)) == 2

        state = await airflow.submit(work(3))
        assert len(state["triggered"]) == 2
        assert bot_active(server) == 2
        lists = [p for m, p, _ in server.state.requests if m == "GET" and p.endswith("/dagRuns")]
        assert len(lists) == 2  # the step's runs, and the DAG's active ones for the cap

        # The step alone fills the cap: the poll does not list the DAG's active runs.
        before = len(server.state.requests)
        progress = await airflow.poll(work(3, state))
        assert progress.counts == Counts(queued=1, running=2)
        assert len(server.state.requests) == before + 1


def test_the_cap_setting_is_optional_and_at_least_one() -> None:
    assert parse_config({}).execution.airflow.max_active_runs_per_dag is None
    airflow = {"airflow": {"max_active_runs_per_dag": 3}}
    assert parse_config({"execution": airflow}).execution.airflow.max_active_runs_per_dag == 3
    with pytest.raises(ConfigError, match=r"execution\.airflow\.max_active_runs_per_dag"):
        parse_config({"execution": {"airflow": {"max_active_runs_per_dag": 0}}})
