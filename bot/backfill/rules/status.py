"""Where a backfill request stands, as its status message shows it (`RequestStatus`), and what
the rules and the words read of a stored request and its steps (`StoredRequest`, `StoredStep`:
the rows of `bot.backfill.store.models` have all of it)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any, Protocol

from bot.backfill.rules.capacity import Held
from bot.backfill.rules.progress import Counts
from bot.backfill.rules.states import STEP_FINAL


class StoredStep(Protocol):
    """One step (DAG) of a stored request."""

    @property
    def dag_id(self) -> str: ...

    @property
    def state(self) -> str: ...

    @property
    def intervals(self) -> Sequence[dict[str, str]]: ...

    @property
    def counts(self) -> dict[str, Any]: ...

    @property
    def message(self) -> str | None: ...

    @property
    def upstream(self) -> Sequence[str]: ...

    @property
    def executor_state(self) -> dict[str, Any] | None: ...

    @property
    def started_at(self) -> datetime | None: ...

    @property
    def finished_at(self) -> datetime | None: ...


class StoredRequest(Protocol):
    """A stored backfill request."""

    @property
    def id(self) -> str: ...

    @property
    def root_dag(self) -> str: ...

    @property
    def start_date(self) -> date: ...

    @property
    def end_date(self) -> date: ...

    @property
    def state(self) -> str: ...

    @property
    def requester(self) -> str: ...

    @property
    def approvers(self) -> Sequence[str]: ...

    @property
    def started_at(self) -> datetime | None: ...

    @property
    def finished_at(self) -> datetime | None: ...

    @property
    def steps(self) -> Sequence[StoredStep]: ...

    @property
    def options(self) -> dict[str, Any]: ...

    @property
    def paused_by(self) -> str | None: ...

    @property
    def paused_at(self) -> datetime | None: ...

    @property
    def pause_reason(self) -> str | None: ...

    @property
    def resume_at(self) -> datetime | None: ...


@dataclass(frozen=True)
class Hold:
    """Why a request is paused or has not started, and until when."""

    by: str | None
    """A Slack user id; `failure` (--stop-on-failure), `window` or None (scheduled)."""
    at: datetime | None
    reason: str = ""
    until: datetime | None = None
    """When the bot starts or resumes it by itself."""


@dataclass(frozen=True)
class ReportEstimate:
    """A report downstream of a backfill: when it is read next, and when it is correct again."""

    report: str
    team: str | None
    read_at: datetime | None
    ready: datetime | None
    """None: no run-time history to tell from."""
    takes: timedelta | None
    """How long after the start it is ready (said before the backfill starts)."""

    @property
    def late(self) -> bool:
        return self.ready is not None and self.read_at is not None and self.ready > self.read_at


@dataclass(frozen=True)
class Queued:
    """Where a request waits for the budget shared by every backfill (`execution.budget`)."""

    position: int
    of: int
    held: tuple[Held, ...]
    """The limits that keep its first waiting step back."""
    idle: bool
    """Nothing of it runs yet: the whole backfill waits."""
    steps: int = 1
    """How many of its DAGs wait."""


@dataclass(frozen=True)
class StepStatus:
    dag_id: str
    state: str
    runs: int
    counts: Counts | None = None
    note: str = ""


@dataclass(frozen=True)
class RequestStatus:
    """What the channel status message shows of one backfill request."""

    request_id: str
    root_dag: str
    range_text: str
    state: str
    requester: str
    approvers: tuple[str, ...]
    steps: tuple[StepStatus, ...]
    cancellable: bool
    awaiting: tuple[str, ...] = ()
    """Teams whose approval is still needed."""
    options: tuple[str, ...] = ()
    """The options chosen, in words (bot/backfill/rules/options.py `RunOptions.described`)."""
    reason: str = ""
    """Why it was asked for (`--reason`)."""
    hold: Hold | None = None
    """Set while it is paused or scheduled."""
    queued: Queued | None = None
    """Set while a step of it waits for the budget."""
    estimates: tuple[ReportEstimate, ...] = ()
    """The reports downstream that say when they are read, and when each is correct again."""

    @property
    def still_to_run(self) -> tuple[int, int]:
        """DAGs not finished, and the runs they have not finished."""
        dags = runs = 0
        for step in self.steps:
            if step.state in STEP_FINAL:
                continue
            dags += 1
            done = step.counts.succeeded + step.counts.failed if step.counts else 0
            runs += max(0, step.runs - done)
        return dags, runs
