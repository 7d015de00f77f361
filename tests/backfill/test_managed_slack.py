"""Managed backfills end to end over signed Slack requests (the Slack stand-in), with the
Marquez stand-in planning and the Airflow stand-in running: options typed after `/backfill`
reach the plan and Airflow; the Review plan modal validates each value under its input and
changes the preview; Pause and Resume on the status message and as commands, with the refusals
Cancel has; and an off-peak window that closes mid-backfill pauses it and reopens it (the
runner's clock driven by the test)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bot.backfill.run.runner import Runner
from bot.config import BotConfig
from bot.core.audit import list_audit
from bot.slack.rules.ids import ActionId, OptionBlock
from standins.airflow.dags import FOOD_DELIVERY_DAGS, food_delivery_history
from standins.airflow.server import AirflowStandin, running_airflow_standin
from standins.marquez.server import StandInServer
from tests.support.e2e import (
    CHANNEL,
    OUTSIDER,
    OWNER,
    REQUESTER,
    Bot,
    buttons,
    eventually,
    running_bot,
)
from tests.support.execution import (
    COMMAND,
    airflow_env,
    approve,
    execution_config,
    finished,
    load,
    request_backfill,
    status_message,
    thread_text,
)

ROOT = "example.etl_orders"


@asynccontextmanager
async def airflow_bot(
    tmp_path: Path, marquez: StandInServer, config: BotConfig, *, run_seconds: float = 0.05
) -> AsyncIterator[tuple[Bot, AirflowStandin]]:
    async with (
        running_airflow_standin(
            api=3, dags=FOOD_DELIVERY_DAGS, run_seconds=run_seconds,
            history=food_delivery_history(),
        ) as server,
        running_bot(
            f"sqlite:///{tmp_path / 'bot.db'}", marquez, config, env=airflow_env(server.url)
        ) as bot,
    ):  # fmt: skip
        yield bot, server


def blocks_text(message: Any) -> str:
    return json.dumps(message.blocks, ensure_ascii=False) + message.text


def ephemerals(bot: Bot, user: str) -> list[str]:
    return [e.text for e in bot.slack.state.ephemerals if e.user == user]


async def test_typed_options_reach_the_preview_the_request_and_airflow(
    tmp_path: Path, food_delivery_marquez: StandInServer
) -> None:
    async with airflow_bot(tmp_path, food_delivery_marquez, execution_config()) as (bot, server):
        preview = await request_backfill(
            bot,
            f"{COMMAND} --only --rerun all --backwards --max-active 1 "
            "--conf '{\"full_refresh\": true}' --reason \u201corders feed was late\u201d",
        )
        text = blocks_text(preview)
        assert "newest interval first" in text
        assert "at most 1 run of a DAG at once" in text
        assert "orders feed was late" in text
        # The run history in Airflow: how many runs each --rerun choice means.
        assert "From the run history: --rerun missing:" in text
        assert ActionId.REVIEW in buttons(preview)
        request_id = await approve(bot, preview)
        request = await finished(bot, request_id)
        assert request.state == "succeeded"
        assert request.options["reason"] == "orders feed was late"
        [backfill] = [b for b in server.state.backfills if b.dag_id == ROOT]
        assert backfill.dag_run_conf == {"full_refresh": True}
        assert backfill.max_active_runs == 1
        async with bot.services.sessions() as session:
            audit = await list_audit(session, request_id=request_id)
        [created] = [a for a in audit if a.action == "request.created"]
        assert created.detail["options"]["conf"] == {"full_refresh": True}
        assert created.detail["options"]["backwards"] is True


async def test_a_bad_option_gets_a_clear_answer_and_nothing_is_planned(
    tmp_path: Path, food_delivery_marquez: StandInServer
) -> None:
    async with airflow_bot(tmp_path, food_delivery_marquez, execution_config()) as (bot, _):
        for typed, says in [
            ("--rerun sometimes", "--rerun takes missing, failed or all"),
            ("--conf '[1, 2]'", "--conf must be a JSON object"),
            ("--max-active 0", "--max-active takes a whole number from 1 to 64"),
            ("--reason 'unclosed", "A quote is not closed"),
            ('--at "2001-01-01 10:00"', "has passed"),
        ]:
            reply = await bot.slack.slash_command(
                f"{COMMAND} {typed}", user_id=REQUESTER, channel_id=CHANNEL
            )
            assert reply.status == 200
            await eventually(lambda s=says: any(s in t for t in ephemerals(bot, REQUESTER)))
        assert bot.slack.state.messages(CHANNEL) == []


def form(**chosen: Any) -> dict[str, Any]:
    """Review plan's `state.values` as Slack sends them."""
    values: dict[str, Any] = {
        OptionBlock.RERUN: {
            ActionId.OPTION: {
                "type": "static_select",
                "selected_option": {"value": chosen.get("rerun", "all")},
            }
        },
        OptionBlock.FLAGS: {
            ActionId.OPTION: {
                "type": "checkboxes",
                "selected_options": [{"value": v} for v in chosen.get("flags", [])],
            }
        },
    }
    for block, key, kind in [
        (OptionBlock.MAX_ACTIVE, "max_active", "number_input"),
        (OptionBlock.CONF, "conf", "plain_text_input"),
        (OptionBlock.REASON, "reason", "plain_text_input"),
        (OptionBlock.AT, "at", "plain_text_input"),
    ]:
        values[block] = {ActionId.OPTION: {"type": kind, "value": chosen.get(key)}}
    return values


