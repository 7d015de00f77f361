"""The Executor protocol: how an approved backfill request is handed over to be run.

The hand-off is one transaction: the request is held in state `approved`, the executor records
what it will do (steps, outbox rows) in that same session, and the hand-off is audited, so it
happens exactly once even across restarts and concurrent cancels. An executor acts on Airflow or
Spark from its own worker, after the commit, never inside `start`.
"""

from __future__ import annotations

from typing import Any, Protocol

from sqlalchemy.ext.asyncio import AsyncSession

from bot.backfill.rules.options import RerunCounts, RunOptions
from bot.backfill.store.models import BackfillRequest
from bot.lineage.rules.planner import Plan, PlanNote


class Executor(Protocol):
    """Runs the steps of an approved request, in plan order."""

    @property
    def name(self) -> str: ...

    @property
    def keeps_time(self) -> bool:
        """Whether it holds a request until its `--at` and its off-peak window."""

    async def start(self, session: AsyncSession, request: BackfillRequest) -> None:
        """Record, in the caller's transaction, the take-over of an approved request (and owe
        the executor's worker a look once it commits: `wake_after_commit`)."""

    async def cancel(self, session: AsyncSession, request: BackfillRequest) -> None:
        """Record, in the caller's transaction, that what is still queued must stop."""

    async def check(self, plan: Plan) -> tuple[PlanNote, ...]:
        """What the preview must say about the plan's DAGs (missing, paused) before approval."""

    def unhonoured(self, options: RunOptions) -> tuple[str, ...]:
        """What of the chosen options this executor cannot do, in words for the preview."""

    async def rerun_counts(self, plan: Plan) -> RerunCounts | None:
        """How many runs each `--rerun` choice means, from the run history (None: unknown)."""

    async def check_options(self, plan: Plan, options: RunOptions) -> tuple[PlanNote, ...]:
        """What the plan's DAGs say of the chosen options (a `--conf` their params refuse)."""

    async def asset_consumers(self, plan: Plan) -> list[dict[str, str]]:
        """DAGs outside the plan that Airflow schedules on assets the plan's DAGs produce
        (producer `dag`, `asset`, `consumer`): every rerun interval triggers them."""

    async def paces(self, plan: Plan, options: RunOptions) -> dict[str, dict[str, Any]]:
        """Per DAG of the plan: its typical run in seconds (`run_s`, None without history) and
        the runs it would have at once (`at_once`), for the reports' estimates."""
