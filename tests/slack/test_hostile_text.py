"""Hostile text end to end, over HTTP: DAG ids, an error message and a report name that try to
mention people, link elsewhere and break out of code spans reach Slack only as text.

A FAIL of such a DAG is posted to the receiver (its alert), then a failure downstream of it (the
grouped reply in the alert's thread); `/backfill` of it runs on the Airflow stand-in (preview,
approval, status message, progress in its thread, the other team told when it starts and ends);
the owner opens the Home tab. Every message, edit, ephemeral answer and view the Slack stand-in
received is then read the way Slack reads mrkdwn: each `<…>` sequence is live, `&lt;…&gt;` is
not. None may be anything but a mention or link the bot built from BOT_CONFIG, Slack's ids and
its own URLs."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.config import BotConfig, parse_config
from bot.slack.rules.ids import ActionId
from standins.airflow.server import AirflowStandin
from standins.marquez.server import StandInServer, running_standin
from standins.slack.state import SlackState
from tests.home.test_home import open_home
from tests.support.e2e import Bot, buttons, eventually
from tests.support.story import click, post_events, request_of, run_event, story_bot

ORDERS, ANALYTICS = "C0ORDERS01", "C0ANALYT01"
OWNER, ANALYST = "U0ORDERS01", "U0ANNA0001"
GROUP = "S0ANALYTIC"
DAY = datetime(2021, 6, 4, tzinfo=UTC)
NAMESPACE = "food_delivery"
# Typed after /backfill, so no spaces; every trick Slack's mrkdwn knows, and a backtick to close
# the code span a DAG id is shown in.
ROOT = (
    "etl`<!channel>`<@U0EVIL>`<!subteam^S0EVIL>`<#C0EVIL>`<!here>`<!everyone>`"
    "<http://evil.example|click>`x"
)
# Only ever in events: spaces allowed.
DOWNSTREAM = "etl`<!channel> <@U0EVIL> <!subteam^S0EVIL> <#C0EVIL>`x_downstream"
ERROR = (
    "Traceback ```\n<!channel> <@U0EVIL> <!subteam^S0EVIL> <#C0EVIL> & "
    "<http://evil.example|click>\n``` and `<!here>`"
)
REPORT = "KPIs <http://evil.example|click> <!here> *bold*"
OUT = "public.hostile_orders"
MARQUEZ_WEB = "http://marquez.example.com:3000"

LIVE = re.compile(r"<([^<>]*)>")


def lineage_event(dag: str, day: datetime, *, inputs: list[str], outputs: list[str]) -> Any:
    """A COMPLETE run of `dag` reading and writing these datasets, for the Marquez stand-in."""
    event = run_event("COMPLETE", day, dag=dag)
    event["job"]["namespace"] = NAMESPACE
    event["inputs"] = [{"namespace": NAMESPACE, "name": name} for name in inputs]
    event["outputs"] = [{"namespace": NAMESPACE, "name": name} for name in outputs]
    return event


@asynccontextmanager
async def hostile_marquez() -> AsyncIterator[StandInServer]:
    """food_delivery, and the hostile DAGs: ROOT writes what DOWNSTREAM reads."""
    async with running_standin(seed="food_delivery") as server:
        for n in range(7):
            day = DAY - timedelta(days=7 - n)
            server.state.ingest(lineage_event(ROOT, day, inputs=[], outputs=[OUT]))
            server.state.ingest(
                lineage_event(DOWNSTREAM, day, inputs=[OUT], outputs=[OUT + "_7_days"])
            )
        yield server


def hostile_config() -> BotConfig:
    return parse_config(
        {
            "teams": [
                {"name": "orders", "channel": ORDERS, "members": [OWNER]},
                {"name": "analytics", "channel": ANALYTICS, "user_groups": [GROUP]},
            ],
            "ownership": [
                {"pattern": "etl`<!channel>`*", "team": "orders"},
                {"pattern": "etl`<!channel> *", "team": "analytics"},
            ],
            "reports": [
                {"name": REPORT, "team": "analytics", "datasets": [f"{NAMESPACE}::{OUT}_7_days"]}
            ],
            # Alerts and edits sent at once (group_wait_s 0): every payload is still checked,
            # and no settle waits 2 s for a gathering that is not the subject here.
            "watch": {"marquez_web_url": MARQUEZ_WEB, "poll": False, "group_wait_s": 0},
            "execution": {
                "poll_interval_s": 0.2,
                "progress_update_s": 1.0,
                # The Airflow stand-in runs daily food_delivery DAGs in their place.
                "airflow": {
                    "dag_ids": {
                        ROOT: "example.etl_orders",
                        DOWNSTREAM: "example.email_discounts",
                    }
                },
            },
        }
    )


class Received:
    """Everything the bot sent the Slack stand-in, as it was sent: every post and every edit
    (an edit replaces what the channel shows), views, ephemeral answers, response_url posts."""

    def __init__(self, state: SlackState) -> None:
        self.payloads: list[tuple[str, Any]] = []
        post, update = state.post, state.update
        open_view, update_view, publish = state.open_view, state.update_view, state.publish_home

        def posting(channel: str, **kwargs: Any) -> Any:
            self.payloads.append((f"post {channel}", kwargs))
            return post(channel, **kwargs)

        def updating(message: Any, *, text: str | None, blocks: Any) -> None:
            self.payloads.append((f"update {message.channel}", {"text": text, "blocks": blocks}))
            update(message, text=text, blocks=blocks)

        def opening(user: str, payload: Any) -> Any:
            self.payloads.append((f"view {user}", payload))
            return open_view(user, payload)

        def view_update(view: Any, payload: Any, expected_hash: str | None) -> Any:
            self.payloads.append((f"view {view.user}", payload))
            return update_view(view, payload, expected_hash)

        def publishing(user: str, payload: Any, expected_hash: str | None) -> Any:
            self.payloads.append((f"home {user}", payload))
            return publish(user, payload, expected_hash)

        state.post = posting  # type: ignore[method-assign]
        state.update = updating  # type: ignore[method-assign]
        state.open_view = opening  # type: ignore[method-assign]
        state.update_view = view_update  # type: ignore[method-assign]
        state.publish_home = publishing  # type: ignore[method-assign]
        self.state = state

    def all(self) -> list[tuple[str, Any]]:
        st = self.state
        return [
            *self.payloads,
            *(
                (f"ephemeral {e.source}", {"text": e.text, "blocks": e.blocks})
                for e in st.ephemerals
            ),
            *((f"response_url {p.url}", p.body) for p in st.response_posts),
        ]


def mrkdwn_of(payload: Any) -> Iterator[str]:
    """The strings Slack reads as mrkdwn: a message's `text`, and every mrkdwn text object
    (sections, fields, context, confirm dialogs) at any depth."""
    if isinstance(payload, dict):
        if isinstance(payload.get("text"), str) and payload.get("type") in (None, "mrkdwn"):
            yield payload["text"]
        for value in payload.values():
            if isinstance(value, (dict, list)):
                yield from mrkdwn_of(value)
    elif isinstance(payload, list):
        for value in payload:
            yield from mrkdwn_of(value)


def urls_of(payload: Any) -> Iterator[str]:
    if isinstance(payload, dict):
        if isinstance(payload.get("url"), str):
            yield payload["url"]
        for value in payload.values():
            yield from urls_of(value)
    elif isinstance(payload, list):
        for value in payload:
            yield from urls_of(value)


def built_by_the_bot(sequence: str, airflow: AirflowStandin) -> bool:
    """Mentions of the config's people, group and channels (and of whoever acted in Slack),
    links to Airflow, Marquez and Slack threads: what the bot builds itself."""
    inner = sequence[1:-1]
    if inner in {f"@{OWNER}", f"!subteam^{GROUP}", f"#{ORDERS}", f"#{ANALYTICS}"}:
        return True
    url, bar, label = inner.partition("|")
    trusted = (airflow.url, MARQUEZ_WEB, "https://slack.com/archives/")
    return bool(bar) and url.startswith(trusted) and "<" not in label and "evil" not in url


@pytest.fixture
async def hostile_bot(tmp_path: Path) -> AsyncIterator[tuple[Bot, AirflowStandin, Received]]:
    async with (
        hostile_marquez() as marquez,
        story_bot(tmp_path, marquez, hostile_config()) as (bot, airflow),
    ):
        bot.slack.state.add_usergroup(GROUP, [ANALYST])
        yield bot, airflow, Received(bot.slack.state)


async def test_nothing_from_outside_reaches_slack_live(
    hostile_bot: tuple[Bot, AirflowStandin, Received], caplog: pytest.LogCaptureFixture
) -> None:
    bot, airflow, received = hostile_bot
    caplog.set_level(logging.ERROR, logger="bot.slack.messages")

    # The alert, then a failure downstream joins it: one grouped reply in the thread.
    await post_events(bot, [run_event("FAIL", DAY, dag=ROOT, error=ERROR)])
    [alert] = [m for m in bot.slack.state.messages(ORDERS) if buttons(m)]
    await post_events(bot, [run_event("FAIL", DAY, dag=DOWNSTREAM, error=ERROR)])
    thread = bot.slack.state.thread(ORDERS, alert.ts)
    assert any("1 failure(s) downstream joined" in m.text for m in thread)
    await click(bot, alert, ActionId.INCIDENT_ACK, OWNER)
    await eventually(
        lambda: any("is on it" in m.text for m in bot.slack.state.thread(ORDERS, alert.ts))
    )

    # /backfill of the hostile DAG: its preview, approved by its owner, run on Airflow.
    reply = await bot.slack.slash_command(f"{ROOT} 2021-06-04", user_id=OWNER, channel_id=ORDERS)
    assert reply.status == 200
    preview = await eventually(
        lambda: [m for m in bot.slack.state.messages(ORDERS) if ActionId.APPROVE in buttons(m)]
    )
    request_id = buttons(preview[-1])[ActionId.APPROVE]["value"]
    await bot.slack.click(
        channel_id=ORDERS,
        message_ts=preview[-1].ts,
        action_id=ActionId.APPROVE,
        user_id=OWNER,
    )

    async def finished() -> bool:
        return (await request_of(bot, request_id)).finished_at is not None

    await eventually(finished, timeout_s=60)
    await bot.settle()
    request = await request_of(bot, request_id)
    assert [s.dag_id for s in request.steps] == [ROOT, DOWNSTREAM]
    told = [m for m in bot.slack.state.messages(ANALYTICS) if "restated" not in m.text]
    assert len(told) == 2, "the analytics team hears when the backfill starts and ends"
    # and which dates of its report the backfill restated, once it is verified
    restated = await eventually(
        lambda: [m for m in bot.slack.state.messages(ANALYTICS) if "restated" in m.text]
    )
    assert len(restated) == 1
    await open_home(bot, OWNER)

    everything = received.all()
    kinds = {where.split()[0] for where, _ in everything}
    assert {"post", "update", "home", "ephemeral"} <= kinds
    progress = [
        p
        for w, p in everything
        if w.startswith("post") and p.get("thread_ts") and "started:" in p.get("text", "")
    ]
    assert progress, "progress replies in the backfill's thread"

    live: list[tuple[str, str]] = []
    for where, payload in everything:
        for text in mrkdwn_of(payload):
            for match in LIVE.finditer(text):
                if not built_by_the_bot(match.group(), airflow):
                    live.append((where, match.group()))
        for url in urls_of(payload):
            assert url.startswith((airflow.url, MARQUEZ_WEB)), (where, url)
    assert live == []
    # The hostile values were there to be shown, as text.
    shown = json.dumps([p for _, p in everything], ensure_ascii=False)
    assert "&lt;!channel&gt;" in shown
    assert "&lt;@U0EVIL&gt;" in shown
    # No template needed the safety net of `render` (it logs what it had to defuse).
    assert [r.getMessage() for r in caplog.records if r.name.startswith("bot.slack.messages")] == []


async def test_a_dag_id_too_long_for_a_link_still_alerts_and_shows_at_home(
    hostile_bot: tuple[Bot, AirflowStandin, Received], caplog: pytest.LogCaptureFixture
) -> None:
    """1,015 characters (the receiver takes up to 1,024): its Marquez URL, every character
    percent-encoded, is over Slack's 3,000 for a button's url. The button is left out, not the
    alert; the Home tab shows the id clipped."""
    bot, _, received = hostile_bot
    caplog.set_level(logging.ERROR, logger="bot.slack.messages")
    long = "etl`<!channel>`" + "é&<x>" * 200
    await post_events(bot, [run_event("FAIL", DAY, dag=long, error=ERROR * 40)])
    [alert] = [m for m in bot.slack.state.messages(ORDERS) if buttons(m)]
    assert ActionId.INCIDENT_MARQUEZ not in buttons(alert)
    assert ActionId.INCIDENT_APPROVE in buttons(alert)
    home = json.dumps(json.loads(await open_home(bot, OWNER)), ensure_ascii=False)
    assert "Open incidents (1)" in home
    assert "`etlˋ&lt;!channel&gt;ˋé&amp;&lt;x&gt;é&amp;" in home
    # Airflow allows 250 characters for a DAG id (and so do the backfill tables): Approve is
    # answered with that, not with "Something went wrong" from the database
    await click(bot, alert, ActionId.INCIDENT_APPROVE, OWNER)
    refusal = await eventually(
        lambda: [e.text for e in bot.slack.state.ephemerals if "limit of 250" in e.text]
    )
    assert "cannot be backfilled" in refusal[0]
    for where, payload in received.all():
        for text in mrkdwn_of(payload):
            assert [m.group() for m in LIVE.finditer(text)] == [], where
    assert [r.getMessage() for r in caplog.records if r.name.startswith("bot.slack.messages")] == []
