"""The simulated scheduler behind the Airflow stand-in: DAGs, dag runs, backfills and time.

Nothing runs in the background. Time comes from an injected clock, and every request (and every
helper below) first replays what a scheduler would have done up to "now": queued runs start when
their DAG is unpaused and a slot is free (a backfill's own `max_active_runs` for its runs, the
DAG's `max_active_runs` for the others, independently, as in Airflow 3), running runs end after
their DAG's duration (failed when chosen by `fail_on`/`fail_always`), and a backfill gets
`completed_at` `completion_delay` seconds after its last run finished. Replaying is event by event,
so the outcome does not depend on how often anyone looks.

Each run has one task instance per task of its DAG, the tasks forming a chain in the DAG's order
(`extract >> load`). A run that starts runs the tasks that are not finished yet: the first of them
shows `running` until the run ends, when each gets its outcome in order (a failed task leaves the
ones after it `upstream_failed`, never run) and the run fails if any of its tasks did. So a run
cleared of its failed tasks only (`clear_tasks`) reruns those alone: the tasks that succeeded keep
their state and `try_number`. Like Airflow, `try_number` counts the tries that started.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import datetime, timedelta

from standins.airflow.auth import Tokens
from standins.airflow.dags import HistoricRun, RunState, StandinDag, run_end, system_clock, utc
from standins.airflow.records import (
    TASK_BROKEN,
    TASK_PENDING,
    UNFINISHED,
    Backfill,
    Clock,
    DagRun,
    DagState,
    JsonDict,
    TaskInstance,
    TaskState,
)

_VERSIONS = uuid.UUID("0b6c3c52-9b8e-5d1e-8f57-2f4a0c1d9e11")
_TASK_IDS = uuid.UUID("6f1d2a7e-3c58-5b0e-9d4a-8e2f1c7b5a90")

__all__ = [
    "TASK_BROKEN",
    "TASK_PENDING",
    "UNFINISHED",
    "AirflowState",
    "Backfill",
    "Clock",
    "DagRun",
    "DagState",
    "JsonDict",
    "TaskInstance",
    "TaskState",
]


class AirflowState:
    """DAGs, runs and backfills, advanced by a simulated scheduler (see the module docstring)."""

    def __init__(
        self,
        dags: Iterable[StandinDag] = (),
        *,
        clock: Clock = system_clock,
        run_seconds: float = 0.3,
        completion_delay: float = 0.05,
        history: Iterable[HistoricRun] = (),
    ) -> None:
        self.clock = clock
        self.run_seconds = run_seconds
        self.completion_delay = completion_delay
        self.requests: list[tuple[str, str, int]] = []
        self.tokens = Tokens(clock)
        self._time = utc(clock())
        self._dags: dict[str, DagState] = {}
        self._runs: dict[str, dict[str, DagRun]] = {}
        self._backfills: dict[int, Backfill] = {}
        # (DAG, logical date) -> (tries left or None for always, the task that fails or None)
        self._fail_on: dict[tuple[str, datetime], tuple[int | None, str | None]] = {}
        self._outage: tuple[int, int | None] | None = None  # (status, answers left or None)
        self.forbidden = False
        self._ids = 0
        self._backfill_ids = 0
        for dag in dags:
            self.add_dag(dag)
        for run in history:
            self.add_historic_run(run)

    # -- helpers for tests and the demo --------------------------------------------------------

    def add_dag(self, dag: StandinDag) -> None:
        version = str(uuid.uuid5(_VERSIONS, dag.dag_id))
        self._dags[dag.dag_id] = DagState(dag, dag.is_paused, dag.fail, self._time, version)
        self._runs.setdefault(dag.dag_id, {})

    def pause(self, dag_id: str, paused: bool = True) -> None:
        self.advance()
        self._require(dag_id).is_paused = paused
        self._schedule(self._time)

    def unpause(self, dag_id: str) -> None:
        self.pause(dag_id, False)

    def fail_on(
        self,
        dag_id: str,
        logical_date: datetime,
        *,
        times: int | None = None,
        task_id: str | None = None,
    ) -> None:
        """Make the run of `dag_id` at `logical_date` fail (next `times` tries; None: always).

        It fails in `task_id` (the tasks before it succeed, the ones after it end
        `upstream_failed`), or in the first task it runs when None. A try that does not run
        `task_id` (cleared of other tasks only) neither fails nor counts.
        """
        dag = self._require(dag_id)
        if task_id is not None and task_id not in dag.dag.tasks:
            raise KeyError(f"DAG {dag_id!r} has no task {task_id!r}")
        self._fail_on[(dag_id, utc(logical_date))] = (times, task_id)

    def fail_always(self, dag_id: str, failing: bool = True) -> None:
        self._require(dag_id).failing = failing

    def runs_of(self, dag_id: str) -> list[DagRun]:
        """The DAG's runs, by logical date (runs without one last), as of now."""
        self.advance()
        runs = self._runs.get(dag_id, {}).values()
        return sorted(runs, key=lambda r: (r.logical_date is None, r.logical_date, r.id))

    @property
    def backfills(self) -> list[Backfill]:
        self.advance()
        return [self._backfills[k] for k in sorted(self._backfills)]

    def outage(self, status: int = 503, *, times: int | None = None) -> None:
        """Answer the next `times` requests (None: every one until `end_outage`) with HTTP
        `status` and the HTML page of the proxy in front of Airflow, before Airflow sees them:
        503 while the API server restarts, 502/504 when it is down or stuck, 429 when the proxy
        rate-limits. Token requests and public endpoints are answered so too."""
        if status not in (429, 500, 502, 503, 504):
            raise ValueError(f"an outage answers 429 or a 5xx, not {status}")
        self._outage = (status, times) if times is None or times > 0 else None

    def end_outage(self) -> None:
        self._outage = None

    def take_outage(self) -> int | None:
        """The status an outage answers this request with (counting it), or None."""
        if self._outage is None:
            return None
        status, left = self._outage
        if left is not None:
            self._outage = (status, left - 1) if left > 1 else None
        return status

    def forbid(self, forbidden: bool = True) -> None:
        """The user logs in but may do nothing: every call that needs authentication is answered
        403 (Airflow 3: `{"detail": "Forbidden"}`; Airflow 2: the PermissionDenied problem), as
        for a user whose role grants no permission on the DAGs."""
        self.forbidden = forbidden

    def expire_tokens(self) -> None:
        """Every token issued so far is answered 401 "Token Expired" from now on."""
        self.tokens.expire_all()

    def revoke_tokens(self) -> None:
        """Every token issued so far is answered 401 "Invalid JWT token" from now on."""
        self.tokens.revoke_all()

    def add_historic_run(self, run: HistoricRun) -> DagRun:
        dag = self._require(run.dag_id)
        timetable = dag.dag.timetable
        start, end = timetable.interval(run.logical_date)
        run_after, started, ended = run_end(run, timetable)
        made = self._new_run(
            dag.dag_id, f"{run.run_type}__{start.isoformat()}", run.run_type, start,
            (start, end), run_after, state=run.state,
        )  # fmt: skip
        made.queued_at, made.start_date, made.end_date = run_after, started, ended
        made.updated_at = ended
        made.triggered_by = "timetable" if run.run_type == "scheduled" else "rest_api"
        failing = next(iter(made.tasks)) if run.state == "failed" else None
        _run_tasks(made.tasks.values(), started, ended, failing)
        return made

    # -- lookups used by the HTTP layer ---------------------------------------------------------

    def now(self) -> datetime:
        return self._time

    def dag(self, dag_id: str) -> DagState | None:
        return self._dags.get(dag_id)

    def dag_states(self) -> list[DagState]:
        return list(self._dags.values())

    def run(self, dag_id: str, run_id: str) -> DagRun | None:
        return self._runs.get(dag_id, {}).get(run_id)

    def all_runs(self, dag_id: str | None = None) -> list[DagRun]:
        """Runs in creation order (`id`); all DAGs when `dag_id` is None."""
        if dag_id is not None:
            return sorted(self._runs.get(dag_id, {}).values(), key=lambda r: r.id)
        return sorted(
            (r for runs in self._runs.values() for r in runs.values()), key=lambda r: r.id
        )

    def run_at(self, dag_id: str, logical_date: datetime) -> DagRun | None:
        found = [r for r in self._runs.get(dag_id, {}).values() if r.logical_date == logical_date]
        return max(
            found, key=lambda r: (r.start_date is not None, r.start_date, r.id), default=None
        )

    def backfill(self, backfill_id: int) -> Backfill | None:
        return self._backfills.get(backfill_id)

    def backfills_of(self, dag_id: str) -> list[Backfill]:
        return [b for b in self._backfills.values() if b.dag_id == dag_id]

    def next_id(self) -> int:
        self._ids += 1
        return self._ids

    def next_backfill_id(self) -> int:
        self._backfill_ids += 1
        return self._backfill_ids

    def add_backfill(self, backfill: Backfill) -> None:
        self._backfills[backfill.id] = backfill

    # -- changes --------------------------------------------------------------------------------

    def _new_run(
        self,
        dag_id: str,
        run_id: str,
        run_type: str,
        logical_date: datetime | None,
        interval: tuple[datetime, datetime] | None,
        run_after: datetime,
        *,
        state: RunState = "queued",
        conf: JsonDict | None = None,
    ) -> DagRun:
        run = DagRun(
            id=self.next_id(), dag_id=dag_id, run_id=run_id, run_type=run_type, state=state,
            logical_date=logical_date,
            data_interval_start=interval[0] if interval else None,
            data_interval_end=interval[1] if interval else None,
            run_after=run_after, queued_at=self._time, updated_at=self._time, conf=conf or {},
        )  # fmt: skip
        for task_id in self._dags[dag_id].dag.tasks:
            run.tasks[task_id] = TaskInstance(task_id, _task_instance_id(run, task_id, 0))
        self._runs[dag_id][run_id] = run
        return run

    def create_run(
        self,
        dag_id: str,
        run_id: str,
        *,
        run_type: str,
        logical_date: datetime | None,
        interval: tuple[datetime, datetime] | None,
        run_after: datetime,
        conf: JsonDict | None = None,
        note: str | None = None,
        triggered_by: str = "rest_api",
        user: str | None = None,
        backfill_id: int | None = None,
    ) -> DagRun:
        """A new queued run (callers check run id / logical date uniqueness)."""
        run = self._new_run(dag_id, run_id, run_type, logical_date, interval, run_after, conf=conf)
        run.note, run.triggered_by, run.triggering_user_name = note, triggered_by, user
        run.external_trigger = run_type == "manual"
        run.backfill_id = backfill_id
        if backfill_id is not None:
            run.start_date = self._time  # Airflow 3 creates backfill runs with a start_date
        return run

    def requeue(self, run: DagRun) -> None:
        """Clear a run and all its tasks: it goes back to queued (whatever its state) and will
        run again."""
        self.clear_tasks(run, list(run.tasks), reset_run=False)
        self._queue(run)

    def clear_tasks(self, run: DagRun, task_ids: Iterable[str], *, reset_run: bool) -> None:
        """Clear some tasks of a run (`clear_task_instances`): each gets state None and a new
        id, keeping its last try's dates; a finished run goes back to queued when `reset_run`,
        and then runs the tasks that are not finished, as a scheduler would. Without
        `reset_run` a finished run stays as it is, its cleared tasks waiting for nothing."""
        for task_id in task_ids:
            task = run.tasks[task_id]
            task.clears += 1
            task.id = _task_instance_id(run, task_id, task.clears)
            task.state = None
            task.max_tries = task.try_number  # retries=0: `try_number + task.retries`
        run.clear_number += 1
        run.queued_at = run.updated_at = self._time
        if reset_run and run.state not in UNFINISHED:
            self._queue(run)

    def _queue(self, run: DagRun) -> None:
        run.state, run.queued_at, run.updated_at = "queued", self._time, self._time
        run.start_date = run.end_date = run.finish_at = run.last_scheduling_decision = None

    def set_state(self, run: DagRun, state: RunState) -> None:
        """Mark a run (PATCH): finished states stop it now, queued clears it.

        Its tasks follow as in Airflow's `set_dag_run_state_to_*`: success marks every task
        succeeded; failed fails the running task and skips the ones not started."""
        if state == "queued":
            self.requeue(run)
            return
        if run.state != state:
            run.state, run.end_date, run.finish_at = state, self._time, None
            run.updated_at = self._time
        for task in run.tasks.values():
            if state == "success" and task.state != "success":
                task.state, task.end_date = "success", self._time
            elif state == "failed" and task.state in TASK_PENDING:
                task.state = "failed" if task.state == "running" else "skipped"
                task.end_date = self._time

    def touch(self) -> None:
        """Start whatever may start after a change made at the current time."""
        self._schedule(self._time)

    # -- the simulated scheduler ------------------------------------------------------------------

    def advance(self) -> None:
        """Replay the scheduler, event by event, up to the clock's now."""
        now = utc(self.clock())
        while True:
            self._schedule(self._time)
            due = self._next_event()
            if due is None or due > now:
                break
            self._time = max(self._time, due)
            self._process(self._time)
        self._time = max(self._time, now)
        self._schedule(self._time)

    def _duration(self, dag_id: str) -> timedelta:
        seconds = self._dags[dag_id].dag.run_seconds
        return timedelta(seconds=self.run_seconds if seconds is None else seconds)

    def _start(self, run: DagRun, moment: datetime) -> None:
        run.state, run.start_date, run.end_date = "running", moment, None
        run.finish_at = moment + self._duration(run.dag_id)
        run.updated_at = run.last_scheduling_decision = moment
        first = next((t for t in run.tasks.values() if t.state is None), None)
        if first is not None and not _blocked(run, first):
            first.state, first.start_date, first.queued_when = "running", moment, moment
            first.try_number += 1

    def _schedule(self, moment: datetime) -> None:
        for dag in self._dags.values():
            runs = list(self._runs[dag.dag_id].values())
            if dag.is_paused or not any(r.state == "queued" for r in runs):
                continue
            plain_running = sum(r.state == "running" and r.backfill_id is None for r in runs)
            plain = sorted(
                (r for r in runs if r.state == "queued" and r.backfill_id is None),
                key=lambda r: (r.run_after, r.id),
            )
            for run in plain[: max(dag.dag.active_runs_limit - plain_running, 0)]:
                self._start(run, moment)
            for backfill in self.backfills_of(dag.dag_id):
                if backfill.is_paused and backfill.completed_at is None:
                    continue
                mine = [self._runs[dag.dag_id][i] for i in backfill.run_ids]
                mine = [r for r in mine if r.backfill_id == backfill.id]
                free = backfill.max_active_runs - sum(r.state == "running" for r in mine)
                for run in [r for r in mine if r.state == "queued"][: max(free, 0)]:
                    self._start(run, moment)
        for backfill in self._backfills.values():
            if backfill.completed_at is not None:
                continue
            runs = [self._runs[backfill.dag_id][i] for i in backfill.run_ids]
            if any(r.state in UNFINISHED and r.backfill_id == backfill.id for r in runs):
                backfill.idle_since = None
            elif backfill.idle_since is None:
                backfill.idle_since = moment

    def _completion_due(self, backfill: Backfill) -> datetime | None:
        if backfill.completed_at is not None or backfill.idle_since is None:
            return None
        return backfill.idle_since + timedelta(seconds=self.completion_delay)

    def _next_event(self) -> datetime | None:
        times = [
            r.finish_at
            for runs in self._runs.values()
            for r in runs.values()
            if r.state == "running" and r.finish_at is not None
        ]
        times += [d for b in self._backfills.values() if (d := self._completion_due(b))]
        return min(times, default=None)

    def _process(self, moment: datetime) -> None:
        for runs in self._runs.values():
            for run in runs.values():
                if run.state == "running" and run.finish_at is not None and run.finish_at <= moment:
                    self._finish(run, run.finish_at)
        for backfill in self._backfills.values():
            due = self._completion_due(backfill)
            if due is not None and due <= moment:
                backfill.completed_at = backfill.updated_at = due

    def _finish(self, run: DagRun, moment: datetime) -> None:
        pending = [t for t in run.tasks.values() if t.state in TASK_PENDING]
        runs_first = next((t.task_id for t in pending if not _blocked(run, t)), None)
        failing = runs_first if self._dags[run.dag_id].failing else None
        key = (run.dag_id, run.logical_date) if run.logical_date is not None else None
        if key is not None and key in self._fail_on:
            times, task_id = self._fail_on[key]
            task_id = task_id or runs_first
            if any(t.task_id == task_id and not _blocked(run, t) for t in pending):
                failing = task_id
                if times is not None:
                    if times <= 1:
                        del self._fail_on[key]
                    else:
                        self._fail_on[key] = (times - 1, self._fail_on[key][1])
        started = run.start_date or moment
        _run_tasks(run.tasks.values(), started, moment, failing)
        failed = any(t.state in TASK_BROKEN for t in run.tasks.values())
        run.state = "failed" if failed else "success"
        run.end_date = run.updated_at = moment
        run.finish_at = None

    def _require(self, dag_id: str) -> DagState:
        dag = self._dags.get(dag_id)
        if dag is None:
            raise KeyError(f"unknown DAG {dag_id!r}")
        return dag


