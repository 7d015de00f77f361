"""Quiet hours: notices held for a sink are not sent before their time, and then arrive as ONE
digest per sink (an e-mail over real SMTP, a signed webhook document, a Teams card), in order,
exactly once: across a restart between forming and sending it, through a failing receiver
(retried with the same delivery id) and when two senders race for it. On SQLite and
PostgreSQL."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from bot.config import BotConfig, parse_config
from bot.core.db import make_engine, session_factory, upgrade
from bot.core.metrics import Metrics
from bot.core.model import DagRef
from bot.hub.messages.digest import digest_body
from bot.hub.messages.documents import body_for
from bot.hub.rules.routing import HubEvent, HubKind
from bot.hub.service.sender import SinkSender
from bot.hub.store import deliveries
from bot.hub.store.models import SinkDelivery
from bot.incidents.store.models import Incident
from standins.sinks.teams import TeamsStandin, running_teams_standin
from standins.sinks.webhook import WebhookReceiver, running_webhook_receiver
from tests.support.smtp import PASSWORD, USER, Mailbox, smtp_server

SECRET = "digest-hook-signing-secret"
T = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=2)  # when quiet hours end
BEFORE = T - timedelta(minutes=10)
DAGS = ["example.etl_orders", "example.<b>delivery</b>", "reporting.weekly_kpis"]


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


@dataclass
class World:
    url: str
    config: BotConfig
    hook: WebhookReceiver
    teams: TeamsStandin
    mailbox: Mailbox
    clock: Clock
    engines: list[AsyncEngine]
    senders: list[SinkSender]

    def sessions(self) -> async_sessionmaker[AsyncSession]:
        """A new engine's sessions, as another process (or the same after a restart) has."""
        engine = make_engine(self.url)
        self.engines.append(engine)
        return session_factory(engine)

    def sender(self, metrics: Metrics | None = None) -> SinkSender:
        sender = SinkSender(
            self.sessions(), self.config, clock=self.clock, metrics=metrics or Metrics()
        )
        self.senders.append(sender)
        return sender


@pytest.fixture
def smtp(tmp_path: Path) -> Iterator[tuple[Mailbox, int, Path]]:
    with smtp_server(tmp_path) as server:
        yield server


@pytest.fixture
async def world(database_url: str, smtp: tuple[Mailbox, int, Path]) -> AsyncIterator[World]:
    mailbox, port, ca = smtp
    upgrade(database_url)
    async with running_webhook_receiver(SECRET) as hook, running_teams_standin() as teams:
        config = parse_config(
            {
                "sinks": [
                    {"name": "data-hook", "kind": "webhook", "url": hook.url_for("data"),
                     "secret": SECRET},
                    {"name": "other-hook", "kind": "webhook", "url": hook.url_for("other"),
                     "secret": SECRET},
                    {"name": "orders-mail", "kind": "email", "host": "127.0.0.1", "port": port,
                     "username": USER, "password": PASSWORD, "sender": "bot@example.com",
                     "to": ["orders@example.com"], "ca_file": str(ca)},
                    {"name": "orders-teams", "kind": "teams", "url": teams.workflow_url},
                ],
                "hub": {"retry_base_s": 1.0, "retry_max_s": 4.0},
            }
        )  # fmt: skip
        found = World(database_url, config, hook, teams, mailbox, Clock(BEFORE), [], [])
        try:
            yield found
        finally:
            for sender in found.senders:
                await sender.close()
            for engine in found.engines:
                await engine.dispose()


def event(n: int, kind: HubKind = "failure.opened", incident: str = "") -> HubEvent:
    return HubEvent(
        kind=kind,
        dag=DagRef("food_delivery", DAGS[n % len(DAGS)]),
        at=BEFORE - timedelta(hours=3) + timedelta(minutes=n),
        intervals=f"2021-06-0{n + 1}",
        owners=("orders",),
        incident_id=incident or f"inc{n}",
        error=f"error <{n}> & more",
    )


