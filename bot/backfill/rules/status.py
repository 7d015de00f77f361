"""Where a backfill request stands, as its status message shows it (`RequestStatus`), and what
the rules and the words read of a stored request and its steps (`StoredRequest`, `StoredStep`:
the rows of `bot.backfill.store.models` have all of it)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, Protocol

from bot.backfill.rules.progress import Counts


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
