"""Airflow 3's public API (`/api/v2`) and `POST /auth/token`, as served by Airflow 3.3.2.

Status codes, messages and shapes follow the published spec and, where the spec is silent, the
FastAPI routes of apache/airflow (routes/public/dags.py, dag_run.py; backfills are in
v2_backfills.py, task instances and assets in v2_tasks.py). Where real Airflow departs from its
own spec, the stand-in does what Airflow does (string `detail`s on some 422s, see
v2_backfills.py).
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from standins.airflow import v2_backfills as airflow_v2_backfills
from standins.airflow import v2_tasks as airflow_v2_tasks
from standins.airflow.dags import RUN_STATES
from standins.airflow.http import (
    STATE,
    USER,
    HttpError,
    V2Body,
    body_v2,
    detail,
    invalid,
    ordering_error,
    pydantic_error,
    query_datetime_v2,
    query_int_v2,
    reply,
    sort_key,
)
from standins.airflow.state import DagRun, DagState
from standins.airflow.views import dag_details_v2, dag_v2, run_v2, task_instance_v2

VERSION = "3.3.2"
PAGE_LIMIT, MAX_PAGE_LIMIT = 50, 100
RUN_TYPES = (
    "backfill", "scheduled", "manual", "operator_triggered", "asset_triggered",
    "asset_materialization",
)  # fmt: skip
_RUN_ORDER = {
    "id": lambda r: r.id,
    "state": lambda r: r.state,
    "dag_id": lambda r: r.dag_id,
    "run_id": lambda r: r.run_id,
    "dag_run_id": lambda r: r.run_id,
    "logical_date": lambda r: r.logical_date,
    "partition_date": lambda r: None,
    "run_after": lambda r: r.run_after,
    "start_date": lambda r: r.start_date,
    "end_date": lambda r: r.end_date,
    "updated_at": lambda r: r.updated_at,
    "conf": lambda r: r.conf,
    "duration": lambda r: r.duration,
}
_RANGE_SUFFIXES = ("gte", "gt", "lte", "lt")


def _order_error(name: str) -> HttpError:
    return detail(400, ordering_error(name))


# -- auth, version, health ------------------------------------------------------------------------


async def create_token(request: web.Request) -> web.Response:
    state = request.app[STATE]
    if request.content_type == "application/x-www-form-urlencoded":
        body: Any = dict(await request.post())
    else:
        body = await body_v2(request)
    checked = V2Body(body, extra_forbidden=False)
    checked.field("username", "str")
    checked.field("password", "str")
    values = checked.result()
    expected = request.app[CREDENTIALS]
    if (values["username"], values["password"]) != expected:
        raise detail(401, "Invalid credentials")
    return reply({"access_token": state.tokens.issue(values["username"])}, 201)


CREDENTIALS: web.AppKey[tuple[str, str]] = web.AppKey("airflow_credentials", tuple)


async def version(request: web.Request) -> web.Response:
    return reply({"version": VERSION, "git_version": None})


async def health(request: web.Request) -> web.Response:
    beat = request.app[STATE].now().isoformat()
    return reply(
        {
            "metadatabase": {"status": "healthy"},
            "scheduler": {"status": "healthy", "latest_scheduler_heartbeat": beat},
            "triggerer": {"status": None, "latest_triggerer_heartbeat": None},
            "dag_processor": {"status": "healthy", "latest_dag_processor_heartbeat": beat},
        }
    )


# -- DAGs -----------------------------------------------------------------------------------------


def _dag(request: web.Request) -> DagState:
    dag_id = request.match_info["dag_id"]
    dag = request.app[STATE].dag(dag_id)
    if dag is None:
        raise detail(404, f"The Dag with ID: `{dag_id}` was not found")
    return dag


async def list_dags(request: web.Request) -> web.Response:
    state = request.app[STATE]
    limit = query_int_v2(request, "limit", PAGE_LIMIT, MAX_PAGE_LIMIT)
    offset = query_int_v2(request, "offset", 0)
    dags = state.dag_states()
    if (pattern := request.query.get("dag_id_pattern")) is not None:
        dags = [d for d in dags if pattern.strip("%").lower() in d.dag_id.lower()]
    if (prefix := request.query.get("dag_id_prefix_pattern")) is not None:
        dags = [d for d in dags if d.dag_id.lower().startswith(prefix.lower())]
    if (paused := request.query.get("paused")) is not None:
        wanted = paused.lower() in ("true", "1", "yes", "on")
        dags = [d for d in dags if d.is_paused == wanted]
    order = sort_key(
        request.query.getall("order_by", ["dag_id"]),
        {"dag_id": lambda d: d.dag_id, "dag_display_name": lambda d: d.dag_id},
        _order_error,
    )
    page = order(dags)[offset:][:limit]
    return reply({"dags": [dag_v2(state, d) for d in page], "total_entries": len(dags)})


async def get_dag_details(request: web.Request) -> web.Response:
    return reply(dag_details_v2(request.app[STATE], _dag(request)))


async def get_dag(request: web.Request) -> web.Response:
    return reply(dag_v2(request.app[STATE], _dag(request)))


async def patch_dag(request: web.Request) -> web.Response:
    state = request.app[STATE]
    dag_id = request.match_info["dag_id"]
    mask = request.query.getall("update_mask", [])
    if mask and mask != ["is_paused"]:
        raise detail(400, "Only `is_paused` field can be updated through the REST API")
    checked = V2Body(await body_v2(request))
    checked.field("is_paused", "bool")
    values = checked.result()
    dag = state.dag(dag_id)
    if dag is None:
        raise detail(404, f"Dag with id: {dag_id} was not found")
    state.pause(dag_id, values["is_paused"])
    return reply(dag_v2(state, dag))


# -- dag runs -------------------------------------------------------------------------------------


def _listed(request: web.Request, name: str, allowed: tuple[str, ...], what: str) -> set[str]:
    values = set(request.query.getall(name, []))
    if values - set(allowed):
        raise detail(422, f"Invalid value for {what}. Valid values are {', '.join(allowed)}")
    return values


def _in_range(request: web.Request, runs: list[DagRun], field: str) -> list[DagRun]:
    for suffix in _RANGE_SUFFIXES:
        bound = query_datetime_v2(request, f"{field}_{suffix}")
        if bound is None:
            continue
        keep = []
        for run in runs:
            value = getattr(run, field)
            if value is not None and (
                (suffix == "gte" and value >= bound)
                or (suffix == "gt" and value > bound)
                or (suffix == "lte" and value <= bound)
                or (suffix == "lt" and value < bound)
            ):
                keep.append(run)
        runs = keep
    return runs


async def list_runs(request: web.Request) -> web.Response:
    state = request.app[STATE]
    dag_id = request.match_info["dag_id"]
    if dag_id != "~":
        _dag(request)
    limit = query_int_v2(request, "limit", PAGE_LIMIT, MAX_PAGE_LIMIT)
    offset = query_int_v2(request, "offset", 0)
    runs = state.all_runs(None if dag_id == "~" else dag_id)
    for field in ("run_after", "logical_date", "start_date", "end_date", "updated_at"):
        runs = _in_range(request, runs, field)
    if states := _listed(request, "state", RUN_STATES, "state"):
        runs = [r for r in runs if r.state in states]
    if run_types := _listed(request, "run_type", RUN_TYPES, "run type"):
        runs = [r for r in runs if r.run_type in run_types]
    if (pattern := request.query.get("run_id_pattern")) is not None:
        runs = [r for r in runs if pattern.strip("%").lower() in r.run_id.lower()]
    order = sort_key(request.query.getall("order_by", ["id"]), _RUN_ORDER, _order_error)
    page = order(runs)[offset:][:limit]
    return reply(
        {
            "dag_runs": [run_v2(state, r) for r in page],
            "total_entries": len(runs),
            "total_entries_limit": None,
            "next_cursor": None,
            "previous_cursor": None,
        }
    )


def _run(request: web.Request) -> DagRun:
    dag_id, run_id = request.match_info["dag_id"], request.match_info["dag_run_id"]
    run = request.app[STATE].run(dag_id, run_id)
    if run is None:
        raise detail(
            404, f"The DagRun with dag_id: `{dag_id}` and run_id: `{run_id}` was not found"
        )
    return run


async def get_run(request: web.Request) -> web.Response:
    return reply(run_v2(request.app[STATE], _run(request)))


async def patch_run(request: web.Request) -> web.Response:
    state = request.app[STATE]
    run = _run(request)
    checked = V2Body(await body_v2(request))
    checked.field(
        "state", "enum", default=None, nullable=True, choices=("queued", "success", "failed")
    )
    checked.field("note", "str", default=None, nullable=True)
    values = checked.result()
    mask = set(request.query.getall("update_mask", [])) or set(values)
    if "state" in mask and values["state"] is not None:
        state.set_state(run, values["state"])
    if "note" in mask and isinstance(checked.body, dict) and "note" in checked.body:
        run.note = values["note"]
    state.touch()
    return reply(run_v2(state, run))


async def clear_run(request: web.Request) -> web.Response:
    """`POST /dags/{dag_id}/dagRuns/{dag_run_id}/clear` (3.3.2 routes/public/dag_run.py
    `clear_dag_run`): `DAGRunClearBody` forbids unknown keys and dry-runs by default, answering
    the task instances it would clear; otherwise every task (or, `only_failed`, the failed and
    upstream_failed ones) is cleared, the run goes back to queued, and the run is the answer."""
    state = request.app[STATE]
    run = _run(request)
    checked = V2Body(await body_v2(request))
    checked.field("dry_run", "bool", default=True)
    checked.field("only_failed", "bool", default=False)
    checked.field("run_on_latest_version", "bool", default=False)
    values = checked.result()
    failed = ("failed", "upstream_failed")
    tasks = [t for t in run.tasks.values() if not values["only_failed"] or t.state in failed]
    if values["dry_run"]:
        found = [task_instance_v2(state, run, t) for t in tasks]
        return reply({"task_instances": found, "total_entries": len(found)})
    if values["only_failed"]:
        state.clear_tasks(run, [t.task_id for t in tasks], reset_run=True)
    else:
        state.requeue(run)
    state.touch()
    return reply(run_v2(state, run))


async def trigger_run(request: web.Request) -> web.Response:
    state = request.app[STATE]
    dag_id = request.match_info["dag_id"]
    dag = state.dag(dag_id)
    if dag is None:
        raise detail(404, f"DAG with dag_id: '{dag_id}' not found")
    checked = V2Body(await body_v2(request))
    checked.field("dag_run_id", "str", default=None, nullable=True)
    for name in ("data_interval_start", "data_interval_end", "run_after"):
        checked.field(name, "datetime", default=None, nullable=True)
    checked.field("logical_date", "datetime", nullable=True)
    checked.field("conf", "dict", default=None, nullable=True)
    checked.field("note", "str", default=None, nullable=True)
    checked.field("partition_key", "str", default=None, nullable=True)
    values = checked.result()
    start, end = values["data_interval_start"], values["data_interval_end"]
    if (start is None) != (end is None):
        raise invalid(
            pydantic_error("value_error", ["body"], "Value error, Either both data_interval_start "
                           "and data_interval_end must be provided or both must be None",
                           checked.body)
        )  # fmt: skip
    logical_date, run_after = values["logical_date"], values["run_after"] or state.now()
    interval = None
    if logical_date is not None:
        if start is not None and end is not None:
            interval = (start, end)
        else:
            interval = dag.dag.timetable.infer_manual_data_interval(logical_date)
            run_after = interval[1]
    # The timetable's run id: "manual__" + run_after (the inferred interval's end).
    run_id = values["dag_run_id"] or f"manual__{run_after.isoformat()}"
    clash = state.run(dag_id, run_id) or (logical_date and state.run_at(dag_id, logical_date))
    if clash:
        raise detail(
            409,
            {
                "reason": "Unique constraint violation",
                "statement": "INSERT INTO dag_run (dag_id, run_id, logical_date, ...) VALUES (...)",
                "orig_error": "duplicate key value violates unique constraint "
                + ("dag_run_dag_id_run_id_key" if state.run(dag_id, run_id) else
                   "dag_run_dag_id_logical_date_key"),
            },
        )  # fmt: skip
    run = state.create_run(
        dag_id, run_id, run_type="manual", logical_date=logical_date, interval=interval,
        run_after=run_after, conf=values["conf"], note=values["note"], user=request.get(USER),
    )  # fmt: skip
    state.touch()
    return reply(run_v2(state, run))


PUBLIC_PATHS = frozenset({"/auth/token", "/api/v2/version", "/api/v2/monitor/health"})


def add_routes(app: web.Application) -> None:
    prefix = "/api/v2"
    app.router.add_post("/auth/token", create_token)
    app.router.add_get(f"{prefix}/version", version)
    app.router.add_get(f"{prefix}/monitor/health", health)
    app.router.add_get(f"{prefix}/dags", list_dags)
    app.router.add_get(f"{prefix}/dags/{{dag_id}}", get_dag)
    app.router.add_get(f"{prefix}/dags/{{dag_id}}/details", get_dag_details)
    app.router.add_patch(f"{prefix}/dags/{{dag_id}}", patch_dag)
    app.router.add_get(f"{prefix}/dags/{{dag_id}}/dagRuns", list_runs)
    app.router.add_post(f"{prefix}/dags/{{dag_id}}/dagRuns", trigger_run)
    app.router.add_get(f"{prefix}/dags/{{dag_id}}/dagRuns/{{dag_run_id}}", get_run)
    app.router.add_patch(f"{prefix}/dags/{{dag_id}}/dagRuns/{{dag_run_id}}", patch_run)
    app.router.add_post(f"{prefix}/dags/{{dag_id}}/dagRuns/{{dag_run_id}}/clear", clear_run)
    airflow_v2_backfills.add_routes(app, prefix)
    airflow_v2_tasks.add_routes(app, prefix)
