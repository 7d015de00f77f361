"""What the runner tells a preview before anyone approves (the `Executor` protocol's questions):
the backend's findings on the plan's DAGs and on a `--conf`, how many runs each `--rerun` choice
means, and each DAG's pace for the reports' estimates. Read from the backend, a few DAGs at a
time, and never for plans so large that the preview would wait on hundreds of histories."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from bot.backfill.rules.options import RerunCounts, RunOptions
from bot.backfill.rules.options import rerun_counts as count_reruns
from bot.backfill.run.backends import Backend, StepWork
from bot.lineage.rules.planner import Plan, PlanNote, PlanStep

logger = logging.getLogger(__name__)
AT_ONCE = 8
"""Run histories asked of the backend at once."""
MOST_STEPS = 100
"""A plan with more DAGs goes without counts and paces."""


async def check(backend: Backend, plan: Plan) -> tuple[PlanNote, ...]:
    findings = await backend.check([s.dag for s in plan.steps])
    return tuple(PlanNote(dag.dag_id, f.text, f.blocking) for dag, f in findings.items())


async def check_options(backend: Backend, plan: Plan, options: RunOptions) -> tuple[PlanNote, ...]:
    if not options.conf:
        return ()
    dags = [s.dag for s in plan.steps[:MOST_STEPS]]
    findings = await backend.check_conf(dags, options.conf)
    return tuple(PlanNote(dag.dag_id, f.text, f.blocking) for dag, f in findings.items())


async def paces(backend: Backend, plan: Plan, options: RunOptions) -> dict[str, dict[str, Any]]:
    if len(plan.steps) > MOST_STEPS:
        return {}
    limit = asyncio.Semaphore(AT_ONCE)

    async def one(step: PlanStep) -> dict[str, Any]:
        work = StepWork(request_id="", step_id="", dag=step.dag, intervals=step.intervals,
                        options=options)  # fmt: skip
        async with limit:
            try:
                run_s = await backend.run_seconds(step.dag)
            except Exception as exc:  # the estimate says it cannot tell
                logger.warning("cannot read run times of %s: %s", step.dag.dag_id, exc)
                run_s = None
        return {"run_s": run_s, "at_once": backend.runs_at_once(work)}

    found = await asyncio.gather(*(one(s) for s in plan.steps))
    return {s.dag.dag_id: pace for s, pace in zip(plan.steps, found, strict=True)}


async def asset_consumers(backend: Backend, plan: Plan) -> list[dict[str, str]]:
    """Each DAG scheduled on an asset a DAG of the plan produces, and not itself in the plan:
    Airflow triggers it for every rerun interval (apache/airflow#33272). Producer, asset and
    consumer, once per pair."""
    if len(plan.steps) > MOST_STEPS:
        return []
    limit = asyncio.Semaphore(AT_ONCE)

    async def one(step: PlanStep) -> list[tuple[str, str]]:
        async with limit:
            return await backend.asset_consumers(step.dag)

    found = await asyncio.gather(*(one(s) for s in plan.steps))
    planned = {s.dag.dag_id for s in plan.steps}
    seen: dict[tuple[str, str, str], dict[str, str]] = {}
    for step, consumers in zip(plan.steps, found, strict=True):
        for asset, consumer in consumers:
            if consumer not in planned:
                key = (step.dag.dag_id, asset, consumer)
                seen[key] = {"dag": step.dag.dag_id, "asset": asset, "consumer": consumer}
    return list(seen.values())


async def rerun_counts(backend: Backend, plan: Plan) -> RerunCounts | None:
    if len(plan.steps) > MOST_STEPS:
        return None
    limit = asyncio.Semaphore(AT_ONCE)

    async def one(step: PlanStep) -> list[str | None] | None:
        async with limit:
            return await backend.history(step.dag, step.intervals)

    found = await asyncio.gather(*(one(s) for s in plan.steps))
    if any(states is None for states in found):
        return RerunCounts(plan.run_count, plan.run_count, plan.run_count, known=False)
    return count_reruns(state for states in found for state in states or ())
