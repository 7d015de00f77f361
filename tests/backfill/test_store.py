"""The store's repository on real SQLite and PostgreSQL databases, migrated by Alembic."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator
from datetime import UTC, date, timedelta
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.backfill.store.models import BackfillRequest, BackfillStep
from bot.backfill.store.repository import (
    InvalidTransition,
    RequestNotFound,
    StepNotFound,
    create_request,
    delete_request,
    get_request,
    list_requests,
    set_status_message,
    transition_request,
    transition_step,
)
from bot.core.audit import list_audit
from bot.core.db import make_engine, session_factory, upgrade

Sessions = async_sessionmaker[AsyncSession]

PLAN: dict[str, Any] = {
    "dag_id": "заказы_daily",
    "namespace": "food_delivery",
    "start": "2024-03-01T00:00:00Z",
    "end": "2024-03-04T00:00:00Z",
    "range": "2024-03-01..2024-03-03",
    "steps": [
        {
            "dag_id": "заказы_daily",
            "namespace": "food_delivery",
            "intervals": [
                {"start": f"2024-03-0{d}T00:00:00Z", "end": f"2024-03-0{d + 1}T00:00:00Z"}
                for d in (1, 2, 3)
            ],
            "upstream": [],
            "schedule": "@daily",
        },
        {
            "dag_id": "配送_hourly_rollup",
            "namespace": "food_delivery",
            "intervals": [{"start": "2024-03-01T00:00:00Z", "end": "2024-03-04T00:00:00Z"}],
            "upstream": ["заказы_daily"],
        },
        {
            "dag_id": "café_weekly 🍕",
            "namespace": "analytics",
            "intervals": [{"start": "2024-02-26T00:00:00Z", "end": "2024-03-04T00:00:00Z"}],
            "upstream": ["заказы_daily", "配送_hourly_rollup"],
        },
    ],
}
OPTIONS = {"only": [], "exclude": ["legacy_dag"], "dry_run": False}


@pytest.fixture
async def sessions(database_url: str) -> AsyncIterator[Sessions]:
    upgrade(database_url)
    engine = make_engine(database_url)
    try:
        yield session_factory(engine)
    finally:
        await engine.dispose()


async def new_request(sessions: Sessions, requester: str = "U_ASKER") -> str:
    async with sessions.begin() as session:
        request = await create_request(
            session, plan=PLAN, requester=requester, channel="C_OPS", options=OPTIONS
        )
        return request.id


async def load(sessions: Sessions, request_id: str) -> BackfillRequest:
    async with sessions() as session:
        return await get_request(session, request_id)


async def actions(sessions: Sessions, request_id: str | None = None) -> list[str]:
    """Audit actions, oldest first."""
    async with sessions() as session:
        return [e.action for e in reversed(await list_audit(session, request_id=request_id))]


async def test_create_then_reload_keeps_every_field_and_the_step_order(sessions: Sessions) -> None:
    plan_before = copy.deepcopy(PLAN)
    request_id = await new_request(sessions)

    request = await load(sessions, request_id)

    assert len(request.id) == 32
    assert (request.requester, request.channel) == ("U_ASKER", "C_OPS")
    assert (request.root_dag, request.root_namespace) == ("заказы_daily", "food_delivery")
    # The plan's window is half-open; the request keeps the calendar days it covers.
    assert (request.start_date, request.end_date) == (date(2024, 3, 1), date(2024, 3, 3))
    assert (request.state, request.version, request.approvers) == ("previewed", 1, [])
    assert request.options == OPTIONS
    assert request.plan == plan_before == PLAN
    assert request.created_at.utcoffset() == timedelta(0)
    assert request.created_at == request.updated_at
    assert [s.position for s in request.steps] == [0, 1, 2]
    assert [s.dag_id for s in request.steps] == [s["dag_id"] for s in PLAN["steps"]]
    for step, raw in zip(request.steps, PLAN["steps"], strict=True):
        assert (step.namespace, step.intervals, step.upstream) == (
            raw["namespace"],
            raw["intervals"],
            raw["upstream"],
        )
        assert (step.state, step.counts, step.started_at, step.finished_at) == (
            "pending",
            {},
            None,
            None,
        )


async def test_non_ascii_json_round_trips_and_filters_by_requester(sessions: Sessions) -> None:
    first = await new_request(sessions, requester="U_Ünïcødé")
    await new_request(sessions, requester="cli")

    async with sessions() as session:
        mine = await list_requests(session, requester="U_Ünïcødé")
        previewed = await list_requests(session, state="previewed")
        none_running = await list_requests(session, state={"running", "approved"})
        newest = await list_requests(session, limit=1)

    assert [r.id for r in mine] == [first]
    assert mine[0].plan["steps"][2]["dag_id"] == "café_weekly 🍕"
    assert mine[0].steps[1].upstream == ["заказы_daily"]
    assert len(previewed) == 2
    assert none_running == []
    assert [r.requester for r in newest] == ["cli"]


async def test_rolled_back_create_leaves_neither_request_nor_audit(sessions: Sessions) -> None:
    async with sessions() as session:
        request = await create_request(session, plan=PLAN, requester="U_ASKER")
        await session.rollback()

    async with sessions() as session:
        assert await list_requests(session) == []
        assert await list_audit(session) == []
    with pytest.raises(RequestNotFound):
        await load(sessions, request.id)


async def test_create_and_transition_audit_in_the_same_transaction(sessions: Sessions) -> None:
    request_id = await new_request(sessions)
    async with sessions() as session:
        await transition_request(
            session, request_id, expected={"previewed"}, to="approved", actor="U_BOSS"
        )
        await session.rollback()

    assert (await load(sessions, request_id)).state == "previewed"
    async with sessions() as session:
        [created] = await list_audit(session, request_id=request_id)
    assert (created.action, created.actor, created.request_id) == (
        "request.created",
        "U_ASKER",
        request_id,
    )
    assert created.detail["steps"] == 3
    assert created.at.utcoffset() == timedelta(0)


@pytest.mark.parametrize(
    "path",
    [
        ["approved", "running", "succeeded"],
        ["approved", "running", "failed"],
        ["approved", "running", "cancelled"],
        ["approved", "failed"],
        ["approved", "cancelled"],
        ["refused"],
        ["cancelled"],
    ],
)
async def test_allowed_transitions_bump_version_and_audit(
    sessions: Sessions, path: list[str]
) -> None:
    request_id = await new_request(sessions)
    before = await load(sessions, request_id)
    current = "previewed"
    for version, to in enumerate(path, start=2):
        async with sessions.begin() as session:
            moved = await transition_request(
                session,
                request_id,
                expected={current},
                to=to,
                actor="U_BOSS",
                detail={"note": "ok"},
            )
        assert (moved.state, moved.version) == (to, version)
        current = to

    after = await load(sessions, request_id)
    assert (after.state, after.version) == (path[-1], len(path) + 1)
    assert after.updated_at >= before.updated_at
    assert after.approvers == (["U_BOSS"] if path[0] == "approved" else [])
    audited = await actions(sessions, request_id)
    assert audited == ["request.created", *(f"request.{s}" for s in path)]
    async with sessions() as session:
        latest = (await list_audit(session, request_id=request_id, limit=1))[0]
    assert (latest.actor, latest.detail["note"]) == ("U_BOSS", "ok")


@pytest.mark.parametrize(
    ("expected", "to"),
    [({"previewed"}, "running"), ({"previewed"}, "succeeded"), ({"succeeded"}, "running")],
)
async def test_moves_outside_the_state_machine_are_refused(
    sessions: Sessions, expected: set[str], to: str
) -> None:
    request_id = await new_request(sessions)

    with pytest.raises(ValueError, match="cannot move"):
        async with sessions.begin() as session:
            await transition_request(session, request_id, expected=expected, to=to, actor="U")

    request = await load(sessions, request_id)
    assert (request.state, request.version) == ("previewed", 1)
    assert await actions(sessions, request_id) == ["request.created"]


async def test_transition_from_the_wrong_state_raises_and_changes_nothing(
    sessions: Sessions,
) -> None:
    request_id = await new_request(sessions)

    with pytest.raises(InvalidTransition) as info:
        async with sessions.begin() as session:
            await transition_request(
                session, request_id, expected={"running"}, to="succeeded", actor="system"
            )

    assert (info.value.current, info.value.to) == ("previewed", "succeeded")
    request = await load(sessions, request_id)
    assert (request.state, request.version) == ("previewed", 1)
    assert await actions(sessions, request_id) == ["request.created"]
    with pytest.raises(RequestNotFound):
        async with sessions.begin() as session:
            await transition_request(
                session, "0" * 32, expected={"previewed"}, to="approved", actor="U"
            )


async def test_a_replayed_approval_says_it_is_already_approved(sessions: Sessions) -> None:
    request_id = await new_request(sessions)
    for _ in range(2):
        try:
            async with sessions.begin() as session:
                await transition_request(
                    session, request_id, expected={"previewed"}, to="approved", actor="U_BOSS"
                )
        except InvalidTransition as exc:
            replay = exc

    assert (replay.kind, replay.row_id, replay.current) == ("request", request_id, "approved")
    assert "approved" in str(replay)
    request = await load(sessions, request_id)
    assert (request.state, request.version, request.approvers) == ("approved", 2, ["U_BOSS"])
    assert await actions(sessions, request_id) == ["request.created", "request.approved"]


async def click(
    sessions: Sessions, request_id: str, both_loaded: asyncio.Barrier, to: str, actor: str
) -> str:
    """One Slack click: load the request, then move it (in one transaction)."""
    async with sessions.begin() as session:
        # Both handlers saw "previewed" before either acted, as with a double click.
        assert (await get_request(session, request_id)).state == "previewed"
        await both_loaded.wait()
        moved = await transition_request(
            session, request_id, expected={"previewed"}, to=to, actor=actor
        )
        return moved.state


async def test_racing_approve_and_cancel_exactly_one_wins(sessions: Sessions) -> None:
    for _ in range(3):
        request_id = await new_request(sessions)
        both_loaded = asyncio.Barrier(2)

        outcomes = await asyncio.gather(
            click(sessions, request_id, both_loaded, "approved", "U_A"),
            click(sessions, request_id, both_loaded, "cancelled", "U_B"),
            return_exceptions=True,
        )

        winners = [o for o in outcomes if isinstance(o, str)]
        losers = [o for o in outcomes if isinstance(o, InvalidTransition)]
        assert len(winners) == 1, outcomes
        assert len(losers) == 1, outcomes
        assert losers[0].current == winners[0]
        request = await load(sessions, request_id)
        assert (request.state, request.version) == (winners[0], 2)
        assert await actions(sessions, request_id) == ["request.created", f"request.{winners[0]}"]


async def test_step_transitions_set_timestamps_handles_and_counts(sessions: Sessions) -> None:
    request = await load(sessions, await new_request(sessions))
    first, second, third = request.steps

    async with sessions.begin() as session:
        submitted = await transition_step(
            session,
            first.id,
            expected={"pending"},
            to="submitted",
            executor="airflow3",
            executor_handle="backfill__2024-03-01",
        )
    async with sessions.begin() as session:
        running = await transition_step(session, first.id, expected={"submitted"}, to="running")
    async with sessions.begin() as session:
        done = await transition_step(
            session, first.id, expected={"running"}, to="succeeded", counts={"runs": 3}
        )
    async with sessions.begin() as session:
        skipped = await transition_step(
            session, second.id, expected={"pending"}, to="skipped", actor="U_BOSS"
        )

    assert submitted.started_at is not None
    assert submitted.started_at.tzinfo == UTC
    assert submitted.finished_at is None
    assert (submitted.executor, submitted.executor_handle) == ("airflow3", "backfill__2024-03-01")
    assert running.started_at == submitted.started_at
    assert done.finished_at is not None
    assert done.finished_at >= submitted.started_at
    assert (done.state, done.counts, done.executor) == ("succeeded", {"runs": 3}, "airflow3")
    assert (skipped.started_at, skipped.finished_at is not None) == (None, True)
    reloaded = await load(sessions, request.id)
    assert [s.state for s in reloaded.steps] == ["succeeded", "skipped", "pending"]
    assert (await actions(sessions, request.id))[1:] == [
        "step.submitted",
        "step.running",
        "step.succeeded",
        "step.skipped",
    ]

    with pytest.raises(ValueError, match="cannot move"):
        async with sessions.begin() as session:
            await transition_step(session, third.id, expected={"pending"}, to="running")
    with pytest.raises(InvalidTransition) as info:
        async with sessions.begin() as session:
            await transition_step(session, first.id, expected={"running"}, to="failed")
    assert info.value.current == "succeeded"
    with pytest.raises(StepNotFound):
        async with sessions.begin() as session:
            await transition_step(session, "f" * 32, expected={"pending"}, to="skipped")
    assert len(await actions(sessions, request.id)) == 5


async def test_status_message_is_remembered(sessions: Sessions) -> None:
    request_id = await new_request(sessions)
    async with sessions.begin() as session:
        await set_status_message(session, request_id, channel="C_OPS", ts="1712.000100")

    request = await load(sessions, request_id)
    assert (request.status_channel, request.status_message_ts, request.version) == (
        "C_OPS",
        "1712.000100",
        2,
    )


async def test_deleting_a_request_cascades_to_steps_and_unlinks_audit(
    sessions: Sessions,
) -> None:
    kept = await new_request(sessions)
    doomed = await load(sessions, await new_request(sessions))

    async with sessions.begin() as session:
        assert await delete_request(session, doomed.id) is True
        assert await delete_request(session, doomed.id) is False

    with pytest.raises(RequestNotFound):
        await load(sessions, doomed.id)
    with pytest.raises(StepNotFound):
        async with sessions.begin() as session:
            await transition_step(session, doomed.steps[0].id, expected={"pending"}, to="skipped")
    async with sessions() as session:
        step_requests = await session.scalars(select(BackfillStep.request_id).distinct())
        assert list(step_requests) == [kept]
        assert await session.scalar(select(func.count()).select_from(BackfillStep)) == 3
        orphaned = [e for e in await list_audit(session) if e.request_id is None]
    assert [e.action for e in orphaned] == ["request.created"]
