"""Airflow 2's stable REST API (`/api/v1`, Airflow 2.10.5), the parts a backfill needs.

Airflow 2 has no backfill endpoint: backfills trigger one dag run per interval (with an explicit
data interval) or clear existing runs. Messages and shapes follow api_connexion's endpoints and
marshmallow schemas: body errors are 400 Problem JSON whose `detail` is the str() of
marshmallow's error dict; query parameter type errors are connexion's `about:blank` problems.
Wrong or missing credentials answer 401 as in 2.10.5 (observed); a real 2.11.2 answers them 403
PermissionDenied (tests/airflow/test_airflow2_client.py), which the client treats alike.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from aiohttp import web

from standins.airflow import assets, clearing
from standins.airflow.http import (
    STATE,
    HttpError,
    is_naive,
    json_body,
    ordering_error,
    parse_datetime,
    problem,
    reply,
    sort_key,
)
from standins.airflow.state import DagRun, DagState
from standins.airflow.views import (
    dag_details_v1,
    dag_v1,
    dataset_v1,
    run_v1,
    task_instance_v1,
    task_reference_v1,
)

VERSION = "2.10.5"
MAX_PAGE_LIMIT = 100
_RUN_ORDER = {
    "id": lambda r: r.id,
    "state": lambda r: r.state,
    "dag_id": lambda r: r.dag_id,
    "execution_date": lambda r: r.logical_date,
    "dag_run_id": lambda r: r.run_id,
    "start_date": lambda r: r.start_date,
    "end_date": lambda r: r.end_date,
    "external_trigger": lambda r: r.external_trigger,
    "conf": lambda r: r.conf,
}
_RUN_FIELDS = ("dag_run_id", "logical_date", "execution_date", "data_interval_start",
               "data_interval_end", "conf", "note")  # fmt: skip
_DATASET_ORDER = {
    "id": lambda a: a.id,
    "uri": lambda a: a.uri,
    "created_at": lambda a: a.created_at,
    "updated_at": lambda a: a.created_at,
}
_CLEAR_FIELDS = (
    *("dry_run", "task_ids", "start_date", "end_date", "only_failed", "only_running"),
    *("include_subdags", "include_parentdag", "reset_dag_runs", "dag_run_id"),
    *("include_upstream", "include_downstream", "include_future", "include_past"),
)


def _blank(status: int, title: str, text: str) -> HttpError:
    """connexion's own validation problems (`type: about:blank`)."""
    body = {"detail": text, "status": status, "title": title, "type": "about:blank"}
    return HttpError(status, body, content_type="application/problem+json")


def _bad_body(errors: dict[str, list[str]]) -> HttpError:
    return problem(400, detail=str(errors))


async def _object(request: web.Request) -> dict[str, Any]:
    body, error = await json_body(request)
    if error == "empty":
        raise _blank(400, "Bad Request", "Request body must not be empty")
    if error is not None:
        raise _blank(400, "Bad Request", "Request body is not valid JSON")
    if not isinstance(body, dict):
        raise _blank(400, "Bad Request", f"{body!r} is not of type 'object'")
    return body


def _unknown(body: dict[str, Any], allowed: tuple[str, ...]) -> dict[str, list[str]]:
    return {k: ["Unknown field."] for k in body if k not in allowed}


def _when(body: dict[str, Any], name: str, errors: dict[str, list[str]]) -> datetime | None:
    raw = body.get(name)
    if raw is None:
        return None
    parsed = parse_datetime(raw) if isinstance(raw, str) else None
    if parsed is None:
        errors[name] = ["Not a valid datetime."]
    return parsed


def _flag(body: dict[str, Any], name: str, default: bool, errors: dict[str, list[str]]) -> bool:
    value = body.get(name, default)
    if not isinstance(value, bool):
        errors[name] = ["Not a valid boolean."]
        return default
    return value


# -- query parameters -----------------------------------------------------------------------------