async def open_review(bot: Bot, message: Any, user: str) -> Any:
    before = set(bot.slack.state.views)
    reply = await bot.slack.click(
        channel_id=CHANNEL, message_ts=message.ts, action_id=ActionId.REVIEW, user_id=user
    )
    assert reply.status == 200
    await eventually(lambda: set(bot.slack.state.views) - before)
    [view_id] = set(bot.slack.state.views) - before
    return bot.slack.state.views[view_id]


async def test_review_plan_validates_each_value_and_changes_the_preview(
    tmp_path: Path, food_delivery_marquez: StandInServer
) -> None:
    async with airflow_bot(tmp_path, food_delivery_marquez, execution_config()) as (bot, _):
        preview = await request_backfill(bot)
        request_id = buttons(preview)[ActionId.APPROVE]["value"]
        view = await open_review(bot, preview, REQUESTER)
        assert view.payload["callback_id"] == "backfill.options_modal"
        inputs = [b["block_id"] for b in view.payload["blocks"] if b["type"] == "input"]
        assert set(inputs) == set(OptionBlock)

        bad = form(rerun="all", conf="[1]", max_active="99", at="yesterday")
        reply = await bot.slack.submit_view(view_id=view.id, user_id=REQUESTER, values=bad)
        assert reply.status == 200
        assert not view.closed
        assert set(view.errors or {}) == {OptionBlock.CONF, OptionBlock.MAX_ACTIVE}
        assert "JSON object" in view.errors[OptionBlock.CONF]
        # The time is read once the other values are good.
        late = form(rerun="failed", at="2001-01-01 10:00")
        await bot.slack.submit_view(view_id=view.id, user_id=REQUESTER, values=late)
        assert "has passed" in (view.errors or {})[OptionBlock.AT]

        good = form(
            rerun="failed",
            flags=["backwards", "stop_on_failure"],
            max_active="2",
            conf='{"k": "v"}',
            reason="late feed",
        )
        reply = await bot.slack.submit_view(view_id=view.id, user_id=REQUESTER, values=good)
        assert reply.status == 200
        assert view.closed
        request = await eventually(lambda: _options_changed(bot, request_id), timeout_s=20)
        assert request.options["rerun"] == "failed"
        assert request.options["conf"] == {"k": "v"}
        assert request.options["stop_on_failure"] is True
        await bot.settle()
        redrawn = bot.slack.state.find_message(CHANNEL, preview.ts)
        text = blocks_text(redrawn)
        assert "reruns failed and missing runs" in text
        assert "pauses at the first failed run" in text
        assert any("Updated backfill" in t for t in ephemerals(bot, REQUESTER))

        # Someone who may neither approve nor ask cannot change it.
        other = await open_review(bot, redrawn, OUTSIDER)
        await bot.slack.submit_view(view_id=other.id, user_id=OUTSIDER, values=form(rerun="all"))
        await eventually(lambda: any("may not change" in t for t in ephemerals(bot, OUTSIDER)))
        assert (await load(bot, request_id)).options["rerun"] == "failed"


async def _options_changed(bot: Bot, request_id: str) -> Any:
    request = await load(bot, request_id)
    return request if request.options.get("rerun") == "failed" else None


