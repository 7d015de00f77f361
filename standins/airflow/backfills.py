"""Airflow 3 backfills over the stand-in's state, following `airflow/models/backfill.py`.

Which logical dates a backfill covers: the DAG's timetable ticks t with
`from_date <= t <= to_date` (both inclusive, `DAG.iter_dagrun_infos_between` with align=True),
keeping only intervals that have already ended (`data_interval.end < now`), in reverse order with
`run_backwards`. For each date an existing run is reused when the reprocess behaviour allows it
(it is cleared back to queued, becomes run_type=backfill and keeps its run_id); otherwise it is
skipped (in flight, or already exists). Without an existing run a new `backfill__<date>` run is
queued.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from standins.airflow.state import UNFINISHED, AirflowState, Backfill, DagRun, DagState, JsonDict

REPROCESS_BEHAVIORS = ("failed", "completed", "none")


class BackfillError(Exception):
    """A backfill request Airflow refuses; `kind` picks the HTTP answer."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind, self.message = kind, message


@dataclass(frozen=True)
class BackfillRequest:
    dag_id: str
    from_date: datetime
    to_date: datetime
    run_backwards: bool = False
    dag_run_conf: JsonDict | None = None
    reprocess_behavior: str = "none"
    max_active_runs: int = 10
    user: str | None = None


def no_create_reason(run: DagRun, reprocess_behavior: str) -> str | None:
    """Why an existing run is not reprocessed (`_get_dag_run_no_create_reason`), or None."""
    if run.state in UNFINISHED:
        return "in flight"
    if reprocess_behavior == "none":
        return "already exists"
    if reprocess_behavior == "failed" and run.state != "failed":
        return "already exists"
    return None


def _validate(state: AirflowState, request: BackfillRequest) -> None:
    """`_validate_backfill_params` (and the dates check before it), for create and dry run."""
    dag = state.dag(request.dag_id)
    if dag is not None and dag.dag.depends_on_past:
        if request.run_backwards:
            raise BackfillError(
                "invalid",
                "Backfill cannot be run in reverse when the Dag has tasks where "
                "depends_on_past=True.",
            )
        if request.reprocess_behavior == "none":
            raise BackfillError(
                "invalid",
                "Dag has tasks for which depends_on_past=True. You must set reprocess behavior "
                "to reprocess completed or reprocess failed.",
            )
    if request.from_date > request.to_date:
        raise BackfillError(
            "invalid",
            f"from_date ({request.from_date.isoformat()}) must not be after "
            f"to_date ({request.to_date.isoformat()}).",
        )
    now = state.now()
    if request.from_date >= now and request.to_date >= now:
        raise BackfillError("invalid", "Backfill cannot be executed for future dates.")


def logical_dates(state: AirflowState, dag: DagState, request: BackfillRequest) -> list[datetime]:
    timetable, now = dag.dag.timetable, state.now()
    found = [
        tick
        for tick in timetable.logical_dates_between(request.from_date, request.to_date)
        if timetable.interval(tick)[1] < now
    ]
    return found[::-1] if request.run_backwards else found


def dry_run(state: AirflowState, request: BackfillRequest) -> list[datetime]:
    """The logical dates a backfill would run now (`_do_dry_run`)."""
    state.advance()
    dag = state.dag(request.dag_id)
    if dag is None:
        raise BackfillError("not_found", f"Could not find dag {request.dag_id}")
    _validate(state, request)
    chosen = []
    for logical_date in logical_dates(state, dag, request):
        existing = state.run_at(dag.dag_id, logical_date)
        if existing is None or no_create_reason(existing, request.reprocess_behavior) is None:
            chosen.append(logical_date)
    return chosen


def create(state: AirflowState, request: BackfillRequest) -> Backfill:
    """Create a backfill and its runs (`_create_backfill`).

    Raises BackfillError: not_found, conflict (an uncompleted backfill of the DAG exists),
    invalid (dates), or empty: the range holds no finished interval; like Airflow, the backfill
    is then already stored (it completes with no runs) and the API answers 500.
    """
    state.advance()
    dag = state.dag(request.dag_id)
    if dag is None:
        raise BackfillError("not_found", f"Could not find dag {request.dag_id}")
    if any(b.completed_at is None for b in state.backfills_of(dag.dag_id)):
        raise BackfillError(
            "conflict",
            f"Another backfill is running for Dag {dag.dag_id}. "
            "There can be only one running backfill per Dag.",
        )
    _validate(state, request)
    now = state.now()
    backfill = Backfill(
        id=state.next_backfill_id(), dag_id=dag.dag_id, from_date=request.from_date,
        to_date=request.to_date, dag_run_conf=request.dag_run_conf,
        reprocess_behavior=request.reprocess_behavior, max_active_runs=request.max_active_runs,
        created_at=now, updated_at=now, triggering_user_name=request.user,
    )  # fmt: skip
    state.add_backfill(backfill)
    dates = logical_dates(state, dag, request)
    if not dates:
        state.touch()
        raise BackfillError("empty", f"No runs to create for Dag {dag.dag_id}")
    timetable = dag.dag.timetable
    for logical_date in dates:
        existing = state.run_at(dag.dag_id, logical_date)
        if existing is not None:
            reason = no_create_reason(existing, request.reprocess_behavior)
            if reason is not None:
                backfill.skipped.append((logical_date, reason))
                continue
            state.requeue(existing)  # `_handle_clear_run`: reuse the run, keep its run_id
            existing.run_type, existing.triggered_by = "backfill", "backfill"
            existing.backfill_id = backfill.id
            if request.dag_run_conf is not None:
                existing.conf = dict(request.dag_run_conf)
            backfill.run_ids.append(existing.run_id)
            continue
        run_id = f"backfill__{logical_date.isoformat()}"
        if state.run(dag.dag_id, run_id) is not None:
            backfill.skipped.append((logical_date, "in flight"))
            continue
        interval = timetable.interval(logical_date)
        state.create_run(
            dag.dag_id, run_id, run_type="backfill", logical_date=logical_date,
            interval=interval, run_after=interval[1], conf=request.dag_run_conf,
            triggered_by="backfill", user=request.user, backfill_id=backfill.id,
        )  # fmt: skip
        backfill.run_ids.append(run_id)
    state.touch()
    return backfill


def set_paused(state: AirflowState, backfill: Backfill, paused: bool) -> None:
    """Pause/unpause: its queued runs wait/start (raises conflict once completed)."""
    state.advance()
    if backfill.completed_at is not None:
        raise BackfillError("conflict", "Backfill is already completed.")
    if backfill.is_paused != paused:
        backfill.is_paused, backfill.updated_at = paused, state.now()
    state.touch()


def cancel(state: AirflowState, backfill: Backfill) -> None:
    """Pause it, fail its queued runs (running ones continue) and mark it completed now."""
    state.advance()
    if backfill.completed_at is not None:
        raise BackfillError("conflict", "Backfill is already completed.")
    now = state.now()
    backfill.is_paused = True
    for run_id in backfill.run_ids:
        run = state.run(backfill.dag_id, run_id)
        if run is not None and run.backfill_id == backfill.id and run.state == "queued":
            run.state, run.updated_at = "failed", now
    backfill.completed_at = backfill.updated_at = now
    state.touch()