def _int(request: web.Request, name: str, default: int) -> int:
    raw = request.query.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise _blank(400, "Bad Request", f"'{raw}' is not of type 'integer'") from None
    if name == "offset" and value < 0:
        raise _blank(400, "Bad Request", f"{value} is less than the minimum of 0")
    if name == "limit":
        if value < 0:
            raise problem(400, "Page limit must be a positive integer")
        value = MAX_PAGE_LIMIT if value in (0,) or value > MAX_PAGE_LIMIT else value
    return value


def _date(request: web.Request, name: str) -> datetime | None:
    raw = request.query.get(name)
    if raw is None:
        return None
    text = raw.strip()
    if not text.endswith("Z"):
        text = text.replace(" ", "+")  # an unencoded "+" in a query string reads as a space
    parsed = parse_datetime(text)
    if parsed is None:
        raise problem(400, "Incorrect datetime argument", f"Unable to parse string [{raw}]")
    return parsed


def _order(request: web.Request, default: str, allowed: dict[str, Any]) -> Any:
    entry = request.query.get("order_by", default)
    return sort_key([entry], allowed, lambda name: problem(400, detail=ordering_error(name)))


# -- endpoints ------------------------------------------------------------------------------------


async def version(request: web.Request) -> web.Response:
    return reply({"version": VERSION, "git_version": None})


async def health(request: web.Request) -> web.Response:
    beat = request.app[STATE].now().isoformat()
    return reply(
        {
            "metadatabase": {"status": "healthy"},
            "scheduler": {"status": "healthy", "latest_scheduler_heartbeat": beat},
            "triggerer": {"status": None, "latest_triggerer_heartbeat": None},
            "dag_processor": {"status": None, "latest_dag_processor_heartbeat": None},
        }
    )


def _dag(request: web.Request) -> DagState:
    dag_id = request.match_info["dag_id"]
    dag = request.app[STATE].dag(dag_id)
    if dag is None:
        raise problem(404, "DAG not found", f"The DAG with dag_id: {dag_id} was not found")
    return dag


async def list_dags(request: web.Request) -> web.Response:
    state = request.app[STATE]
    limit, offset = _int(request, "limit", 100), _int(request, "offset", 0)
    dags = state.dag_states()
    if (pattern := request.query.get("dag_id_pattern")) is not None:
        dags = [d for d in dags if pattern.lower() in d.dag_id.lower()]
    if (paused := request.query.get("paused")) is not None:
        dags = [d for d in dags if d.is_paused == (paused.lower() == "true")]
    order = _order(request, "dag_id", {"dag_id": lambda d: d.dag_id})
    page = order(dags)[offset:][:limit]
    return reply({"dags": [dag_v1(state, d) for d in page], "total_entries": len(dags)})


async def get_dag_details(request: web.Request) -> web.Response:
    return reply(dag_details_v1(request.app[STATE], _dag(request)))


async def get_dag(request: web.Request) -> web.Response:
    return reply(dag_v1(request.app[STATE], _dag(request)))


async def patch_dag(request: web.Request) -> web.Response:
    state = request.app[STATE]
    body = await _object(request)
    errors = _unknown(body, ("is_paused",))
    paused = _flag(body, "is_paused", False, errors)
    if "is_paused" not in body and not errors:
        errors["is_paused"] = ["Missing data for required field."]
    if errors:
        raise _bad_body(errors)
    mask = [m for raw in request.query.getall("update_mask", []) for m in raw.split(",") if m]
    if mask and mask != ["is_paused"]:
        raise problem(400, detail="Only `is_paused` field can be updated through the REST API")
    dag_id = request.match_info["dag_id"]
    dag = state.dag(dag_id)
    if dag is None:
        raise problem(404, f"Dag with id: '{dag_id}' not found")
    state.pause(dag_id, paused)
    return reply(dag_v1(state, dag))


