"""Which task instances `clearTaskInstances` clears, as both APIs' `post_clear_task_instances`
do through `DAG.clear(dry_run=True)` (Airflow 3.3.2 routes/public/task_instances.py, 2.11.2
api_connexion/endpoints/task_instance_endpoint.py), and clearing them.

A `dag_run_id` selects that run (Airflow 2 converts it to its logical date, which is the same
run); otherwise runs whose logical date is within [start_date, end_date] (an open bound when
None; a run without a logical date is left out once either bound is given). `include_past` and
`include_future` open the bounds. `task_ids` keeps those tasks, with the ones before (upstream)
or after (downstream) them in the chain when asked. `only_failed` keeps `failed` and
`upstream_failed` task instances, `only_running` the `running` ones (both: either state).
Each API checks its body first (v1.py, v2_tasks.py) and words the errors its own way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from standins.airflow.state import AirflowState, DagRun, TaskInstance, TaskState

Selected = list[tuple[DagRun, TaskInstance]]


class ClearError(Exception):
    """A clear Airflow refuses after the body was read; `kind` picks the answer: `run` (no such
    run of the DAG: 404) or `no_logical_date` (past/future around a run without one: 400)."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind


@dataclass(frozen=True)
class ClearRequest:
    dag_id: str
    dag_run_id: str | None = None
    start_date: datetime | None = None
    end_date: datetime | None = None
    only_failed: bool = True
    only_running: bool = False
    task_ids: tuple[str, ...] | None = None
    include_upstream: bool = False
    include_downstream: bool = False
    include_past: bool = False
    include_future: bool = False


def _tasks(chain: Sequence[str], request: ClearRequest) -> set[str]:
    if request.task_ids is None:
        return set(chain)
    chosen = {t for t in request.task_ids if t in chain}
    positions = [chain.index(t) for t in chosen]
    if positions and request.include_upstream:
        chosen |= set(chain[: max(positions)])
    if positions and request.include_downstream:
        chosen |= set(chain[min(positions) :])
    return chosen


def select(state: AirflowState, request: ClearRequest) -> Selected:
    """The (run, task instance) pairs to clear, by run creation then chain order. The DAG must
    exist (the caller answers its own 404 first)."""
    dag = state.dag(request.dag_id)
    assert dag is not None
    start, end = request.start_date, request.end_date
    by_dates = True
    runs = state.all_runs(request.dag_id)
    if request.dag_run_id is not None:
        run = state.run(request.dag_id, request.dag_run_id)
        if run is None:
            raise ClearError("run")
        past_or_future = request.include_past or request.include_future
        if past_or_future and run.logical_date is None:
            raise ClearError("no_logical_date")
        start = end = run.logical_date
        by_dates = past_or_future
        runs = runs if by_dates else [run]
    if request.include_past:
        start = None
    if request.include_future:
        end = None
    if by_dates and (start is not None or end is not None):
        runs = [
            r
            for r in runs
            if r.logical_date is not None
            and (start is None or r.logical_date >= start)
            and (end is None or r.logical_date <= end)
        ]
    wanted: list[TaskState | None] = []
    if request.only_failed:
        wanted += ["failed", "upstream_failed"]
    if request.only_running:
        wanted.append("running")
    tasks = _tasks(dag.dag.tasks, request)
    return [
        (run, task)
        for run in runs
        for task in run.tasks.values()
        if task.task_id in tasks and (not wanted or task.state in wanted)
    ]


def clear(state: AirflowState, selected: Selected, *, reset_dag_runs: bool) -> None:
    """Clear the selected task instances; with `reset_dag_runs` their finished runs go back to
    queued, to rerun them (`clear_task_instances(..., DagRunState.QUEUED)`). The caller answers
    with them as cleared, then `touch`es the state: Airflow's scheduler starts the runs after
    the answer."""
    by_run: dict[int, tuple[DagRun, list[str]]] = {}
    for run, task in selected:
        by_run.setdefault(run.id, (run, []))[1].append(task.task_id)
    for run, task_ids in by_run.values():
        state.clear_tasks(run, task_ids, reset_run=reset_dag_runs)
