"""The Airflow stand-in over real HTTP: Airflow 3's `/api/v2` (JWT) and what both APIs share
(auth failures, outages, one API per stand-in), every request and answer validated against the
published specs (tests/support/airflow_spec.py), and the behaviours of SOURCE.md in
tests/fixtures/airflow. Airflow 2's `/api/v1` is in test_standin_airflow_v1.py.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

import aiohttp
import pytest
from openapi_core import OpenAPI
from openapi_core.datatypes import RequestParameters
from werkzeug.datastructures import Headers

from standins.airflow.server import (
    FOOD_DELIVERY_DAGS,
    AirflowStandin,
    HistoricRun,
    ManualClock,
    food_delivery_history,
    running_airflow_standin,
)
from standins.seeds import food_delivery
from tests.support.airflow_spec import (
    COMPLETION_DELAY,
    RUN_SECONDS,
    T0,
    Api,
    SpecRequest,
    SpecResponse,
    airflow2,
    airflow3,
    basic,
    clock,
    day,
    login,
    states,
    v1,
    v1_openapi,
    v2,
    v2_openapi,
    z,
)

# The fixtures imported from airflow_spec_support:
__all__ = ["airflow2", "airflow3", "clock", "v1", "v1_openapi", "v2", "v2_openapi"]


def backfill_body(**overrides: Any) -> dict[str, Any]:
    body = {"dag_id": "etl.daily", "from_date": z(day(1)), "to_date": z(day(5))}
    return body | overrides


async def runs_v2(api: Api, dag_id: str = "etl.daily", **filters: str) -> list[dict[str, Any]]:
    params = [("order_by", "logical_date"), *filters.items()]
    found: list[dict[str, Any]] = (
        await api.ok("GET", f"/api/v2/dags/{dag_id}/dagRuns", params=params)
    )["dag_runs"]
    return found


# -- authentication -------------------------------------------------------------------------------


async def test_v2_token_public_endpoints_and_401s(airflow3: AirflowStandin, v2: Api) -> None:
    anonymous = Api(v2.base, v2.session, v2.openapi)
    assert (await anonymous.ok("GET", "/api/v2/version"))["version"] == "3.3.2"
    health = await anonymous.ok("GET", "/api/v2/monitor/health")
    assert health["scheduler"]["status"] == "healthy"
    status, body = await anonymous.call("GET", "/api/v2/dags/etl.daily", check_request=False)
    assert (status, body) == (401, {"detail": "Not authenticated"})
    assert anonymous.last_headers["WWW-Authenticate"] == "Bearer"
    bad = await anonymous.call(
        "POST", "/auth/token", {"username": "admin", "password": "no"}, in_spec=False
    )
    assert bad == (401, {"detail": "Invalid credentials"})
    missing = await anonymous.call("POST", "/auth/token", {"username": "admin"}, in_spec=False)
    assert missing[0] == 422
    assert missing[1]["detail"][0]["loc"] == ["body", "password"]

    assert (await v2.ok("GET", "/api/v2/dags/etl.daily"))["dag_id"] == "etl.daily"
    forged = {"Authorization": "Bearer " + v2.headers["Authorization"][7:-4] + "AAAA"}
    status, body = await v2.call("GET", "/api/v2/dags/etl.daily", headers=forged)
    assert (status, body) == (401, {"detail": "Invalid JWT token"})

    airflow3.state.expire_tokens()
    status, body = await v2.call("GET", "/api/v2/dags/etl.daily")
    assert (status, body) == (401, {"detail": "Token Expired"})
    renewed = await login(v2.session, v2.base, "admin", "admin")
    v2.headers["Authorization"] = f"Bearer {renewed}"
    await v2.ok("GET", "/api/v2/dags/etl.daily")
    airflow3.state.revoke_tokens()
    assert (await v2.call("GET", "/api/v2/dags"))[1] == {"detail": "Invalid JWT token"}


async def test_v2_tokens_expire_after_24_hours(clock: ManualClock, v2: Api) -> None:
    clock.advance(timedelta(hours=23, minutes=59).total_seconds())
    await v2.ok("GET", "/api/v2/dags")
    clock.advance(120)
    assert (await v2.call("GET", "/api/v2/dags"))[1] == {"detail": "Token Expired"}


async def test_a_forbidden_user_logs_in_but_gets_403s(
    airflow3: AirflowStandin, airflow2: AirflowStandin, v2: Api, v1: Api
) -> None:
    airflow3.state.forbid()
    airflow2.state.forbid()
    status, body = await v2.call("GET", "/api/v2/dags/etl.daily")
    assert (status, body) == (403, {"detail": "Forbidden"})
    assert await login(v2.session, v2.base, "admin", "admin")  # logging in still works
    assert (await v2.ok("GET", "/api/v2/version"))["version"] == "3.3.2"
    status, body = await v1.call("GET", "/api/v1/dags/etl.daily")
    assert status == 403
    assert body["title"] == "Forbidden"
    assert body["type"].endswith("#section/Errors/PermissionDenied")
    assert (await v1.ok("GET", "/api/v1/version"))["version"] == "2.10.5"
    wrong = {"Authorization": basic("ops", "nope")}  # wrong credentials are still a 401
    assert (await v1.call("GET", "/api/v1/dags/etl.daily", headers=wrong))[0] == 401
    airflow3.state.forbid(False)
    airflow2.state.forbid(False)
    await v2.ok("GET", "/api/v2/dags/etl.daily")
    await v1.ok("GET", "/api/v1/dags/etl.daily")


async def test_an_outage_answers_like_the_proxy_in_front_of_airflow(
    airflow3: AirflowStandin, v2: Api
) -> None:
    airflow3.state.outage(503, times=2)
    for path in ("/api/v2/dags/etl.daily", "/auth/token"):
        status, page = await v2.call("GET", path, in_spec=False)
        assert status == 503
        assert "<title>503 Service Unavailable</title>" in page
        assert v2.last_headers["Content-Type"].startswith("text/html")
    await v2.ok("GET", "/api/v2/dags/etl.daily")
    airflow3.state.outage(429)  # until it ends
    for _ in range(3):
        assert (await v2.call("GET", "/api/v2/version", in_spec=False))[0] == 429
    airflow3.state.end_outage()
    await v2.ok("GET", "/api/v2/version")
    assert [status for _, _, status in airflow3.state.requests[-5:]] == [200, 429, 429, 429, 200]
    with pytest.raises(ValueError, match="429 or a 5xx"):
        airflow3.state.outage(404)


async def test_each_stand_in_serves_one_api(v1: Api, v2: Api) -> None:
    status, body = await v2.call("GET", "/api/v1/dags/etl.daily", in_spec=False)
    assert (status, body) == (404, {"detail": "Not Found"})
    status, body = await v1.call("GET", "/api/v1/nothing/here", in_spec=False)
    assert (status, body["type"], body["title"]) == (404, "about:blank", "Not Found")
    assert (await v1.call("POST", "/auth/token", {}, in_spec=False))[0] == 404
    assert (await v2.call("GET", "/api/v2/nothing", in_spec=False))[0] == 404


# -- DAGs -----------------------------------------------------------------------------------------


async def test_v2_dag_get_list_and_pause(v2: Api) -> None:
    dag = await v2.ok("GET", "/api/v2/dags/etl.weekly")
    assert dag["timetable_summary"] == "0 0 * * 0"
    assert dag["is_paused"] is False
    assert dag["next_dagrun_logical_date"] == z(day(7))  # the Sunday before T0
    status, body = await v2.call("GET", "/api/v2/dags/nope")
    assert (status, body) == (404, {"detail": "The Dag with ID: `nope` was not found"})
    patched = await v2.ok("PATCH", "/api/v2/dags/etl.weekly", {"is_paused": True})
    assert patched["is_paused"] is True
    listed = await v2.ok("GET", "/api/v2/dags", params=[("paused", "true")])
    assert [d["dag_id"] for d in listed["dags"]] == ["etl.paused", "etl.weekly"]
    assert listed["total_entries"] == 2
    status, body = await v2.call(
        "PATCH", "/api/v2/dags/etl.weekly", {"is_paused": "maybe"}, check_request=False
    )
    assert status == 422
    assert body["detail"][0]["type"] == "bool_parsing"
    status, body = await v2.call("PATCH", "/api/v2/dags/nope", {"is_paused": False})
    assert (status, body) == (404, {"detail": "Dag with id: nope was not found"})


async def test_v2_dag_details_carry_its_params_as_param_dumps(v2: Api) -> None:
    details = await v2.ok("GET", "/api/v2/dags/etl.weekly/details")
    assert details["dag_id"] == "etl.weekly"
    assert details["params"]["full_refresh"]["value"] is False
    assert details["params"]["full_refresh"]["schema"] == {"type": "boolean"}
    assert details["params"]["region"]["schema"] == {}
    assert (await v2.ok("GET", "/api/v2/dags/etl.daily/details"))["params"] == {}
    status, _ = await v2.call("GET", "/api/v2/dags/nope/details")
    assert status == 404


# -- Airflow 3 backfills --------------------------------------------------------------------------


async def test_backfill_runs_progress_in_order_within_max_active_runs(
    airflow3: AirflowStandin, clock: ManualClock, v2: Api
) -> None:
    created = await v2.ok("POST", "/api/v2/backfills", backfill_body(max_active_runs=2))
    assert created["completed_at"] is None
    assert created["reprocess_behavior"] == "none"
    runs = await runs_v2(v2)
    assert [r["logical_date"] for r in runs] == [z(day(n)) for n in range(1, 6)]
    first = runs[0]
    assert first["dag_run_id"] == "backfill__2024-01-01T00:00:00+00:00"
    assert (first["run_type"], first["triggered_by"]) == ("backfill", "backfill")
    assert (first["data_interval_start"], first["data_interval_end"]) == (z(day(1)), z(day(2)))
    assert first["run_after"] == z(day(2))
    assert states(runs) == ["running", "running", "queued", "queued", "queued"]

    seen = []
    for _ in range(6):
        clock.advance(RUN_SECONDS / 2)
        current = states(await runs_v2(v2))
        assert current.count("running") <= 2
        seen.append(current)
    assert seen[-1] == ["success"] * 5
    started = [r["start_date"] for r in await runs_v2(v2)]
    assert started == sorted(started)  # started in logical date order
    backfill = await v2.ok("GET", f"/api/v2/backfills/{created['id']}")
    last_end = max(r.end_date for r in airflow3.state.runs_of("etl.daily") if r.end_date)
    assert backfill["completed_at"] is None
    clock.advance(COMPLETION_DELAY)
    backfill = await v2.ok("GET", f"/api/v2/backfills/{created['id']}")
    assert backfill["completed_at"] == z(last_end + timedelta(seconds=COMPLETION_DELAY))
    listed = await v2.ok("GET", "/api/v2/backfills", params=[("dag_id", "etl.daily")])
    assert [b["id"] for b in listed["backfills"]] == [created["id"]]


async def test_second_backfill_conflicts_until_the_first_completes(
    clock: ManualClock, v2: Api
) -> None:
    await v2.ok("POST", "/api/v2/backfills", backfill_body())
    status, body = await v2.call("POST", "/api/v2/backfills", backfill_body(from_date=z(day(6))))
    assert (status, body) == (
        409,
        {"detail": "There is already a running backfill for dag etl.daily"},
    )
    other_dag = backfill_body(dag_id="etl.weekly", from_date=z(datetime(2023, 12, 31, tzinfo=UTC)))
    await v2.ok("POST", "/api/v2/backfills", other_dag)
    clock.advance(RUN_SECONDS + COMPLETION_DELAY)
    again = await v2.ok(
        "POST", "/api/v2/backfills", backfill_body(from_date=z(day(6)), to_date=z(day(7)))
    )
    assert again["completed_at"] is None


async def test_dry_run_reads_from_and_to_as_inclusive_logical_dates(
    airflow3: AirflowStandin, v2: Api
) -> None:
    async def dry(**overrides: Any) -> list[str]:
        found = await v2.ok("POST", "/api/v2/backfills/dry_run", backfill_body(**overrides))
        assert found["total_entries"] == len(found["backfills"])
        return [b["logical_date"] for b in found["backfills"]]

    assert await dry() == [z(day(n)) for n in range(1, 6)]
    # An unaligned from_date starts at the next tick; intervals not yet over are left out.
    assert await dry(from_date="2024-01-01T06:00:00Z", to_date=z(day(20))) == [
        z(day(n)) for n in range(2, 9)
    ]
    weekly = await dry(dag_id="etl.weekly", from_date="2023-12-25T00:00:00Z", to_date=z(day(8)))
    assert weekly == ["2023-12-31T00:00:00Z"]  # Jan 7's week has not ended at T0
    assert await dry(run_backwards=True, to_date=z(day(3))) == [z(day(n)) for n in (3, 2, 1)]
    airflow3.state.add_historic_run(HistoricRun("etl.daily", day(2)))
    airflow3.state.add_historic_run(HistoricRun("etl.daily", day(3), "failed"))
    assert await dry(to_date=z(day(3))) == [z(day(1))]
    assert await dry(to_date=z(day(3)), reprocess_behavior="failed") == [z(day(1)), z(day(3))]
    everything = await dry(to_date=z(day(3)), reprocess_behavior="completed")
    assert everything == [z(day(n)) for n in (1, 2, 3)]
    assert airflow3.state.backfills == []  # a dry run creates nothing


async def test_reprocess_none_over_a_succeeded_range_creates_zero_runs(
    airflow3: AirflowStandin, clock: ManualClock, v2: Api
) -> None:
    for n in range(1, 4):
        airflow3.state.add_historic_run(HistoricRun("etl.daily", day(n)))
    created = await v2.ok("POST", "/api/v2/backfills", backfill_body(to_date=z(day(3))))
    runs = await runs_v2(v2)
    assert states(runs) == ["success"] * 3
    assert {r["run_type"] for r in runs} == {"scheduled"}
    clock.advance(COMPLETION_DELAY)
    done = await v2.ok("GET", f"/api/v2/backfills/{created['id']}")
    assert done["completed_at"] == z(T0 + timedelta(seconds=COMPLETION_DELAY))


async def test_reprocessing_reuses_the_existing_run(
    airflow3: AirflowStandin, clock: ManualClock, v2: Api
) -> None:
    airflow3.state.add_historic_run(HistoricRun("etl.daily", day(1)))
    airflow3.state.add_historic_run(HistoricRun("etl.daily", day(2), "failed"))
    body = backfill_body(
        to_date=z(day(2)), reprocess_behavior="failed", dag_run_conf={"reason": "fix"}
    )
    await v2.ok("POST", "/api/v2/backfills", body)
    runs = await runs_v2(v2)
    assert [(r["dag_run_id"], r["run_type"], r["state"]) for r in runs] == [
        ("scheduled__2024-01-01T00:00:00+00:00", "scheduled", "success"),
        ("scheduled__2024-01-02T00:00:00+00:00", "backfill", "running"),
    ]
    assert runs[1]["conf"] == {"reason": "fix"}
    assert runs[1]["end_date"] is None
    clock.advance(RUN_SECONDS)
    assert states(await runs_v2(v2)) == ["success", "success"]
    backfill_runs = await runs_v2(v2, run_type="backfill")
    assert [r["logical_date"] for r in backfill_runs] == [z(day(2))]


async def test_a_paused_dag_keeps_backfill_runs_queued(
    airflow3: AirflowStandin, clock: ManualClock, v2: Api
) -> None:
    await v2.ok("POST", "/api/v2/backfills", backfill_body(dag_id="etl.paused", to_date=z(day(2))))
    clock.advance(RUN_SECONDS * 5)
    assert states(await runs_v2(v2, "etl.paused")) == ["queued", "queued"]
    await v2.ok("PATCH", "/api/v2/dags/etl.paused", {"is_paused": False})
    assert states(await runs_v2(v2, "etl.paused")) == ["running", "running"]
    airflow3.state.pause("etl.paused")  # running runs finish; nothing new starts
    clock.advance(RUN_SECONDS)
    assert states(await runs_v2(v2, "etl.paused")) == ["success", "success"]


async def test_pause_and_cancel_a_backfill(clock: ManualClock, v2: Api) -> None:
    created = await v2.ok("POST", "/api/v2/backfills", backfill_body(max_active_runs=1))
    path = f"/api/v2/backfills/{created['id']}"
    paused = await v2.ok("PUT", f"{path}/pause")
    assert paused["is_paused"] is True
    clock.advance(RUN_SECONDS)
    assert states(await runs_v2(v2)) == ["success"] + ["queued"] * 4  # the running one finished
    await v2.ok("PUT", f"{path}/unpause")
    assert states(await runs_v2(v2)) == ["success", "running"] + ["queued"] * 3

    cancelled = await v2.ok("PUT", f"{path}/cancel")
    assert cancelled["completed_at"] == z(clock.now)
    assert cancelled["is_paused"] is True
    assert states(await runs_v2(v2)) == ["success", "running"] + ["failed"] * 3
    clock.advance(RUN_SECONDS)
    assert states(await runs_v2(v2)) == ["success", "success"] + ["failed"] * 3
    status, body = await v2.call("PUT", f"{path}/cancel")
    assert (status, body) == (409, {"detail": "Backfill is already completed."})
    assert (await v2.call("PUT", f"{path}/pause"))[0] == 409
    status, body = await v2.call("PUT", "/api/v2/backfills/99/cancel")
    assert (status, body) == (404, {"detail": "Could not find backfill with id 99"})
    assert (await v2.call("GET", "/api/v2/backfills/99"))[1] == {"detail": "Backfill not found"}


async def test_fail_on_and_fail_always(
    airflow3: AirflowStandin, clock: ManualClock, v2: Api
) -> None:
    airflow3.state.fail_on("etl.daily", day(2))
    created = await v2.ok("POST", "/api/v2/backfills", backfill_body(to_date=z(day(3))))
    clock.advance(RUN_SECONDS + COMPLETION_DELAY)
    assert states(await runs_v2(v2)) == ["success", "failed", "success"]
    assert (await v2.ok("GET", f"/api/v2/backfills/{created['id']}"))["completed_at"]
    failed = await runs_v2(v2, state="failed")
    assert [r["logical_date"] for r in failed] == [z(day(2))]

    airflow3.state.fail_always("etl.weekly")
    weekly = backfill_body(dag_id="etl.weekly", from_date="2023-12-24T00:00:00Z", to_date=z(day(9)))
    await v2.ok("POST", "/api/v2/backfills", weekly)
    clock.advance(RUN_SECONDS)
    assert states(await runs_v2(v2, "etl.weekly")) == ["failed", "failed"]


async def test_backfill_request_errors(airflow3: AirflowStandin, v2: Api) -> None:
    status, body = await v2.call("POST", "/api/v2/backfills", backfill_body(dag_id="nope"))
    assert (status, body) == (404, {"detail": "Could not find dag nope"})
    status, body = await v2.call(
        "POST", "/api/v2/backfills", {"dag_id": "etl.daily", "x": 1}, check_request=False
    )
    assert status == 422
    problems = {(e["type"], tuple(e["loc"])) for e in body["detail"]}
    assert problems == {
        ("missing", ("body", "from_date")),
        ("missing", ("body", "to_date")),
        ("extra_forbidden", ("body", "x")),
    }
    status, body = await v2.call(
        "POST", "/api/v2/backfills", backfill_body(reprocess_behavior="all"), check_request=False
    )
    assert status == 422
    assert body["detail"][0]["type"] == "enum"
    future = backfill_body(from_date=z(day(20)), to_date=z(day(25)))
    status, body = await v2.call("POST", "/api/v2/backfills", future, string_422=True)
    assert body == {"detail": "Backfill cannot be executed for future dates."}
    backwards = backfill_body(from_date=z(day(5)), to_date=z(day(1)))
    await v2.call("POST", "/api/v2/backfills/dry_run", backwards, string_422=True)
    # A range holding no tick: Airflow's RuntimeError (500) after it stored the backfill.
    empty = backfill_body(from_date="2024-01-02T01:00:00Z", to_date="2024-01-02T02:00:00Z")
    assert (await v2.call("POST", "/api/v2/backfills", empty, in_spec=False))[0] == 500
    assert len(airflow3.state.backfills) == 1
    assert (await v2.call("GET", "/api/v2/backfills", check_request=False))[0] == 422
    assert (await v2.call("GET", "/api/v2/backfills/abc", check_request=False))[0] == 422


# -- Airflow 3 dag runs ---------------------------------------------------------------------------


async def test_v2_dag_run_list_filters_and_get(clock: ManualClock, v2: Api) -> None:
    await v2.ok("POST", "/api/v2/backfills", backfill_body(max_active_runs=1))
    clock.advance(RUN_SECONDS * 2)
    runs_path = "/api/v2/dags/etl.daily/dagRuns"
    page = await v2.ok(
        "GET", runs_path, params=[("order_by", "-logical_date"), ("limit", "2"), ("offset", "1")]
    )
    assert [r["logical_date"] for r in page["dag_runs"]] == [z(day(4)), z(day(3))]
    assert page["total_entries"] == 5
    window = [("logical_date_gte", z(day(2))), ("logical_date_lte", z(day(3)))]
    assert len((await v2.ok("GET", runs_path, params=window))["dag_runs"]) == 2
    done = await v2.ok("GET", runs_path, params=[("state", "success"), ("state", "running")])
    assert states(done["dag_runs"]) == ["success", "success", "running"]
    assert (await v2.ok("GET", runs_path, params=[("run_type", "manual")]))["dag_runs"] == []
    everywhere = await v2.ok("GET", "/api/v2/dags/~/dagRuns")
    assert everywhere["total_entries"] == 5
    run_id = quote("backfill__2024-01-01T00:00:00+00:00", safe="")
    one = await v2.ok("GET", f"{runs_path}/{run_id}")
    assert one["state"] == "success"
    assert one["duration"] == RUN_SECONDS
    status, body = await v2.call("GET", f"{runs_path}/nope")
    assert body == {
        "detail": "The DagRun with dag_id: `etl.daily` and run_id: `nope` was not found"
    }
    status, body = await v2.call("GET", runs_path, params=[("order_by", "colour")])
    assert status == 400
    assert "colour" in body["detail"]
    await v2.call("GET", runs_path, params=[("state", "done")], string_422=True)
    assert (await v2.call("GET", "/api/v2/dags/nope/dagRuns"))[0] == 404


async def test_v2_trigger_and_patch_a_run(clock: ManualClock, v2: Api) -> None:
    body = {"logical_date": z(day(3)), "conf": {"a": 1}, "note": "by hand"}
    run = await v2.ok("POST", "/api/v2/dags/etl.daily/dagRuns", body)
    assert (run["data_interval_start"], run["data_interval_end"]) == (z(day(2)), z(day(3)))
    assert (run["run_type"], run["state"], run["note"]) == ("manual", "running", "by hand")
    status, conflict = await v2.call("POST", "/api/v2/dags/etl.daily/dagRuns", body)
    assert status == 409
    assert conflict["detail"]["reason"] == "Unique constraint violation"
    path = f"/api/v2/dags/etl.daily/dagRuns/{quote(run['dag_run_id'], safe='')}"
    failed = await v2.ok("PATCH", path, {"state": "failed"})
    assert failed["state"] == "failed"
    assert failed["end_date"] == z(T0)
    queued = await v2.ok("PATCH", path, {"state": "queued"})
    assert queued["state"] == "running"  # cleared: queued, then started at once


# -- the food_delivery set ------------------------------------------------------------------------


def test_food_delivery_dags_match_the_marquez_seed() -> None:
    dag_jobs: dict[str, tuple[str, str]] = {}
    for event in food_delivery.food_delivery_events():
        facets = event["run"].get("facets", {})
        if event["eventType"] == "START" and "parent" not in facets:
            nominal = facets["nominalTime"]
            dag_jobs[event["job"]["name"]] = (
                nominal["nominalStartTime"],
                nominal["nominalEndTime"],
            )
    by_id = {dag.dag_id: dag for dag in FOOD_DELIVERY_DAGS}
    assert set(by_id) == set(dag_jobs)
    for dag_id, (start, end) in dag_jobs.items():
        begin = datetime.fromisoformat(start.replace("Z", "+00:00"))
        interval = by_id[dag_id].timetable.interval(begin)
        assert z(interval[0]).replace("Z", ".000Z") == start, dag_id
        assert z(interval[1]).replace("Z", ".000Z") == end, dag_id


async def test_food_delivery_history_on_the_stand_in(v2_openapi: OpenAPI) -> None:
    async with (
        running_airflow_standin(dags=FOOD_DELIVERY_DAGS, history=food_delivery_history()) as server,
        aiohttp.ClientSession() as session,
    ):
        token = await login(session, server.url, "admin", "admin")
        api = Api(server.url, session, v2_openapi, {"Authorization": f"Bearer {token}"})
        body = {
            "dag_id": "example.etl_orders",
            "from_date": "2021-05-24T00:00:00Z",
            "to_date": "2021-06-13T00:00:00Z",
            "reprocess_behavior": "failed",
        }
        found = await api.ok("POST", "/api/v2/backfills/dry_run", body)
        assert [b["logical_date"] for b in found["backfills"]] == [
            "2021-06-04T00:00:00Z",
            "2021-06-05T00:00:00Z",
            "2021-06-06T00:00:00Z",
        ]
        weekly = await api.ok("GET", "/api/v2/dags/reporting.weekly_kpis/dagRuns")
        assert weekly["total_entries"] == 3


def test_the_validator_rejects_wrong_shapes(v1_openapi: OpenAPI, v2_openapi: OpenAPI) -> None:
    def check(openapi: OpenAPI, path: str, status: int, body: Any) -> None:
        request = SpecRequest(path, RequestParameters(), "get", None)
        headers = Headers({"Content-Type": "application/json"})
        response = SpecResponse(status, json.dumps(body).encode(), "application/json", headers)
        openapi.validate_response(request, response)

    backfill = {
        "id": 1,
        "dag_id": "d",
        "from_date": z(T0),
        "to_date": z(T0),
        "dag_run_conf": None,
        "is_paused": False,
        "reprocess_behavior": "none",
        "max_active_runs": 1,
        "created_at": z(T0),
        "completed_at": None,
        "updated_at": z(T0),
        "dag_display_name": "d",
    }
    check(v2_openapi, "/api/v2/backfills/1", 200, backfill)
    for broken in (
        backfill | {"reprocess_behavior": "all"},
        backfill | {"created_at": "now"},
        {k: v for k, v in backfill.items() if k != "completed_at"},
    ):
        with pytest.raises(Exception):  # noqa: B017, PT011 - openapi-core's error types vary
            check(v2_openapi, "/api/v2/backfills/1", 200, broken)
    with pytest.raises(Exception):  # noqa: B017, PT011
        check(v2_openapi, "/api/v2/backfills/1", 422, {"detail": "a string"})
    with pytest.raises(Exception):  # noqa: B017, PT011
        check(v1_openapi, "/api/v1/dags/d", 404, {"title": "no type or status"})
