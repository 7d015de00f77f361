"""The Airflow stand-in's records: a DAG's state, its runs, their task instances, backfills
(standins/airflow/state.py keeps them and plays the scheduler)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from standins.airflow.dags import RunState, StandinDag

JsonDict = dict[str, Any]
Clock = Callable[[], datetime]
TaskState = Literal["running", "success", "failed", "upstream_failed", "skipped"]
UNFINISHED = ("queued", "running")
#: task states a run's next try runs again (None: cleared or never scheduled)
TASK_PENDING: tuple[TaskState | None, ...] = (None, "running")
TASK_BROKEN: tuple[TaskState | None, ...] = ("failed", "upstream_failed")


@dataclass
class DagState:
    dag: StandinDag
    is_paused: bool
    failing: bool
    created_at: datetime
    version_id: str

    @property
    def dag_id(self) -> str:
        return self.dag.dag_id


@dataclass
class TaskInstance:
    """One task of one run. Clearing it gives it a new `id` (Airflow records the old try in its
    history) and state None; `try_number` grows when it next starts."""

    task_id: str
    id: str
    state: TaskState | None = None
    try_number: int = 0
    max_tries: int = 0
    start_date: datetime | None = None
    end_date: datetime | None = None
    queued_when: datetime | None = None
    note: str | None = None
    clears: int = 0

    @property
    def duration(self) -> float | None:
        if self.start_date is None or self.end_date is None:
            return None
        return (self.end_date - self.start_date).total_seconds()


@dataclass
class DagRun:
    id: int
    dag_id: str
    run_id: str
    run_type: str
    state: RunState
    logical_date: datetime | None
    data_interval_start: datetime | None
    data_interval_end: datetime | None
    run_after: datetime
    queued_at: datetime | None
    updated_at: datetime
    start_date: datetime | None = None
    end_date: datetime | None = None
    conf: JsonDict = field(default_factory=dict)
    note: str | None = None
    external_trigger: bool = False
    triggered_by: str | None = None
    triggering_user_name: str | None = None
    backfill_id: int | None = None
    last_scheduling_decision: datetime | None = None
    clear_number: int = 0
    finish_at: datetime | None = None  # when a running run ends (simulation only)
    tasks: dict[str, TaskInstance] = field(default_factory=dict)  # in the DAG's (chain) order

    @property
    def duration(self) -> float | None:
        if self.start_date is None or self.end_date is None:
            return None
        return (self.end_date - self.start_date).total_seconds()


@dataclass
class Backfill:
    id: int
    dag_id: str
    from_date: datetime
    to_date: datetime
    dag_run_conf: JsonDict | None
    reprocess_behavior: str
    max_active_runs: int
    created_at: datetime
    updated_at: datetime
    is_paused: bool = False
    completed_at: datetime | None = None
    triggering_user_name: str | None = None
    run_ids: list[str] = field(default_factory=list)  # in run order (sort_ordinal)
    skipped: list[tuple[datetime, str]] = field(default_factory=list)  # (logical date, reason)
    idle_since: datetime | None = None
