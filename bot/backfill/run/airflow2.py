"""Steps as one triggered DAG run per planned interval: every step on Airflow 2, which has no
backfill endpoint, and on Airflow 3 the DAGs scheduled on assets a plan includes
(`--with-asset-consumers`), which Airflow 3 cannot backfill (bot/backfill/rules/assets.py).

Each run is triggered with its data interval spelled out (a run triggered for logical date D
otherwise covers the interval ending at D) and a run id derived from the step and the interval,
so triggering again after a crash answers 409 for our own run instead of running it twice. An
interval that already has a run (scheduled, or an earlier backfill) is cleared, which reruns it.

At most `cap` of the bot's runs of one DAG are active (queued or running) at once, whichever
backfill they belong to: `submit` triggers the first intervals, each `poll` triggers the next
ones as earlier runs finish, oldest first, while the DAG's active runs with our run id prefix
(and the step's adopted runs) number fewer than the cap. Two backfills of one DAG share it, so
the one polled first may take each freed slot; the other waits, and both finish. The cap is
`execution.airflow.max_active_runs_per_dag`, else the DAG's own `max_active_runs` as the API
reports it, fixed at submit. Which intervals were triggered is kept in the step's state, and
runs found in Airflow under our run ids count as triggered too, so a bot that died between
triggering and recording neither triggers an interval twice nor forgets the rest. Until they
are triggered, intervals count as queued.

Which intervals run follows the request's `--rerun` (bot/backfill/rules/options.py `redone`,
Airflow 3's rule), decided once at submit from the DAG's run history and kept in the step's
state (`skipped`); they are triggered oldest first, or newest first with `--backwards`, each with
the request's `--conf`. While the request is paused nothing more is triggered.

Cancel triggers nothing more and sets every queued or running run to failed
(`PATCH .../dagRuns/{id}`): Airflow 2.11 then fails the running task instances, whose task
processes notice at their next heartbeat and are killed, and skips the tasks not started yet.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from bot.backfill.rules.options import redone
from bot.backfill.rules.progress import Counts
from bot.backfill.run.airflow3 import ready
from bot.backfill.run.backends import Progress, State, StepWork, SubmitInterrupted
from bot.clients.airflow import (
    Airflow2Client,
    Airflow3Client,
    AirflowConflict,
    AirflowNotFound,
    AirflowUnavailable,
    DagRunInfo,
)
from bot.config import AirflowExecution
from bot.core.model import Interval, iso

AIRFLOW_MAX_ACTIVE_RUNS = 16
"""Airflow's own `[core] max_active_runs_per_dag` default: a DAG reporting none has this."""
ACTIVE = frozenset({"queued", "running"})
RUN_ID_PREFIX = "backfill_bot__"
"""Every run the bot triggers has a run id starting so, whichever step triggered it."""


def run_id_for(work: StepWork, interval: Interval) -> str:
    return f"{RUN_ID_PREFIX}{work.step_id[:12]}__{interval.start.strftime('%Y%m%dT%H%M%S')}"


def _cap(work: StepWork) -> int:
    # A step submitted before the cap existed triggered every interval at once.
    cap = work.state.get("cap")
    return cap if isinstance(cap, int) and cap > 0 else len(work.intervals)


def _todo(work: StepWork) -> list[Interval]:
    """The intervals this step runs, in the order it triggers them."""
    skipped = set(work.state.get("skipped", ()))
    return [i for i in work.ordered() if iso(i.start) not in skipped]


