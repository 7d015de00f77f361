"""The Airflow stand-in's task instances and assets over real HTTP, every request and answer
validated against the published specs (tests/support/airflow_spec.py): clearing only the failed
tasks of a run (`POST .../clearTaskInstances` on both APIs, with the body checks of Airflow
3.3.2's ClearTaskInstancesBody and 2.11's ClearTaskInstanceFormSchema), listing a run's task
instances, and the assets (Airflow 2: datasets) a DAG produces or is scheduled on.

The DAGs added here run their tasks as a chain; `fail_on(..., task_id=...)` fails one task.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import pytest

from standins.airflow.server import AirflowStandin, ManualClock, StandinDag
from tests.support.airflow_spec import (
    RUN_SECONDS,
    Api,
    airflow2,
    airflow3,
    assert_problem,
    clock,
    day,
    v1,
    v1_openapi,
    v2,
    v2_openapi,
    z,
)

# The fixtures imported from airflow_spec_support:
__all__ = ["airflow2", "airflow3", "clock", "v1", "v1_openapi", "v2", "v2_openapi"]

CHAIN = StandinDag("etl.chain", tasks=("extract", "transform", "load"))
PRODUCER = StandinDag("assets.producer", outlets=("s3://lake/orders", "s3://lake/items"))
CONSUMER = StandinDag("assets.consumer", asset_schedule=("s3://lake/orders",))
READER = StandinDag(
    "assets.reader", asset_schedule=("s3://lake/items",), outlets=("s3://lake/report",)
)
UNRELATED = StandinDag("assets.unrelated", outlets=("s3://lake/other",))
V2_CLEAR = "/api/v2/dags/etl.chain/clearTaskInstances"
V1_CLEAR = "/api/v1/dags/etl.chain/clearTaskInstances"


def by_task(found: dict[str, Any]) -> dict[str, tuple[str | None, int]]:
    return {t["task_id"]: (t["state"], t["try_number"]) for t in found["task_instances"]}


async def failed_run(
    server: AirflowStandin, api: Api, clock: ManualClock, failing: str, day_of_month: int = 3
) -> str:
    """The run id of a finished run of etl.chain whose task `failing` failed (once)."""
    if server.state.dag(CHAIN.dag_id) is None:
        server.state.add_dag(CHAIN)
    server.state.fail_on(CHAIN.dag_id, day(day_of_month), times=1, task_id=failing)
    prefix = "v1" if server.api == 2 else "v2"
    body = {"logical_date": z(day(day_of_month))}
    run = await api.ok("POST", f"/api/{prefix}/dags/etl.chain/dagRuns", body)
    clock.advance(RUN_SECONDS)
    run_id: str = run["dag_run_id"]
    return run_id


def tasks_path(api: int, run_id: str) -> str:
    prefix = "v1" if api == 2 else "v2"
    return f"/api/{prefix}/dags/etl.chain/dagRuns/{quote(run_id, safe='')}/taskInstances"


def run_path(api: int, run_id: str) -> str:
    prefix = "v1" if api == 2 else "v2"
    return f"/api/{prefix}/dags/etl.chain/dagRuns/{quote(run_id, safe='')}"


# -- Airflow 3: clearing --------------------------------------------------------------------------


async def test_v2_clearing_only_the_failed_task_reruns_it_alone(
    airflow3: AirflowStandin, clock: ManualClock, v2: Api
) -> None:
    run_id = await failed_run(airflow3, v2, clock, failing="load")
    before = await v2.ok("GET", tasks_path(3, run_id))
    assert by_task(before) == {
        "extract": ("success", 1),
        "transform": ("success", 1),
        "load": ("failed", 1),
    }
    assert before["total_entries"] == 3
    assert (await v2.ok("GET", run_path(3, run_id)))["state"] == "failed"
    first = {t["task_id"]: t for t in before["task_instances"]}

    body = {"dry_run": False, "dag_run_id": run_id, "only_failed": True, "reset_dag_runs": True}
    cleared = await v2.ok("POST", V2_CLEAR, body)
    assert cleared["total_entries"] == 1
    [load] = cleared["task_instances"]
    # Cleared: no state, a new id (the old try went to its history), the try not yet counted.
    assert (load["task_id"], load["state"], load["try_number"]) == ("load", None, 1)
    assert load["id"] != first["load"]["id"]
    run = await v2.ok("GET", run_path(3, run_id))
    assert (run["state"], run["end_date"]) == ("running", None)  # queued, started at once
    assert by_task(await v2.ok("GET", tasks_path(3, run_id))) == {
        "extract": ("success", 1),
        "transform": ("success", 1),
        "load": ("running", 2),
    }

    clock.advance(RUN_SECONDS)
    after = await v2.ok("GET", tasks_path(3, run_id))
    assert by_task(after) == {
        "extract": ("success", 1),
        "transform": ("success", 1),
        "load": ("success", 2),
    }
    again = {t["task_id"]: t for t in after["task_instances"]}
    for untouched in ("extract", "transform"):  # not rerun: the same try, the same times
        assert again[untouched] == first[untouched]
    assert again["load"]["start_date"] > first["load"]["end_date"]
    assert (await v2.ok("GET", run_path(3, run_id)))["state"] == "success"


async def test_v2_only_failed_takes_upstream_failed_tasks_but_not_skipped_ones(
    airflow3: AirflowStandin, clock: ManualClock, v2: Api
) -> None:
    run_id = await failed_run(airflow3, v2, clock, failing="transform")
    before = await v2.ok("GET", tasks_path(3, run_id))
    assert by_task(before) == {
        "extract": ("success", 1),
        "transform": ("failed", 1),
        "load": ("upstream_failed", 0),  # never ran
    }
    preview = await v2.ok("POST", V2_CLEAR, {"dag_run_id": run_id})  # dry_run defaults to true
    assert [t["task_id"] for t in preview["task_instances"]] == ["transform", "load"]
    assert [t["state"] for t in preview["task_instances"]] == ["failed", "upstream_failed"]
    assert (await v2.ok("GET", run_path(3, run_id)))["state"] == "failed"

    # Without the flags: only_failed and reset_dag_runs default to true in Airflow 3.
    await v2.ok("POST", V2_CLEAR, {"dag_run_id": run_id, "dry_run": False})
    clock.advance(RUN_SECONDS)
    assert by_task(await v2.ok("GET", tasks_path(3, run_id))) == {
        "extract": ("success", 1),
        "transform": ("success", 2),
        "load": ("success", 1),
    }

    # A run failed by hand: its running task fails, the ones not started are skipped.
    await v2.ok("POST", "/api/v2/dags/etl.chain/dagRuns", {"logical_date": z(day(4))})
    other = (await v2.ok("GET", "/api/v2/dags/etl.chain/dagRuns", params=[("state", "running")]))[
        "dag_runs"
    ][0]["dag_run_id"]
    await v2.ok("PATCH", run_path(3, other), {"state": "failed"})
    assert by_task(await v2.ok("GET", tasks_path(3, other))) == {
        "extract": ("failed", 1),
        "transform": ("skipped", 0),
        "load": ("skipped", 0),
    }
    cleared = await v2.ok("POST", V2_CLEAR, {"dag_run_id": other, "dry_run": False})
    assert [t["task_id"] for t in cleared["task_instances"]] == ["extract"]
    clock.advance(RUN_SECONDS)
    assert by_task(await v2.ok("GET", tasks_path(3, other))) == {
        "extract": ("success", 2),
        "transform": ("skipped", 0),
        "load": ("skipped", 0),
    }
    assert (await v2.ok("GET", run_path(3, other)))["state"] == "success"


async def test_v2_clear_by_dates_task_ids_and_without_resetting_runs(
    airflow3: AirflowStandin, clock: ManualClock, v2: Api
) -> None:
    first = await failed_run(airflow3, v2, clock, failing="load", day_of_month=3)
    second = await failed_run(airflow3, v2, clock, failing="extract", day_of_month=5)
    window = {"start_date": z(day(1)), "end_date": z(day(4))}
    preview = await v2.ok("POST", V2_CLEAR, window)
    assert [(t["dag_run_id"], t["task_id"]) for t in preview["task_instances"]] == [(first, "load")]
    everything = await v2.ok("POST", V2_CLEAR, {"start_date": z(day(1)), "only_failed": False})
    assert everything["total_entries"] == 6
    chosen = {"task_ids": ["transform"], "include_downstream": True, "only_failed": False}
    picked = await v2.ok("POST", V2_CLEAR, chosen | {"dag_run_id": second})
    assert [t["task_id"] for t in picked["task_instances"]] == ["transform", "load"]

    # reset_dag_runs false: the tasks are cleared, the finished run stays as it was.
    kept = {"dag_run_id": second, "dry_run": False, "reset_dag_runs": False, "note": "retry"}
    cleared = await v2.ok("POST", V2_CLEAR, kept)
    assert [(t["task_id"], t["state"], t["note"]) for t in cleared["task_instances"]] == [
        ("extract", None, "retry"),
        ("transform", None, "retry"),
        ("load", None, "retry"),
    ]
    clock.advance(RUN_SECONDS)
    assert (await v2.ok("GET", run_path(3, second)))["state"] == "failed"
    assert {s for s, _ in by_task(await v2.ok("GET", tasks_path(3, second))).values()} == {None}


async def test_v2_clear_body_errors_follow_clear_task_instances_body(
    airflow3: AirflowStandin, clock: ManualClock, v2: Api
) -> None:
    run_id = await failed_run(airflow3, v2, clock, failing="load")

    async def refused(body: dict[str, Any], **kw: Any) -> dict[str, Any]:
        status, answer = await v2.call("POST", V2_CLEAR, body, **kw)
        assert status == 422, answer
        return answer["detail"][0]  # type: ignore[no-any-return]

    both = await refused({"dag_run_id": run_id, "start_date": z(day(1)), "end_date": z(day(4))})
    assert (both["type"], both["loc"]) == ("value_error", ["body"])
    assert both["msg"] == (
        "Value error, Exactly one of dag_run_id or (start_date and end_date) must be provided"
    )
    start_only = await refused({"dag_run_id": run_id, "start_date": z(day(1))})
    assert start_only["msg"].endswith("Exactly one of dag_run_id or start_date must be provided")
    backwards = await refused({"start_date": z(day(4)), "end_date": z(day(1))})
    assert backwards["msg"] == "Value error, end_date is sooner than start_date"
    empty = await refused({"task_ids": []})
    assert empty["msg"] == "Value error, task_ids list should have at least 1 element."
    naive = await refused({"start_date": "2024-01-01T00:00:00"}, check_request=False)
    assert (naive["type"], naive["loc"]) == ("timezone_aware", ["body", "start_date"])
    extra = await refused({"dry_run": False, "colour": "red"}, check_request=False)
    assert (extra["type"], extra["loc"]) == ("extra_forbidden", ["body", "colour"])
    assert (await refused({"only_failed": True, "only_running": True}))["msg"].endswith(
        "only_failed and only_running both are set to True"
    )

    status, answer = await v2.call("POST", "/api/v2/dags/nope/clearTaskInstances", {})
    assert (status, answer) == (404, {"detail": "The Dag with ID: `nope` was not found"})
    status, answer = await v2.call("POST", V2_CLEAR, {"dag_run_id": "r9"})
    assert (status, answer) == (404, {"detail": "Dag Run id r9 not found in dag etl.chain"})
    assert (await v2.ok("GET", run_path(3, run_id)))["state"] == "failed"  # nothing changed


async def test_v2_task_instances_of_a_run(
    airflow3: AirflowStandin, clock: ManualClock, v2: Api
) -> None:
    run_id = await failed_run(airflow3, v2, clock, failing="transform")
    page = await v2.ok("GET", tasks_path(3, run_id), params=[("limit", "2"), ("offset", "1")])
    assert [t["task_id"] for t in page["task_instances"]] == ["transform", "load"]
    assert page["total_entries"] == 3
    task = page["task_instances"][0]
    assert (task["dag_id"], task["dag_run_id"], task["map_index"]) == ("etl.chain", run_id, -1)
    assert task["logical_date"] == z(day(3))
    assert task["duration"] == pytest.approx(RUN_SECONDS / 3)  # the run's time, shared out
    failed = await v2.ok("GET", tasks_path(3, run_id), params=[("state", "failed")])
    assert [t["task_id"] for t in failed["task_instances"]] == ["transform"]
    status, answer = await v2.call("GET", tasks_path(3, "nope"))
    assert (status, answer) == (
        404,
        {"detail": "DagRun with dag_id: `etl.chain` and run_id: `nope` was not found"},
    )


# -- Airflow 2: clearing --------------------------------------------------------------------------


async def test_v1_clearing_only_the_failed_task_reruns_it_alone(
    airflow2: AirflowStandin, clock: ManualClock, v1: Api
) -> None:
    run_id = await failed_run(airflow2, v1, clock, failing="load")
    before = await v1.ok("GET", tasks_path(2, run_id))
    assert by_task(before) == {
        "extract": ("success", 1),
        "transform": ("success", 1),
        "load": ("failed", 1),
    }
    body = {"dry_run": False, "dag_run_id": run_id, "only_failed": True, "reset_dag_runs": True}
    cleared = await v1.ok("POST", V1_CLEAR, body)
    assert cleared == {
        "task_instances": [
            {
                "task_id": "load",
                "dag_id": "etl.chain",
                "execution_date": "2024-01-03T00:00:00+00:00",
                "dag_run_id": run_id,
            }
        ]
    }
    clock.advance(RUN_SECONDS)
    after = await v1.ok("GET", tasks_path(2, run_id))
    assert by_task(after) == {
        "extract": ("success", 1),
        "transform": ("success", 1),
        "load": ("success", 2),
    }
    assert after["task_instances"][0] == before["task_instances"][0]
    assert (await v1.ok("GET", run_path(2, run_id)))["state"] == "success"


async def test_v1_clear_task_ids_and_form_errors(
    airflow2: AirflowStandin, clock: ManualClock, v1: Api
) -> None:
    run_id = await failed_run(airflow2, v1, clock, failing="extract")
    chosen = {"dag_run_id": run_id, "task_ids": ["transform"], "include_upstream": True}
    picked = await v1.ok("POST", V1_CLEAR, chosen)
    assert [t["task_id"] for t in picked["task_instances"]] == ["extract", "transform"]

    async def refused(body: dict[str, Any]) -> dict[str, Any]:
        status, answer = await v1.call("POST", V1_CLEAR, body, in_spec=False)  # 400: not listed
        assert status == 400, answer
        return answer  # type: ignore[no-any-return]

    both = await refused({"dag_run_id": run_id, "start_date": z(day(1)), "end_date": z(day(4))})
    assert both["detail"] == (
        "{'_schema': ['Exactly one of dag_run_id or (start_date and end_date) must be provided']}"
    )
    assert_problem(both, 400)
    unknown = await refused({"dag_run_id": run_id, "colour": "red", "task_ids": []})
    assert unknown["detail"] == (
        "{'colour': ['Unknown field.'], 'task_ids': ['Shorter than minimum length 1.']}"
    )
    naive = await refused({"start_date": "2024-01-01T00:00:00", "colour": "red"})
    assert (naive["title"], naive["detail"]) == (
        "Invalid datetime format",
        "Naive datetime is disallowed",
    )
    status, answer = await v1.call("POST", V1_CLEAR, {"dag_run_id": "r9"})
    assert (status, answer["title"]) == (404, "Dag Run id r9 not found in dag etl.chain")


async def test_v1_task_instances_of_a_run(
    airflow2: AirflowStandin, clock: ManualClock, v1: Api
) -> None:
    run_id = await failed_run(airflow2, v1, clock, failing="transform")
    listed = await v1.ok("GET", tasks_path(2, run_id), params=[("limit", "2")])
    assert [t["task_id"] for t in listed["task_instances"]] == ["extract", "transform"]
    assert listed["total_entries"] == 3
    assert listed["task_instances"][0]["execution_date"] == "2024-01-03T00:00:00+00:00"
    upstream = await v1.ok("GET", tasks_path(2, run_id), params=[("state", "upstream_failed")])
    assert [t["task_id"] for t in upstream["task_instances"]] == ["load"]
    # Airflow 2 does not check the run: an unknown one has no task instances.
    assert await v1.ok("GET", tasks_path(2, "nope")) == {"task_instances": [], "total_entries": 0}


# -- assets and datasets --------------------------------------------------------------------------


async def test_v2_assets_filtered_by_any_relation_to_the_dags(
    airflow3: AirflowStandin, v2: Api
) -> None:
    for dag in (PRODUCER, CONSUMER, READER, UNRELATED):
        airflow3.state.add_dag(dag)
    found = await v2.ok("GET", "/api/v2/assets", params=[("dag_ids", "assets.producer")])
    assert [a["uri"] for a in found["assets"]] == ["s3://lake/orders", "s3://lake/items"]
    assert found["total_entries"] == 2
    orders = found["assets"][0]
    assert orders["name"] == orders["uri"]
    assert [p["dag_id"] for p in orders["producing_tasks"]] == ["assets.producer"]
    assert orders["producing_tasks"][0]["task_id"] == "run"
    assert [d["dag_id"] for d in orders["scheduled_dags"]] == ["assets.consumer"]
    # The reader is related to items (scheduled on it) and report (produces it).
    reader = await v2.ok("GET", "/api/v2/assets", params=[("dag_ids", "assets.reader")])
    assert [a["uri"] for a in reader["assets"]] == ["s3://lake/items", "s3://lake/report"]
    both = await v2.ok(
        "GET", "/api/v2/assets", params=[("dag_ids", "assets.consumer,assets.unrelated")]
    )
    assert [a["uri"] for a in both["assets"]] == ["s3://lake/orders", "s3://lake/other"]
    page = await v2.ok("GET", "/api/v2/assets", params=[("limit", "2"), ("offset", "3")])
    assert ([a["id"] for a in page["assets"]], page["total_entries"]) == ([4], 4)
    assert (await v2.ok("GET", "/api/v2/assets", params=[("dag_ids", "nope")]))["assets"] == []


async def test_v1_datasets_count_every_dataset_whatever_the_filter(
    airflow2: AirflowStandin, v1: Api
) -> None:
    for dag in (PRODUCER, CONSUMER, READER, UNRELATED):
        airflow2.state.add_dag(dag)
    found = await v1.ok("GET", "/api/v1/datasets", params=[("dag_ids", "assets.producer")])
    assert [d["uri"] for d in found["datasets"]] == ["s3://lake/orders", "s3://lake/items"]
    assert found["total_entries"] == 4  # as Airflow 2 counts: all datasets
    orders = found["datasets"][0]
    assert [d["dag_id"] for d in orders["consuming_dags"]] == ["assets.consumer"]
    assert [(p["dag_id"], p["task_id"]) for p in orders["producing_tasks"]] == [
        ("assets.producer", "run")
    ]
    assert orders["created_at"].endswith("+00:00")
    both = await v1.ok(
        "GET", "/api/v1/datasets", params=[("dag_ids", "assets.reader,assets.unrelated")]
    )
    assert [d["uri"] for d in both["datasets"]] == [
        "s3://lake/items",
        "s3://lake/report",
        "s3://lake/other",
    ]
    status, answer = await v1.call(
        "GET", "/api/v1/datasets", params=[("order_by", "colour")], in_spec=False
    )
    assert status == 400
    assert "colour" in answer["detail"]