def _filtered(request: web.Request, runs: list[DagRun]) -> list[DagRun]:
    for name, field in (("execution_date", "logical_date"), ("start_date", "start_date"),
                        ("end_date", "end_date"), ("updated_at", "updated_at")):  # fmt: skip
        low, high = _date(request, f"{name}_gte"), _date(request, f"{name}_lte")
        if low is not None:
            runs = [r for r in runs if (v := getattr(r, field)) is not None and v >= low]
        if high is not None:
            runs = [r for r in runs if (v := getattr(r, field)) is not None and v <= high]
    if states := request.query.getall("state", []):
        runs = [r for r in runs if r.state in states]
    return runs


async def list_runs(request: web.Request) -> web.Response:
    # Airflow 2 does not check that the DAG exists here: an unknown DAG lists no runs.
    state = request.app[STATE]
    dag_id = request.match_info["dag_id"]
    limit, offset = _int(request, "limit", 100), _int(request, "offset", 0)
    runs = _filtered(request, state.all_runs(None if dag_id == "~" else dag_id))
    page = _order(request, "id", _RUN_ORDER)(runs)[offset:][:limit]
    return reply({"dag_runs": [run_v1(r) for r in page], "total_entries": len(runs)})


async def trigger_run(request: web.Request) -> web.Response:
    state = request.app[STATE]
    dag_id = request.match_info["dag_id"]
    dag = state.dag(dag_id)
    if dag is None:
        raise problem(404, "DAG not found", f"DAG with dag_id: '{dag_id}' not found")
    body = await _object(request)
    errors = _unknown(body, _RUN_FIELDS)
    logical, legacy = _when(body, "logical_date", errors), _when(body, "execution_date", errors)
    start, end = (
        _when(body, "data_interval_start", errors),
        _when(body, "data_interval_end", errors),
    )
    for name, kind, message in (("dag_run_id", str, "Not a valid string."),
                                ("note", str, "Not a valid string."),
                                ("conf", dict, "Not a valid mapping type.")):  # fmt: skip
        if body.get(name) is not None and not isinstance(body[name], kind):
            errors[name] = [message]
    if logical is not None and legacy is not None and logical != legacy:
        errors.setdefault("_schema", []).append("logical_date conflicts with execution_date")
    if (start is None) != (end is None):
        errors.setdefault("_schema", []).append(
            "Both 'data_interval_start' and 'data_interval_end' must be specified together"
        )
    if errors:
        raise _bad_body(errors)
    logical_date = logical or legacy or state.now()
    run_id = body.get("dag_run_id") or f"manual__{logical_date.isoformat()}"
    if state.run_at(dag_id, logical_date) is not None:
        raise problem(409, detail=f"DAGRun with DAG ID: '{dag_id}' and DAGRun logical date: "
                      f"'{logical_date.isoformat(sep=' ')}' already exists")  # fmt: skip
    if state.run(dag_id, run_id) is not None:
        raise problem(409, detail=f"DAGRun with DAG ID: '{dag_id}' and DAGRun ID: '{run_id}' "
                      "already exists")  # fmt: skip
    if start is not None and end is not None:
        interval = (start, end)
    else:  # Airflow 2 then covers the interval *ending* at the logical date
        interval = dag.dag.timetable.infer_manual_data_interval(logical_date)
    run = state.create_run(
        dag_id, run_id, run_type="manual", logical_date=logical_date, interval=interval,
        run_after=logical_date, conf=body.get("conf"), note=body.get("note"),
    )  # fmt: skip
    state.touch()
    return reply(run_v1(run))


def _run(request: web.Request, not_found: str | None = None) -> DagRun:
    dag_id, run_id = request.match_info["dag_id"], request.match_info["dag_run_id"]
    run = request.app[STATE].run(dag_id, run_id)
    if run is None:
        if not_found is not None:
            raise problem(404, not_found)
        message = f"DAGRun with DAG ID: '{dag_id}' and DagRun ID: '{run_id}' not found"
        raise problem(404, "DAGRun not found", message)
    return run


async def get_run(request: web.Request) -> web.Response:
    return reply(run_v1(_run(request)))