class Airflow2Steps:
    def __init__(self, client: Airflow2Client | Airflow3Client, settings: AirflowExecution) -> None:
        self.client = client
        self.settings = settings

    async def _resolve_cap(self, work: StepWork, dag_id: str) -> int:
        if work.options.max_active is not None:
            return work.options.max_active
        if self.settings.max_active_runs_per_dag is not None:
            return self.settings.max_active_runs_per_dag
        info = await self.client.get_dag(dag_id)
        return info.max_active_runs or AIRFLOW_MAX_ACTIVE_RUNS

    async def submit(self, work: StepWork) -> State:
        dag_id = self.settings.dag_id_for(work.dag)
        await ready(self.client, dag_id, self.settings)
        cap = work.within_budget(await self._resolve_cap(work, dag_id))
        state: dict[str, Any] = {**work.state, "cap": cap}
        if "skipped" not in state:
            state["skipped"] = await self._not_redone(work, dag_id)
        work = replace(work, state=state)
        try:
            state.update(await self._top_up(work, await self._runs(work)))
        except AirflowUnavailable as exc:
            # Which intervals --rerun leaves alone was read before anything was cleared: read
            # again, a run this try cleared would look like history and be left alone.
            raise SubmitInterrupted(state, exc) from exc
        return {**state, "handle": f"{len(_todo(work))} DAG runs"}

    async def _not_redone(self, work: StepWork, dag_id: str) -> list[str]:
        """Intervals whose run `--rerun` leaves alone (a success under `failed`, any run under
        `missing`), from the runs Airflow has now. Runs the bot triggered for this step are
        not history: they are this step's own, found again after a crash."""
        if work.options.chosen_rerun == "all":
            return []
        mine = {run_id_for(work, i) for i in work.intervals}
        latest: dict[datetime, str] = {}
        for run in await self.client.list_dag_runs(
            dag_id,
            logical_date_gte=work.intervals[0].start,
            logical_date_lte=work.intervals[-1].start,
        ):
            if run.logical_date is not None and run.run_id not in mine:
                latest[run.logical_date] = run.state
        return [
            iso(i.start)
            for i in work.intervals
            if not redone(latest.get(i.start), work.options.chosen_rerun)
        ]

    async def _top_up(self, work: StepWork, runs: Mapping[datetime, DagRunInfo]) -> State:
        """Trigger the oldest untriggered intervals while fewer than the cap of the bot's runs
        of the DAG are active; the state to persist (which intervals are triggered, which runs
        were adopted)."""
        dag_id = self.settings.dag_id_for(work.dag)
        adopted: dict[str, str] = dict(work.state.get("adopted", {}))
        triggered = self._triggered(work, runs)
        todo = _todo(work)
        # The step's own active runs alone may fill the cap: then the DAG-wide list is not needed.
        active = sum(run.state in ACTIVE for run in runs.values())
        if active < _cap(work) and len(triggered) < len(todo):
            active = await self._active_for_cap(dag_id, adopted.values())
        for interval in todo:
            key = iso(interval.start)
            if active >= _cap(work):
                break
            if key in triggered:
                continue
            await self._trigger(work, dag_id, interval, adopted)
            triggered.add(key)
            active += 1
        order = [iso(i.start) for i in todo]
        return {"adopted": adopted, "triggered": [k for k in order if k in triggered]}

    async def _active_for_cap(self, dag_id: str, adopted: Collection[str]) -> int:
        """The DAG's active runs that count against the cap, in one list call: every run the bot
        triggered (any step's, found by run id prefix) and this step's adopted runs.

        Runs the bot did not trigger (scheduled, manual) do not count: Airflow's own
        `max_active_runs` already bounds how many of the DAG's runs run at once, theirs and
        ours together, and counting them would stall a backfill behind runs it cannot end. The
        cap bounds what the bot adds on top. Another step's adopted runs keep their scheduler
        run id, so they are not recognisable here and count only towards their own step."""
        runs = await self.client.list_dag_runs(dag_id, state=sorted(ACTIVE))
        mine = set(adopted)
        return sum(r.run_id.startswith(RUN_ID_PREFIX) or r.run_id in mine for r in runs)

    @staticmethod
    def _triggered(work: StepWork, runs: Mapping[datetime, DagRunInfo]) -> set[str]:
        recorded: Collection[Any] = work.state.get("triggered", ())
        found = {iso(start) for start in runs}
        return {str(key) for key in recorded} | set(work.state.get("adopted", {})) | found

    async def _trigger(
        self, work: StepWork, dag_id: str, interval: Interval, adopted: dict[str, str]
    ) -> None:
        run_id = run_id_for(work, interval)
        try:
            await self.client.trigger_dag_run(
                dag_id,
                run_id,
                logical_date=interval.start,
                data_interval_start=interval.start,
                data_interval_end=interval.end,
                conf=work.options.conf,
                note=f"backfill-bot request {work.request_id}",
            )
        except AirflowConflict:
            other = await self._existing(dag_id, interval, run_id)
            if other is None or other.run_id == run_id:
                return  # ours, triggered before a crash
            adopted[iso(interval.start)] = other.run_id
            if not self._rerun_since(other, work.since):
                await self.client.clear_dag_run(dag_id, other.run_id)

    @staticmethod
    def _rerun_since(run: DagRunInfo, since: datetime | None) -> bool:
        """Already cleared for us by a process that died before recording it: rerunning now,
        or started after we claimed the step. Clearing it again would run it twice."""
        if run.state in ACTIVE:
            return True
        return since is not None and run.start_date is not None and run.start_date >= since

    async def _existing(self, dag_id: str, interval: Interval, run_id: str) -> DagRunInfo | None:
        runs = await self.client.list_dag_runs(
            dag_id, logical_date_gte=interval.start, logical_date_lte=interval.start
        )
        ours = [r for r in runs if r.run_id == run_id]
        return ours[0] if ours else (runs[0] if runs else None)

    async def _runs(self, work: StepWork) -> dict[datetime, DagRunInfo]:
        """The step's runs in Airflow (ours, or adopted), by interval start."""
        dag_id = self.settings.dag_id_for(work.dag)
        adopted: dict[str, Any] = dict(work.state.get("adopted", {}))
        wanted = {adopted.get(iso(i.start), run_id_for(work, i)): i.start for i in work.intervals}
        runs = await self.client.list_dag_runs(
            dag_id,
            logical_date_gte=work.intervals[0].start,
            logical_date_lte=work.intervals[-1].start,
        )
        return {wanted[r.run_id]: r for r in runs if r.run_id in wanted}

    async def poll(self, work: StepWork) -> Progress:
        runs = await self._runs(work)
        new_state: State | None = None
        if work.cancelling:
            # What was triggered is all there is: the rest never will be.
            expected = len(self._triggered(work, runs))
        else:
            expected = len(_todo(work))
            if len(self._triggered(work, runs)) < expected and not work.pausing:
                topped = await self._top_up(work, runs)
                # Recorded only when it changed: an unchanged state costs a write per pass.
                if any(topped[key] != work.state.get(key) for key in topped):
                    new_state = topped
        counts = Counts.of([r.state for r in runs.values()], expected=expected)
        if expected and not counts.finished:
            return Progress(counts, state=new_state)
        never = len(_todo(work)) - expected
        if work.cancelling and (counts.failed or never):
            stopped = f"{counts.failed} of {counts.total} runs failed or were stopped"
            left = f"{never} interval{'s' if never != 1 else ''} never triggered"
            parts = [stopped] * bool(counts.failed) + [left] * bool(never)
            return Progress(counts, done=True, message=", ".join(parts))
        if counts.failed:
            message = f"{counts.failed} of {counts.total} runs failed"
            return Progress(counts, done=True, message=message)
        alone = len(work.intervals) - expected
        if not alone:
            return Progress(counts, done=True, ok=True)
        message = (
            f"{alone} interval{'s' if alone != 1 else ''} left alone (--rerun {work.options.rerun})"
        )
        return Progress(counts, done=True, ok=True, message=message)

    async def pause(self, work: StepWork, paused: bool) -> State | None:
        return None  # a paused request's polls trigger nothing more; what runs finishes

    async def cancel(self, work: StepWork) -> State | None:
        dag_id = self.settings.dag_id_for(work.dag)
        runs = (await self._runs(work)).values()
        # Queued runs first: stopping a running one frees a slot the scheduler would fill.
        for run in sorted(runs, key=lambda r: r.state != "queued"):
            if run.state in ACTIVE:
                # 404: deleted in Airflow meanwhile, nothing left to stop.
                with contextlib.suppress(AirflowNotFound):
                    await self.client.set_dag_run_state(dag_id, run.run_id, "failed")
        return None

    def link(self, work: StepWork) -> str | None:
        return self.client.ui_url(self.settings.dag_id_for(work.dag))
