"""What the step runner asks of a system that runs DAGs (Airflow 3, Airflow 2, local Spark).

A backend never touches the database: the runner gives it a step (with the state the backend
returned last time, persisted before anything else happens) and stores what it answers. Every
call must be safe to repeat after a crash: `submit` finds work it already started instead of
starting it twice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from bot.backfill.rules.options import RunOptions
from bot.backfill.rules.progress import Counts
from bot.core.model import DagRef, Interval

State = dict[str, Any]


@dataclass(frozen=True)
class StepWork:
    """One step of a backfill, as a backend sees it."""

    request_id: str
    step_id: str
    dag: DagRef
    intervals: tuple[Interval, ...]
    state: Mapping[str, Any] = field(default_factory=dict)
    cancelling: bool = False
    since: datetime | None = None
    """When the runner claimed the step: work found in the backend from before is not ours."""
    options: RunOptions = field(default_factory=lambda: RunOptions(rerun="all"))
    """What the request asked for: which runs to redo, order, conf, runs at once."""
    pausing: bool = False
    """The request is paused: start nothing new; what runs may finish."""
    budget: int | None = None
    """The runs at once `execution.budget` granted the step (None: no budget): the backend
    keeps to it (Airflow 3's `max_active_runs`, Airflow 2's cap)."""

    def within_budget(self, runs: int) -> int:
        return runs if self.budget is None else max(1, min(runs, self.budget))

    def ordered(self) -> tuple[Interval, ...]:
        """The intervals in the order they run: oldest first, or newest first (`--backwards`)."""
        return self.intervals[::-1] if self.options.backwards else self.intervals


@dataclass(frozen=True)
class Finding:
    """Something about a DAG the plan preview must say before anyone approves it."""

    text: str
    blocking: bool


@dataclass(frozen=True)
class Progress:
    """Where one step stands in the system that runs it."""

    counts: Counts
    done: bool = False
    ok: bool = False
    message: str | None = None
    state: State | None = None
    """New backend state to persist (None: unchanged)."""
    lost: bool = False
    """The work vanished (a local run interrupted by a restart): submit it again."""


class Busy(Exception):
    """The system cannot take this step yet (another backfill of the DAG is running there)."""

    def __init__(self, message: str, *, retry_at: datetime | None = None) -> None:
        super().__init__(message)
        self.retry_at = retry_at


class SubmitInterrupted(Exception):
    """A submission failed for a reason that may pass (Airflow unreachable) after it decided
    what must not be decided again: `state` is kept for the next try; `cause` says why."""

    def __init__(self, state: State, cause: Exception) -> None:
        super().__init__(str(cause))
        self.state = state
        self.cause = cause


class StepRejected(Exception):
    """The system refused the step for good (unknown DAG, invalid range): the step fails."""


class Backend(Protocol):
    @property
    def name(self) -> str: ...

    async def check(self, dags: Sequence[DagRef]) -> dict[DagRef, Finding]:
        """Problems to show in the preview (missing or paused DAGs); empty when all is well."""

    async def submit(self, work: StepWork) -> State:
        """Start the step (or find it already started) and return the state to persist."""

    async def poll(self, work: StepWork) -> Progress: ...

    async def cancel(self, work: StepWork) -> State | None:
        """Stop what has not started yet; what runs may finish. Returns new state or None."""

    async def pause(self, work: StepWork, paused: bool) -> State | None:
        """Hold (or release) what has not started yet; what runs may finish."""

    async def history(self, dag: DagRef, intervals: Sequence[Interval]) -> list[str | None] | None:
        """The latest run state of each interval (None: no run), or None when the backend keeps
        no run history."""

    def unhonoured(self, options: RunOptions) -> tuple[str, ...]:
        """What of `options` this backend cannot do, in words for the preview."""

    async def asset_consumers(self, dag: DagRef) -> list[tuple[str, str]]:
        """(asset, DAG id) of each DAG scheduled on an asset the DAG produces (Airflow assets;
        Airflow 2 datasets): a run of `dag` triggers them. Empty when the backend has none."""

    async def run_seconds(self, dag: DagRef) -> float | None:
        """How long one run of the DAG usually takes (None: no history to tell from)."""

    def runs_at_once(self, work: StepWork) -> int:
        """How many of the step's runs it would have active at once, unbounded by the budget
        (what the step asks of `execution.budget`)."""

    async def check_conf(
        self, dags: Sequence[DagRef], conf: Mapping[str, Any]
    ) -> dict[DagRef, Finding]:
        """What each DAG's params say of a `--conf` (unknown keys, refused types); empty when
        the backend cannot tell."""

    def link(self, work: StepWork) -> str | None:
        """Where a person can watch the step (the Airflow UI), if anywhere."""

    async def close(self) -> None: ...
