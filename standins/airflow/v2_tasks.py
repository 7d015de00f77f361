"""Airflow 3's task instance and asset endpoints: `POST /dags/{dag_id}/clearTaskInstances`,
`GET /dags/{dag_id}/dagRuns/{dag_run_id}/taskInstances` (routes/public/task_instances.py) and
`GET /assets` (routes/public/assets.py), as served by 3.3.2.

`ClearTaskInstancesBody` forbids unknown keys and wants timezone-aware dates; its
`model_validator(mode="before")` reads the raw JSON first, so its one error (`value_error`,
located at the body) comes before any field's, and it judges by truthiness: `only_running`
alone passes, and then both states are cleared. Which task instances: clearing.py.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from standins.airflow import assets, clearing
from standins.airflow.http import (
    STATE,
    HttpError,
    V2Body,
    body_v2,
    detail,
    invalid,
    ordering_error,
    pydantic_error,
    query_int_v2,
    reply,
    sort_key,
)
from standins.airflow.views import asset_v2, task_instance_v2

PAGE_LIMIT, MAX_PAGE_LIMIT = 50, 100
_RUNNING_CLEARED = (
    "AirflowClearRunningTaskException: Disable 'prevent_running_task' to proceed, or wait until "
    "the task is not running, queued, or scheduled state."
)
_ASSET_ORDER = {
    "id": lambda a: a.id,
    "name": lambda a: a.uri,
    "uri": lambda a: a.uri,
    "created_at": lambda a: a.created_at,
    "updated_at": lambda a: a.created_at,
}


def _order_error(name: str) -> HttpError:
    return detail(400, ordering_error(name))


def _before_validator(body: dict[str, Any]) -> str | None:
    """`ClearTaskInstancesBody.validate_model`: the first rule the raw body breaks."""
    start, end, run_id = body.get("start_date"), body.get("end_date"), body.get("dag_run_id")
    if body.get("only_failed") and body.get("only_running"):
        return "only_failed and only_running both are set to True"
    if isinstance(start, str) and isinstance(end, str) and start and end and start > end:
        return "end_date is sooner than start_date"  # compared as strings, before parsing
    if start and end and run_id:
        return "Exactly one of dag_run_id or (start_date and end_date) must be provided"
    if start and run_id:
        return "Exactly one of dag_run_id or start_date must be provided"
    if end and run_id:
        return "Exactly one of dag_run_id or end_date must be provided"
    if isinstance(body.get("task_ids"), list) and not body["task_ids"]:
        return "task_ids list should have at least 1 element."
    return None


async def _clear_body(request: web.Request) -> dict[str, Any]:
    body = await body_v2(request)
    if isinstance(body, dict) and (problem := _before_validator(body)) is not None:
        error = pydantic_error("value_error", ["body"], f"Value error, {problem}", body)
        raise invalid(error | {"ctx": {"error": {}}})
    checked = V2Body(body)
    checked.field("dry_run", "bool", default=True)
    checked.field("start_date", "aware_datetime", default=None, nullable=True)
    checked.field("end_date", "aware_datetime", default=None, nullable=True)
    for name, default in (("only_failed", True), ("only_running", False),
                          ("reset_dag_runs", True), ("include_upstream", False),
                          ("include_downstream", False), ("include_future", False),
                          ("include_past", False), ("prevent_running_task", False)):  # fmt: skip
        checked.field(name, "bool", default=default)
    checked.field("task_ids", "str_list", default=None, nullable=True)
    checked.field("dag_run_id", "str", default=None, nullable=True)
    checked.field("run_on_latest_version", "bool", default=None, nullable=True)
    checked.field("note", "str", default=None, nullable=True, max_length=1000)
    return checked.result()


async def clear_task_instances(request: web.Request) -> web.Response:
    state = request.app[STATE]
    values = await _clear_body(request)
    dag_id = request.match_info["dag_id"]
    if state.dag(dag_id) is None:
        raise detail(404, f"The Dag with ID: `{dag_id}` was not found")
    task_ids = values["task_ids"]
    wanted = clearing.ClearRequest(
        dag_id=dag_id, dag_run_id=values["dag_run_id"], start_date=values["start_date"],
        end_date=values["end_date"], only_failed=values["only_failed"],
        only_running=values["only_running"],
        task_ids=None if task_ids is None else tuple(task_ids),
        include_upstream=values["include_upstream"],
        include_downstream=values["include_downstream"], include_past=values["include_past"],
        include_future=values["include_future"],
    )  # fmt: skip
    try:
        selected = clearing.select(state, wanted)
    except clearing.ClearError as exc:
        if exc.kind == "run":
            raise detail(
                404, f"Dag Run id {values['dag_run_id']} not found in dag {dag_id}"
            ) from exc
        raise detail(
            400,
            "Cannot use include_past or include_future with no logical_date(e.g. manually or "
            "asset-triggered).",
        ) from exc
    if not values["dry_run"]:
        if values["prevent_running_task"] and any(t.state == "running" for _, t in selected):
            raise detail(409, _RUNNING_CLEARED)
        clearing.clear(state, selected, reset_dag_runs=values["reset_dag_runs"])
        if values["note"] is not None:
            for _, task in selected:
                task.note = values["note"]
    found = [task_instance_v2(state, run, task) for run, task in selected]
    state.touch()
    return reply({"task_instances": found, "total_entries": len(found)})


async def list_task_instances(request: web.Request) -> web.Response:
    """One run's task instances, in the DAG's order (the default order, `map_index`, is -1 for
    all); filtered by `state` (repeated) and `task_id`."""
    state = request.app[STATE]
    dag_id, run_id = request.match_info["dag_id"], request.match_info["dag_run_id"]
    limit = query_int_v2(request, "limit", PAGE_LIMIT, MAX_PAGE_LIMIT)
    offset = query_int_v2(request, "offset", 0)
    run = state.run(dag_id, run_id)
    if run is None:
        raise detail(404, f"DagRun with dag_id: `{dag_id}` and run_id: `{run_id}` was not found")
    tasks = list(run.tasks.values())
    if states := request.query.getall("state", []):
        # "none" asks for task instances without a state, as in Airflow's state filter
        tasks = [t for t in tasks if (t.state or "none") in states]
    if (task_id := request.query.get("task_id")) is not None:
        tasks = [t for t in tasks if t.task_id == task_id]
    page = [task_instance_v2(state, run, t) for t in tasks[offset:][:limit]]
    return reply(
        {
            "task_instances": page,
            "total_entries": len(tasks),
            "total_entries_limit": None,
            "next_cursor": None,
            "previous_cursor": None,
        }
    )


def _contains(pattern: str | None, value: str) -> bool:
    return pattern is None or pattern.strip("%").lower() in value.lower()


async def list_assets(request: web.Request) -> web.Response:
    """Assets, `dag_ids` keeping those any of the DAGs produces, is scheduled on or reads
    (`dag_ids=a,b` is split as `dag_ids=a&dag_ids=b`)."""
    state = request.app[STATE]
    limit = query_int_v2(request, "limit", PAGE_LIMIT, MAX_PAGE_LIMIT)
    offset = query_int_v2(request, "offset", 0)
    dag_ids = request.query.getall("dag_ids", [])
    if len(dag_ids) == 1 and "," in dag_ids[0]:
        dag_ids = dag_ids[0].split(",")
    found = assets.index(state.dag_states())
    if dag_ids:
        found = [a for a in found if a.related_to(dag_ids)]
    uri_pattern, name_pattern = request.query.get("uri_pattern"), request.query.get("name_pattern")
    found = [a for a in found if _contains(uri_pattern, a.uri) and _contains(name_pattern, a.uri)]
    order = sort_key(request.query.getall("order_by", ["id"]), _ASSET_ORDER, _order_error)
    page = order(found)[offset:][:limit]
    return reply({"assets": [asset_v2(a) for a in page], "total_entries": len(found)})


def add_routes(app: web.Application, prefix: str) -> None:
    app.router.add_post(f"{prefix}/dags/{{dag_id}}/clearTaskInstances", clear_task_instances)
    app.router.add_get(
        f"{prefix}/dags/{{dag_id}}/dagRuns/{{dag_run_id}}/taskInstances", list_task_instances
    )
    app.router.add_get(f"{prefix}/assets", list_assets)
