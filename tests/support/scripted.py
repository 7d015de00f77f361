"""A backend for the step runner whose answers a test sets per DAG (what `poll` says, what
`submit` raises) and which records what the runner asked of it: submissions, cancels, pauses
and the work it was given (with the request's options)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bot.backfill.rules.options import RunOptions
from bot.backfill.rules.progress import Counts
from bot.backfill.run.backends import Finding, Progress, State, StepWork
from bot.core.model import DagRef, Interval

RUNNING = Progress(Counts(running=1))
DONE = Progress(Counts(succeeded=1), done=True, ok=True)


@dataclass
class Scripted:
    name: str = "scripted"
    polls: dict[str, list[Progress]] = field(default_factory=dict)
    submit_errors: dict[str, list[Exception]] = field(default_factory=dict)
    submitted: list[str] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)
    pauses: list[tuple[str, bool]] = field(default_factory=list)
    works: list[StepWork] = field(default_factory=list)
    run_s: dict[str, float] = field(default_factory=dict)
    consumers: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    """(asset, consumer DAG) each DAG's runs trigger (`asset_consumers`)."""
    """How long one run of each DAG usually takes (`run_seconds`)."""

    async def check(self, dags: Sequence[DagRef]) -> dict[DagRef, Finding]:
        return {}

    async def submit(self, work: StepWork) -> State:
        errors = self.submit_errors.get(work.dag.dag_id)
        if errors:
            raise errors.pop(0)
        self.submitted.append(work.dag.dag_id)
        self.works.append(work)
        return {"handle": f"run of {work.dag.dag_id}"}

    async def poll(self, work: StepWork) -> Progress:
        self.works.append(work)
        script = self.polls.get(work.dag.dag_id) or [DONE]
        return script.pop(0) if len(script) > 1 else script[0]

    async def cancel(self, work: StepWork) -> State | None:
        self.cancelled.append(work.dag.dag_id)
        return None

    async def pause(self, work: StepWork, paused: bool) -> State | None:
        self.pauses.append((work.dag.dag_id, paused))
        return None

    async def history(self, dag: DagRef, intervals: Sequence[Interval]) -> list[str | None]:
        return [None] * len(intervals)

    def unhonoured(self, options: RunOptions) -> tuple[str, ...]:
        return ()

    async def asset_consumers(self, dag: DagRef) -> list[tuple[str, str]]:
        return list(self.consumers.get(dag.dag_id, ()))

    async def run_seconds(self, dag: DagRef) -> float | None:
        return self.run_s.get(dag.dag_id)

    def runs_at_once(self, work: StepWork) -> int:
        return max(1, min(work.options.max_active or 4, len(work.intervals)))

    async def check_conf(
        self, dags: Sequence[DagRef], conf: Mapping[str, Any]
    ) -> dict[DagRef, Finding]:
        return {}

    def link(self, work: StepWork) -> str | None:
        return None

    async def close(self) -> None:
        return None
