"""`execution.budget` in the step runner: backfills share one budget of runs at once, a step that
would pass it waits in the queue (high priority, due reports, then the oldest first), its status
message says its place and what it waits for, and the queue outlives a restart. A scripted
backend and a driven clock, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.backfill.rules.estimate import DEADLINES
from bot.backfill.rules.states import RequestState
from bot.backfill.run.runner import Runner
from bot.backfill.store import control, repository
from bot.backfill.store.models import BackfillRequest, BackfillStep, BudgetClaim
from bot.config import Execution
from bot.config.execution import Budget, Pool
from bot.core.db import make_engine, session_factory, upgrade
from bot.core.windows import Deadline, parse_clock, parse_days
from bot.slack.store.models import OutboxMessage as Outbox
from tests.support.factories import runner as make_runner
from tests.support.scripted import DONE, RUNNING, Scripted

Sessions = async_sessionmaker[AsyncSession]
DAYS = [
    {"start": f"2021-06-0{d}T00:00:00Z", "end": f"2021-06-0{d + 1}T00:00:00Z"} for d in (4, 5, 6)
]
NOW = datetime(2021, 6, 7, 5, 0, tzinfo=UTC)


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
async def sessions(database_url: str) -> AsyncIterator[Sessions]:
    upgrade(database_url)
    engine = make_engine(database_url)
    yield session_factory(engine)
    await engine.dispose()


def plan(*dags: str, team: str = "data") -> dict[str, Any]:
    steps = [
        {"dag_id": dag, "namespace": "ns", "intervals": DAYS, "upstream": [],
         "owners": [team]}
        for dag in dags
    ]  # fmt: skip
    return {"dag_id": dags[0], "namespace": "ns", "start": DAYS[0]["start"],
            "end": DAYS[-1]["end"], "steps": steps}  # fmt: skip


async def approved(
    sessions: Sessions,
    runner: Runner,
    *dags: str,
    team: str = "data",
    max_active: int = 2,
    **options: Any,
) -> str:
    async with sessions.begin() as session:
        request = await repository.create_request(
            session, plan=plan(*dags, team=team), requester="U1", channel="C1",
            options={"max_active": max_active, **options},
        )  # fmt: skip
        await repository.transition_request(
            session, request.id, expected={"previewed"}, to="approved", actor="U2"
        )
        await runner.start(session, await repository.get_request(session, request.id))
        return request.id


def budgeted(**budget: Any) -> Execution:
    return Execution(poll_interval_s=0.01, progress_update_s=0, budget=Budget(**budget))


async def load(sessions: Sessions, request_id: str) -> BackfillRequest:
    async with sessions() as session:
        return await repository.get_request(session, request_id)


async def held(sessions: Sessions) -> dict[str, int]:
    """Runs held per DAG."""
    async with sessions() as session:
        rows = (await session.execute(
            select(BudgetClaim.step_id, BudgetClaim.granted)
        )).all()  # fmt: skip
        names = {}
        for step_id, granted in rows:
            step = await session.get(BackfillStep, step_id)
            assert step is not None
            names[step.dag_id] = granted
        return names


async def status_texts(sessions: Sessions, request_id: str) -> list[str]:
    """The status message's edits for a request, oldest first, as plain text of every block."""
    async with sessions() as session:
        rows = await session.scalars(
            select(Outbox)
            .where(Outbox.request_id == request_id, Outbox.method == "chat.update")
            .order_by(Outbox.id)
        )
        return [_text(row.payload) for row in rows]


def _text(payload: dict[str, Any]) -> str:
    parts = [str(payload.get("text", ""))]
    for block in payload.get("blocks", ()):
        if "text" in block:
            parts.append(str(block["text"].get("text", "")))
        for element in block.get("elements", ()):
            if isinstance(element, dict) and "text" in element:
                text = element["text"]
                parts.append(str(text.get("text", "") if isinstance(text, dict) else text))
    return "\n".join(parts)


