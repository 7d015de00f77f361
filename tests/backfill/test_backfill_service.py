"""BackfillService against a real database: the hand-off happens exactly once, never after a
cancel, and a bot in Socket Mode without a signing secret exposes no unsigned route."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from slack_sdk.web.async_client import AsyncWebClient
from sqlalchemy import func, select

from bot.app import build_services
from bot.backfill.rules.states import RequestState
from bot.backfill.run.manual import ManualExecutor
from bot.backfill.service.backfills import BackfillService
from bot.backfill.store import repository
from bot.config import parse_config
from bot.core.audit import AuditEntry
from bot.core.db import make_engine, session_factory, upgrade
from bot.lineage.service.planning import Planner
from bot.settings import load_settings
from bot.slack.store.models import OutboxMessage
from bot.web import create_web_app
from tests.support.answers import said
from tests.support.factories import backfill_service

PLAN = {
    "dag_id": "example.etl_orders",
    "namespace": "food_delivery",
    "start": "2021-06-04T00:00:00Z",
    "end": "2021-06-05T00:00:00Z",
    "steps": [
        {
            "dag_id": "example.etl_orders",
            "namespace": "food_delivery",
            "intervals": [{"start": "2021-06-04T00:00:00Z", "end": "2021-06-05T00:00:00Z"}],
            "upstream": [],
        }
    ],
}
CONFIG = parse_config(
    {
        "teams": [{"name": "orders", "members": ["U0OWNER001"]}],
        "ownership": [{"pattern": "example.*", "team": "orders"}],
    }
)


class NoGroups:
    async def members(self, group_id: str) -> frozenset[str]:
        return frozenset()


@asynccontextmanager
async def no_planner() -> AsyncIterator[Planner]:
    raise AssertionError("these tests never plan")
    yield  # pragma: no cover


@pytest.fixture
async def service(database_url: str) -> AsyncIterator[BackfillService]:
    upgrade(database_url)
    engine = make_engine(database_url)
    yield backfill_service(
        session_factory(engine), CONFIG, no_planner, ManualExecutor(), NoGroups()
    )
    await engine.dispose()


async def approved_request(service: BackfillService) -> str:
    async with service.sessions.begin() as session:
        row = await repository.create_request(
            session, plan=PLAN, requester="U0REQ00001", channel="C1"
        )
        await repository.transition_request(
            session, row.id, expected={RequestState.PREVIEWED}, to=RequestState.APPROVED,
            actor="U0OWNER001",
        )  # fmt: skip
        return row.id


async def counts(service: BackfillService, request_id: str) -> tuple[int, int]:
    async with service.sessions() as session:
        handed = await session.scalar(
            select(func.count())
            .select_from(AuditEntry)
            .where(AuditEntry.request_id == request_id, AuditEntry.action == "request.handed_off")
        )
        thread = await session.scalar(
            select(func.count())
            .select_from(OutboxMessage)
            .where(OutboxMessage.request_id == request_id, OutboxMessage.role == "thread")
        )
    return int(handed or 0), int(thread or 0)


async def test_hand_off_happens_once_even_when_asked_twice(service: BackfillService) -> None:
    request_id = await approved_request(service)
    results = await asyncio.gather(service.hand_off(request_id), service.hand_off(request_id))
    assert sorted(results) == [False, True]
    assert await service.resume() == 0
    assert await counts(service, request_id) == (1, 1)


async def test_a_cancelled_request_is_never_handed_off(service: BackfillService) -> None:
    request_id = await approved_request(service)
    reply = await said(service.cancel(request_id, user="U0REQ00001"))
    assert reply.changed
    assert await service.hand_off(request_id) is False
    assert await service.resume() == 0
    assert await counts(service, request_id) == (0, 0)


async def test_cancel_racing_the_hand_off_leaves_a_consistent_record(
    service: BackfillService,
) -> None:
    request_id = await approved_request(service)
    handed, reply = await asyncio.gather(
        service.hand_off(request_id), said(service.cancel(request_id, user="U0REQ00001"))
    )
    async with service.sessions() as session:
        state = (await repository.get_request(session, request_id)).state
    assert state == "cancelled"
    assert reply.changed
    assert await counts(service, request_id) == ((1, 1) if handed else (0, 0))


async def test_socket_mode_without_a_secret_serves_no_events_route(tmp_path: object) -> None:
    settings = load_settings(
        {
            "DATABASE_URL": f"sqlite:///{tmp_path}/bot.db",
            "SLACK_BOT_TOKEN": "xoxb-test",
            "SLACK_APP_TOKEN": "xapp-test",
        }
    )
    services = build_services(settings, CONFIG, AsyncWebClient(token="xoxb-test"))
    from bot.app import create_bolt_app

    app: web.Application = create_web_app(create_bolt_app(services), services)
    async with TestClient(TestServer(app)) as client:
        reply = await client.post(
            "/slack/events", data="command=/backfill&text=help&user_id=U0ATTACKER"
        )
        assert reply.status in (404, 405)
        assert (await client.get("/healthz")).status == 200


async def test_someone_who_may_not_cancel_is_told_so_in_words_about_cancelling(
    service: BackfillService,
) -> None:
    request_id = await approved_request(service)
    reply = await said(service.cancel(request_id, user="U0STRANGER"))
    reason = (
        "You may not cancel backfills of example.etl_orders: only the requester, members of its "
        "owning teams (orders) or the configured approvers may. Ask one of them to click Cancel."
    )
    assert (reply.changed, reply.payload["text"]) == (False, f":no_entry: {reason}")
    async with service.sessions() as session:
        refused = await session.scalar(
            select(AuditEntry).where(
                AuditEntry.request_id == request_id, AuditEntry.action == "cancel.refused"
            )
        )
    assert refused is not None
    assert (refused.actor, refused.detail) == ("U0STRANGER", {"reason": reason})
