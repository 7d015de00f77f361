"""What a backfill command plans to, checked: the DAG it names, the plan (the planner's), the
executor's notes on its DAGs, whether another backfill already reruns some of its intervals,
and who besides the root's owners may approve it."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.backfill.messages import answers
from bot.backfill.rules.assets import ASSET_SCHEDULE, with_consumers
from bot.backfill.rules.estimate import DEADLINES, PACE, REPORTS
from bot.backfill.rules.options import ASSET_CONSUMERS, OPTION_NOTES, RunOptions, default_rerun
from bot.backfill.rules.outcomes import Busy
from bot.backfill.run.base import Executor
from bot.backfill.store import execution
from bot.config import BotConfig
from bot.core.model import DagRef
from bot.core.windows import parse_at
from bot.lineage.rules.planner import Plan, PlanNote, PlanStep
from bot.lineage.service.planning import PlannerFactory, PlanRequest
from bot.ownership.rules import owners, requires_all_owners
from bot.slack.rules.commands import PlanCommand

logger = logging.getLogger(__name__)
_ASSET_DEPTH = 5
"""Rounds of asset consumers `--with-asset-consumers` follows (consumers of consumers...)."""


class PlanChecks:
    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        config: BotConfig,
        planners: PlannerFactory,
        executor: Executor,
    ) -> None:
        self.sessions = sessions
        self.config = config
        self.planners = planners
        self.executor = executor

    async def make_plan(self, command: PlanCommand) -> Plan:
        """The plan a command asks for (raises PlanningError or a Marquez error)."""
        request = PlanRequest(
            command.dag, command.range_text, command.namespace, command.only, command.exclude
        )
        async with self.planners() as planner:
            plan = await planner.plan(request)
        if command.options.with_asset_consumers:
            plan = await self.with_consumers(plan)
        return plan

    async def with_consumers(self, plan: Plan) -> Plan:
        """The plan with the DAGs scheduled on its DAGs' assets as steps after them (one run
        per interval), and the DAGs scheduled on theirs, and so on (their triggered runs update
        assets too); with a note saying why when Airflow cannot say which."""
        frontier = plan
        for _ in range(_ASSET_DEPTH):
            try:
                found = await self.executor.asset_consumers(frontier)
            except Exception as exc:
                logger.warning("cannot read the asset consumers of %s: %s", plan.root.dag_id, exc)
                note = answers.check_failed(self.executor.name, str(exc))
                return replace(plan, notes=(*plan.notes, PlanNote(plan.root.dag_id, note)))
            namespace = plan.root.namespace
            owned = {c["consumer"]: owners(self.config, DagRef(namespace, c["consumer"]))
                     for c in found}  # fmt: skip
            plan, added = with_consumers(plan, found, owned)
            if not added:
                break
            frontier = replace(plan, steps=plan.steps[-len(added) :])
        return plan

    async def root_of(self, command: PlanCommand) -> DagRef:
        """The DAG a command names, as far as the planner resolves it (else as typed)."""
        try:
            async with self.planners() as planner:
                return await planner.resolve(command.dag, command.namespace)
        except Exception:  # the plan that follows says why, with the usual refusal
            return DagRef(command.namespace or "", command.dag)

    async def downstream_owners(self, command: PlanCommand, root: DagRef) -> list[str]:
        """Teams that may approve besides the root's owners: under `approve: all_owners`, the
        owners of the DAGs a backfill of `root` reruns."""
        if not requires_all_owners(self.config, root):
            return []
        try:
            async with self.planners() as planner:
                impact = await planner.impact(root.dag_id, root.namespace)
        except Exception:
            return []
        return [name for owners in impact.owners.values() for name in owners]

    async def notes(self, plan: Plan) -> tuple[PlanNote, ...]:
        """The executor's notes on the plan's DAGs; a failed check is a note, not a refusal."""
        try:
            return await self.executor.check(plan)
        except Exception as exc:
            logger.warning("cannot check the plan with %s: %s", self.executor.name, exc)
            note = answers.check_failed(self.executor.name, str(exc))
            return (PlanNote(plan.root.dag_id, note, blocking=False),)

    def start_at(self, command: PlanCommand, now: datetime) -> datetime | None:
        """`--at` as a UTC moment (raises WindowError, whose message says what to type)."""
        if command.at is None:
            return None
        return parse_at(command.at, now=now, default_tz=self.config.execution.timezone)

    async def options(self, command: PlanCommand, plan: Plan) -> dict[str, Any]:
        """What the request stores of its options: the command's flags, the run options (the
        bot's default `--rerun` written in), the off-peak window it keeps to (none with
        `--now`), how many runs each `--rerun` choice means, and what the executor cannot
        honour."""
        rule = self.config.window_for(plan.root)
        window = rule.window().to_json() if rule is not None else None
        default = default_rerun(self.config.execution.airflow.reprocess_behavior)
        chosen = command.options.resolved(default)
        if chosen.with_asset_consumers:  # the steps it added run as triggered runs
            added = tuple(s.dag.dag_id for s in plan.steps if s.schedule == ASSET_SCHEDULE)
            chosen = replace(chosen, asset_triggered=added)
        try:
            counts = await self.executor.rerun_counts(plan)
        except Exception as exc:  # the preview goes out without the counts
            logger.warning("cannot read the run history for %s: %s", plan.root.dag_id, exc)
            counts = None
        try:
            notes = await self.executor.check_options(plan, chosen)
        except Exception as exc:  # a failed check is a note, not a refusal
            logger.warning("cannot check the options of %s: %s", plan.root.dag_id, exc)
            text = answers.check_failed(self.executor.name, str(exc))
            notes = (PlanNote(plan.root.dag_id, text, blocking=False),)
        return {
            "only": command.only,
            "exclude": list(command.exclude),
            "dry_run": command.dry_run,
            **chosen.to_json(),
            "window": None if command.now else window,
            "now": bool(command.now and window),
            "counts": counts.to_json() if counts else None,
            "unhonoured": [*self.executor.unhonoured(chosen), *self._untimed(command, window)],
            OPTION_NOTES: [n.to_json() for n in notes],
            **await self._reports(plan, chosen),
            ASSET_CONSUMERS: await self._consumers(plan),
        }

    async def _consumers(self, plan: Plan) -> list[dict[str, str]]:
        try:
            return await self.executor.asset_consumers(plan)
        except Exception as exc:  # the preview goes out without the warning
            logger.warning("cannot read the asset consumers of %s: %s", plan.root.dag_id, exc)
            return []

    async def _reports(self, plan: Plan, options: RunOptions) -> dict[str, Any]:
        """The reports downstream (whose owners hear which of their dates it restated), those
        that say when they are read, and (for their estimates) the pace of the plan's DAGs."""
        reports = await self.reports(plan)
        deadlines = [r for r in reports if r.get("deadline")]
        if not deadlines:
            return {DEADLINES: [], REPORTS: reports}
        try:
            paces = await self.executor.paces(plan, options)
        except Exception as exc:  # the preview says it cannot estimate
            logger.warning("cannot read the run times for %s: %s", plan.root.dag_id, exc)
            paces = {}
        return {DEADLINES: deadlines, PACE: paces, REPORTS: reports}

    async def deadlines(self, plan: Plan) -> list[dict[str, Any]]:
        """The reports downstream of the plan that say when they are read (`ready_by`): what
        puts the backfill ahead in the queue for the budget as that time nears."""
        if not any(r.ready_by for r in self.config.reports):
            return []
        return [r for r in await self.reports(plan) if r.get("deadline")]

    async def reports(self, plan: Plan) -> list[dict[str, Any]]:
        """Every BOT_CONFIG report downstream of the plan whose data it rewrites: {report,
        team, deadline (Deadline JSON or None), dags: the plan's DAGs that write what it
        reads (empty: not known, then every DAG of the plan)}."""
        if not any(r.ready_by or self._told(r.team) for r in self.config.reports):
            return []  # nobody to queue for or to tell: no walk downstream
        try:
            async with self.planners() as planner:
                impact = await planner.impact(plan.root.dag_id, plan.root.namespace)
        except Exception as exc:  # it queues as if nothing urgent read its data
            logger.warning("cannot find the reports downstream of %s: %s", plan.root.dag_id, exc)
            return []
        planned = {s.dag for s in plan.steps}
        found: dict[str, dict[str, Any]] = {}
        for hit in impact.reports:
            if hit.writers and not planned & set(hit.writers):
                continue  # its data is written by DAGs this plan does not rerun
            deadline = hit.report.deadline()
            entry = found.setdefault(hit.report.name, {
                "report": hit.report.name, "team": hit.report.team,
                "deadline": deadline.to_json() if deadline is not None else None, "dags": [],
            })  # fmt: skip
            # The plan's DAGs that write what it reads: it is correct once they have rerun.
            entry["dags"] += [d.dag_id for d in hit.writers
                              if d in planned and d.dag_id not in entry["dags"]]  # fmt: skip
        return list(found.values())

    def _told(self, team_name: str | None) -> bool:
        team = self.config.team(team_name) if team_name else None
        return team is not None and bool(team.channel)

    def _untimed(self, command: PlanCommand, window: object) -> list[str]:
        if self.executor.keeps_time or not (command.at or (window and not command.now)):
            return []
        return [
            "with no Airflow or Spark to run it, the bot posts the commands on approval: "
            "--at and off-peak windows are up to whoever runs them"
        ]

    async def busy(
        self,
        steps: Sequence[PlanStep],
        *,
        exclude: str | None = None,
        session: AsyncSession | None = None,
    ) -> Busy | None:
        """Why the plan must wait: another backfill already reruns one of its DAG intervals."""
        wanted = [(s.dag.namespace, s.dag.dag_id, s.intervals) for s in steps]
        if session is None:
            async with self.sessions() as own:
                found = await execution.overlapping(own, wanted, exclude=exclude)
        else:
            found = await execution.overlapping(session, wanted, exclude=exclude)
        if not found:
            return None
        first = found[0]
        return Busy(first.dag_id, first.request_id, first.state, request_id=exclude)