async def test_backfills_share_the_budget_and_a_waiting_one_starts_when_runs_end(
    sessions: Sessions,
) -> None:
    backend = Scripted(polls={"a": [RUNNING], "b": [RUNNING], "c": [RUNNING]})
    runner = make_runner(sessions, backend, budgeted(total=4), clock=Clock(NOW))
    first = await approved(sessions, runner, "a")
    second = await approved(sessions, runner, "b")
    third = await approved(sessions, runner, "c")
    await runner.tick()
    assert backend.submitted == ["a", "b"]
    assert {w.dag.dag_id: w.budget for w in backend.works if w.budget} == {"a": 2, "b": 2}
    assert await held(sessions) == {"a": 2, "b": 2, "c": 0}
    waiting = await load(sessions, third)
    assert waiting.state == RequestState.RUNNING
    assert [s.state for s in waiting.steps] == ["pending"]
    texts = await status_texts(sessions, third)
    assert "Queued" in texts[-1]
    assert (
        "1st of 1 in the queue · waiting for the bot's budget (4 of 4 runs in use)" in (texts[-1])
    )

    backend.polls["a"] = [DONE]
    await runner.tick()  # a ends and gives its runs back
    await runner.tick()  # c takes them
    assert backend.submitted == ["a", "b", "c"]
    assert await held(sessions) == {"b": 2, "c": 2}
    assert (await load(sessions, first)).state == RequestState.SUCCEEDED
    assert "Queued" not in (await status_texts(sessions, third))[-1]
    backend.polls["b"] = backend.polls["c"] = [DONE]
    for _ in range(3):
        await runner.tick()
    assert {(await load(sessions, r)).state for r in (second, third)} == {"succeeded"}
    assert await held(sessions) == {}


async def test_a_high_priority_backfill_and_a_due_report_go_before_older_ones(
    sessions: Sessions,
) -> None:
    backend = Scripted(polls={d: [RUNNING] for d in "xlnuh"})
    clock = Clock(NOW)
    runner = make_runner(sessions, backend, budgeted(total=1), clock=clock)
    await approved(sessions, runner, "x", max_active=1)
    await runner.tick()
    kpis = Deadline(parse_days("daily"), parse_clock("08:00"), "UTC").to_json()
    low = await approved(sessions, runner, "l", priority="low")
    normal = await approved(sessions, runner, "n")
    urgent = await approved(sessions, runner, "u",
                            **{DEADLINES: [{"report": "KPIs", "deadline": kpis}]})  # fmt: skip
    high = await approved(sessions, runner, "h", priority="high")
    await runner.tick()  # each queues; a place counts those queued before it looked
    await runner.tick()
    places = {}
    for name, request_id in {"low": low, "normal": normal, "urgent": urgent, "high": high}.items():
        text = (await status_texts(sessions, request_id))[-1]
        places[name] = text.split(" of 4 in the queue")[0][-3:]
    assert places == {"high": "1st", "urgent": "2nd", "normal": "3rd", "low": "4th"}

    order = []
    for dag in "xhunl":
        backend.polls[dag] = [DONE]
        await runner.tick()
        await runner.tick()
        order.append(backend.submitted[-1])
    assert order == ["h", "u", "n", "l", "l"]


async def test_team_and_pool_limits_hold_only_what_they_cover(sessions: Sessions) -> None:
    backend = Scripted(polls={d: [RUNNING] for d in ("f1", "f2", "m1", "fin.a", "fin.b")})
    budget = budgeted(total=10, per_team=2, pools=[Pool(dags="fin.*", max=1)])
    runner = make_runner(sessions, backend, budget, clock=Clock(NOW))
    await approved(sessions, runner, "f1", team="finance")
    queued = await approved(sessions, runner, "f2", team="finance")
    await approved(sessions, runner, "m1", team="marketing")
    await approved(sessions, runner, "fin.a", team="ops", max_active=1)
    pooled = await approved(sessions, runner, "fin.b", team="ops", max_active=1)
    await runner.tick()
    assert sorted(backend.submitted) == ["f1", "fin.a", "m1"]
    assert (
        "waiting for team `finance`'s budget (2 of 2 runs in use)"
        in (await status_texts(sessions, queued))[-1]
    )
    assert (
        "waiting for the pool `fin.*` (1 of 1 runs in use)"
        in (await status_texts(sessions, pooled))[-1]
    )


async def test_the_queue_and_what_is_held_outlive_a_restart(sessions: Sessions) -> None:
    backend = Scripted(polls={d: [RUNNING] for d in "abc"})
    runner = make_runner(sessions, backend, budgeted(total=2), clock=Clock(NOW))
    await approved(sessions, runner, "a")
    second = await approved(sessions, runner, "b")
    third = await approved(sessions, runner, "c", priority="high")
    await runner.tick()
    assert backend.submitted == ["a"]

    # A new process: it does not start b or c while a holds the whole budget.
    again = make_runner(sessions, backend, budgeted(total=2), clock=Clock(NOW))
    await again.tick()
    assert backend.submitted == ["a"]
    backend.polls["a"] = [DONE]
    await again.tick()
    await again.tick()
    assert backend.submitted == ["a", "c"]  # high before the older b
    assert (await load(sessions, second)).steps[0].state == "pending"
    assert (await load(sessions, third)).steps[0].state in ("submitted", "running")


