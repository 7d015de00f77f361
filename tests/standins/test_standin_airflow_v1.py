"""The Airflow stand-in's Airflow 2 stable API (`/api/v1`, basic auth) over real HTTP, every
request and answer validated against v1.yaml (tests/support/airflow_spec.py): DAGs
(with `max_active_runs`, null for a DAG without one), triggered runs with explicit intervals,
PATCHing a run's state (a cancel: queued and running runs fail at once, and a run stopped so
frees its slot), clearing; and the Airflow 2 client reading them.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import aiohttp
import pytest

from bot.clients.airflow import Airflow2Client, AirflowNotFound
from standins.airflow.server import AirflowStandin, ManualClock
from tests.support.airflow_spec import (
    RUN_SECONDS,
    T0,
    Api,
    airflow2,
    assert_problem,
    basic,
    clock,
    day,
    states,
    v1,
    v1_openapi,
    z,
)

# The fixtures imported from airflow_spec_support:
__all__ = ["airflow2", "clock", "v1", "v1_openapi"]


async def test_v1_basic_auth(airflow2: AirflowStandin, v1: Api) -> None:
    async with aiohttp.ClientSession() as anonymous_session:
        anonymous = Api(v1.base, anonymous_session, v1.openapi)
        assert (await anonymous.ok("GET", "/api/v1/version"))["version"] == "2.10.5"
        status, body = await anonymous.call("GET", "/api/v1/dags/etl.daily")
        assert status == 401
        assert body["title"] == "Unauthorized"
        assert anonymous.last_headers["WWW-Authenticate"] == "Basic"
        wrong = {"Authorization": basic("ops", "nope")}
        assert (await anonymous.call("GET", "/api/v1/dags/etl.daily", headers=wrong))[0] == 401
    assert (await v1.ok("GET", "/api/v1/dags/etl.daily"))["is_paused"] is False
    assert ("GET", "/api/v1/dags/etl.daily", 401) in airflow2.state.requests


async def test_v1_dag_get_and_pause(v1: Api) -> None:
    dag = await v1.ok("GET", "/api/v1/dags/etl.daily")
    assert dag["schedule_interval"] == {"__type": "CronExpression", "value": "0 0 * * *"}
    patched = await v1.ok(
        "PATCH",
        "/api/v1/dags/etl.daily",
        {"is_paused": True},
        params=[("update_mask", "is_paused")],
    )
    assert patched["is_paused"] is True
    status, body = await v1.call("PATCH", "/api/v1/dags/etl.daily", {"dag_id": "x"}, in_spec=False)
    assert (status, body["detail"]) == (400, "{'dag_id': ['Unknown field.']}")  # 400: not in spec
    assert_problem(body, 400)
    status, body = await v1.call("GET", "/api/v1/dags/nope")
    assert status == 404
    assert body["title"] == "DAG not found"


# -- Airflow 2 ------------------------------------------------------------------------------------


async def test_v1_dag_details_carry_its_params_as_param_dumps(v1: Api) -> None:
    details = await v1.ok("GET", "/api/v1/dags/etl.weekly/details")
    assert details["params"]["full_refresh"] == {
        "__class": "airflow.models.param.Param",
        "value": False,
        "description": None,
        "schema": {"type": "boolean"},
    }
    status, _ = await v1.call("GET", "/api/v1/dags/nope/details")
    assert status == 404


async def test_v1_trigger_with_an_explicit_interval(clock: ManualClock, v1: Api) -> None:
    body = {
        "dag_run_id": "backfill_bot__1",
        "logical_date": z(day(1)),
        "data_interval_start": z(day(1)),
        "data_interval_end": z(day(2)),
        "conf": {"backfill": True},
        "note": "bot",
    }
    run = await v1.ok("POST", "/api/v1/dags/etl.daily/dagRuns", body)
    assert run["data_interval_start"] == "2024-01-01T00:00:00+00:00"
    assert (run["run_type"], run["state"], run["external_trigger"]) == ("manual", "running", True)
    # Without an interval, Airflow 2 covers the interval ending at the logical date.
    inferred = await v1.ok("POST", "/api/v1/dags/etl.daily/dagRuns", {"logical_date": z(day(5))})
    assert inferred["dag_run_id"] == "manual__2024-01-05T00:00:00+00:00"
    assert (inferred["data_interval_start"], inferred["data_interval_end"]) == (
        "2024-01-04T00:00:00+00:00",
        "2024-01-05T00:00:00+00:00",
    )
    status, body_409 = await v1.call("POST", "/api/v1/dags/etl.daily/dagRuns", body)
    assert status == 409
    assert "logical date: '2024-01-01 00:00:00+00:00' already exists" in (body_409["detail"])
    same_id = {"dag_run_id": "backfill_bot__1", "logical_date": z(day(7))}
    status, body_409 = await v1.call("POST", "/api/v1/dags/etl.daily/dagRuns", same_id)
    assert status == 409
    assert "DAGRun ID: 'backfill_bot__1' already exists" in body_409["detail"]
    half = {"logical_date": z(day(8)), "data_interval_start": z(day(8))}
    status, problem_body = await v1.call("POST", "/api/v1/dags/etl.daily/dagRuns", half)
    assert status == 400
    assert "must be specified together" in problem_body["detail"]
    clock.advance(RUN_SECONDS)
    run_path = "/api/v1/dags/etl.daily/dagRuns/backfill_bot__1"
    assert (await v1.ok("GET", run_path))["state"] == "success"
    status, missing = await v1.call("POST", "/api/v1/dags/nope/dagRuns", {})
    assert status == 404
    assert missing["detail"] == "DAG with dag_id: 'nope' not found"


async def test_v1_patch_state_and_list_filters(airflow2: AirflowStandin, v1: Api) -> None:
    for n in (1, 2, 3):
        await v1.ok(
            "POST",
            "/api/v1/dags/etl.daily/dagRuns",
            {"dag_run_id": f"r{n}", "logical_date": z(day(n))},
        )
    patched = await v1.ok("PATCH", "/api/v1/dags/etl.daily/dagRuns/r2", {"state": "failed"})
    assert patched["state"] == "failed"
    assert patched["end_date"] == T0.isoformat()
    status, body = await v1.call(
        "PATCH", "/api/v1/dags/etl.daily/dagRuns/r2", {"state": "done"}, check_request=False
    )
    assert status == 400
    assert "Must be one of" in body["detail"]
    status, body = await v1.call("PATCH", "/api/v1/dags/etl.daily/dagRuns/r9", {"state": "failed"})
    assert status == 404
    assert body["title"] == "Dag Run id r9 not found in dag etl.daily"
    window = [("execution_date_gte", "2024-01-02T00:00:00+00:00"), ("order_by", "-execution_date")]
    listed = await v1.ok("GET", "/api/v1/dags/etl.daily/dagRuns", params=window)
    assert [r["dag_run_id"] for r in listed["dag_runs"]] == ["r3", "r2"]
    assert listed["total_entries"] == 2
    failed = await v1.ok("GET", "/api/v1/dags/~/dagRuns", params=[("state", "failed")])
    assert [r["dag_run_id"] for r in failed["dag_runs"]] == ["r2"]
    assert (await v1.ok("GET", "/api/v1/dags/nope/dagRuns"))["dag_runs"] == []
    status, body = await v1.call(
        "GET",
        "/api/v1/dags/etl.daily/dagRuns",
        params=[("order_by", "logical_date")],
        in_spec=False,
    )
    assert status == 400
    assert "logical_date" in body["detail"]
    assert_problem(body, 400)


async def test_v1_clear_task_instances_reruns_failed_runs(
    airflow2: AirflowStandin, clock: ManualClock, v1: Api
) -> None:
    airflow2.state.fail_on("etl.weekly", day(7), times=1)
    for sunday in (day(7), datetime(2023, 12, 31, tzinfo=UTC)):
        interval = {"data_interval_start": z(sunday), "data_interval_end": z(sunday + timedelta(7))}
        await v1.ok(
            "POST", "/api/v1/dags/etl.weekly/dagRuns", {"logical_date": z(sunday)} | interval
        )
    clock.advance(RUN_SECONDS)
    runs = (
        await v1.ok(
            "GET", "/api/v1/dags/etl.weekly/dagRuns", params=[("order_by", "execution_date")]
        )
    )["dag_runs"]
    assert states(runs) == ["success", "failed"]

    body = {"start_date": z(day(1)), "end_date": z(day(8))}
    preview = await v1.ok("POST", "/api/v1/dags/etl.weekly/clearTaskInstances", body)
    assert {(t["task_id"], t["dag_run_id"]) for t in preview["task_instances"]} == {
        ("extract", runs[1]["dag_run_id"]),
        ("load", runs[1]["dag_run_id"]),
    }
    assert airflow2.state.runs_of("etl.weekly")[1].state == "failed"  # dry_run defaults to true
    everything = await v1.ok(
        "POST", "/api/v1/dags/etl.weekly/clearTaskInstances", {"only_failed": False}
    )
    assert len(everything["task_instances"]) == 4
    # Airflow 2's reset_dag_runs defaults to false: the tasks are cleared, the run stays failed.
    await v1.ok("POST", "/api/v1/dags/etl.weekly/clearTaskInstances", body | {"dry_run": False})
    assert [r.state for r in airflow2.state.runs_of("etl.weekly")] == ["success", "failed"]
    reset = body | {"dry_run": False, "only_failed": False, "reset_dag_runs": True}
    await v1.ok("POST", "/api/v1/dags/etl.weekly/clearTaskInstances", reset)
    assert [r.state for r in airflow2.state.runs_of("etl.weekly")] == ["success", "running"]
    clock.advance(RUN_SECONDS)
    assert [r.state for r in airflow2.state.runs_of("etl.weekly")] == ["success", "success"]

    # Airflow 2 answers 400 here, a status the spec does not list for this operation.
    both = {"only_failed": True, "only_running": True}
    path = "/api/v1/dags/etl.weekly/clearTaskInstances"
    status, body_400 = await v1.call("POST", path, both, in_spec=False)
    assert status == 400
    assert "only_running both are set" in body_400["detail"]
    assert_problem(body_400, 400)
    status, _ = await v1.call("POST", "/api/v1/dags/nope/clearTaskInstances", {})
    assert status == 404


async def test_v1_clear_one_dag_run(clock: ManualClock, v1: Api) -> None:
    await v1.ok(
        "POST", "/api/v1/dags/etl.daily/dagRuns", {"dag_run_id": "r1", "logical_date": z(day(1))}
    )
    clock.advance(RUN_SECONDS)
    path = "/api/v1/dags/etl.daily/dagRuns/r1/clear"
    preview = await v1.ok("POST", path, {})
    assert [t["task_id"] for t in preview["task_instances"]] == ["run"]
    cleared = await v1.ok("POST", path, {"dry_run": False})
    assert cleared["state"] == "running"
    assert cleared["end_date"] is None


# -- what a capped, cancellable backfill reads and does ------------------------------------------


async def test_v1_dags_report_max_active_runs_and_the_client_reads_it(
    airflow2: AirflowStandin, v1: Api
) -> None:
    assert (await v1.ok("GET", "/api/v1/dags/etl.serial"))["max_active_runs"] == 1
    assert (await v1.ok("GET", "/api/v1/dags/etl.no_limit"))["max_active_runs"] is None
    listed = await v1.ok("GET", "/api/v1/dags")
    assert {d["dag_id"]: d["max_active_runs"] for d in listed["dags"]}["etl.daily"] == 16
    async with Airflow2Client(airflow2.url, "ops", "s3cret") as client:
        assert (await client.get_dag("etl.serial")).max_active_runs == 1
        assert (await client.get_dag("etl.no_limit")).max_active_runs is None
        assert (await client.get_dag("etl.daily")).max_active_runs == 16


async def test_v1_failing_runs_stops_them_and_a_freed_slot_is_filled(
    airflow2: AirflowStandin, clock: ManualClock, v1: Api
) -> None:
    path = "/api/v1/dags/etl.serial/dagRuns"
    for n in (1, 2, 3):
        interval = {"data_interval_start": z(day(n)), "data_interval_end": z(day(n + 1))}
        await v1.ok("POST", path, {"dag_run_id": f"r{n}", "logical_date": z(day(n))} | interval)
    listed = await v1.ok("GET", path, params=[("order_by", "execution_date")])
    assert states(listed["dag_runs"]) == ["running", "queued", "queued"]  # one at a time

    clock.advance(1)
    queued = await v1.ok("PATCH", f"{path}/r3", {"state": "failed"})
    assert (queued["state"], queued["start_date"]) == ("failed", None)
    assert queued["end_date"] == (T0 + timedelta(seconds=1)).isoformat()
    running = await v1.ok("PATCH", f"{path}/r1", {"state": "failed"})
    assert running["state"] == "failed"
    assert running["end_date"] == (T0 + timedelta(seconds=1)).isoformat()
    # The scheduler fills the slot the stopped run left; the run failed while queued never runs.
    clock.advance(RUN_SECONDS)
    listed = await v1.ok("GET", path, params=[("order_by", "execution_date")])
    assert states(listed["dag_runs"]) == ["failed", "success", "failed"]

    async with Airflow2Client(airflow2.url, "ops", "s3cret") as client:
        await client.trigger_dag_run(
            "etl.serial", "r4", logical_date=day(4), data_interval_start=day(4),
            data_interval_end=day(5),
        )  # fmt: skip
        stopped = await client.set_dag_run_state("etl.serial", "r4", "failed")
        assert (stopped.state, stopped.end_date) == ("failed", clock())
        with pytest.raises(AirflowNotFound):
            await client.set_dag_run_state("etl.serial", "r9", "failed")
