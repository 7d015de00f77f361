"""DAGs of the Airflow stand-in: cron timetables, `StandinDag` and the food_delivery DAG set.

Timetables follow Airflow's `CronDataIntervalTimetable` (the timetable of `schedule="<cron>"`):
a run's data interval spans one cron tick to the next, its logical date is the interval's start,
and it may run once the interval has ended (`run_after` = data interval end). All times are UTC.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Literal

from croniter import croniter

from standins.seeds import food_delivery as seed

RunState = Literal["queued", "running", "success", "failed"]
RUN_STATES: tuple[RunState, ...] = ("queued", "running", "success", "failed")
MAX_RUNS_PER_RANGE = 100_000  # a guard against runaway loops over absurd ranges
MAX_ACTIVE_RUNS_PER_DAG = 16  # Airflow's `[core] max_active_runs_per_dag` default

_PRESETS = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
}
_WEEKDAYS = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")


def utc(value: datetime) -> datetime:
    """`value` as an aware UTC datetime (naive values are read as UTC, as Airflow does)."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def system_clock() -> datetime:
    return datetime.now(UTC)


class ManualClock:
    """A clock for tests: stands still until `advance`d (or `set`)."""

    def __init__(self, start: datetime = datetime(2024, 1, 1, tzinfo=UTC)) -> None:
        self.now = utc(start)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)

    def set(self, moment: datetime) -> None:
        self.now = utc(moment)


class CronTimetable:
    """Airflow's CronDataIntervalTimetable over one cron expression (or @preset), in UTC."""

    def __init__(self, expression: str) -> None:
        expr = _PRESETS.get(expression, expression)
        if not croniter.is_valid(expr):
            raise ValueError(f"invalid cron expression {expression!r}")
        self.expression = expression
        self._expr = expr

    def _next(self, moment: datetime) -> datetime:
        found: datetime = croniter(self._expr, utc(moment)).get_next(datetime)
        return found.astimezone(UTC)

    def _prev(self, moment: datetime) -> datetime:
        found: datetime = croniter(self._expr, utc(moment)).get_prev(datetime)
        return found.astimezone(UTC)

    def on_tick(self, moment: datetime) -> bool:
        return self._prev(self._next(moment)) == utc(moment)

    def align_next(self, moment: datetime) -> datetime:
        """`moment` if it is a tick, else the first tick after it."""
        return utc(moment) if self.on_tick(moment) else self._next(moment)

    def align_prev(self, moment: datetime) -> datetime:
        """`moment` if it is a tick, else the last tick before it."""
        return utc(moment) if self.on_tick(moment) else self._prev(moment)

    def following(self, tick: datetime) -> datetime:
        return self._next(tick)

    def interval(self, logical_date: datetime) -> tuple[datetime, datetime]:
        """The data interval of the run at an (aligned) logical date."""
        start = self.align_next(logical_date)
        return start, self._next(start)

    def logical_dates_between(self, earliest: datetime, latest: datetime) -> Iterator[datetime]:
        """Ticks t with earliest <= t <= latest (`DAG.iter_dagrun_infos_between`, aligned)."""
        tick, count = self.align_next(earliest), 0
        while tick <= utc(latest):
            yield tick
            count += 1
            if count >= MAX_RUNS_PER_RANGE:
                return
            tick = self._next(tick)

    def infer_manual_data_interval(self, run_after: datetime) -> tuple[datetime, datetime]:
        """A manual run at `run_after` covers the last complete interval ending at or before it."""
        end = self.align_prev(run_after)
        return self._prev(end), end

    def summary(self) -> str:
        return self.expression

    def description(self) -> str:
        fields = self._expr.split()
        if len(fields) != 5 or not (fields[0].isdigit() and fields[1].isdigit()):
            return f"Cron expression {self._expr}"
        at = f"At {int(fields[1]):02d}:{int(fields[0]):02d}"
        day_of_month, month, weekday = fields[2:]
        if (day_of_month, month) == ("*", "*") and weekday == "*":
            return at
        if (day_of_month, month) == ("*", "*") and weekday.isdigit() and int(weekday) < 7:
            return f"{at}, only on {_WEEKDAYS[int(weekday)]}"
        return f"{at} ({self._expr})"


