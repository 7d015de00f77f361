"""Retry by clearing only the failed tasks of the runs a backfill left failed (Airflow 3's
`POST /api/v2/dags/{id}/clearTaskInstances`, Airflow 2's `/api/v1`), instead of new runs that
recompute every task: the tasks that succeeded keep their state and are not run again.

For each interval of the step, the latest run Airflow has for its logical date is looked at: a
failed run has its failed (and upstream_failed) tasks cleared, with `reset_dag_runs` so the run
goes back to queued and the scheduler runs the cleared tasks alone; a run that succeeded or is
still under way is followed as it is. An interval without a run, or whose failed run has no
failed task to clear (a run failed by a cancel never started its tasks), cannot be redone this
way: the step says so, and a Retry with new runs redoes it. Progress follows the runs by id.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from bot.backfill.rules.progress import Counts
from bot.backfill.run.airflow3 import ready
from bot.backfill.run.backends import Progress, State, StepWork
from bot.clients.airflow import Airflow2Client, Airflow3Client, DagRunInfo
from bot.config import AirflowExecution
from bot.core.model import iso

HANDLE = "cleared failed tasks"
_FINISHED = frozenset({"success", "failed"})


class ClearFailedSteps:
    def __init__(self, client: Airflow3Client | Airflow2Client, settings: AirflowExecution) -> None:
        self.client = client
        self.settings = settings

    async def submit(self, work: StepWork) -> State:
        """Find each interval's latest run; clear the failed tasks of as many failed runs as
        the budget's runs at once allow (the rest as those end, `poll`)."""
        dag_id = self.settings.dag_id_for(work.dag)
        await ready(self.client, dag_id, self.settings)
        if "todo" in work.state:  # found before a crash: carry on from there
            return await self._top_up(work, dict(work.state), {})
        latest = await self._latest(dag_id, [i.start for i in work.intervals])
        state: dict[str, Any] = {"follow": {}, "todo": [], "not_cleared": [], "tasks_cleared": 0,
                                 "handle": HANDLE}  # fmt: skip
        for interval in work.ordered():
            key = iso(interval.start)
            run = latest.get(interval.start)
            if run is None:
                state["not_cleared"].append(key)
            elif run.state == "failed":
                state["todo"].append([key, run.run_id])
            else:  # succeeded, or still under way: followed as it is
                state["follow"][key] = run.run_id
        return await self._top_up(work, state, {})

    async def _top_up(
        self, work: StepWork, state: dict[str, Any], known: dict[str, str]
    ) -> dict[str, Any]:
        """Clear failed runs from `todo` while fewer than the step's runs at once are active
        (`known`: run id → state already read this pass). A run cleared before a crash is
        queued or running now, not failed: it is followed, not cleared again."""
        dag_id = self.settings.dag_id_for(work.dag)
        limit = work.budget or len(work.intervals)
        active = sum(1 for run_id in state["follow"].values()
                     if known.get(run_id, "queued") not in _FINISHED)  # fmt: skip
        while state["todo"] and active < limit:
            key, run_id = state["todo"][0]
            run = await self.client.get_dag_run(dag_id, run_id)
            count = 0
            if run.state == "failed":
                count = (await self.client.clear_task_instances(
                    dag_id, dag_run_id=run_id, only_failed=True
                )).count  # fmt: skip
                if not count:
                    state["not_cleared"].append(key)
            state["todo"].pop(0)
            if run.state != "failed" or count:
                state["follow"][key] = run_id
                state["tasks_cleared"] += count
                active += 1
        return state

    async def _latest(self, dag_id: str, starts: Sequence[datetime]) -> dict[datetime, DagRunInfo]:
        if not starts:
            return {}
        runs = await self.client.list_dag_runs(
            dag_id, logical_date_gte=min(starts), logical_date_lte=max(starts)
        )
        wanted = set(starts)
        latest: dict[datetime, DagRunInfo] = {}
        for run in runs:  # in creation order: the last one of a date wins
            if run.logical_date in wanted:
                latest[run.logical_date] = run
        return latest

    async def poll(self, work: StepWork) -> Progress:
        dag_id = self.settings.dag_id_for(work.dag)
        state: dict[str, Any] = {**work.state}
        follow: dict[str, str] = dict(state.get("follow") or {})
        known = {r: (await self.client.get_dag_run(dag_id, r)).state for r in follow.values()}
        todo = list(state.get("todo") or ())
        if todo and not work.cancelling and not work.pausing:
            state = await self._top_up(work, {**state, "follow": follow, "todo": todo}, known)
            follow, todo = state["follow"], state["todo"]
        missing = list(state.get("not_cleared") or ())
        runs = Counts.of([known.get(r, "queued") for r in follow.values()],
                         expected=len(follow) + len(todo))  # fmt: skip
        counts = Counts(runs.queued, runs.running, runs.succeeded, runs.failed + len(missing))
        if runs.total and not runs.finished and not (work.cancelling and not runs.running):
            return Progress(counts, state=state)
        tasks = int(state.get("tasks_cleared", 0))
        said = [f"{tasks} failed task{'s' if tasks != 1 else ''} cleared and run again"]
        if missing:
            said.append(
                f"{len(missing)} interval{'s' if len(missing) != 1 else ''} had no failed task "
                f"to clear (first {missing[0][:10]}): Retry with new runs redoes "
                f"{'them' if len(missing) != 1 else 'it'}"
            )
        if runs.failed:
            said.append(f"{runs.failed} of {runs.total} runs failed again")
        ok = not missing and not runs.failed and not todo
        return Progress(counts, done=True, ok=ok, message="; ".join(said), state=state)

    async def cancel(self, work: StepWork) -> State | None:
        return None  # the cleared tasks are queued in runs of their own: they finish

    async def pause(self, work: StepWork, paused: bool) -> State | None:
        return None  # nothing new is started by the bot: the cleared runs are all there is

    def link(self, work: StepWork) -> str | None:
        return self.client.ui_url(self.settings.dag_id_for(work.dag))