async def patch_run(request: web.Request) -> web.Response:
    state = request.app[STATE]
    dag_id, run_id = request.match_info["dag_id"], request.match_info["dag_run_id"]
    run = _run(request, f"Dag Run id {run_id} not found in dag {dag_id}")
    body = await _object(request)
    errors = _unknown(body, ("state",))
    if "state" not in body:
        errors["state"] = ["Missing data for required field."]
    elif body["state"] not in ("success", "failed", "queued"):
        errors["state"] = ["Must be one of: success, failed, queued."]
    if errors:
        raise _bad_body(errors)
    state.set_state(run, body["state"])
    state.touch()
    return reply(run_v1(run))


async def clear_run(request: web.Request) -> web.Response:
    state = request.app[STATE]
    dag_id, run_id = request.match_info["dag_id"], request.match_info["dag_run_id"]
    run = _run(request, f"Dag Run id {run_id} not found in dag {dag_id}")
    body = await _object(request)
    errors = _unknown(body, ("dry_run",))
    dry = _flag(body, "dry_run", True, errors)
    if errors:
        raise _bad_body(errors)
    dag = state.dag(dag_id)
    tasks = dag.dag.tasks if dag is not None else ()
    if dry:
        return reply({"task_instances": [task_reference_v1(run, t) for t in tasks]})
    state.requeue(run)
    state.touch()
    return reply(run_v1(run))


def _clear_form(body: dict[str, Any], dag_id: str) -> tuple[clearing.ClearRequest, bool, bool]:
    """ClearTaskInstanceFormSchema: (what to clear, dry_run, reset_dag_runs).

    A naive date is refused at once by `validate_istimezone` (its own BadRequest, before the
    other fields are looked at); then field errors; its `validates_schema` runs only when there
    are none, and stops at the first rule broken."""
    for name in ("start_date", "end_date"):
        raw = body.get(name)
        if isinstance(raw, str) and is_naive(raw):
            raise problem(400, "Invalid datetime format", "Naive datetime is disallowed")
    errors = _unknown(body, _CLEAR_FIELDS)
    start, end = _when(body, "start_date", errors), _when(body, "end_date", errors)
    flags = {
        name: _flag(body, name, default, errors)
        for name, default in (("dry_run", True), ("only_failed", True), ("only_running", False),
                              ("include_subdags", False), ("include_parentdag", False),
                              ("reset_dag_runs", False), ("include_upstream", False),
                              ("include_downstream", False), ("include_future", False),
                              ("include_past", False))
    }  # fmt: skip
    run_id, task_ids = body.get("dag_run_id"), body.get("task_ids")
    if run_id is not None and not isinstance(run_id, str):
        errors["dag_run_id"] = ["Not a valid string."]
    if task_ids is not None:
        if not isinstance(task_ids, list) or not all(isinstance(t, str) for t in task_ids):
            errors["task_ids"] = ["Not a valid list."]
        elif not task_ids:
            errors["task_ids"] = ["Shorter than minimum length 1."]
    if not errors:
        rule = None
        if flags["only_failed"] and flags["only_running"]:
            rule = "only_failed and only_running both are set to True"
        elif start is not None and end is not None and start > end:
            rule = "end_date is sooner than start_date"
        elif start is not None and end is not None and run_id:
            rule = "Exactly one of dag_run_id or (start_date and end_date) must be provided"
        elif start is not None and run_id:
            rule = "Exactly one of dag_run_id or start_date must be provided"
        elif end is not None and run_id:
            rule = "Exactly one of dag_run_id or end_date must be provided"
        if rule is not None:
            errors["_schema"] = [rule]
    if errors:
        raise _bad_body(errors)
    wanted = clearing.ClearRequest(
        dag_id=dag_id, dag_run_id=run_id, start_date=start, end_date=end,
        only_failed=flags["only_failed"], only_running=flags["only_running"],
        task_ids=None if task_ids is None else tuple(task_ids),
        include_upstream=flags["include_upstream"],
        include_downstream=flags["include_downstream"], include_past=flags["include_past"],
        include_future=flags["include_future"],
    )  # fmt: skip
    return wanted, flags["dry_run"], flags["reset_dag_runs"]


