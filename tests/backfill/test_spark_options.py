"""The local Spark backend's part of a request's options, with the pipeline replaced by a
recording one (no JVM): `--backwards` runs the newest interval first, a paused request starts
no new interval (the one running finishes) and resume carries on, and the preview is told
plainly what Spark cannot honour (`--rerun missing|failed`, `--conf`)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from bot.backfill.rules.options import RunOptions
from bot.backfill.run.backends import StepWork
from bot.backfill.run.spark import SparkBackend
from bot.core.model import DagRef, Interval

DAG = "example.etl_orders"
DAYS = tuple(
    Interval(datetime(2021, 6, d, tzinfo=UTC), datetime(2021, 6, d, tzinfo=UTC) + timedelta(days=1))
    for d in (4, 5, 6)
)


@dataclass
class Pipeline:
    """What SparkBackend reads of pipeline.food_delivery.jobs; each interval waits for `go`."""

    ran: list[datetime] = field(default_factory=list)
    go: threading.Event = field(default_factory=threading.Event)
    JOBS: tuple[str, ...] = (DAG,)

    class JobFailed(Exception):
        pass

    @staticmethod
    def PipelineSettings(**settings: Any) -> SimpleNamespace:
        return SimpleNamespace(**settings)

    def run_interval(
        self, spark: Any, dag: str, start: datetime, end: datetime, settings: Any
    ) -> None:
        assert self.go.wait(10)
        self.ran.append(start)

    def cancel_interval(self, spark: Any, dag: str, start: datetime) -> bool:
        return False


@pytest.fixture
def pipeline(monkeypatch: pytest.MonkeyPatch) -> Iterator[Pipeline]:
    fake = Pipeline()
    monkeypatch.setattr(SparkBackend, "_pipeline", staticmethod(lambda: fake))

    async def no_session(self: SparkBackend) -> object:
        return object()

    monkeypatch.setattr(SparkBackend, "_spark", no_session)
    yield fake
    fake.go.set()


def work(options: RunOptions, *, pausing: bool = False) -> StepWork:
    return StepWork("r1", "s1", DagRef("food_delivery", DAG), DAYS, options=options,
                    pausing=pausing)  # fmt: skip


async def until(check: Any) -> None:
    for _ in range(500):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not met")


async def test_backwards_runs_the_newest_interval_first(pipeline: Pipeline, tmp_path: Path) -> None:
    spark = SparkBackend(master=None, warehouse=tmp_path)
    step = work(RunOptions(rerun="all", backwards=True))
    pipeline.go.set()
    await spark.submit(step)
    await until(lambda: len(pipeline.ran) == 3)
    assert pipeline.ran == [d.start for d in reversed(DAYS)]
    done = await spark.poll(step)
    assert (done.done, done.ok, done.counts.succeeded) == (True, True, 3)
    await spark.close()


async def test_a_paused_step_starts_no_new_interval_until_resumed(
    pipeline: Pipeline, tmp_path: Path
) -> None:
    spark = SparkBackend(master=None, warehouse=tmp_path)
    step = work(RunOptions(rerun="all"))
    await spark.submit(step)
    for _ in range(500):  # until its first interval is under way
        if (await spark.poll(step)).counts.running:
            break
        await asyncio.sleep(0.01)
    await spark.pause(replace(step, pausing=True), True)
    pipeline.go.set()  # the first interval, already running, finishes
    await until(lambda: len(pipeline.ran) == 1)
    await asyncio.sleep(0.2)
    assert pipeline.ran == [DAYS[0].start]
    held = await spark.poll(replace(step, pausing=True))
    assert not held.done
    assert (held.counts.succeeded, held.counts.queued) == (1, 2)

    await spark.pause(step, False)
    await until(lambda: len(pipeline.ran) == 3)
    assert pipeline.ran == [d.start for d in DAYS]
    await spark.close()


def test_the_preview_is_told_what_spark_cannot_honour(tmp_path: Path) -> None:
    spark = SparkBackend(master=None, warehouse=tmp_path)
    assert spark.unhonoured(RunOptions(rerun="all", backwards=True, max_active=2)) == ()
    said = " ".join(spark.unhonoured(RunOptions(rerun="failed", conf={"k": 1})))
    assert "--rerun failed cannot be honoured: every interval runs again" in said
    assert "--conf is ignored" in said