def _task_instance_id(run: DagRun, task_id: str, clears: int) -> str:
    """A task instance's uuid, new at each clear (stable across stand-ins for equal histories)."""
    return str(uuid.uuid5(_TASK_IDS, f"{run.dag_id}\0{run.run_id}\0{task_id}\0{clears}"))


def _blocked(run: DagRun, task: TaskInstance) -> bool:
    """Whether a task before `task` in the chain has failed, so that `task` cannot run."""
    for other in run.tasks.values():
        if other is task:
            return False
        if other.state in TASK_BROKEN:
            return True
    return False


def _run_tasks(
    tasks: Iterable[TaskInstance], started: datetime, ended: datetime, failing: str | None
) -> None:
    """Give a run's pending tasks their outcome, in chain order, sharing [started, ended] out
    evenly: `failing` fails, and a task after a failed one (this try's or an earlier one's) ends
    `upstream_failed`, never run, at the time the failure was known."""
    tasks = list(tasks)
    pending = [t for t in tasks if t.state in TASK_PENDING]
    slot = (ended - started) / max(len(pending), 1)
    moment, broken = started, False
    for task in tasks:
        if task.state not in TASK_PENDING:
            broken = broken or task.state in TASK_BROKEN
        elif broken:
            task.state = "upstream_failed"
            task.start_date = task.end_date = moment
        else:
            if task.state != "running":  # the first task started with its run
                task.try_number += 1
                task.queued_when = moment
            task.start_date, task.end_date = moment, moment + slot
            moment += slot
            task.state = "failed" if task.task_id == failing else "success"
            broken = task.state == "failed"
