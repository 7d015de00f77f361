"""Running many intervals: every job over a range of days, in dependency order.

Used by `python -m pipeline.food_delivery full` (full recompute, the demo's history), the tests
and the bench. Jobs run stage by stage (a job's stage comes after the stages of every job it
reads from); the intervals of one stage may run in parallel threads on the shared session.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import date, datetime

from pyspark.sql import SparkSession

from pipeline.food_delivery.catalog import JOBS, scheduled_intervals
from pipeline.food_delivery.jobs import JobFailed, PipelineSettings, RunResult, run_interval


@dataclass(frozen=True)
class Planned:
    dag: str
    start: datetime
    end: datetime


@dataclass(frozen=True)
class Outcome:
    """A planned run and how it went: `result` on success, else the `error` message."""

    run: Planned
    result: RunResult | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.result is not None


def _stages() -> dict[str, int]:
    producers = {out: name for name, job in JOBS.items() for out in job.outputs}
    stage: dict[str, int] = {}
    for name, job in JOBS.items():  # JOBS is in dependency order
        upstream = [stage[producers[i]] for i in job.inputs if i in producers]
        stage[name] = 1 + max(upstream, default=-1)
    return stage


def full_plan(
    first_day: date, last_day: date, dags: Iterable[str] | None = None
) -> list[list[Planned]]:
    """Every scheduled interval of the jobs (all by default) over those days, by stage."""
    wanted = set(JOBS) if dags is None else set(dags)
    stages = _stages()
    plan: list[list[Planned]] = [[] for _ in range(max(stages.values()) + 1)]
    for name, job in JOBS.items():
        if name in wanted:
            plan[stages[name]] += [
                Planned(name, a, b) for a, b in scheduled_intervals(job, first_day, last_day)
            ]
    return [stage for stage in plan if stage]


def run_stages(
    spark: SparkSession,
    stages: Sequence[Sequence[Planned]],
    settings: PipelineSettings,
    *,
    parallel: int = 1,
    on_outcome: Callable[[Outcome], None] | None = None,
) -> list[Outcome]:
    """Run the stages one after the other, up to `parallel` runs at a time within a stage.

    A failed run does not stop the others (weekly jobs then compute from what is there, as a
    scheduler would); every outcome is returned, in plan order.
    """

    def one(run: Planned) -> Outcome:
        try:
            result = run_interval(spark, run.dag, run.start, run.end, settings)
        except JobFailed as exc:
            outcome = Outcome(run, error=str(exc))
        else:
            outcome = Outcome(run, result=result)
        if on_outcome is not None:
            on_outcome(outcome)
        return outcome

    outcomes: list[Outcome] = []
    if parallel <= 1:
        for stage in stages:
            outcomes += [one(run) for run in stage]
        return outcomes
    with ThreadPoolExecutor(parallel, thread_name_prefix="food_delivery") as pool:
        for stage in stages:
            outcomes += list(pool.map(one, stage))
    return outcomes
