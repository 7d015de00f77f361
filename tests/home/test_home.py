"""The App Home tab: a signed app_home_opened event makes the bot publish, for the viewing
user's teams, their open incidents, running backfills and recent SLA misses."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.config import parse_config
from bot.sla.store import SlaMiss
from standins.marquez.server import StandInServer
from tests.incidents.test_incidents import AT_ONCE, event, store
from tests.support.e2e import OWNER, Bot, eventually, running_bot


@pytest.fixture
async def bot(tmp_path: Path, food_delivery_marquez: StandInServer) -> AsyncIterator[Bot]:
    database = f"sqlite:///{tmp_path / 'bot.db'}"
    # AT_ONCE: the alert is sent at once, not gathered for 2 s; the home tab is the subject.
    async with running_bot(
        database,
        food_delivery_marquez,
        parse_config(AT_ONCE),
        groups={"S0ANALYTIC": ["U0ANNA0001"]},
    ) as running:
        yield running


async def open_home(bot: Bot, user: str) -> str:
    if user not in bot.slack.state.users:
        bot.slack.state.add_user(user, user.lower())
    body = json.dumps(
        {
            "type": "event_callback",
            "team_id": "T0TEAM0001",
            "api_app_id": "A0APP00001",
            "event_id": f"Ev{time.time_ns()}",
            "event_time": int(time.time()),
            "event": {
                "type": "app_home_opened",
                "user": user,
                "channel": "D0HOME0001",
                "tab": "home",
            },
        }
    ).encode()
    reply = await bot.slack.send_raw(
        body, {"Content-Type": "application/json", **bot.slack.sign(body)}
    )
    assert reply.status == 200
    view = await eventually(lambda: bot.slack.state.home.get(user), timeout_s=15)
    return json.dumps(view.payload)


async def test_home_shows_what_the_viewers_teams_own(bot: Bot) -> None:
    await store(bot, event("example.etl_orders"))
    async with bot.services.sessions.begin() as session:
        session.add(
            SlaMiss(
                namespace="food_delivery", dag_id="example.etl_orders",
                interval_key="2021-06-07T00:00:00+00:00", kind="missing",
                due=datetime(2021, 6, 8, 2, tzinfo=UTC), reason="the SLA is 2h 00m",
                detected_at=datetime.now(UTC),
            )
        )  # fmt: skip

    mine = await open_home(bot, OWNER)
    assert "Your teams: orders" in mine
    assert "Open incidents (1)" in mine
    assert "`example.etl_orders` failed for 2021-06-04" in mine
    assert "SLA misses, last 7 days (1)" in mine

    theirs = await open_home(bot, "U0ANNA0001")  # analytics, through its user group
    assert "Your teams: analytics" in theirs
    assert "Open incidents (0)" in theirs