@dataclass(frozen=True)
class StandinDag:
    """A DAG known to the stand-in.

    `schedule` is a cron expression or @preset; `run_seconds` overrides the stand-in's default
    run duration; `fail` makes every run of the DAG fail. `tasks` run as a chain, in order
    (`extract >> load`). New DAGs are unpaused by default (a real Airflow pauses new DAGs
    unless DAGS_ARE_PAUSED_AT_CREATION=False): pass `is_paused=True` for the real default.
    `max_active_runs=None` is a DAG whose row has none (the API answers null; the scheduler
    applies `[core] max_active_runs_per_dag`, 16).
    """

    dag_id: str
    schedule: str = "0 0 * * *"
    is_paused: bool = False
    fileloc: str | None = None
    tasks: tuple[str, ...] = ("run",)
    run_seconds: float | None = None
    max_active_runs: int | None = 16
    owners: tuple[str, ...] = ("airflow",)
    tags: tuple[str, ...] = ()
    description: str | None = None
    fail: bool = False
    params: tuple[tuple[str, object, str | None], ...] = ()
    """The DAG's params: (name, default value, JSON schema `type` or None)."""
    depends_on_past: bool = False
    """Some of its tasks have depends_on_past=True (Airflow 3 then refuses some backfills)."""
    outlets: tuple[str, ...] = ()
    """URIs of the assets (Airflow 2: datasets) its last task produces (`outlets=[Asset(uri)]`)."""
    asset_schedule: tuple[str, ...] = ()
    """URIs of the assets it is scheduled on (`schedule=[Asset(uri), ...]`): the assets API
    lists it as their consumer. The stand-in keeps `schedule` for the runs it is asked for; it
    does not trigger runs on asset events."""

    def __post_init__(self) -> None:
        CronTimetable(self.schedule)  # fail early on a bad expression
        if not self.tasks:
            raise ValueError(f"DAG {self.dag_id} needs at least one task")
        if len(set(self.tasks)) != len(self.tasks):
            raise ValueError(f"DAG {self.dag_id} names a task twice: {self.tasks}")
        if not all(uri.strip() for uri in (*self.outlets, *self.asset_schedule)):
            raise ValueError(f"DAG {self.dag_id} has an empty asset URI")

    @property
    def active_runs_limit(self) -> int:
        """How many runs of the DAG the scheduler lets run at once."""
        return MAX_ACTIVE_RUNS_PER_DAG if self.max_active_runs is None else self.max_active_runs

    @property
    def timetable(self) -> CronTimetable:
        return CronTimetable(self.schedule)

    @property
    def path(self) -> str:
        return self.fileloc or f"/opt/airflow/dags/{self.dag_id.replace('.', '/')}.py"

    @property
    def file_token(self) -> str:
        return hashlib.sha256(self.path.encode()).hexdigest()[:40]


@dataclass(frozen=True)
class HistoricRun:
    """A finished run that already exists when the stand-in starts (e.g. scheduled history)."""

    dag_id: str
    logical_date: datetime
    state: RunState = "success"
    run_type: Literal["scheduled", "manual", "backfill"] = "scheduled"
    minutes: int = 5


DAILY = "0 0 * * *"
WEEKLY_SUNDAY = "0 0 * * 0"
WEEKLY_MONDAY = "0 0 * * 1"
_TASKS: dict[str, tuple[str, ...]] = {
    "etl_delivery_7_days": ("extract", "load"),
    "delivery_times_7_days": ("top_delivery_times", "discounts"),
}
_WEEKLY_JOBS = (
    "etl_orders_7_days",
    "etl_delivery_7_days",
    "delivery_times_7_days",
    "orders_popular_day_of_week",
)


def _food_dag(name: str, schedule: str) -> StandinDag:
    owners = ("team:orders",) if name in seed.OWNED_JOBS else ("airflow",)
    return StandinDag(
        dag_id=seed.PREFIX + name,
        schedule=schedule,
        tasks=_TASKS.get(name, (name,)),
        owners=owners,
        tags=("food_delivery",),
    )


# Every DAG of the Marquez food_delivery seed (standins/seeds/food_delivery.py), so any plan the
# bot builds from that seed (for example.etl_orders: its weekly descendants, email_discounts and
# reporting.weekly_kpis) can run on the stand-in.
FOOD_DELIVERY_DAGS: tuple[StandinDag, ...] = (
    *(_food_dag(name, DAILY) for name in seed.SOURCE_JOBS),
    _food_dag("email_discounts", DAILY),
    *(_food_dag(name, WEEKLY_SUNDAY) for name in _WEEKLY_JOBS),
    StandinDag(
        dag_id="reporting.weekly_kpis",
        schedule=WEEKLY_MONDAY,
        tasks=("weekly_kpis",),
        owners=("team:reporting",),
        tags=("reporting",),
    ),
)


def _midnight(day: date) -> datetime:
    return datetime.combine(day, time(0, 0), tzinfo=UTC)


def food_delivery_history() -> list[HistoricRun]:
    """The scheduled runs the Marquez seed reports, as finished Airflow runs (same outcomes)."""
    runs: list[HistoricRun] = []
    for day in seed.DAILY_DAYS:
        for name in (*seed.SOURCE_JOBS, "email_discounts"):
            failed = name == "etl_orders" and day in seed.FAILED_ORDERS_DAYS
            state: RunState = "failed" if failed else "success"
            runs.append(HistoricRun(seed.PREFIX + name, _midnight(day), state))
    for sunday in seed.WEEKLY_SUNDAYS:
        runs += [HistoricRun(seed.PREFIX + name, _midnight(sunday)) for name in _WEEKLY_JOBS]
    runs += [HistoricRun("reporting.weekly_kpis", _midnight(m)) for m in seed.REPORTING_MONDAYS]
    return runs


def run_end(run: HistoricRun, timetable: CronTimetable) -> tuple[datetime, datetime, datetime]:
    """(data interval end = run_after, start, end) of a historic run: it ran right after its
    interval ended, for `minutes`."""
    interval_end = timetable.interval(run.logical_date)[1]
    started = interval_end + timedelta(minutes=1)
    return interval_end, started, started + timedelta(minutes=run.minutes)
