"""BOT_CONFIG's `execution` section: how approved backfills run (Airflow, local Spark), how
much at once, and the off-peak windows backfills keep to (`windows`)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from bot.config.base import Duration, Strict, parse_duration
from bot.core.model import DagRef
from bot.core.windows import Window, WindowError, parse_clock, parse_days, zone


class AirflowExecution(Strict):
    """How approved steps are submitted to Airflow."""

    # "completed" reruns every interval asked for, even those that already succeeded: a backfill
    # exists because that data is wrong. "failed" or "none" skip intervals Airflow thinks are done.
    reprocess_behavior: Literal["completed", "failed", "none"] = "completed"
    max_active_runs: int = Field(default=4, ge=1, le=64)
    """Airflow 3: the `max_active_runs` of each backfill the bot creates."""
    max_active_runs_per_dag: int | None = Field(default=None, ge=1, le=64)
    """Airflow 2: how many runs the bot triggered for one DAG may be active (queued or running)
    at once, across all its backfills of that DAG; later intervals are triggered as earlier runs
    finish. Runs Airflow scheduled or someone triggered by hand do not count (the DAG's own
    `max_active_runs` bounds them). Default: the DAG's own `max_active_runs`."""
    on_paused: Literal["refuse", "unpause"] = "refuse"
    dag_ids: dict[str, str] = Field(default_factory=dict)
    """Marquez DAG name (or `NS::name`) → Airflow dag_id, where they differ."""
    ui_url: str | None = None
    """Base URL of the Airflow UI for links, when it differs from AIRFLOW_URL."""

    def dag_id_for(self, dag: DagRef) -> str:
        return self.dag_ids.get(f"{dag.namespace}::{dag.dag_id}") or self.dag_ids.get(
            dag.dag_id, dag.dag_id
        )


class SparkExecution(Strict):
    """The local executor: the example pipeline's PySpark jobs on one shared session."""

    warehouse: Path = Path("var/warehouse")
    send_lineage: bool = True
    """Send the jobs' OpenLineage events to MARQUEZ_URL, so Marquez sees the rerun."""
    options: dict[str, int | str] = Field(default_factory=dict)
    """More settings of the pipeline (e.g. `orders_per_day` of the example's generator)."""


def zone_name(value: str) -> str:
    """An IANA zone name as BOT_CONFIG gives it (spaces around it dropped), else the error."""
    try:
        zone(value)
    except WindowError as exc:
        raise ValueError(str(exc)) from None
    return value.strip()


def days_text(value: str) -> str:
    """Days as BOT_CONFIG gives them (`mon-fri`, `sat,sun`, `daily`), else the error."""
    try:
        parse_days(value)
    except WindowError as exc:
        raise ValueError(str(exc)) from None
    return value


def clock_text(value: str) -> str:
    """A wall-clock time as BOT_CONFIG gives it (`20:00`), else the error."""
    try:
        parse_clock(value)
    except WindowError as exc:
        raise ValueError(str(exc)) from None
    return value


class WindowRule(Strict):
    """When backfills may run: e.g. `{days: mon-fri, start: "20:00", end: "06:00", timezone:
    Europe/Berlin}`, for backfills whose root DAG `dags` matches or the team `team` owns
    (neither: all).
    Outside it an approved backfill waits, and a running one pauses at its next run boundary
    and resumes when the window opens; `--now` on `/backfill` runs one regardless."""

    days: str = "daily"
    start: str
    end: str
    timezone: str = "UTC"
    team: str | None = None
    """A team under `teams`: the window holds for backfills of DAGs it owns."""
    dags: str | None = None
    """A DAG pattern (`GLOB` or `NS::GLOB`) the window holds for."""

    @field_validator("days")
    @classmethod
    def _days(cls, value: str) -> str:
        return days_text(value)

    @field_validator("start", "end")
    @classmethod
    def _clock(cls, value: str) -> str:
        return clock_text(value)

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str) -> str:
        return zone_name(value)

    @model_validator(mode="after")
    def _not_empty(self) -> WindowRule:
        if parse_clock(self.start) == parse_clock(self.end):
            raise ValueError("a window's start and end must differ (for all day, leave it out)")
        return self

    def window(self) -> Window:
        return Window(parse_days(self.days), parse_clock(self.start), parse_clock(self.end),
                      self.timezone)  # fmt: skip


class Pool(Strict):
    """DAGs that share a resource (a warehouse, a cluster queue): their backfill runs active at
    once never exceed `max`."""

    dags: str = Field(min_length=1)
    """A DAG pattern (`GLOB` or `NS::GLOB`)."""
    max: int = Field(ge=1, le=10_000)


class Budget(Strict):
    """The most backfill runs active at once across every backfill the bot runs: in all
    (`total`), for the backfills of one team (`per_team`, the team owning the root DAG) and for
    each pool of DAGs. A step that would go over waits in the queue (high priority first, then
    the backfills whose reports are due soonest, then the oldest) and starts when runs end.
    Nothing set: no budget, each backfill keeps its own `max_active_runs`."""

    total: int | None = Field(default=None, ge=1, le=10_000)
    per_team: int | None = Field(default=None, ge=1, le=10_000)
    pools: tuple[Pool, ...] = ()
    urgent_within: Duration = timedelta(hours=12)
    """A report whose `ready_by` comes within this long puts its backfills ahead of others."""

    @field_validator("urgent_within", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> timedelta:
        return parse_duration(value)

    @property
    def enforced(self) -> bool:
        return self.total is not None or self.per_team is not None or bool(self.pools)


class Execution(Strict):
    max_parallel_steps: int = Field(default=4, ge=1, le=64)
    poll_interval_s: float = Field(default=5.0, gt=0, le=600)
    progress_update_s: float = Field(default=5.0, ge=0, le=600)
    """The status message is edited at most once per this many seconds."""
    conflict_retry_s: float = Field(default=30.0, gt=0, le=3600)
    airflow: AirflowExecution = AirflowExecution()
    spark: SparkExecution = SparkExecution()
    windows: tuple[WindowRule, ...] = ()
    """Off-peak windows, first match wins (`BotConfig.window_for`)."""
    budget: Budget = Budget()
    """Backfill runs active at once across all backfills (none by default)."""
    timezone: str = "UTC"
    """How `/backfill … --at "2021-06-07 20:00"` reads a time given without a zone."""

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str) -> str:
        return zone_name(value)
