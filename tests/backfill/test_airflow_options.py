"""A request's run options on the Airflow backend, against the Airflow stand-in speaking
Airflow 3 (`/api/v2/backfills`) and Airflow 2 (one DAG run per interval): `--rerun` redoes only
the intervals its choice names (Airflow 3 by `reprocess_behavior`, Airflow 2 by the bot's own
reading of the run history), `--backwards` runs the newest first, `--conf` reaches every new run,
`--max-active` caps the runs, and a paused request holds its Airflow work. Time is a ManualClock.
"""

from __future__ import annotations

from datetime import UTC, datetime
from itertools import pairwise

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.backfill.rules.options import RunOptions
from bot.backfill.rules.states import RequestState
from bot.backfill.run.runner import Runner
from bot.backfill.store import control, repository
from bot.clients.airflow import AirflowUnavailable
from bot.core.model import iso
from bot.lineage.rules.planner import interval_from_json, plan_from_json
from standins.airflow.server import (
    AirflowStandin,
    HistoricRun,
    ManualClock,
    StandinDag,
    running_airflow_standin,
)
from tests.support.airflow_runner import ROOT, backend, days, load, opened, plan, runner, sessions

__all__ = ["sessions"]

T0 = datetime(2024, 3, 1, tzinfo=UTC)
RUN_S = 60.0
JUNE = [interval_from_json(i).start for i in days(1, 5)]
# June 1 succeeded, June 2 failed, June 3 has no run, June 4 succeeded, June 5 failed.
HISTORY = (
    HistoricRun(ROOT, JUNE[0], "success"),
    HistoricRun(ROOT, JUNE[1], "failed"),
    HistoricRun(ROOT, JUNE[3], "success"),
    HistoricRun(ROOT, JUNE[4], "failed"),
)


async def approved_with(
    sessions: async_sessionmaker[AsyncSession], run: Runner, options: RunOptions, count: int = 5
) -> str:
    async with sessions.begin() as session:
        request = await repository.create_request(
            session,
            plan=plan(ROOT, days(1, count), child=False),
            requester="U1",
            channel="C1",
            options=options.to_json(),
        )
        await repository.transition_request(
            session, request.id, expected={"previewed"}, to="approved", actor="U2"
        )
        await run.start(session, await repository.get_request(session, request.id))
        return request.id


async def to_the_end(
    run: Runner, sessions: async_sessionmaker[AsyncSession], request_id: str, clock: ManualClock
) -> None:
    for _ in range(40):
        await run.advance(request_id)
        if (await load(sessions, request_id)).finished_at is not None:
            return
        clock.advance(RUN_S)
    raise AssertionError("the backfill did not finish")


def rerun_dates(server: AirflowStandin) -> list[datetime]:
    """Logical dates of the runs the backfill started or cleared (started after T0)."""
    return sorted(
        r.logical_date
        for r in server.state.runs_of(ROOT)
        if r.logical_date is not None and r.start_date is not None and r.start_date >= T0
    )


@pytest.mark.parametrize("api", [3, 2])
@pytest.mark.parametrize(
    ("rerun", "expected"),
    [
        ("missing", [JUNE[2]]),
        ("failed", [JUNE[1], JUNE[2], JUNE[4]]),
        ("all", JUNE),
    ],
)
async def test_rerun_redoes_only_the_intervals_its_choice_names(
    sessions: async_sessionmaker[AsyncSession], api: int, rerun: str, expected: list[datetime]
) -> None:
    clock = ManualClock(T0)
    dags = [StandinDag(ROOT, run_seconds=RUN_S)]
    async with (
        running_airflow_standin(api=api, dags=dags, clock=clock, history=HISTORY) as server,
        opened(backend(server)) as airflow,
    ):
        run = runner(sessions, airflow)
        options = RunOptions(rerun=rerun)  # type: ignore[arg-type]
        request_id = await approved_with(sessions, run, options)
        await to_the_end(run, sessions, request_id, clock)
        request = await load(sessions, request_id)
        assert request.state == RequestState.SUCCEEDED
        assert rerun_dates(server) == expected
        # Intervals the choice leaves alone keep their run as it was.
        untouched = [d for d in JUNE if d not in expected]
        before = {h.logical_date: h.state for h in HISTORY}
        for run_ in server.state.runs_of(ROOT):
            if run_.logical_date in untouched:
                assert run_.state == before[run_.logical_date]
        [step] = request.steps
        assert step.counts["succeeded"] == len(expected)
        if api == 2 and len(expected) < len(JUNE):  # the bot chose: it says what it left
            left = len(JUNE) - len(expected)
            assert step.message == f"{left} interval{'s' if left > 1 else ''} left alone " + (
                f"(--rerun {rerun})"
            )