async def clear_task_instances(request: web.Request) -> web.Response:
    """Clear task instances (clearing.py says which); answers references to them."""
    state = request.app[STATE]
    dag_id = request.match_info["dag_id"]
    wanted, dry_run, reset_dag_runs = _clear_form(await _object(request), dag_id)
    if state.dag(dag_id) is None:
        raise problem(404, f"Dag id {dag_id} not found")
    try:
        selected = clearing.select(state, wanted)
    except clearing.ClearError as exc:  # Airflow 2's runs all have a logical date
        raise problem(404, f"Dag Run id {wanted.dag_run_id} not found in dag {dag_id}") from exc
    refs = [task_reference_v1(run, task.task_id) for run, task in selected]
    if not dry_run:
        clearing.clear(state, selected, reset_dag_runs=reset_dag_runs)
        state.touch()
    return reply({"task_instances": refs})


async def list_task_instances(request: web.Request) -> web.Response:
    """One run's task instances in the DAG's order. Airflow 2 does not check that the run
    exists: an unknown one lists none."""
    state = request.app[STATE]
    limit, offset = _int(request, "limit", 100), _int(request, "offset", 0)
    run = state.run(request.match_info["dag_id"], request.match_info["dag_run_id"])
    tasks = [] if run is None else list(run.tasks.values())
    if states := request.query.getall("state", []):
        tasks = [t for t in tasks if (t.state or "none") in states]  # "none": no state
    page = [task_instance_v1(run, t) for t in tasks[offset:][:limit]] if run else []
    return reply({"task_instances": page, "total_entries": len(tasks)})


async def list_datasets(request: web.Request) -> web.Response:
    """Datasets; `dag_ids` (comma-separated) keeps those the DAGs produce or are scheduled on.
    Like Airflow 2 (dataset_endpoint.get_datasets), `total_entries` counts every dataset,
    whatever the filters."""
    state = request.app[STATE]
    limit, offset = _int(request, "limit", 100), _int(request, "offset", 0)
    order = _order(request, "id", _DATASET_ORDER)
    everything = assets.index(state.dag_states())
    found = everything
    if dag_ids := request.query.get("dag_ids"):
        found = [a for a in found if a.related_to(dag_ids.split(","))]
    if pattern := request.query.get("uri_pattern"):
        found = [a for a in found if pattern.lower() in a.uri.lower()]
    page = order(found)[offset:][:limit]
    return reply({"datasets": [dataset_v1(a) for a in page], "total_entries": len(everything)})


PUBLIC_PATHS = frozenset({"/api/v1/version", "/api/v1/health"})


def add_routes(app: web.Application) -> None:
    prefix = "/api/v1"
    app.router.add_get(f"{prefix}/version", version)
    app.router.add_get(f"{prefix}/health", health)
    app.router.add_get(f"{prefix}/dags", list_dags)
    app.router.add_get(f"{prefix}/dags/{{dag_id}}", get_dag)
    app.router.add_get(f"{prefix}/dags/{{dag_id}}/details", get_dag_details)
    app.router.add_patch(f"{prefix}/dags/{{dag_id}}", patch_dag)
    app.router.add_post(f"{prefix}/dags/{{dag_id}}/clearTaskInstances", clear_task_instances)
    app.router.add_get(f"{prefix}/dags/{{dag_id}}/dagRuns", list_runs)
    app.router.add_post(f"{prefix}/dags/{{dag_id}}/dagRuns", trigger_run)
    app.router.add_get(f"{prefix}/dags/{{dag_id}}/dagRuns/{{dag_run_id}}", get_run)
    app.router.add_patch(f"{prefix}/dags/{{dag_id}}/dagRuns/{{dag_run_id}}", patch_run)
    app.router.add_post(f"{prefix}/dags/{{dag_id}}/dagRuns/{{dag_run_id}}/clear", clear_run)
    app.router.add_get(
        f"{prefix}/dags/{{dag_id}}/dagRuns/{{dag_run_id}}/taskInstances", list_task_instances
    )
    app.router.add_get(f"{prefix}/datasets", list_datasets)
