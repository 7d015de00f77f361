"""The late-event sweep through the poller, against the Marquez stand-in over HTTP, on SQLite and
PostgreSQL: events reaching Marquez long after their eventTime (POSTed or ingested "now" with an
old eventTime, which is what Marquez sees from a late producer) are stored within a poll; what
an idle poll, a restart and a first start cost, counted as the stand-in's own requests.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from sqlalchemy import select

from bot.clients.marquez import EventsPage, MarquezClient, MarquezUnavailable, RetryPolicy
from bot.config import Watch
from bot.events.service.poller import MarquezPoller
from bot.events.store.models import RunEvent
from standins.marquez.server import StandInServer
from tests.events.test_poller import T0, Env, environment, run_event
from tests.support.factories import poller as make_poller

FEED = "GET /api/v1/events/lineage"
START = T0 - timedelta(hours=26)  # start_from: the whole 24 h window is behind the cursor


@pytest.fixture
async def env(database_url: str, marquez_standin: StandInServer) -> AsyncIterator[Env]:
    async with environment(database_url, marquez_standin.url) as built:
        yield built


def feed_requests(marquez: StandInServer) -> list[str]:
    return [r for r in marquez.requests if r.startswith(FEED)]


def history(marquez: StandInServer, until: datetime = T0) -> None:
    """A run every 20 minutes over the 26 h before `until`, and a dataset event each hour."""
    at = START
    while at < until - timedelta(minutes=1):
        marquez.state.ingest(run_event("COMPLETE", at))
        if at.minute == 0:
            marquez.state.ingest(dataset_event(at + timedelta(minutes=7)))
        at += timedelta(minutes=20)


def dataset_event(at: datetime) -> dict[str, Any]:
    return {
        "eventTime": at.isoformat().replace("+00:00", "Z"),
        "dataset": {"namespace": "food_delivery", "name": "public.orders"},
        "producer": "https://example.com/tests",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/definitions/DatasetEvent",
    }


async def stored(env: Env, event_type: str = "FAIL") -> list[RunEvent]:
    async with env.sessions() as session:
        rows = await session.scalars(select(RunEvent).where(RunEvent.event_type == event_type))
        return list(rows)


async def steady(env: Env, marquez: StandInServer, **watch: Any) -> Any:
    """A poller whose cursor is at the last run (11:40) with the whole window counted."""
    history(marquez)
    poller = env.poller(start_from=START, **watch)
    assert await poller.poll_once() > 0
    env.clock.advance(30)
    assert await poller.poll_once() == 0
    return poller


@pytest.mark.parametrize("late", [timedelta(minutes=10), timedelta(hours=3), timedelta(hours=23)])
async def test_a_late_fail_is_stored_by_the_next_poll(
    env: Env, marquez_standin: StandInServer, late: timedelta, caplog: pytest.LogCaptureFixture
) -> None:
    poller = await steady(env, marquez_standin)
    env.clock.advance(30)
    when = env.clock.now - late
    body = run_event("FAIL", when)
    async with MarquezClient(marquez_standin.url) as client:
        await client.emit(body)  # reaches Marquez now, long after its eventTime
    woken = len(env.woken)
    caplog.set_level(logging.INFO, logger="bot.events.service.late_sweep")
    assert await poller.poll_once() == 1
    (row,) = await stored(env)
    assert (row.run_id, row.event_time, row.source, row.processed_at) == (
        body["run"]["runId"],
        when,
        "marquez",
        None,
    )
    assert len(env.woken) == woken + 1  # the incident processor is woken for it
    # The main read's newest eventTime moves the cursor; the sweep's never move it back.
    assert (await env.cursor()).position == max(T0 - timedelta(minutes=20), when)
    found = [r.getMessage() for r in caplog.records if r.name == "bot.events.service.late_sweep"]
    hours = int(late.total_seconds() // 3600)
    # Older than the main read's start (11:30): the sweep found it and says so.
    assert found == [
        "late-event sweep: 1 late run event stored from 1 changed bucket, eventTime "
        f"{hours} h 00 min to {hours} h 00 min behind the clock"
    ] * (late > timedelta(minutes=31))
    env.clock.advance(30)
    assert await poller.poll_once() == 0
    assert len(await stored(env)) == 1


async def test_an_event_later_than_the_window_is_not_caught(
    env: Env, marquez_standin: StandInServer
) -> None:
    poller = await steady(env, marquez_standin)
    env.clock.advance(30)
    marquez_standin.state.ingest(run_event("FAIL", env.clock.now - timedelta(hours=25)))
    for _ in range(2):
        env.clock.advance(30)
        assert await poller.poll_once() == 0
    assert await stored(env) == []  # the documented limit: watch.late_window_s (24 h)


async def test_an_idle_poll_costs_one_count_request(
    env: Env, marquez_standin: StandInServer
) -> None:
    poller = await steady(env, marquez_standin)
    plain_watch = Watch(poll_interval_s=30, overlap_s=300, page_size=50, late_window_s=0)
    without = make_poller(
        env.sessions, env.target.client, plain_watch, clock=env.clock, cursor_name="plain"
    )
    for _ in range(2):
        assert await without.poll_once() >= 0  # the first reads the last hour
    env.clock.advance(30)
    cursor = await env.cursor()
    marks = len(feed_requests(marquez_standin))
    assert await without.poll_once() == 0
    plain = feed_requests(marquez_standin)[marks:]
    marks += len(plain)
    assert await poller.poll_once() == 0
    swept = feed_requests(marquez_standin)[marks:]
    assert len(plain) == 1  # the main read: one short page
    assert len(swept) == 2  # the main read and ONE count of the whole window
    count = parse_qs(urlsplit(swept[-1]).query)
    assert count["limit"] == ["0"]
    window = (count["after"][0], count["before"][0])
    # [W0, W1): 24 h before now, and the bucket of cursor (11:40) - overlap
    assert window == ("2024-02-29T12:00:00+00:00", "2024-03-01T11:30:00+00:00")
    after = await env.cursor()
    assert after.late_counts == cursor.late_counts  # nothing written
    assert after.late_counts is not None
    assert len(after.late_counts["counts"]) == 24 * 6 - 1  # through floor(now - overlap)


async def test_a_late_dataset_event_costs_one_bisect_then_nothing(
    env: Env, marquez_standin: StandInServer
) -> None:
    poller = await steady(env, marquez_standin)
    marquez_standin.state.ingest(dataset_event(T0 - timedelta(hours=7)))  # counted, not listed
    env.clock.advance(30)
    marks = len(feed_requests(marquez_standin))
    assert await poller.poll_once() == 0
    # main read + window count + 7 or 8 halving counts (142 buckets) + the bucket's one page
    assert len(feed_requests(marquez_standin)) - marks in (10, 11)
    marks = len(feed_requests(marquez_standin))
    env.clock.advance(30)
    assert await poller.poll_once() == 0
    assert len(feed_requests(marquez_standin)) - marks == 2


async def test_a_restart_keeps_the_counts_and_finds_what_arrived_meanwhile(
    env: Env, marquez_standin: StandInServer
) -> None:
    await steady(env, marquez_standin)
    # The bot is down; a producer delivers a failure from 5 hours ago.
    body = run_event("FAIL", T0 - timedelta(hours=5))
    marquez_standin.state.ingest(body)
    env.clock.advance(60)
    restarted = env.poller(start_from=START)
    marks = len(feed_requests(marquez_standin))
    assert await restarted.poll_once() == 1
    # main read, window count, 7-8 halving counts, one page of the bucket: no 24 h re-read
    assert len(feed_requests(marquez_standin)) - marks in (10, 11)
    assert [row.run_id for row in await stored(env)] == [body["run"]["runId"]]
    env.clock.advance(30)
    marks = len(feed_requests(marquez_standin))
    assert await env.poller(start_from=START).poll_once() == 0
    assert len(feed_requests(marquez_standin)) - marks == 2


async def test_the_first_start_reads_nothing_before_its_origin(
    env: Env, marquez_standin: StandInServer
) -> None:
    history(marquez_standin)
    marquez_standin.state.ingest(run_event("FAIL", T0 - timedelta(hours=2)))  # history
    poller = env.poller()  # lookback 1 h, overlap 5 min: origin 10:55
    origin = T0 - timedelta(hours=1, minutes=5)
    assert await poller.poll_once() == 3  # 11:00, 11:20, 11:40
    requests = feed_requests(marquez_standin)
    afters = [datetime.fromisoformat(parse_qs(urlsplit(r).query)["after"][0]) for r in requests]
    assert min(afters) == origin
    assert len(requests) == 7  # counts of the 6 buckets 10:50 (from 10:55) … 11:40, one page
    # Late arrivals: one dated before the origin (history, like the FAIL above), one after.
    marquez_standin.state.ingest(run_event("FAIL", T0 - timedelta(hours=1, minutes=30)))
    late = run_event("FAIL", T0 - timedelta(minutes=50))
    marquez_standin.state.ingest(late)
    env.clock.advance(30)
    assert await poller.poll_once() == 1
    env.clock.advance(30)
    assert await poller.poll_once() == 0
    assert [row.run_id for row in await stored(env)] == [late["run"]["runId"]]
    assert (await env.cursor()).late_counts["origin"] == origin.isoformat()  # type: ignore[index]


class Hooked:
    """A client factory whose clients call `hook(query, page)` after each feed request was
    answered (`page` is None before it is sent): a test lets events arrive mid-poll or
    fails some requests."""

    def __init__(self, url: str, hook: Callable[[dict[str, Any], EventsPage | None], None]):
        self.url, self.hook = url, hook

    def __call__(self) -> AbstractAsyncContextManager[MarquezClient]:
        hook = self.hook

        class Client(MarquezClient):
            async def lineage_events(self, **query: Any) -> EventsPage:
                hook(query, None)
                page = await super().lineage_events(**query)
                hook(query, page)
                return page

        return Client(self.url, retry=RetryPolicy(attempts=1))

    def poller(self, env: Env) -> MarquezPoller:
        watch = Watch(poll_interval_s=30, overlap_s=300, page_size=50, ops_channel="C0OPS",
                      start_from=START)  # fmt: skip
        return make_poller(env.sessions, self, watch, clock=env.clock)


async def test_an_event_arriving_during_a_bucket_read_is_caught_next_poll(
    env: Env, marquez_standin: StandInServer
) -> None:
    await steady(env, marquez_standin)
    during = run_event("FAIL", T0 - timedelta(hours=4, minutes=1))
    arriving = [during]

    def arrive(query: dict[str, Any], page: EventsPage | None) -> None:
        # Right after the first page of a bucket read (a read with `before`) was answered.
        if page is not None and query.get("before") and query.get("limit") and arriving:
            marquez_standin.state.ingest(arriving.pop())

    poller = Hooked(marquez_standin.url, arrive).poller(env)
    marquez_standin.state.ingest(run_event("FAIL", T0 - timedelta(hours=4, minutes=2)))
    env.clock.advance(30)
    assert await poller.poll_once() == 1  # the first; the second arrived after its page
    assert arriving == []
    assert during["run"]["runId"] not in {row.run_id for row in await stored(env)}
    env.clock.advance(30)
    assert await poller.poll_once() == 1
    assert during["run"]["runId"] in {row.run_id for row in await stored(env)}
    env.clock.advance(30)
    assert await poller.poll_once() == 0


async def test_a_failing_sweep_keeps_the_main_read_and_catches_up_later(
    env: Env, marquez_standin: StandInServer
) -> None:
    await steady(env, marquez_standin)
    before = await env.cursor()
    down = [True]

    def fail_counts(query: dict[str, Any], page: EventsPage | None) -> None:
        if page is None and query.get("limit") == 0 and down[0]:
            raise MarquezUnavailable("Marquez answered 503", url=marquez_standin.url, status=503)

    poller = Hooked(marquez_standin.url, fail_counts).poller(env)
    marquez_standin.state.ingest(run_event("FAIL", T0 - timedelta(hours=6)))
    marquez_standin.state.ingest(run_event("COMPLETE", T0 - timedelta(seconds=10)))
    env.clock.advance(30)
    # the sweep's count failed: the main read's event is stored all the same
    assert await poller.poll_once() == 1
    after = await env.cursor()
    assert after.position == T0 - timedelta(seconds=10)
    assert (after.late_counts, after.failures, after.reachable) == (before.late_counts, 0, True)
    assert await env.notices() == []  # Marquez answered the poll: nothing is "unreachable"
    down[0] = False
    env.clock.advance(30)
    assert await poller.poll_once() == 1  # the late FAIL, once the sweep's counts work again
