"""The executor when neither Airflow nor Spark is configured: it posts, in the request's thread,
the exact Airflow commands to run in plan order (over several replies when they are many), so a
human can run them."""

from __future__ import annotations

import json
import shlex
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from bot.backfill.messages.progress import run_by_hand
from bot.backfill.rules.options import RerunCounts, RunOptions
from bot.backfill.store.models import BackfillRequest, BackfillStep
from bot.lineage.rules.planner import Plan, PlanNote
from bot.slack.store import outbox
from bot.slack.store.models import OutboxRole


def _day(text: str) -> str:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).strftime("%Y-%m-%dT%H:%M:%S+00:00")


def airflow_command(step: BackfillStep, options: RunOptions | None = None) -> str:
    """`airflow backfill create` (Airflow 3) over the step's runs, with the request's options;
    logical dates are interval starts, so the range runs from the first interval's start to the
    last one's."""
    options = options or RunOptions(rerun="all")
    first, last = step.intervals[0]["start"], step.intervals[-1]["start"]
    # Quoted for the shell: someone pastes it, and a DAG id and a conf come from outside.
    command = (
        f"airflow backfill create --dag-id {shlex.quote(step.dag_id)} --from-date {_day(first)} "
        f"--to-date {_day(last)} --reprocess-behavior {options.reprocess_behavior}"
    )
    if options.backwards:
        command += " --run-backwards"
    if options.max_active is not None:
        command += f" --max-active-runs {options.max_active}"
    if options.conf:
        command += f" --dag-run-conf {shlex.quote(json.dumps(dict(options.conf)))}"
    return command


class ManualExecutor:
    name = "manual"
    keeps_time = False  # the commands are posted on approval; people run them when they will

    async def start(self, session: AsyncSession, request: BackfillRequest) -> None:
        options = RunOptions.from_json(request.options)
        commands = [airflow_command(step, options) for step in request.steps]
        for payload in run_by_hand(commands):  # enqueued in order, so posted in order
            await outbox.enqueue(
                session,
                channel=request.channel or "",
                payload=payload,
                role=OutboxRole.THREAD,
                request_id=request.id,
            )

    async def cancel(self, session: AsyncSession, request: BackfillRequest) -> None:
        return None  # nothing was started on our side

    async def check(self, plan: Plan) -> tuple[PlanNote, ...]:
        return ()

    def unhonoured(self, options: RunOptions) -> tuple[str, ...]:
        if options.stop_on_failure:
            return ("the commands are run by hand: --stop-on-failure is up to whoever runs them",)
        return ()

    async def rerun_counts(self, plan: Plan) -> RerunCounts | None:
        return None

    async def asset_consumers(self, plan: Plan) -> list[dict[str, str]]:
        return []  # no Airflow to ask

    async def paces(self, plan: Plan, options: RunOptions) -> dict[str, dict[str, Any]]:
        return {}  # whoever runs the commands decides how fast

    async def check_options(self, plan: Plan, options: RunOptions) -> tuple[PlanNote, ...]:
        return ()