@pytest.mark.parametrize("api", [3, 2])
async def test_backwards_runs_the_newest_interval_first_with_the_conf(
    sessions: async_sessionmaker[AsyncSession], api: int
) -> None:
    clock = ManualClock(T0)
    dags = [StandinDag(ROOT, run_seconds=RUN_S, max_active_runs=16)]
    async with (
        running_airflow_standin(api=api, dags=dags, clock=clock) as server,
        opened(backend(server)) as airflow,
    ):
        run = runner(sessions, airflow)
        options = RunOptions(rerun="all", backwards=True, conf={"full_refresh": True}, max_active=1)
        request_id = await approved_with(sessions, run, options, count=3)
        await to_the_end(run, sessions, request_id, clock)
        assert (await load(sessions, request_id)).state == RequestState.SUCCEEDED
        runs = server.state.runs_of(ROOT)
        by_start = sorted(runs, key=lambda r: r.start_date or T0)
        assert [r.logical_date for r in by_start] == sorted(JUNE[:3], reverse=True)
        assert all(r.conf == {"full_refresh": True} for r in runs)
        # One at a time: each started after the one before ended.
        for earlier, later in pairwise(by_start):
            assert earlier.end_date is not None
            assert later.start_date is not None
            assert later.start_date >= earlier.end_date


