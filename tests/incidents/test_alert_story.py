"""The alert story end to end, over HTTP: failed runs posted to the receiver, clicks as signed
Slack requests through the Slack stand-in, the backfill on the Airflow stand-in.

3 failed days → 1 alert proposing the backfill → Approve backfill in the alert → the DAG and
everything downstream rerun for those days, progress in the alert's thread → the other teams
told when it starts and ends → the alert resolves. Also: a root that recovers on its own offers
Backfill downstream; Acknowledge and Unsnooze; Retry of a failed backfill; and a rule that asks
every owning team to approve.

Tests that are not about how the watcher gathers its Slack calls (group_wait_s) have them sent
at once (`SEND_AT_ONCE`): a gathered alert or edit keeps each settle waiting 2 s."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bot.slack.rules.ids import ActionId
from standins.marquez.server import StandInServer
from tests.support.e2e import buttons, eventually
from tests.support.story import (
    ANALYTICS,
    BOB,
    CAROL,
    DAYS,
    LOGISTICS,
    ORDERS,
    OWNER,
    SEND_AT_ONCE,
    alerts,
    backfill_of_incident,
    click,
    incident,
    post_events,
    request_of,
    run_event,
    story_bot,
    story_config,
)

PLANNED_DAGS = 7  # example.etl_orders and everything downstream of it
PLANNED_RUNS = 28


def mrkdwn_lines(message: Any) -> list[str]:
    return [
        str(part.get("text", ""))
        for block in message.blocks or []
        for part in [block.get("text") or {}, *block.get("elements", [])]
        if isinstance(part, dict)
    ]


def shown(message: Any) -> str:
    return message.text + json.dumps(message.blocks, ensure_ascii=False)


async def test_three_failed_days_one_click_every_team_told_resolved(
    tmp_path: Path, food_delivery_marquez: StandInServer
) -> None:
    async with story_bot(tmp_path, food_delivery_marquez, story_config()) as (bot, _):
        await post_events(bot, [run_event("FAIL", day) for day in DAYS])

        [alert] = alerts(bot)
        assert alert.edited is None, "days arriving together are one post, not a post and edits"
        text = shown(alert)
        assert "2021-06-04 to 2021-06-06" in text
        # the plan Approve backfill makes: each DAG's own schedule, weekly DAGs' weeks and the
        # daily DAGs reading them over those weeks (not 7 DAGs × 3 days)
        assert f"*Proposed backfill:* {PLANNED_DAGS} DAGs · {PLANNED_RUNS} runs ·" in text
        approve = buttons(alert)[ActionId.INCIDENT_APPROVE]
        assert "confirm" in approve  # one click, confirmed in Slack's own dialog
        assert "Open in Airflow" in text
        assert "scheduled__2021-06-06" in text

        await click(bot, alert, ActionId.INCIDENT_APPROVE, OWNER)
        request = await backfill_of_incident(bot)

        assert request.state == "succeeded"
        assert request.approvers == [OWNER]
        assert (request.start_date.isoformat(), request.end_date.isoformat()) == (
            "2021-06-04",
            "2021-06-06",
        )
        assert len(request.steps) == PLANNED_DAGS
        assert sum(len(step.intervals) for step in request.steps) == PLANNED_RUNS
        # the status message and the progress are in the alert's thread, not the channel
        thread = bot.slack.state.thread(ORDERS, alert.ts)
        assert any(m.ts == request.status_message_ts for m in thread)
        assert "Succeeded" in shown(bot.slack.state.find_message(ORDERS, request.status_message_ts))
        assert len(alerts(bot)) == 1
        assert len(bot.slack.state.messages(ORDERS)) == 1
        # each other team: one notice when it was approved, one when it ended
        for channel in (LOGISTICS, ANALYTICS):
            started, ended = bot.slack.state.messages(channel)
            assert "reruns your DAGs" in started.text
            assert request.id[:8] in started.text
            assert "*succeeded*" in ended.text
        assert "example.etl_delivery_7_days" in bot.slack.state.messages(LOGISTICS)[0].text

        # Airflow's reruns report success: the alert resolves and names the backfill
        before = len(bot.slack.state.calls)
        await post_events(bot, [run_event("COMPLETE", day) for day in DAYS])
        edits = [c for c in bot.slack.state.calls[before:] if c.method == "chat.update"]
        assert len(edits) == 1, "three successes arriving together are one edit"
        [alert] = alerts(bot)
        assert "now resolved" in alert.text
        assert f"Backfill `{request.id}` succeeded" in shown(alert)
        assert ActionId.INCIDENT_APPROVE not in buttons(alert)


async def test_a_root_that_recovers_on_its_own_offers_backfill_downstream(
    tmp_path: Path, food_delivery_marquez: StandInServer
) -> None:
    config = story_config(watch=SEND_AT_ONCE)
    async with story_bot(tmp_path, food_delivery_marquez, config) as (bot, _):
        await post_events(bot, [run_event("FAIL", DAYS[0])])
        # someone clears the run in Airflow; it succeeds without the bot
        await post_events(bot, [run_event("COMPLETE", DAYS[0])])
        [alert] = alerts(bot)
        assert "now resolved on its own" in alert.text
        assert ActionId.INCIDENT_APPROVE not in buttons(alert)

        await click(bot, alert, ActionId.INCIDENT_DOWNSTREAM, OWNER)
        request = await backfill_of_incident(bot)
        assert request.state == "succeeded"
        dags = [s.dag_id for s in request.steps]
        assert "example.etl_orders" not in dags
        assert len(dags) == PLANNED_DAGS - 1
        [alert] = alerts(bot)
        assert ActionId.INCIDENT_DOWNSTREAM not in buttons(alert)


async def test_a_click_while_the_watchers_edit_gathers_is_not_undone_by_it(
    tmp_path: Path, food_delivery_marquez: StandInServer
) -> None:
    async with story_bot(tmp_path, food_delivery_marquez, story_config()) as (bot, _):
        await post_events(bot, [run_event("FAIL", DAYS[0])])
        [alert] = alerts(bot)
        # the next day fails: its edit of the alert gathers for watch.group_wait_s ...
        await post_events(bot, [run_event("FAIL", DAYS[1])], settle=False)
        # ... and an Acknowledge edits the alert at once, with the second day in it
        await click(bot, alert, ActionId.INCIDENT_ACK, BOB)
        await eventually(lambda: "is on it" in shown(alerts(bot)[0]))
        await bot.settle()  # the gathered edit comes due: it is older, so it is not sent
        [alert] = alerts(bot)
        assert f"<@{BOB}> is on it" in shown(alert)
        assert "2021-06-04 to 2021-06-05" in alert.text


async def test_acknowledge_and_snooze_show_in_the_alert_and_snooze_can_be_undone(
    tmp_path: Path, food_delivery_marquez: StandInServer
) -> None:
    config = story_config(watch=SEND_AT_ONCE)
    async with story_bot(tmp_path, food_delivery_marquez, config) as (bot, _):
        await post_events(bot, [run_event("FAIL", DAYS[0])])
        [alert] = alerts(bot)
        await click(bot, alert, ActionId.INCIDENT_ACK, BOB)
        await eventually(lambda: "is on it" in shown(alerts(bot)[0]))
        await bot.settle()
        [alert] = alerts(bot)
        assert f"<@{BOB}> is on it" in shown(alert)
        assert ActionId.INCIDENT_ACK not in buttons(alert)

        # anyone may say they are on it; snoozing is for those who may approve (an owner)
        await click(bot, alert, ActionId.INCIDENT_SNOOZE_1H, OWNER)
        await eventually(lambda: ActionId.INCIDENT_UNSNOOZE in buttons(alerts(bot)[0]))
        [alert] = alerts(bot)
        assert f"by <@{OWNER}>" in shown(alert)
        await click(bot, alert, ActionId.INCIDENT_UNSNOOZE, OWNER)
        await eventually(lambda: ActionId.INCIDENT_SNOOZE_1H in buttons(alerts(bot)[0]))
        found = await incident(bot)
        assert found.snoozed_until is None
        assert found.acknowledged_by == BOB


async def test_someone_not_allowed_is_told_who_may_and_nothing_starts(
    tmp_path: Path, food_delivery_marquez: StandInServer
) -> None:
    config = story_config(watch=SEND_AT_ONCE)
    async with story_bot(tmp_path, food_delivery_marquez, config) as (bot, _):
        await post_events(bot, [run_event("FAIL", DAYS[0])])
        [alert] = alerts(bot)
        await click(bot, alert, ActionId.INCIDENT_APPROVE, CAROL)

        def told() -> str:
            mine = [e for e in bot.slack.state.ephemerals if e.user == CAROL]
            return "\n".join(f"{e.text} {json.dumps(e.blocks)}" for e in mine)

        said = await eventually(told, timeout_s=15)
        assert "only members of its owning teams (orders)" in said
        assert (await incident(bot)).backfill_request_id is None


async def test_all_owners_must_approve_and_the_preview_says_who_is_left(
    tmp_path: Path, food_delivery_marquez: StandInServer
) -> None:
    config = story_config(
        ownership=[
            {"pattern": "example.etl_orders*", "team": "orders", "approve": "all_owners"},
            {"pattern": "example.*delivery*", "team": "logistics"},
            {"pattern": "reporting.*", "team": "analytics"},
            {"pattern": "example.email_*", "team": "analytics"},
            {"pattern": "example.orders_*", "team": "analytics"},
        ],
        watch=SEND_AT_ONCE,
    )
    async with story_bot(tmp_path, food_delivery_marquez, config) as (bot, _):
        await post_events(bot, [run_event("FAIL", DAYS[0])])
        [alert] = alerts(bot)
        await click(bot, alert, ActionId.INCIDENT_APPROVE, OWNER)

        def preview() -> Any:
            thread = bot.slack.state.thread(ORDERS, alert.ts)
            found = [m for m in thread if ActionId.APPROVE in buttons(m)]
            return found[-1] if found else None

        def waiting() -> str:
            found = preview()
            lines = mrkdwn_lines(found) if found else []
            return next((line for line in lines if "Waiting for approval" in line), "")

        await eventually(waiting)
        await bot.settle()
        assert "analytics" in waiting()
        assert "logistics" in waiting()
        assert "orders" not in waiting()  # its owner's click counted
        request_id = (await incident(bot)).backfill_request_id
        assert request_id is not None
        assert (await request_of(bot, request_id)).state == "previewed"

        await click(bot, preview(), ActionId.APPROVE, BOB)
        await eventually(lambda: "logistics" not in waiting())
        assert "analytics" in waiting()
        assert (await request_of(bot, request_id)).state == "previewed"
        await click(bot, preview(), ActionId.APPROVE, CAROL)
        request = await backfill_of_incident(bot)
        assert request.state == "succeeded"
        assert request.approvers == [OWNER, BOB, CAROL]


async def test_a_failed_backfill_says_why_and_retry_reruns_only_what_did_not_succeed(
    tmp_path: Path, food_delivery_marquez: StandInServer
) -> None:
    config = story_config(watch=SEND_AT_ONCE)
    async with story_bot(tmp_path, food_delivery_marquez, config) as (bot, airflow):
        airflow.state.fail_always("example.etl_orders_7_days")
        await post_events(bot, [run_event("FAIL", day) for day in DAYS])
        [alert] = alerts(bot)
        await click(bot, alert, ActionId.INCIDENT_APPROVE, OWNER)
        failed = await backfill_of_incident(bot)
        assert failed.state == "failed"
        status = bot.slack.state.find_message(ORDERS, failed.status_message_ts or "")
        # the reason is in the status message itself, with Retry
        assert "example.etl_orders_7_days" in shown(status)
        assert "failed" in shown(status)
        assert ActionId.RETRY in buttons(status)
        assert "failed (Retry is in the thread)" in shown(alerts(bot)[0])

        airflow.state.fail_always("example.etl_orders_7_days", failing=False)
        await click(bot, status, ActionId.RETRY, OWNER)

        def retry_preview() -> Any:
            thread = bot.slack.state.thread(ORDERS, alert.ts)
            found = [m for m in thread if ActionId.APPROVE in buttons(m)]
            return found[-1] if found else None

        preview = await eventually(retry_preview, timeout_s=30)
        await bot.settle()
        retry_id = str(buttons(preview)[ActionId.APPROVE]["value"])
        retry = await request_of(bot, retry_id)
        assert retry.retry_of == failed.id
        redo = {s.dag_id for s in failed.steps if s.state != "succeeded"}
        assert {s.dag_id for s in retry.steps} == redo
        assert "example.etl_orders" not in redo  # it succeeded the first time

        await click(bot, preview, ActionId.APPROVE, OWNER)

        async def done() -> Any:
            found = await request_of(bot, retry_id)
            return found if found.finished_at is not None else None

        finished = await eventually(done, timeout_s=60)
        assert finished.state == "succeeded"


async def test_reruns_reported_while_the_backfill_runs_leave_the_alert_showing_its_success(
    tmp_path: Path, food_delivery_marquez: StandInServer
) -> None:
    # Airflow's provider reports the root DAG's reruns as soon as they succeed, while the DAGs
    # downstream still run: the alert resolves then, and must show the success at the end.
    async with story_bot(tmp_path, food_delivery_marquez, story_config(), run_seconds=0.3) as (
        bot,
        _,
    ):
        await post_events(bot, [run_event("FAIL", day) for day in DAYS])
        [alert] = alerts(bot)
        await click(bot, alert, ActionId.INCIDENT_APPROVE, OWNER)

        async def root_done() -> bool | None:
            found = await incident(bot)
            if found.backfill_request_id is None:
                return None
            request = await request_of(bot, found.backfill_request_id)
            return True if request.steps[0].state == "succeeded" else None

        await eventually(root_done, timeout_s=60)
        await post_events(bot, [run_event("COMPLETE", day) for day in DAYS])
        request = await backfill_of_incident(bot)
        assert request.state == "succeeded"
        [alert] = alerts(bot)
        assert "now resolved" in alert.text
        assert f"Backfill `{request.id}` succeeded" in shown(alert)
        assert "running" not in shown(alert)