async def owe(
    world: World,
    sink: str,
    events: list[HubEvent],
    *,
    held: bool = True,
    incident_id: str | None = None,
) -> None:
    found = world.config.sink(sink)
    assert found is not None
    sessions = world.sessions()
    async with sessions.begin() as session:
        for e in events:
            assert await deliveries.enqueue(
                session,
                sink=sink,
                kind=found.kind,
                event_key=f"incident:{e.incident_id}:{e.kind}:{e.at.isoformat()}",
                body=body_for(found, e),
                incident_id=incident_id,
                held_until=T if held else None,
            )


async def owe_all(world: World, events: list[HubEvent]) -> None:
    for sink in ("data-hook", "orders-mail", "orders-teams"):
        await owe(world, sink, events)


async def rows(world: World) -> list[SinkDelivery]:
    async with world.sessions()() as session:
        return list(await session.scalars(select(SinkDelivery).order_by(SinkDelivery.id)))


async def new_incident(world: World, dag: str) -> str:
    async with world.sessions().begin() as session:
        incident = Incident(namespace="food_delivery", dag_id=dag, interval_key="2021-06-04")
        session.add(incident)
        await session.flush()
        return incident.id


def card_titles(message: dict[str, Any]) -> list[str]:
    """The card's heading, then each notice's (a Container's first TextBlock)."""
    body = message["attachments"][0]["content"]["body"]
    return [body[0]["text"]] + [
        item["items"][0]["text"] for item in body if item["type"] == "Container"
    ]


def sample(registry: Metrics, sink: str, outcome: str) -> float:
    labels = {"sink": sink, "outcome": outcome}
    value = registry.registry.get_sample_value("backfill_bot_sink_deliveries_total", labels)
    return value or 0.0


async def test_held_notices_wait_for_the_quiet_hours_end_then_go_as_one_digest_per_sink(
    world: World,
) -> None:
    events = [event(n) for n in range(3)]
    await owe_all(world, events)
    await owe(world, "other-hook", [event(7)], held=False)
    metrics = Metrics()
    sender = world.sender(metrics)

    await sender.drain()
    # before T: only the notice that was not held (another sink) went, as itself
    [other] = world.hook.documents("other")
    assert other["type"] == "failure.opened"
    assert world.hook.documents("data") == []
    assert world.mailbox.messages == []
    assert world.teams.messages == []

    world.clock.now = T - timedelta(seconds=1)
    assert await sender.deliver_due() == 0
    assert world.hook.documents("data") == []

    world.clock.now = T
    await sender.drain()
    await sender.drain()  # nothing more
    # the webhook: one document carrying the three held ones, in order
    [received] = [d for d in world.hook.deliveries if d.name == "data"]
    digest = received.document
    assert (digest["version"], digest["type"]) == ("1", "digest")
    assert digest["occurred_at"] == T.isoformat().replace("+00:00", "Z")
    assert digest["events"] == [body_for(world.config.sinks[0], e) for e in events]
    assert received.delivery_id.startswith("data-hook/digest:")
    # the e-mail: one message listing each notice's subject and text, escaped in the HTML
    [mail] = world.mailbox.messages
    assert mail["Subject"] == "[backfill-bot] 3 notices held during quiet hours"
    text_part = mail.get_body(preferencelist=("plain",))
    html_part = mail.get_body(preferencelist=("html",))
    assert text_part is not None
    assert html_part is not None
    text, html = text_part.get_content(), html_part.get_content()
    positions = [text.index(f"{n + 1}. {e.dag.dag_id} failed for") for n, e in enumerate(events)]
    assert positions == sorted(positions)
    assert "error <2> & more" in text
    assert "<b>delivery</b>" not in html
    assert "example.&lt;b&gt;delivery&lt;/b&gt;" in html
    assert "error &lt;0&gt; &amp; more" in html
    # Teams: one card, a section per notice in order
    [card] = world.teams.messages
    teams_sink = world.config.sink("orders-teams")
    assert teams_sink is not None
    held_titles = [card_titles(body_for(teams_sink, e))[0] for e in events]
    assert held_titles[0] == "example.etl\\_orders failed for 2021-06-01"  # escaped, as sent
    assert card_titles(card) == ["3 notices held during quiet hours", *held_titles]
    # the held rows are recorded as sent into their digest; the digest as sent
    stored = await rows(world)
    held = [r for r in stored if r.held_until is not None]
    digests = [r for r in stored if r.event_key.startswith("digest:")]
    assert len(held) == 9
    assert {r.state for r in held} == {"sent"}
    assert {(r.sink, r.state, r.kind) for r in digests} == {
        ("data-hook", "sent", "webhook"),
        ("orders-mail", "sent", "email"),
        ("orders-teams", "sent", "teams"),
    }
    for d in digests:
        mine = [r for r in held if r.sink == d.sink]
        assert d.event_key == f"digest:{mine[0].id}-{mine[-1].id}"
        assert {r.error for r in mine} == {f"in digest {d.event_key}"}
    # digests are counted like any delivery: one each
    for sink in ("data-hook", "orders-mail", "orders-teams", "other-hook"):
        assert sample(metrics, sink, "delivered") == 1.0