async def test_pause_and_resume_from_the_status_message_and_by_command(
    tmp_path: Path, food_delivery_marquez: StandInServer
) -> None:
    config = execution_config(airflow={"max_active_runs": 1})
    async with airflow_bot(tmp_path, food_delivery_marquez, config, run_seconds=0.5) as (bot, _):
        request_id = await approve(bot, await request_backfill(bot))
        await eventually(lambda: _state(bot, request_id, "running"))
        await bot.settle()
        status = status_message(bot, await load(bot, request_id))
        # The runner's first report shows it running, with Pause.
        await eventually(
            lambda: ActionId.PAUSE in buttons(bot.slack.state.find_message(CHANNEL, status.ts))
        )

        reply = await bot.slack.click(
            channel_id=CHANNEL, message_ts=status.ts, action_id=ActionId.PAUSE, user_id=OUTSIDER
        )
        assert reply.status == 200
        await eventually(lambda: any("may not pause" in t for t in ephemerals(bot, OUTSIDER)))
        assert (await load(bot, request_id)).state == "running"

        await bot.slack.click(
            channel_id=CHANNEL, message_ts=status.ts, action_id=ActionId.PAUSE, user_id=OWNER
        )
        await eventually(lambda: _state(bot, request_id, "paused"))
        await bot.settle()
        paused = bot.slack.state.find_message(CHANNEL, status.ts)
        assert ActionId.RESUME in buttons(paused)
        assert ActionId.PAUSE not in buttons(paused)
        assert "Paused by <@" in blocks_text(paused)
        assert "still to run" in blocks_text(paused)

        short = request_id[:8]
        await bot.slack.slash_command(f"resume {short}", user_id=OUTSIDER, channel_id=CHANNEL)
        await eventually(lambda: any("may not resume" in t for t in ephemerals(bot, OUTSIDER)))
        await bot.slack.slash_command(f"resume {short}", user_id=OWNER, channel_id=CHANNEL)
        request = await finished(bot, request_id, timeout_s=90)
        assert request.state == "succeeded"
        thread = thread_text(bot, request)
        assert "*Paused* by" in thread
        assert "*Resumed* by" in thread
        await bot.slack.slash_command(f"pause {short}", user_id=OWNER, channel_id=CHANNEL)
        await eventually(lambda: any("has already finished" in t for t in ephemerals(bot, OWNER)))


async def _state(bot: Bot, request_id: str, state: str) -> bool:
    return (await load(bot, request_id)).state == state


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


async def test_a_window_that_closes_mid_backfill_pauses_it_and_reopens_it(
    tmp_path: Path, food_delivery_marquez: StandInServer
) -> None:
    window = {"days": "daily", "start": "20:00", "end": "06:00", "timezone": "UTC"}
    config = execution_config(airflow={"max_active_runs": 1}, windows=[window])
    async with airflow_bot(tmp_path, food_delivery_marquez, config, run_seconds=0.3) as (bot, _):
        runner = bot.services.backfills.executor
        assert isinstance(runner, Runner)
        clock = Clock(datetime.now(UTC).replace(hour=23, minute=0, second=0, microsecond=0))
        runner.clock = clock
        preview = await request_backfill(bot)
        assert "off-peak window (daily 20:00–06:00 UTC)" in blocks_text(preview)
        request_id = await approve(bot, preview)
        await eventually(lambda: _state(bot, request_id, "running"))

        clock.now += timedelta(hours=7)  # 06:00: the window closes
        runner.wake()
        await eventually(lambda: _state(bot, request_id, "paused"), timeout_s=20)
        request = await load(bot, request_id)
        assert request.paused_by == "window"
        assert request.resume_at == clock.now.replace(hour=20)
        # Nobody resumes it early: it waits for its window.
        await bot.slack.slash_command(f"resume {request_id}", user_id=OWNER, channel_id=CHANNEL)
        await eventually(lambda: any("off-peak window" in t for t in ephemerals(bot, OWNER)))

        clock.now = clock.now.replace(hour=20)  # the window opens again
        runner.wake()
        request = await finished(bot, request_id, timeout_s=90)
        assert request.state == "succeeded"
        thread = thread_text(bot, request)
        assert "off-peak window closed" in thread
        assert "off-peak window opened" in thread


async def test_a_backfill_approved_for_later_says_so_and_starts_at_its_time(
    tmp_path: Path, food_delivery_marquez: StandInServer
) -> None:
    async with airflow_bot(tmp_path, food_delivery_marquez, execution_config()) as (bot, server):
        runner = bot.services.backfills.executor
        assert isinstance(runner, Runner)
        at = (datetime.now(UTC) + timedelta(days=2)).replace(second=0, microsecond=0)
        preview = await request_backfill(bot, f'{COMMAND} --at "{at:%Y-%m-%d %H:%M} UTC"')
        assert f"Starts at {at:%Y-%m-%d %H:%M} UTC once approved" in blocks_text(preview)
        request_id = await approve(bot, preview)
        await eventually(lambda: _state(bot, request_id, "scheduled"))
        await bot.settle()
        request = await load(bot, request_id)
        status = status_message(bot, request)

        def scheduled_shown() -> bool:
            text = blocks_text(bot.slack.state.find_message(CHANNEL, status.ts))
            return f"Starts by itself at {at:%Y-%m-%d %H:%M} UTC" in text

        await eventually(scheduled_shown)
        assert "*Scheduled*: it starts by itself" in thread_text(bot, request)
        assert server.state.backfills == []

        runner.clock = Clock(at)  # its time has come
        runner.wake()
        request = await finished(bot, request_id, timeout_s=90)
        assert request.state == "succeeded"
        assert "*Started* at its scheduled time" in thread_text(bot, request)
