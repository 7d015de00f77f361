"""Retry of a failed backfill (RetryService) on SQLite and PostgreSQL: a backfill fails through
the Runner, Retry posts a new plan of what did not succeed in its thread (the outbox row and its
preview), refusals are clear and audited, and the retry, approved with the ordinary Approve,
runs only those DAGs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.backfill.messages.progress import status_payload
from bot.backfill.rules.progress import Counts
from bot.backfill.rules.states import RequestState
from bot.backfill.run.backends import Finding, Progress, State, StepWork
from bot.backfill.run.runner import Runner
from bot.backfill.service.backfills import BackfillService
from bot.backfill.service.retry import RetryService
from bot.backfill.store import repository
from bot.backfill.store.models import BackfillRequest
from bot.config import Execution, parse_config
from bot.core.audit import AuditEntry
from bot.core.db import make_engine, session_factory, upgrade
from bot.core.model import DagRef
from bot.slack.rules.ids import ActionId
from bot.slack.store.models import OutboxMessage, OutboxRole
from tests.support.answers import said
from tests.support.factories import backfill_service, retry_service
from tests.support.factories import runner as make_runner

OWNER, REQUESTER, RETRIER = "U0OWNER001", "U0REQ00001", "U0RETRY001"
CHANNEL = "C0BACKFILL"
DAY = {"start": "2021-06-04T00:00:00Z", "end": "2021-06-05T00:00:00Z"}
NEXT = {"start": "2021-06-05T00:00:00Z", "end": "2021-06-06T00:00:00Z"}
# orders → (delivery, kpis); delivery → report; audit on its own
PLAN = {
    "dag_id": "orders",
    "namespace": "ns",
    "start": DAY["start"],
    "end": NEXT["end"],
    "steps": [
        {"dag_id": "orders", "namespace": "ns", "intervals": [DAY, NEXT], "upstream": []},
        {"dag_id": "delivery", "namespace": "ns", "intervals": [DAY], "upstream": ["orders"]},
        {"dag_id": "kpis", "namespace": "ns", "intervals": [NEXT], "upstream": ["orders"]},
        {"dag_id": "report", "namespace": "ns", "intervals": [DAY], "upstream": ["delivery"]},
        {"dag_id": "audit", "namespace": "ns", "intervals": [DAY], "upstream": []},
    ],
}
CONFIG = parse_config(
    {
        "teams": [{"name": "orders", "members": [OWNER]}],
        "ownership": [{"pattern": "ns::*", "team": "orders"}],
    }
)


@dataclass
class Flaky:
    """Every DAG succeeds at its first poll, except those in `failing` (with a message)."""

    failing: set[str] = field(default_factory=set)
    name: str = "flaky"
    submitted: list[str] = field(default_factory=list)

    async def check(self, dags: Sequence[DagRef]) -> dict[DagRef, Finding]:
        return {}

    async def submit(self, work: StepWork) -> State:
        self.submitted.append(work.dag.dag_id)
        return {"handle": work.dag.dag_id}

    async def poll(self, work: StepWork) -> Progress:
        runs = len(work.intervals)
        if work.dag.dag_id in self.failing:
            counts = Counts(failed=runs)
            return Progress(counts, done=True, message=f"Task load failed: disk full ({runs})")
        return Progress(Counts(succeeded=runs), done=True, ok=True)

    async def cancel(self, work: StepWork) -> State | None:
        return None

    def link(self, work: StepWork) -> str | None:
        return None

    async def close(self) -> None:
        return None


@dataclass
class Bot:
    sessions: async_sessionmaker[AsyncSession]
    backend: Flaky
    runner: Runner
    backfills: BackfillService
    retries: RetryService

    async def load(self, request_id: str) -> BackfillRequest:
        async with self.sessions() as session:
            return await repository.get_request(session, request_id)

    async def run_to_the_end(self, request_id: str) -> BackfillRequest:
        for _ in range(20):
            await self.runner.advance(request_id)
            request = await self.load(request_id)
            if request.finished_at is not None:
                return request
        raise AssertionError("the backfill did not finish")

    async def failed_backfill(
        self,
        failing: set[str],
        *,
        thread_ts: str | None = None,
        options: dict[str, Any] | None = None,
    ) -> str:
        """A backfill of PLAN that ran and failed at `failing`; its status message is posted."""
        self.backend.failing = failing
        async with self.sessions.begin() as session:
            row = await repository.create_request(
                session, plan=PLAN, requester=REQUESTER, channel=CHANNEL, options=options
            )
            await repository.set_status_message(session, row.id, channel=CHANNEL, ts="111.000")
            if thread_ts:  # asked for from an incident's alert: it lives in the alert's thread
                await session.execute(
                    update(BackfillRequest)
                    .where(BackfillRequest.id == row.id)
                    .values(thread_ts=thread_ts, incident_id="inc0001")
                )
            await repository.transition_request(
                session, row.id, expected={"previewed"}, to="approved", actor=OWNER
            )
            await self.runner.start(session, await repository.get_request(session, row.id))
        request = await self.run_to_the_end(row.id)
        assert request.state == RequestState.FAILED
        self.backend.failing = set()
        return row.id

    async def outbox_of(self, request_id: str) -> list[OutboxMessage]:
        async with self.sessions() as session:
            rows = await session.scalars(
                select(OutboxMessage)
                .where(OutboxMessage.request_id == request_id)
                .order_by(OutboxMessage.id)
            )
            return list(rows)

    async def audit(self, action: str) -> list[AuditEntry]:
        async with self.sessions() as session:
            rows = await session.scalars(
                select(AuditEntry).where(AuditEntry.action == action).order_by(AuditEntry.id)
            )
            return list(rows)


class NoGroups:
    async def members(self, group_id: str) -> frozenset[str]:
        return frozenset()


def no_planner() -> Any:
    raise AssertionError("a retry never plans: it reuses the failed plan")


@pytest.fixture
async def bot(database_url: str) -> AsyncIterator[Bot]:
    upgrade(database_url)
    engine = make_engine(database_url)
    sessions = session_factory(engine)
    backend = Flaky()
    runner = make_runner(sessions, backend, Execution(poll_interval_s=0.01))
    yield Bot(
        sessions,
        backend,
        runner,
        backfill_service(sessions, CONFIG, no_planner, runner, NoGroups()),
        retry_service(sessions),
    )
    await engine.dispose()


def mrkdwn_texts(payload: dict[str, Any]) -> list[str]:
    texts = []
    for block in payload["blocks"]:
        if isinstance(block.get("text"), dict):
            texts.append(block["text"]["text"])
        texts += [e["text"] for e in block.get("elements", []) if e.get("type") == "mrkdwn"]
    return texts


def text_of(payload: dict[str, Any]) -> str:
    return "\n".join(mrkdwn_texts(payload))


def elements(payload: dict[str, Any]) -> list[dict[str, Any]]:
    """The buttons: in actions blocks and as section accessories."""
    found = []
    for block in payload["blocks"]:
        if block["type"] == "actions":
            found += block["elements"]
        if "accessory" in block:
            found.append(block["accessory"])
    return found


async def test_a_retry_keeps_the_options_but_reruns_every_interval(bot: Bot) -> None:
    chosen = {"rerun": "missing", "reason": "late feed", "max_active": 2,
              "counts": {"missing": 0, "failed": 1, "all": 5, "known": True}}  # fmt: skip
    failed_id = await bot.failed_backfill({"delivery"}, options=chosen)
    reply = await said(bot.retries.retry(failed_id, user=RETRIER))
    assert reply.request_id is not None
    retry = await bot.load(reply.request_id)
    # Under --rerun missing the failed interval, which has a run, would not run again.
    assert retry.options["rerun"] == "all"
    assert (retry.options["reason"], retry.options["max_active"]) == ("late feed", 2)
    assert retry.options["counts"] is None  # the old plan's


async def test_the_failed_status_offers_retry_and_says_why(bot: Bot) -> None:
    failed = await bot.load(await bot.failed_backfill({"delivery"}))
    status = status_payload(failed)
    assert [(e["action_id"], e["value"]) for e in elements(status)] == [
        (ActionId.RETRY, failed.id),
        (ActionId.RETRY_TASKS, failed.id),
    ]
    row = next(t for t in mrkdwn_texts(status) if "`delivery`" in t)
    assert "failed" in row
    assert "Task load failed: disk full (1)" in row


async def test_retry_posts_a_plan_of_what_did_not_succeed_in_the_failed_thread(
    bot: Bot,
) -> None:
    failed_id = await bot.failed_backfill({"delivery"})
    failed = await bot.load(failed_id)
    assert {s.dag_id: s.state for s in failed.steps} == {
        "orders": "succeeded",
        "delivery": "failed",
        "kpis": "succeeded",
        "report": "skipped",
        "audit": "succeeded",
    }

    reply = await said(bot.retries.retry(failed_id, user=RETRIER))

    assert reply.changed
    assert reply.request_id is not None
    assert reply.request_id != failed_id
    assert f"Retry plan {reply.request_id}" in text_of(reply.payload)
    retry = await bot.load(reply.request_id)
    assert retry.state == RequestState.PREVIEWED
    assert retry.retry_of == failed_id
    assert retry.channel == CHANNEL
    assert retry.thread_ts == "111.000"  # the failed backfill's status message
    assert retry.requester == RETRIER
    assert retry.root_dag == "delivery"
    assert [(s.dag_id, s.intervals, s.upstream) for s in retry.steps] == [
        ("delivery", [DAY], []),  # orders succeeded: nothing to wait for
        ("report", [DAY], ["delivery"]),
    ]
    assert (retry.start_date, retry.end_date) == (failed.start_date, failed.end_date)

    [posted] = await bot.outbox_of(retry.id)
    assert (posted.role, posted.channel, posted.method) == (
        OutboxRole.STATUS,
        CHANNEL,
        "chat.postMessage",
    )
    preview = text_of(posted.payload)
    assert f"Retry of backfill `{failed_id}`" in preview
    assert "`delivery`" in preview
    assert "`report`" in preview
    assert "`orders`" not in preview
    assert "`kpis`" not in preview
    assert [(e["action_id"], e["value"]) for e in elements(posted.payload)] == [
        (ActionId.APPROVE, retry.id),
        (ActionId.REVIEW, retry.id),
        (ActionId.CANCEL, retry.id),
    ]
    [audited] = await bot.audit("request.retry")
    assert (audited.actor, audited.request_id) == (RETRIER, failed_id)
    assert audited.detail["retry"] == retry.id


async def test_an_approved_retry_runs_only_what_did_not_succeed(bot: Bot) -> None:
    failed_id = await bot.failed_backfill({"delivery", "audit"})
    bot.backend.submitted.clear()
    retry_id = (await said(bot.retries.retry(failed_id, user=RETRIER))).request_id
    assert retry_id is not None

    approved = await said(bot.backfills.approve(retry_id, user=OWNER))
    assert approved.changed, approved.payload
    retry = await bot.run_to_the_end(retry_id)

    assert retry.state == RequestState.SUCCEEDED
    assert sorted(bot.backend.submitted) == ["audit", "delivery", "report"]
    assert bot.backend.submitted.index("delivery") < bot.backend.submitted.index("report")


async def test_the_retry_of_a_backfill_in_an_alert_thread_stays_there(bot: Bot) -> None:
    failed_id = await bot.failed_backfill({"orders"}, thread_ts="999.000")
    retry_id = (await said(bot.retries.retry(failed_id, user=RETRIER))).request_id
    assert retry_id is not None
    retry = await bot.load(retry_id)
    assert retry.thread_ts == "999.000"
    assert retry.incident_id == "inc0001"
    # orders failed: everything but audit (which succeeded) is retried, in plan order
    assert [s.dag_id for s in retry.steps] == ["orders", "delivery", "kpis", "report"]
    assert [s.upstream for s in retry.steps] == [[], ["orders"], ["orders"], ["delivery"]]


async def test_a_second_retry_is_refused_while_the_first_is_open(bot: Bot) -> None:
    failed_id = await bot.failed_backfill({"kpis"})
    first = await said(bot.retries.retry(failed_id, user=RETRIER))
    assert first.request_id is not None

    again = await said(bot.retries.retry(failed_id, user=OWNER))

    assert not again.changed
    assert again.request_id is None
    words = text_of(again.payload)
    assert f"already being retried by backfill {first.request_id} (previewed)" in words
    [refused] = await bot.audit("retry.refused")
    assert refused.actor == OWNER
    assert refused.detail["retry"] == first.request_id

    # Once that retry is cancelled, the failed backfill may be retried again.
    assert (await said(bot.backfills.cancel(first.request_id, user=RETRIER))).changed
    third = await said(bot.retries.retry(failed_id, user=OWNER))
    assert third.changed
    assert third.request_id not in (None, first.request_id)


async def test_two_clicks_at_once_make_one_retry(bot: Bot) -> None:
    failed_id = await bot.failed_backfill({"kpis"})
    replies = await asyncio.gather(
        said(bot.retries.retry(failed_id, user=RETRIER)),
        said(bot.retries.retry(failed_id, user=OWNER)),
    )
    assert sorted(r.changed for r in replies) == [False, True]
    async with bot.sessions() as session:
        retries = await session.scalars(
            select(BackfillRequest.id).where(BackfillRequest.retry_of == failed_id)
        )
        assert len(list(retries)) == 1


@pytest.mark.parametrize("state", ["previewed", "running", "succeeded"])
async def test_only_a_failed_backfill_can_be_retried(bot: Bot, state: str) -> None:
    async with bot.sessions.begin() as session:
        row = await repository.create_request(
            session, plan=PLAN, requester=REQUESTER, channel=CHANNEL
        )
        if state != "previewed":
            await repository.transition_request(
                session, row.id, expected={"previewed"}, to="approved", actor=OWNER
            )
            await bot.runner.start(session, await repository.get_request(session, row.id))
    if state == "succeeded":
        await bot.run_to_the_end(row.id)

    reply = await said(bot.retries.retry(row.id, user=RETRIER))

    assert not reply.changed
    assert f"Backfill {row.id} is {state}: only a failed backfill can be retried." in text_of(
        reply.payload
    )
    [refused] = await bot.audit("retry.refused")
    assert (refused.actor, refused.detail["request_id"]) == (RETRIER, row.id)
    assert await bot.audit("request.retry") == []


async def test_retrying_an_unknown_backfill_is_refused(bot: Bot) -> None:
    reply = await said(bot.retries.retry("0" * 32, user=RETRIER))
    assert not reply.changed
    assert f"Backfill {'0' * 32} does not exist." in text_of(reply.payload)
    assert len(await bot.audit("retry.refused")) == 1