async def test_a_digest_formed_before_a_restart_is_sent_once_after_it(world: World) -> None:
    await owe_all(world, [event(0), event(1)])
    world.clock.now = T
    first = world.sender()
    assert await first.form_digests() == 3
    assert await first.form_digests() == 0  # the held rows are in them already
    assert world.hook.deliveries == []
    assert world.mailbox.messages == []
    # "restart": a new sender on the same database
    second = world.sender()
    await second.drain()
    await second.drain()
    assert len(world.hook.deliveries) == 1
    assert len(world.hook.documents("data")[0]["events"]) == 2
    assert len(world.mailbox.messages) == 1
    assert len(world.teams.messages) == 1
    assert [r.state for r in await rows(world)] == ["sent"] * 9


async def test_a_failing_receiver_gets_the_digest_again_with_the_same_delivery_id(
    world: World,
) -> None:
    await owe(world, "data-hook", [event(0), event(1)])
    world.hook.fail_next(503, times=2)
    world.clock.now = T
    sender = world.sender()
    await sender.deliver_due()
    for _ in range(2):
        world.clock.now += timedelta(seconds=10)  # past the backoff
        await sender.deliver_due()
    statuses = [(a.delivery_id, a.status) for a in world.hook.attempts]
    digest_id = statuses[0][0]
    assert digest_id is not None
    assert digest_id.startswith("data-hook/digest:")
    assert statuses == [(digest_id, 503), (digest_id, 503), (digest_id, 200)]
    # the answer was lost (as if the bot died before recording it): sent again, same id
    async with world.sessions().begin() as session:
        await session.execute(
            update(SinkDelivery)
            .where(SinkDelivery.event_key.startswith("digest:"))
            .values(state="pending", next_attempt_at=T)
        )
    await sender.deliver_due()
    assert [d.delivery_id for d in world.hook.deliveries] == [digest_id, digest_id]
    [document] = world.hook.documents("data")  # the receiver processes it once
    assert [e["incident"]["id"] for e in document["events"]] == ["inc0", "inc1"]
    [digest] = [r for r in await rows(world) if r.event_key.startswith("digest:")]
    assert digest.attempts == 4