async def test_a_paused_or_cancelled_backfill_leaves_the_queue(sessions: Sessions) -> None:
    backend = Scripted(polls={d: [RUNNING] for d in "abc"})
    runner = make_runner(sessions, backend, budgeted(total=2), clock=Clock(NOW))
    await approved(sessions, runner, "a")
    paused = await approved(sessions, runner, "b")
    cancelled = await approved(sessions, runner, "c")
    await runner.tick()
    assert await held(sessions) == {"a": 2, "b": 0, "c": 0}
    async with sessions.begin() as session:
        assert await control.pause(session, paused, by="U1", reason="", at=NOW)
        await repository.transition_request(
            session, cancelled, expected={"running"}, to="cancelled", actor="U1"
        )
    await runner.tick()
    assert await held(sessions) == {"a": 2}
    backend.polls["a"] = [DONE]
    await runner.tick()
    await runner.tick()
    assert backend.submitted == ["a"]  # nothing else wanted the runs
    assert await held(sessions) == {}


async def test_without_a_budget_nothing_queues(sessions: Sessions) -> None:
    backend = Scripted(polls={d: [RUNNING] for d in "abc"})
    runner = make_runner(sessions, backend, Execution(poll_interval_s=0.01), clock=Clock(NOW))
    for dag in "abc":
        await approved(sessions, runner, dag)
    await runner.tick()
    assert backend.submitted == ["a", "b", "c"]
    assert all(w.budget is None for w in backend.works)
    assert await held(sessions) == {}


def test_a_deadline_is_read_in_its_zone() -> None:
    berlin = Deadline(parse_days("mon-fri"), parse_clock("08:00"), "Europe/Berlin")
    friday_noon = datetime(2021, 6, 4, 12, 0, tzinfo=UTC)
    assert berlin.next_after(friday_noon) == datetime(2021, 6, 7, 6, 0, tzinfo=UTC)
    assert berlin.next_after(friday_noon - timedelta(hours=7)) == datetime(
        2021, 6, 4, 6, 0, tzinfo=UTC
    )


async def test_within_a_backfill_the_way_to_the_most_urgent_report_goes_first(
    sessions: Sessions,
) -> None:
    backend = Scripted(polls={d: [DONE] for d in ("r", "b", "c")})
    settings = Execution(poll_interval_s=0.01, max_parallel_steps=1, budget=Budget(total=4))
    runner = make_runner(sessions, backend, settings, clock=Clock(NOW))
    kpis = Deadline(parse_days("daily"), parse_clock("08:00"), "UTC").to_json()
    steps = [
        {"dag_id": dag, "namespace": "ns", "intervals": DAYS, "upstream": up, "owners": ["t"]}
        for dag, up in (("r", []), ("b", ["r"]), ("c", ["r"]))
    ]
    async with sessions.begin() as session:
        request = await repository.create_request(
            session, plan={**plan("r"), "steps": steps}, requester="U1", channel="C1",
            options={DEADLINES: [{"report": "KPIs", "deadline": kpis, "dags": ["c"]}]},
        )  # fmt: skip
        await repository.transition_request(
            session, request.id, expected={"previewed"}, to="approved", actor="U2"
        )
        await runner.start(session, await repository.get_request(session, request.id))
    for _ in range(6):
        await runner.tick()
    assert backend.submitted == ["r", "c", "b"]  # c writes what KPIs reads, b feeds nothing


async def test_two_replicas_grant_no_more_than_the_budget(sessions: Sessions) -> None:
    """Two bot processes on one database pass over the same requests at the same time: the
    budget's lock lets them grant its runs once."""
    backend = Scripted(polls={d: [RUNNING] for d in "abcd"})
    one = make_runner(sessions, backend, budgeted(total=3), clock=Clock(NOW))
    two = make_runner(sessions, backend, budgeted(total=3), clock=Clock(NOW))
    for dag in "abcd":
        await approved(sessions, one, dag)
    for _ in range(4):
        await asyncio.gather(one.tick(), two.tick())
        assert sum((await held(sessions)).values()) <= 3
    assert sum((await held(sessions)).values()) == 3  # 2 for a, 1 for b: the rest wait
    assert sorted(set(backend.submitted)) == ["a", "b"]
