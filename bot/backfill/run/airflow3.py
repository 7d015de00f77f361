"""Steps on Airflow 3: one `POST /api/v2/backfills` per run of contiguous intervals.

Airflow's logical date of a data-interval DAG run is its interval's start, and a backfill covers
the logical dates from `from_date` to `to_date` inclusive; so a group of planned intervals maps
to one backfill from the first interval's start to the last one's. Airflow allows one running
backfill per DAG (409): ours is adopted after a crash, anyone else's is waited for. Progress is
read from the DAG's backfill runs at the expected logical dates (3.3 runs don't name their
backfill), because the backfill's own `completed_at` lags the last run by about 30 s.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from bot.backfill.rules.progress import Counts, contiguous
from bot.backfill.run.backends import Busy, Progress, State, StepRejected, StepWork
from bot.clients.airflow import (
    Airflow2Client,
    Airflow3Client,
    AirflowConflict,
    AirflowNotFound,
    BackfillInfo,
)
from bot.config import AirflowExecution
from bot.core.model import DagRef, Interval, iso

# Clocks of the bot and of Airflow differ a little; a backfill created this long before our claim
# can still be ours.
_SKEW = timedelta(minutes=2)


def _parse(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


async def ready(
    client: Airflow3Client | Airflow2Client, dag_id: str, settings: AirflowExecution
) -> None:
    """Refuse (or unpause, per config) a paused DAG: its backfill runs would sit queued."""
    try:
        info = await client.get_dag(dag_id)
    except AirflowNotFound:
        raise StepRejected(f"{dag_id} does not exist in Airflow") from None
    if not info.is_paused:
        return
    if settings.on_paused == "unpause":
        await client.set_paused(dag_id, False)
        return
    raise StepRejected(
        f"{dag_id} is paused in Airflow; unpause it (or set execution.airflow.on_paused: "
        "unpause) and backfill again"
    )


class Airflow3Steps:
    def __init__(self, client: Airflow3Client, settings: AirflowExecution) -> None:
        self.client = client
        self.settings = settings

    def dag_id(self, dag: DagRef) -> str:
        return self.settings.dag_id_for(dag)

    async def ready(self, dag_id: str) -> None:
        await ready(self.client, dag_id, self.settings)

    def _chunks(self, work: StepWork) -> list[list[Interval]]:
        """Runs of contiguous intervals, in the order their backfills are created (newest
        first with `--backwards`, like the runs inside each)."""
        chunks = contiguous(work.intervals)
        return chunks[::-1] if work.options.backwards else chunks

    def _max_active(self, work: StepWork) -> int:
        return work.within_budget(work.options.max_active or self.settings.max_active_runs)

    async def submit(self, work: StepWork) -> State:
        return await self._start_chunk(work, int(work.state.get("chunk", 0)), dict(work.state))

    def _mine(
        self, found: Sequence[BackfillInfo], start: datetime, end: datetime, since: datetime | None
    ) -> BackfillInfo | None:
        """Our backfill of this range, created by a process that died before recording it: one
        still running that was created around our claim, or a finished one created after it."""
        for backfill in found:
            if backfill.from_date != start or backfill.to_date != end:
                continue
            if since is None or backfill.created_at is None:
                return backfill
            margin = _SKEW if backfill.completed_at is None else timedelta(0)
            if backfill.created_at >= since - margin:
                return backfill
        return None

    async def _start_chunk(self, work: StepWork, index: int, state: dict[str, Any]) -> State:
        dag_id = self.dag_id(work.dag)
        chunk = self._chunks(work)[index]
        first, last = chunk[0].start, chunk[-1].start
        await self.ready(dag_id)
        existing = await self.client.list_backfills(dag_id)
        backfill = self._mine(existing, first, last, work.since)
        if backfill is None:
            options = work.options
            dates = await self.client.dry_run_backfill(
                dag_id,
                first,
                last,
                reprocess_behavior=options.reprocess_behavior,
                max_active_runs=self._max_active(work),
            )
            if not dates:
                # Nothing in this range to redo under the chosen --rerun: Airflow would answer
                # 500 for a backfill with no runs. Recorded as a finished, empty chunk.
                empty: State = {"chunk": index, "backfill_id": None, "expected": []}
                return {**state, **empty, "from": iso(first), "to": iso(last)}
            try:
                backfill = await self.client.create_backfill(
                    dag_id,
                    first,
                    last,
                    reprocess_behavior=options.reprocess_behavior,
                    max_active_runs=self._max_active(work),
                    run_backwards=options.backwards,
                    dag_run_conf=options.conf,
                )
            except AirflowConflict:
                running = [
                    b for b in await self.client.list_backfills(dag_id) if not b.completed_at
                ]
                ids = ", ".join(str(b.id) for b in running) or "another"
                raise Busy(
                    f"waiting: backfill {ids} of {dag_id} is already running in Airflow"
                ) from None
            state["expected"] = [iso(d) for d in dates]
        else:
            # Adopted: what it runs is what it created (the dry run's answer was lost).
            runs = await self.client.list_dag_runs(
                dag_id, run_type="backfill", logical_date_gte=first, logical_date_lte=last
            )
            dates = sorted({r.logical_date for r in runs if r.logical_date}) or [
                i.start for i in chunk
            ]
            state["expected"] = [iso(d) for d in dates]
        return {
            **state,
            "chunk": index,
            "backfill_id": backfill.id,
            "from": iso(first),
            "to": iso(last),
            "handle": f"backfill {backfill.id}",
        }

    async def poll(self, work: StepWork) -> Progress:
        state = dict(work.state)
        dag_id = self.dag_id(work.dag)
        expected = {_parse(d) for d in state.get("expected", ())}
        runs = await self.client.list_dag_runs(
            dag_id,
            run_type="backfill",
            logical_date_gte=_parse(state["from"]),
            logical_date_lte=_parse(state["to"]),
        )
        latest: dict[datetime, Any] = {}
        for run in runs:
            if run.logical_date in expected:
                latest[run.logical_date] = run
        prior = Counts.from_json(state.get("prior"))
        now = Counts.of([r.state for r in latest.values()], expected=len(expected))
        counts = Counts(
            queued=now.queued,
            running=now.running,
            succeeded=prior.succeeded + now.succeeded,
            failed=prior.failed + now.failed,
        )
        if now.total and not now.finished:
            return Progress(counts)
        if now.failed:
            return Progress(counts, done=True, message=f"{now.failed} of {now.total} runs failed")
        chunks = self._chunks(work)
        index = int(state.get("chunk", 0))
        if index + 1 < len(chunks) and not work.cancelling:
            if work.pausing:
                return Progress(counts)  # the next chunk's backfill waits for the resume
            state["prior"] = counts.to_json()
            state.pop("expected", None)
            try:
                state = await self._start_chunk(work, index + 1, state)
            except Busy:
                return Progress(counts)
            return Progress(counts, state=state)
        if work.cancelling and index + 1 < len(chunks):
            return Progress(counts, done=True, message="cancelled before every interval ran")
        message = None if counts.total else self._nothing(work)
        return Progress(counts, done=True, ok=True, message=message)

    @staticmethod
    def _nothing(work: StepWork) -> str:
        if work.options.rerun in ("missing", "failed"):
            return f"nothing to redo with --rerun {work.options.rerun}: every interval had a run"
        return "Airflow had no runs to redo in this range"

    async def pause(self, work: StepWork, paused: bool) -> State | None:
        backfill_id = work.state.get("backfill_id")
        if isinstance(backfill_id, int):
            # 409: completed meanwhile, nothing left to hold.
            with contextlib.suppress(AirflowNotFound, AirflowConflict):
                await self.client.set_backfill_paused(backfill_id, paused)
        return None

    async def cancel(self, work: StepWork) -> State | None:
        backfill_id = work.state.get("backfill_id")
        if isinstance(backfill_id, int):
            # 409: already completed (cancelled before, or finished): nothing left to stop.
            with contextlib.suppress(AirflowNotFound, AirflowConflict):
                await self.client.cancel_backfill(backfill_id)
        return None

    def link(self, work: StepWork) -> str | None:
        return self.client.ui_url(self.dag_id(work.dag))