async def test_two_senders_racing_form_one_digest_per_sink(world: World) -> None:
    await owe_all(world, [event(n) for n in range(4)])
    world.clock.now = T
    a, b = world.sender(), world.sender()
    await asyncio.gather(a.deliver_due(), b.deliver_due(), a.deliver_due(), b.deliver_due())
    await a.drain()
    await b.drain()
    stored = await rows(world)
    assert len([r for r in stored if r.event_key.startswith("digest:")]) == 3
    assert {r.state for r in stored} == {"sent"}
    assert len(world.hook.documents("data")) == 1
    assert len(world.hook.documents("data")[0]["events"]) == 4
    assert len(world.mailbox.messages) == 1
    assert len(world.teams.messages) == 1


async def test_a_second_sender_taking_the_same_held_rows_finds_them_taken(world: World) -> None:
    await owe(world, "data-hook", [event(0), event(1)])
    async with world.sessions()() as session:
        held = await deliveries.held_over(session, now=T, kinds={"webhook"})
    assert len(held) == 2

    def build(bodies: list[dict[str, Any]]) -> dict[str, Any]:
        return digest_body("webhook", bodies, at=T)

    first, second = world.sessions(), world.sessions()
    async with first.begin() as session:
        await deliveries.form_digest(session, held, body=build, now=T)

        async def compete() -> None:
            async with second.begin() as other:
                await deliveries.form_digest(other, held, body=build, now=T)

        racing = asyncio.create_task(compete())
        await asyncio.sleep(0.3)  # the competitor waits for our lock (SQLite or PostgreSQL)
        assert not racing.done()
    with pytest.raises(deliveries.TakenMeanwhile):
        await racing
    stored = await rows(world)
    assert [r.event_key for r in stored if r.event_key.startswith("digest:")] == [
        f"digest:{held[0].id}-{held[1].id}"
    ]


async def test_a_later_notice_of_an_incident_waits_for_the_digest_of_its_held_one(
    world: World,
) -> None:
    incident = await new_incident(world, DAGS[0])
    # opened during quiet hours (held), then resolved by an urgent path (not held)
    await owe(world, "data-hook", [event(0, incident=incident)], incident_id=incident)
    await owe(
        world,
        "data-hook",
        [event(1, "failure.resolved", incident=incident)],
        held=False,
        incident_id=incident,
    )
    sender = world.sender()
    await sender.drain()
    assert world.hook.deliveries == []  # the resolution does not overtake the held opening
    world.clock.now = T
    world.hook.fail_next(503)
    await sender.drain()
    # the digest failed once: the resolution waits for it too (its retry, 1 s later)
    assert world.hook.deliveries == []
    [attempt] = world.hook.attempts
    assert attempt.status == 503
    assert str(attempt.delivery_id).startswith("data-hook/digest:")
    world.clock.now = T + timedelta(seconds=10)
    await sender.drain()
    assert [d["type"] for d in world.hook.documents("data")] == ["digest", "failure.resolved"]
    assert world.hook.documents("data")[0]["events"][0]["type"] == "failure.opened"
    # a later night's held notice of the incident: a digest of its own, after the first
    await owe(
        world, "data-hook", [event(2, "failure.opened", incident=incident)], incident_id=incident
    )
    await sender.drain()
    assert [d["type"] for d in world.hook.documents("data")] == [
        "digest",
        "failure.resolved",
        "digest",
    ]


async def test_a_held_notice_behind_a_page_being_retried_waits_for_it(world: World) -> None:
    incident = await new_incident(world, DAGS[0])
    # the opening was not held, but the receiver is down; the acknowledgement was held
    await owe(world, "data-hook", [event(0, incident=incident)], held=False, incident_id=incident)
    await owe(
        world, "data-hook", [event(1, "failure.acknowledged", incident=incident)],
        incident_id=incident,
    )  # fmt: skip
    await owe(world, "data-hook", [event(2)])  # held, of another incident
    world.hook.fail_next(503, retry_after=3600)
    sender = world.sender()
    await sender.drain()  # the opening fails; tried again in an hour (after T)
    world.clock.now = T
    await sender.drain()
    # at T the digest takes what is not behind the opening
    [first] = world.hook.documents("data")
    assert [e["incident"]["id"] for e in first["events"]] == ["inc2"]
    world.clock.now = BEFORE + timedelta(hours=1, seconds=1)
    await sender.drain()
    await sender.drain()
    documents = world.hook.documents("data")
    assert [d["type"] for d in documents] == ["digest", "failure.opened", "digest"]
    assert [e["type"] for e in documents[2]["events"]] == ["failure.acknowledged"]


