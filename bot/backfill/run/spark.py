"""The local backend: the example pipeline's PySpark jobs, run interval by interval on one
SparkSession shared by every step (`local[*]`, or the cluster SPARK_MASTER names).

Runs live in this process, so a restart loses them: `poll` then reports the step lost and the
runner submits it again, which reruns only the intervals not recorded as done (the pipeline
overwrites whole partitions, so rerunning an interrupted one is harmless).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bot.backfill.rules.options import RunOptions
from bot.backfill.rules.progress import Counts
from bot.backfill.run.backends import Finding, Progress, State, StepWork
from bot.core.model import DagRef, Interval, iso

logger = logging.getLogger(__name__)
# A run another process reports on every poll is alive; silent this long, it died with it.
HEARTBEAT_TIMEOUT = timedelta(seconds=60)


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass
class _LocalRun:
    intervals: tuple[Interval, ...]
    done: set[str] = field(default_factory=set)
    current: Interval | None = None
    failed: str | None = None
    cancelled: bool = False
    task: asyncio.Task[None] | None = None
    resumed: asyncio.Event = field(default_factory=asyncio.Event)
    """Set while the request runs; cleared while it is paused (no new interval starts)."""

    def __post_init__(self) -> None:
        self.resumed.set()


class SparkBackend:
    name = "spark"

    def __init__(
        self,
        *,
        master: str | None,
        warehouse: Path,
        lineage_url: str | None = None,
        lineage_api_key: str | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> None:
        self.master = master
        self.options = dict(options or {})
        self.warehouse = warehouse
        self.lineage_url = lineage_url
        self.lineage_api_key = lineage_api_key
        self.boot = uuid.uuid4().hex
        self._runs: dict[str, _LocalRun] = {}
        self._session: Any = None
        self._session_lock = asyncio.Lock()

    # The pipeline (and PySpark with it) is imported only when the local backend is used.
    @staticmethod
    def _pipeline() -> Any:
        from pipeline.food_delivery import jobs

        return jobs

    async def check(self, dags: Sequence[DagRef]) -> dict[DagRef, Finding]:
        try:
            jobs = self._pipeline()
        except ImportError as exc:
            why = (
                f"the local Spark executor cannot start ({exc}); install pyspark or set AIRFLOW_URL"
            )
            return {dag: Finding(why, blocking=True) for dag in dags}
        return {
            dag: Finding(
                "no local Spark job: the local executor runs the example food_delivery pipeline "
                "only; set AIRFLOW_URL to run this DAG on Airflow, or leave it out with --exclude",
                blocking=True,
            )
            for dag in dags
            if dag.dag_id not in jobs.JOBS
        }

    async def _spark(self) -> Any:
        async with self._session_lock:
            if self._session is None:
                from pipeline.food_delivery.session import shared_session

                self._session = await asyncio.to_thread(shared_session, self.master)
            return self._session

    def _settings(self) -> Any:
        jobs = self._pipeline()
        return jobs.PipelineSettings(
            warehouse=self.warehouse,
            lineage_url=self.lineage_url,
            lineage_api_key=self.lineage_api_key,
            **self.options,
        )

    async def submit(self, work: StepWork) -> State:
        run = self._runs.get(work.step_id)
        if run is None or (run.task is not None and run.task.done() and run.failed):
            done = {str(d) for d in work.state.get("done", ())}
            run = _LocalRun(work.ordered(), done=done)
            if work.pausing:
                run.resumed.clear()
            self._runs[work.step_id] = run
            run.task = asyncio.create_task(self._run(work.dag.dag_id, run))
        return {"boot": self.boot, "handle": f"Spark {self.master or 'local[*]'}"}

    async def _run(self, dag: str, run: _LocalRun) -> None:
        jobs = self._pipeline()
        try:
            spark = await self._spark()
            settings = self._settings()
            for interval in run.intervals:
                key = iso(interval.start)
                if key in run.done:
                    continue
                await run.resumed.wait()
                if run.cancelled:
                    return
                run.current = interval
                await asyncio.to_thread(
                    jobs.run_interval, spark, dag, interval.start, interval.end, settings
                )
                run.done.add(key)
                run.current = None
        except jobs.JobFailed as exc:
            run.failed = str(exc)
        except Exception as exc:  # Spark itself broke: the step fails with Spark's reason
            logger.exception("local run of %s failed", dag)
            run.failed = f"{type(exc).__name__}: {exc}"
        finally:
            run.current = None

    async def poll(self, work: StepWork) -> Progress:
        run = self._runs.get(work.step_id)
        if run is None:
            done = list(work.state.get("done", ()))
            counts = Counts(queued=len(work.intervals) - len(done), succeeded=len(done))
            return Progress(counts, lost=self._lost(work.state))
        total = len(run.intervals)
        finished = run.task is not None and run.task.done()
        failed = 1 if run.failed else 0
        running = 1 if run.current is not None and not finished else 0
        counts = Counts(
            queued=max(0, total - len(run.done) - running - failed),
            running=running,
            succeeded=len(run.done),
            failed=failed,
        )
        state: State = {"boot": self.boot, "done": sorted(run.done), "seen": _now().isoformat()}
        if not finished:
            return Progress(counts, state=state)
        self._runs.pop(work.step_id, None)
        ok = not run.failed and len(run.done) == total
        message = run.failed or (None if ok else "cancelled before every interval ran")
        return Progress(counts, done=True, ok=ok, message=message, state=state)

    def _lost(self, state: Mapping[str, Any]) -> bool:
        """Not running here. Ours (this process) or silent for a while: the process that ran
        it is gone (a restart). Another live process still reports it every poll."""
        if state.get("boot") == self.boot or not isinstance(state.get("seen"), str):
            return True
        return _now() - datetime.fromisoformat(state["seen"]) > HEARTBEAT_TIMEOUT

    async def cancel(self, work: StepWork) -> State | None:
        run = self._runs.get(work.step_id)
        if run is None:
            return None
        run.cancelled = True
        run.resumed.set()  # a paused run wakes to see it is cancelled
        if run.current is not None and self._session is not None:
            # Stops the interval's Spark jobs now; the run reports ABORT and raises.
            jobs = self._pipeline()
            await asyncio.to_thread(
                jobs.cancel_interval, self._session, work.dag.dag_id, run.current.start
            )
        return None

    def link(self, work: StepWork) -> str | None:
        return None

    async def pause(self, work: StepWork, paused: bool) -> State | None:
        run = self._runs.get(work.step_id)
        if run is not None:
            if paused:
                run.resumed.clear()
            else:
                run.resumed.set()
        return None

    async def history(self, dag: DagRef, intervals: Sequence[Interval]) -> list[str | None] | None:
        return None  # local runs leave no history to choose from

    async def check_conf(
        self, dags: Sequence[DagRef], conf: Mapping[str, Any]
    ) -> dict[DagRef, Finding]:
        return {}  # its jobs take no conf: `unhonoured` says so

    async def asset_consumers(self, dag: DagRef) -> list[tuple[str, str]]:
        return []  # the example pipeline's jobs schedule nothing on each other's output

    async def run_seconds(self, dag: DagRef) -> float | None:
        return None  # local runs leave no history

    def runs_at_once(self, work: StepWork) -> int:
        return 1  # a step's intervals run one after another on the shared session

    def unhonoured(self, options: RunOptions) -> tuple[str, ...]:
        cannot = []
        if options.chosen_rerun != "all":
            cannot.append(
                f"the local Spark executor keeps no run history, so --rerun {options.rerun} "
                "cannot be honoured: every interval runs again"
            )
        if options.conf:
            cannot.append("the local Spark executor's jobs take no DAG run conf: --conf is ignored")
        if options.clear_failed:
            cannot.append(
                "the local Spark executor has no tasks to clear: every interval runs again"
            )
        return tuple(cannot)

    async def close(self) -> None:
        for run in self._runs.values():
            run.cancelled = True
            run.resumed.set()
        tasks = [r.task for r in self._runs.values() if r.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