async def test_a_paused_request_pauses_its_airflow_3_backfill_and_resume_unpauses_it(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    clock = ManualClock(T0)
    dags = [StandinDag(ROOT, run_seconds=RUN_S)]
    async with (
        running_airflow_standin(api=3, dags=dags, clock=clock) as server,
        opened(backend(server)) as airflow,
    ):
        run = runner(sessions, airflow)
        request_id = await approved_with(sessions, run, RunOptions(rerun="all", max_active=1))
        await run.advance(request_id)
        await run.advance(request_id)
        [backfill] = server.state.backfills
        assert not backfill.is_paused
        async with sessions.begin() as session:
            await control.pause(session, request_id, by="U3", reason="", at=clock())
        await run.advance(request_id)
        assert backfill.is_paused
        started = len([r for r in server.state.runs_of(ROOT) if r.start_date is not None])
        for _ in range(5):
            clock.advance(RUN_S)
            await run.advance(request_id)
        # The run under way finished; no queued run started while paused.
        assert len([r for r in server.state.runs_of(ROOT) if r.start_date is not None]) == started
        assert (await load(sessions, request_id)).state == RequestState.PAUSED

        async with sessions.begin() as session:
            await control.resume(session, request_id, by="U3")
        await run.advance(request_id)
        assert not backfill.is_paused
        await to_the_end(run, sessions, request_id, clock)
        assert (await load(sessions, request_id)).state == RequestState.SUCCEEDED
        assert len(server.state.runs_of(ROOT)) == 5


async def test_a_paused_request_triggers_no_more_airflow_2_runs_until_resumed(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    clock = ManualClock(T0)
    dags = [StandinDag(ROOT, run_seconds=RUN_S)]
    async with (
        running_airflow_standin(api=2, dags=dags, clock=clock) as server,
        opened(backend(server)) as airflow,
    ):
        run = runner(sessions, airflow)
        request_id = await approved_with(sessions, run, RunOptions(rerun="all", max_active=1))
        await run.advance(request_id)
        assert len(server.state.runs_of(ROOT)) == 1
        async with sessions.begin() as session:
            await control.pause(session, request_id, by="U3", reason="", at=clock())
        for _ in range(5):
            clock.advance(RUN_S)
            await run.advance(request_id)
        assert len(server.state.runs_of(ROOT)) == 1
        async with sessions.begin() as session:
            await control.resume(session, request_id, by="U3")
        await to_the_end(run, sessions, request_id, clock)
        assert (await load(sessions, request_id)).state == RequestState.SUCCEEDED
        assert len(server.state.runs_of(ROOT)) == 5


@pytest.mark.parametrize("api", [3, 2])
async def test_the_preview_counts_the_runs_each_rerun_choice_means(
    sessions: async_sessionmaker[AsyncSession], api: int
) -> None:
    clock = ManualClock(T0)
    dags = [StandinDag(ROOT, run_seconds=RUN_S)]
    async with (
        running_airflow_standin(api=api, dags=dags, clock=clock, history=HISTORY) as server,
        opened(backend(server)) as airflow,
    ):
        run = runner(sessions, airflow)
        counts = await run.rerun_counts(plan_from_json(plan(ROOT, days(1, 5), child=False)))
        assert counts is not None
        assert (counts.missing, counts.failed, counts.all, counts.known) == (1, 3, 5, True)


@pytest.mark.parametrize("api", [3, 2])
async def test_the_conf_is_checked_against_the_dags_params(
    sessions: async_sessionmaker[AsyncSession], api: int
) -> None:
    params = (("full_refresh", False, "boolean"), ("limit", 10, "integer"))
    dags = [StandinDag(ROOT, params=params)]
    async with (
        running_airflow_standin(api=api, dags=dags) as server,
        opened(backend(server)) as airflow,
    ):
        run = runner(sessions, airflow)
        planned = plan_from_json(plan(ROOT, days(1, 2), child=False))

        async def notes(conf: dict[str, object]) -> list[tuple[str, bool]]:
            found = await run.check_options(planned, RunOptions(rerun="all", conf=conf))
            return [(n.text, n.blocking) for n in found]

        assert await notes({"full_refresh": True, "limit": 5}) == []
        [(text, blocking)] = await notes({"full_refresh": "yes"})
        assert blocking
        assert "`full_refresh` a string; this DAG's param takes boolean" in text
        [(text, blocking)] = await notes({"limit": 3, "colour": "red"})
        assert not blocking
        assert "sets colour, which this DAG has no param for (its params: full_refresh, limit)" in (
            text
        )
        assert await run.check_options(planned, RunOptions(rerun="all")) == ()


@pytest.mark.parametrize(
    ("options", "says"),
    [
        (RunOptions(rerun="all", backwards=True), "cannot be run in reverse"),
        (RunOptions(rerun="missing"), "You must set reprocess behavior"),
    ],
)
async def test_what_airflow_3_refuses_for_a_dag_depending_on_its_past_fails_at_once(
    sessions: async_sessionmaker[AsyncSession], options: RunOptions, says: str
) -> None:
    clock = ManualClock(T0)
    dags = [StandinDag(ROOT, run_seconds=RUN_S, depends_on_past=True)]
    async with (
        running_airflow_standin(api=3, dags=dags, clock=clock) as server,
        opened(backend(server)) as airflow,
    ):
        run = runner(sessions, airflow)
        request_id = await approved_with(sessions, run, options, count=2)
        await run.advance(request_id)
        await run.advance(request_id)
        request = await load(sessions, request_id)
        [step] = request.steps
        # Refused for good (422), not retried: the step fails with Airflow's reason.
        assert (request.state, step.state) == ("failed", "failed")
        assert step.message is not None
        assert says in step.message
        assert server.state.backfills == []


async def test_an_airflow_2_submit_cut_short_keeps_what_rerun_left_alone(
    sessions: async_sessionmaker[AsyncSession], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Airflow drops out after the bot cleared June 2's failed run: the next try must not read
    that run, now queued again, as history to leave alone."""
    clock = ManualClock(T0)
    dags = [StandinDag(ROOT, run_seconds=RUN_S)]
    async with (
        running_airflow_standin(api=2, dags=dags, clock=clock, history=HISTORY) as server,
        opened(backend(server)) as airflow,
    ):
        steps = await airflow.steps()
        trigger = steps.client.trigger_dag_run
        calls = 0

        async def flaky(*args: object, **kwargs: object) -> object:
            nonlocal calls
            calls += 1
            if calls == 2:  # after June 2 was cleared, June 3's trigger finds Airflow gone
                raise AirflowUnavailable("Airflow is down", status=503)
            return await trigger(*args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(steps.client, "trigger_dag_run", flaky)
        run = runner(sessions, airflow, clock=clock)
        request_id = await approved_with(sessions, run, RunOptions(rerun="failed"))
        await run.advance(request_id)
        [step] = (await load(sessions, request_id)).steps
        assert step.executor_state is not None
        assert "will retry" in (step.message or "")
        kept = step.executor_state["skipped"]
        assert kept == [iso(JUNE[0]), iso(JUNE[3])]
        await to_the_end(run, sessions, request_id, clock)
        request = await load(sessions, request_id)
        assert request.state == RequestState.SUCCEEDED
        [step] = request.steps
        assert step.executor_state is not None
        assert step.executor_state["skipped"] == kept
        assert step.counts["succeeded"] == 3  # June 2, 3 and 5, each followed to its end
        assert rerun_dates(server) == [JUNE[1], JUNE[2], JUNE[4]]
