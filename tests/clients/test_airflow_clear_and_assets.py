"""The Airflow clients against the stand-in, both APIs: rerunning only the failed tasks of a run
(`clear_task_instances`, followed with `list_task_instances` and `get_dag_run`), Airflow's
refusals as AirflowRequestError in its words, paging, and the DAGs scheduled on the assets a
DAG produces (`asset_consumers`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest

from bot.clients.airflow import (
    Airflow2Client,
    Airflow3Client,
    AirflowClient,
    AirflowConflict,
    AirflowNotFound,
    AirflowRequestError,
    AssetConsumer,
    RetryPolicy,
    TaskInstanceInfo,
)
from standins.airflow.dags import HistoricRun
from standins.airflow.server import (
    AirflowStandin,
    ManualClock,
    StandinDag,
    running_airflow_standin,
)

T0 = datetime(2024, 1, 10, tzinfo=UTC)
RUN_S = 10.0
FAST = RetryPolicy(attempts=2, backoff_s=0.001, max_backoff_s=0.002)
CHAIN = StandinDag("etl.chain", tasks=("extract", "transform", "load"))
WIDE = StandinDag("etl.wide", tasks=tuple(f"t{n:03d}" for n in range(130)))
PRODUCER = StandinDag(
    "orders.producer",
    outlets=("s3://lake/orders", "s3://lake/items", "s3://lake/loop"),
    asset_schedule=("s3://lake/loop", "s3://lake/raw"),  # scheduled on its own output, too
)
DAGS = (
    CHAIN,
    WIDE,
    PRODUCER,
    StandinDag("orders.report", asset_schedule=("s3://lake/orders", "s3://lake/items")),
    StandinDag("orders.audit", asset_schedule=("s3://lake/orders",)),
    StandinDag("raw.loader", outlets=("s3://lake/raw",)),  # the producer consumes this one
    StandinDag("unrelated", outlets=("s3://lake/other",), asset_schedule=("s3://lake/other",)),
)


def day(n: int) -> datetime:
    return datetime(2024, 1, n, tzinfo=UTC)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture(params=[3, 2], ids=["airflow3", "airflow2"])
async def airflow(
    request: pytest.FixtureRequest, clock: ManualClock
) -> AsyncIterator[AirflowStandin]:
    async with running_airflow_standin(
        api=request.param, dags=DAGS, clock=clock, run_seconds=RUN_S
    ) as server:
        yield server


@pytest.fixture
async def client(airflow: AirflowStandin) -> AsyncIterator[AirflowClient]:
    kind = Airflow3Client if airflow.api == 3 else Airflow2Client
    async with kind(airflow.url, airflow.username, airflow.password, retry=FAST) as made:
        yield made


async def failed_run(
    airflow: AirflowStandin, clock: ManualClock, failing: str, n: int = 3, dag: StandinDag = CHAIN
) -> str:
    """The id of a finished run of `dag` at day `n` whose task `failing` failed (once)."""
    airflow.state.fail_on(dag.dag_id, day(n), times=1, task_id=failing)
    run = airflow.state.create_run(
        dag.dag_id, f"manual__{n}", run_type="manual", logical_date=day(n),
        interval=(day(n), day(n + 1)), run_after=day(n + 1),
    )  # fmt: skip
    clock.advance(RUN_S)
    assert airflow.state.runs_of(dag.dag_id)[-1].state == "failed"
    return run.run_id


def states(tasks: list[TaskInstanceInfo]) -> dict[str, tuple[str | None, int]]:
    return {t.task_id: (t.state, t.try_number) for t in tasks}


async def test_clearing_only_the_failed_task_of_a_failed_run_reruns_that_task_alone(
    airflow: AirflowStandin, client: AirflowClient, clock: ManualClock
) -> None:
    run_id = await failed_run(airflow, clock, failing="load")
    before = await client.list_task_instances("etl.chain", run_id)
    assert states(before) == {
        "extract": ("success", 1),
        "transform": ("success", 1),
        "load": ("failed", 1),
    }
    assert all(t.start_date and t.end_date and t.start_date.tzinfo for t in before)

    cleared = await client.clear_task_instances("etl.chain", dag_run_id=run_id)
    assert (cleared.tasks, cleared.count, cleared.run_ids) == (((run_id, "load"),), 1, (run_id,))
    assert (await client.get_dag_run("etl.chain", run_id)).state == "running"
    clock.advance(RUN_S)
    run = await client.get_dag_run("etl.chain", run_id)
    assert run.state == "success"
    after = await client.list_task_instances("etl.chain", run_id)
    assert states(after) == {
        "extract": ("success", 1),
        "transform": ("success", 1),
        "load": ("success", 2),
    }
    assert after[:2] == before[:2]  # the tasks that succeeded did not run again
    assert after[2].start_date is not None
    assert run.start_date is not None
    assert after[2].start_date >= run.start_date


async def test_upstream_failed_tasks_are_cleared_with_the_failed_one(
    airflow: AirflowStandin, client: AirflowClient, clock: ManualClock
) -> None:
    run_id = await failed_run(airflow, clock, failing="transform")
    assert states(await client.list_task_instances("etl.chain", run_id))["load"] == (
        "upstream_failed",
        0,
    )
    cleared = await client.clear_task_instances("etl.chain", dag_run_id=run_id)
    assert [task for _, task in cleared.tasks] == ["transform", "load"]
    clock.advance(RUN_S)
    assert states(await client.list_task_instances("etl.chain", run_id)) == {
        "extract": ("success", 1),
        "transform": ("success", 2),
        "load": ("success", 1),
    }


async def test_clearing_by_dates_and_task_ids(
    airflow: AirflowStandin, client: AirflowClient, clock: ManualClock
) -> None:
    first = await failed_run(airflow, clock, failing="extract", n=3)
    second = await failed_run(airflow, clock, failing="load", n=5)
    found = await client.clear_task_instances("etl.chain", start_date=day(4), end_date=day(6))
    assert found.tasks == ((second, "load"),)
    everything = await client.clear_task_instances(
        "etl.chain", start_date=day(1), end_date=day(4), only_failed=False, task_ids=["extract"]
    )
    assert everything.tasks == ((first, "extract"),)
    clock.advance(RUN_S)
    assert (await client.get_dag_run("etl.chain", second)).state == "success"
    # extract reran alone and succeeded; the tasks after it were not cleared, so the run
    # fails again on them, as Airflow's does.
    assert states(await client.list_task_instances("etl.chain", first)) == {
        "extract": ("success", 2),
        "transform": ("upstream_failed", 0),
        "load": ("upstream_failed", 0),
    }
    assert (await client.get_dag_run("etl.chain", first)).state == "failed"
    await client.clear_task_instances("etl.chain", dag_run_id=first)
    clock.advance(RUN_S)
    assert (await client.get_dag_run("etl.chain", first)).state == "success"
    # Nothing failed any more: only_failed clears nothing, and no run is touched.
    nothing = await client.clear_task_instances("etl.chain", start_date=day(1))
    assert (nothing.tasks, nothing.count) == ((), 0)


async def test_airflows_refusals_keep_its_words(
    airflow: AirflowStandin, client: AirflowClient, clock: ManualClock
) -> None:
    run_id = await failed_run(airflow, clock, failing="load")
    with pytest.raises(AirflowRequestError) as caught:
        await client.clear_task_instances("etl.chain", dag_run_id=run_id, start_date=day(1))
    status = 422 if airflow.api == 3 else 400
    assert caught.value.status == status
    assert "Exactly one of dag_run_id or start_date must be provided" in caught.value.detail
    prefix = "v2" if airflow.api == 3 else "v1"
    assert caught.value.endpoint == f"POST /api/{prefix}/dags/etl.chain/clearTaskInstances"
    with pytest.raises(AirflowRequestError, match="end_date is sooner than start_date"):
        await client.clear_task_instances("etl.chain", start_date=day(5), end_date=day(1))
    with pytest.raises(AirflowNotFound, match="r9"):
        await client.clear_task_instances("etl.chain", dag_run_id="r9")
    with pytest.raises(AirflowNotFound):
        await client.clear_task_instances("nope", dag_run_id=run_id)
    assert (await client.get_dag_run("etl.chain", run_id)).state == "failed"  # nothing cleared


async def test_task_instances_are_paged(
    airflow: AirflowStandin, client: AirflowClient, clock: ManualClock
) -> None:
    run_id = await failed_run(airflow, clock, failing="t120", dag=WIDE)
    tasks = await client.list_task_instances("etl.wide", run_id)
    assert [t.task_id for t in tasks] == list(WIDE.tasks)
    assert {t.state for t in tasks[:120]} == {"success"}
    assert (tasks[120].state, {t.state for t in tasks[121:]}) == ("failed", {"upstream_failed"})
    path = f"/api/v{'2' if airflow.api == 3 else '1'}/dags/etl.wide/dagRuns/{run_id}/taskInstances"
    assert sum(p == path for _, p, _ in airflow.state.requests) == 2  # 100, then 30
    cleared = await client.clear_task_instances("etl.wide", dag_run_id=run_id)
    assert cleared.count == 10
    if airflow.api == 2:  # an unknown run has no task instances in Airflow 2, a 404 in 3
        assert await client.list_task_instances("etl.wide", "nope") == []
    else:
        with pytest.raises(AirflowNotFound):
            await client.list_task_instances("etl.wide", "nope")


async def test_asset_consumers_are_the_dags_scheduled_on_what_the_dag_produces(
    airflow: AirflowStandin, client: AirflowClient
) -> None:
    assert await client.asset_consumers("orders.producer") == [
        AssetConsumer("s3://lake/orders", "s3://lake/orders", "orders.audit"),
        AssetConsumer("s3://lake/orders", "s3://lake/orders", "orders.report"),
        AssetConsumer("s3://lake/items", "s3://lake/items", "orders.report"),
    ]
    # raw.loader's asset is consumed by the producer; the report produces nothing.
    assert await client.asset_consumers("raw.loader") == [
        AssetConsumer("s3://lake/raw", "s3://lake/raw", "orders.producer")
    ]
    assert await client.asset_consumers("orders.report") == []
    assert await client.asset_consumers("unrelated") == []  # only itself
    assert await client.asset_consumers("nope") == []


async def test_asset_consumers_are_paged_to_the_end_however_the_total_counts(
    airflow: AirflowStandin, client: AirflowClient
) -> None:
    uris = tuple(f"s3://wide/{n:03d}" for n in range(120))
    airflow.state.add_dag(StandinDag("wide.producer", outlets=uris))
    airflow.state.add_dag(StandinDag("wide.reader", asset_schedule=uris[::2]))
    found = await client.asset_consumers("wide.producer")
    assert [c.uri for c in found] == list(uris[::2])
    assert {c.dag_id for c in found} == {"wide.reader"}
    # Airflow 2 counts all 125 datasets in total_entries: the client stops at the short page.
    path = "/api/v2/assets" if airflow.api == 3 else "/api/v1/datasets"
    assert sum(p == path for _, p, _ in airflow.state.requests) == 2


async def test_recent_runs_are_the_latest_to_end_in_the_state_asked(
    airflow: AirflowStandin, client: AirflowClient
) -> None:
    for n, (minutes, state) in enumerate(
        [(5, "success"), (7, "failed"), (9, "success"), (11, "success")], start=1
    ):
        airflow.state.add_historic_run(HistoricRun("etl.chain", day(n), state, minutes=minutes))
    recent = await client.recent_dag_runs("etl.chain", limit=2)
    assert [r.logical_date for r in recent] == [day(4), day(3)]
    assert all(r.state == "success" for r in recent)
    durations = [(r.end_date - r.start_date).total_seconds() for r in recent
                 if r.end_date and r.start_date]  # fmt: skip
    assert durations == [11 * 60, 9 * 60]
    failed = await client.recent_dag_runs("etl.chain", state="failed")
    assert [r.logical_date for r in failed] == [day(2)]


async def test_run_writes_trigger_clear_and_stop_a_run_on_both_apis(
    airflow: AirflowStandin, client: AirflowClient, clock: ManualClock
) -> None:
    """trigger_dag_run / clear_dag_run / set_dag_run_state (bot/clients/airflow_runs.py): the
    Airflow 2 steps, and on Airflow 3 the asset-scheduled DAGs it cannot backfill."""
    audit = "orders.audit"  # scheduled on an asset: only triggered runs have a logical date
    made = await client.trigger_dag_run(
        audit, "backfill_bot__x__1", logical_date=day(4), data_interval_start=day(4),
        data_interval_end=day(5), conf={"k": 1}, note="backfill-bot request r1",
    )  # fmt: skip
    assert (made.run_id, made.logical_date) == ("backfill_bot__x__1", day(4))
    assert (made.data_interval_start, made.data_interval_end) == (day(4), day(5))
    with pytest.raises(AirflowConflict):  # the same logical date again
        await client.trigger_dag_run(
            audit, "other", logical_date=day(4), data_interval_start=day(4),
            data_interval_end=day(5),
        )  # fmt: skip
    active = await client.list_dag_runs(audit, state=["queued", "running"])
    assert [r.run_id for r in active] == ["backfill_bot__x__1"]
    clock.advance(RUN_S)
    assert (await client.get_dag_run(audit, made.run_id)).state == "success"
    assert await client.list_dag_runs(audit, state=["queued", "running"]) == []

    await client.clear_dag_run(audit, made.run_id)  # runs it again
    assert (await client.get_dag_run(audit, made.run_id)).state in ("queued", "running")
    stopped = await client.set_dag_run_state(audit, made.run_id, "failed")
    assert stopped.state == "failed"
    with pytest.raises(ValueError, match="success, failed or queued"):
        await client.set_dag_run_state(audit, made.run_id, "running")
    with pytest.raises(ValueError, match="non-empty collection"):
        await client.list_dag_runs(audit, state="running")
    with pytest.raises(AirflowNotFound):
        await client.clear_dag_run(audit, "no-such-run")
