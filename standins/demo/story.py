"""The demo's story, played as the people of the example config would play it.

example.etl_orders fails for 2021-06-04..06 → one alert with the impact in #orders, the teams
downstream told → Alice (orders) clicks Approve backfill → Pat (data platform) gives the second
approval the orders rule asks for → progress in the alert's thread → Airflow's reruns reach the
bot as OpenLineage events and the incident resolves → the SLA clock moves a day and the missing
run's SLA miss reaches the owners of the reports it feeds → the run of 06-07 completes having
written 0 rows → a data incident in #orders says so, with the usual count from run history →
Alice approves its backfill → the rerun's statistics verify it, the incident resolves and the
owners of the reports downstream hear which of their dates were restated.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import date

from bot.config import BotConfig
from bot.settings import Settings
from bot.slack.rules.ids import ActionId
from standins.demo.run import Demo, demo_config, running_demo
from standins.slack.state import Message, find_button
from standins.slack.transcript import transcript

OWNER = "U0ALICE001"  # orders team
PLATFORM = "U0PAT00001"  # data platform: an approver of every DAG (examples/bot-config.yml)
FAILED = (date(2021, 6, 4), date(2021, 6, 6))
EMPTY = date(2021, 6, 7)  # the run that completes having written nothing


def has_button(message: Message, action_id: str) -> bool:
    try:
        find_button(message.blocks, action_id, None)
    except LookupError:
        return False
    return True


def _first(messages: list[Message], check: Callable[[Message], bool]) -> Message | None:
    return next((m for m in messages if check(m)), None)


async def _click(demo: Demo, message: Message, action_id: str, user: str) -> None:
    _, button = find_button(message.blocks, action_id, None)
    await demo.slack.click(
        channel_id=message.channel,
        message_ts=message.ts,
        action_id=action_id,
        user_id=user,
        value=button.get("value"),
    )
    await demo.settle()


async def play(demo: Demo, *, pause_s: float = 0.0) -> str | None:
    """Play the story; None when it reached its end, else what stopped it."""
    state = demo.slack.state
    orders = next((t.channel for t in demo.services.config.teams if t.name == "orders"), None)
    if orders is None:
        return "BOT_CONFIG has no team named orders to alert"

    async def step(text: str) -> None:
        await asyncio.sleep(pause_s)
        demo.out(f"\n▸ {text}")

    await step(f"example.etl_orders fails for {FAILED[0]}..{FAILED[1]}: Airflow sends FAIL events")
    await demo.world.fail(*FAILED)
    alert = await demo.wait_for(
        lambda: _first(state.messages(orders), lambda m: has_button(m, ActionId.INCIDENT_APPROVE))
    )
    if alert is None:
        return "no alert reached #orders within a minute"
    await demo.settle()
    await step("backfill-bot alerts #orders with the impact and tells the teams downstream")
    await step("@alice (orders) clicks Approve backfill in the alert and confirms")
    await _click(demo, alert, ActionId.INCIDENT_APPROVE, OWNER)
    preview = _first(state.thread(orders, alert.ts), lambda m: has_button(m, ActionId.APPROVE))
    if preview is not None:  # the orders rule asks for a second person
        await step("The plan needs a second person: @pat (data platform) approves it in the thread")
        await _click(demo, preview, ActionId.APPROVE, PLATFORM)
    await step("The backfill runs on Airflow: progress in the alert's thread")
    if not await demo.until_finished(timeout_s=180):
        return "the backfill was still running after 3 minutes"
    resolved = await demo.wait_for(lambda: alert if "resolved" in alert.text else None, 30)
    if resolved is None:
        return "the incident did not resolve after the backfill"
    await step("Airflow's reruns reached the bot as OpenLineage events: the incident resolved")
    await step("The SLA clock moves a day: example.etl_orders has no run for 2021-06-07")
    await demo.world.advance(24)
    await demo.settle()
    await step(f"example.etl_orders completes for {EMPTY} having written 0 rows: bad data")
    seen = len(state.messages(orders))
    await demo.world.empty(EMPTY)
    bad = await demo.wait_for(
        lambda: _first(state.messages(orders)[seen:], lambda m: "wrote bad data" in m.text)
    )
    if bad is None:
        return "no data incident reached #orders within a minute"
    await demo.settle()
    await step("backfill-bot alerts #orders: the run succeeded, but wrote no rows")
    await step("@alice approves the backfill from the data alert: the run of the day is redone")
    await _click(demo, bad, ActionId.INCIDENT_APPROVE, OWNER)
    preview = _first(state.thread(orders, bad.ts), lambda m: has_button(m, ActionId.APPROVE))
    if preview is not None:
        await _click(demo, preview, ActionId.APPROVE, PLATFORM)
    if not await demo.until_finished(timeout_s=180):
        return "the data backfill was still running after 3 minutes"
    verified = await demo.wait_for(
        lambda: _first(state.thread(orders, bad.ts), lambda m: "Verified" in m.text)
    )
    if verified is None:
        return "the data backfill was not verified within a minute"
    fixed = await demo.wait_for(lambda: bad if "resolved" in bad.text else None, 30)
    if fixed is None:
        return "the data incident did not resolve after its backfill"
    await step(
        "The rerun wrote the usual rows: backfill-bot verified it in the thread, resolved the "
        "incident and told the owners of the reports downstream which of their dates changed"
    )
    return None


async def scripted(
    settings: Settings,
    config: BotConfig,
    out: Callable[[str], None],
    *,
    headless: bool,
    port: int = 3001,
    ansi: bool = False,
) -> bool:
    """The main job on embedded defaults. Headless: the final transcript, then exit (False if
    the story stopped short). Otherwise the page stays open until Ctrl-C."""
    async with running_demo(
        settings, demo_config(settings, config), out, slack_port=0 if headless else port
    ) as demo:
        page = f"{demo.slack.url}/"
        if not headless:
            out(f"\nOpen {page} in a browser to watch the story (it starts in a few seconds).")
        problem = await play(demo, pause_s=0.0 if headless else 2.5)
        if problem is not None:
            out(f"\nThe story stopped: {problem}.")
        if headless:
            out("\n" + transcript(demo.slack.state, ansi=ansi))
            return problem is None
        out(
            f"\nThe workspace stays open at {page}: act as anyone, type /backfill, fail other "
            "dates or move the SLA clock from the panel. Ctrl-C stops the demo."
        )
        await asyncio.Event().wait()
    return True