async def test_many_held_notices_fit_the_limits_and_all_are_counted(world: World) -> None:
    many = [event(n) for n in range(60)]
    for sink in ("orders-mail", "orders-teams"):
        await owe(world, sink, many)
    world.clock.now = T
    await world.sender().drain()
    [mail] = world.mailbox.messages
    assert mail["Subject"] == "[backfill-bot] 60 notices held during quiet hours"
    text_part = mail.get_body(preferencelist=("plain",))
    assert text_part is not None
    text = text_part.get_content()
    listed = [line for line in text.splitlines() if re.match(r"[0-9]+\. ", line)]
    assert [line.split(".")[0] for line in listed] == [str(n) for n in range(1, 26)]
    assert "… and 35 more:" in text
    [card] = world.teams.messages  # accepted: under Teams' 28 KB
    body = card["attachments"][0]["content"]["body"]
    assert body[0]["text"] == "60 notices held during quiet hours"
    shown = len([item for item in body if item["type"] == "Container"])
    assert 0 < shown < 60
    assert body[-1]["text"].startswith(f"… and {60 - shown} more")


async def test_more_than_a_digest_holds_go_in_several_in_order(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("bot.hub.service.sender.MAX_DIGEST_ROWS", 2)
    await owe(world, "data-hook", [event(n) for n in range(5)])
    world.clock.now = T
    await world.sender().drain()
    documents = world.hook.documents("data")
    assert [len(d["events"]) for d in documents] == [2, 2, 1]
    ids = [e["incident"]["id"] for d in documents for e in d["events"]]
    assert ids == [f"inc{n}" for n in range(5)]


async def test_a_digest_that_cannot_be_built_lets_its_notices_go_one_by_one(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(kind: str, bodies: list[dict[str, Any]], *, at: datetime) -> dict[str, Any]:
        raise RuntimeError("a bug")

    monkeypatch.setattr("bot.hub.service.sender.digest_body", broken)
    await owe(world, "data-hook", [event(0), event(1)])
    world.clock.now = T
    await world.sender().drain()
    assert [d["type"] for d in world.hook.documents("data")] == ["failure.opened"] * 2
    assert {r.state for r in await rows(world)} == {"sent"}


async def test_the_next_digest_waits_for_one_carrying_its_incident_to_be_sent(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("bot.hub.service.sender.MAX_DIGEST_ROWS", 2)
    incident = await new_incident(world, DAGS[0])
    await owe(world, "data-hook", [event(0)])
    await owe(world, "data-hook", [event(1, incident=incident)], incident_id=incident)
    await owe(
        world, "data-hook", [event(2, "failure.resolved", incident=incident)],
        incident_id=incident,
    )  # fmt: skip
    await owe(world, "data-hook", [event(3), event(4)])
    world.hook.fail_next(503)
    world.clock.now = T
    sender = world.sender()
    await sender.drain()
    # the first digest failed: the next takes what does not follow it, the resolution waits
    [early] = world.hook.documents("data")
    assert [e["incident"]["id"] for e in early["events"]] == ["inc3", "inc4"]
    world.clock.now = T + timedelta(seconds=10)
    await sender.drain()
    documents = world.hook.documents("data")
    events = [[(e["incident"]["id"], e["type"]) for e in d["events"]] for d in documents]
    assert events == [
        [("inc3", "failure.opened"), ("inc4", "failure.opened")],
        [("inc0", "failure.opened"), (incident, "failure.opened")],
        [(incident, "failure.resolved")],
    ]
