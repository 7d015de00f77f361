"""Airflow 3's backfill endpoints (`/api/v2/backfills`), after
airflow/api_fastapi/core_api/routes/public/backfills.py."""

from __future__ import annotations

from aiohttp import web

from standins.airflow import backfills
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
    query_int_v2,
    reply,
    sort_key,
)
from standins.airflow.state import Backfill
from standins.airflow.views import backfill_v2

PAGE_LIMIT, MAX_PAGE_LIMIT = 50, 100


def _order_error(name: str) -> HttpError:
    return detail(400, ordering_error(name))


async def _backfill_request(request: web.Request) -> backfills.BackfillRequest:
    checked = V2Body(await body_v2(request))
    checked.field("dag_id", "str")
    checked.field("from_date", "datetime")
    checked.field("to_date", "datetime")
    checked.field("run_backwards", "bool", default=False)
    checked.field("dag_run_conf", "dict", default=None, nullable=True)
    checked.field(
        "reprocess_behavior", "enum", default="none", choices=backfills.REPROCESS_BEHAVIORS
    )
    checked.field("max_active_runs", "int", default=10)
    checked.field("run_on_latest_version", "bool", default=None, nullable=True)
    values = checked.result()
    return backfills.BackfillRequest(
        dag_id=values["dag_id"], from_date=values["from_date"], to_date=values["to_date"],
        run_backwards=values["run_backwards"], dag_run_conf=values["dag_run_conf"],
        reprocess_behavior=values["reprocess_behavior"],
        max_active_runs=values["max_active_runs"], user=request.get(USER),
    )  # fmt: skip


def _backfill_error(exc: backfills.BackfillError, dag_id: str) -> HttpError:
    if exc.kind == "not_found":
        return detail(404, f"Could not find dag {dag_id}")
    if exc.kind == "conflict":
        return detail(409, f"There is already a running backfill for dag {dag_id}")
    if exc.kind == "empty":  # Airflow's RuntimeError: FastAPI's plain-text 500
        return HttpError(500, text="Internal Server Error")
    # RequestValidationError(str): FastAPI answers 422 with the message as `detail`, a string,
    # although the spec documents HTTPValidationError (a list) for 422.
    return detail(422, exc.message)


async def create_backfill(request: web.Request) -> web.Response:
    # The spec documents 200 for a created backfill (FastAPI's default), and so does Airflow.
    state = request.app[STATE]
    wanted = await _backfill_request(request)
    try:
        made = backfills.create(state, wanted)
    except backfills.BackfillError as exc:
        raise _backfill_error(exc, wanted.dag_id) from exc
    return reply(backfill_v2(made))


async def dry_run(request: web.Request) -> web.Response:
    state = request.app[STATE]
    wanted = await _backfill_request(request)
    try:
        dates = backfills.dry_run(state, wanted)
    except backfills.BackfillError as exc:
        raise _backfill_error(exc, wanted.dag_id) from exc
    found = [
        {"logical_date": d.isoformat().replace("+00:00", "Z"), "partition_key": None,
         "partition_date": None}
        for d in dates
    ]  # fmt: skip
    return reply({"backfills": found, "total_entries": len(found)})


async def list_backfills(request: web.Request) -> web.Response:
    state = request.app[STATE]
    dag_id = request.query.get("dag_id")
    if dag_id is None:
        raise invalid(pydantic_error("missing", ["query", "dag_id"], "Field required", None))
    limit = query_int_v2(request, "limit", PAGE_LIMIT, MAX_PAGE_LIMIT)
    offset = query_int_v2(request, "offset", 0)
    order = sort_key(request.query.getall("order_by", ["id"]), {"id": lambda b: b.id}, _order_error)
    found = order(state.backfills_of(dag_id))
    page = [backfill_v2(b) for b in found[offset:][:limit]]
    return reply({"backfills": page, "total_entries": len(found)})


def _backfill(request: web.Request) -> Backfill:
    raw = request.match_info["backfill_id"]
    try:
        backfill_id = int(raw)
    except ValueError:
        raise invalid(
            pydantic_error("int_parsing", ["path", "backfill_id"],
                           "Input should be a valid integer, unable to parse string as an integer",
                           raw)
        ) from None  # fmt: skip
    found = request.app[STATE].backfill(backfill_id)
    if found is None:
        if request.method == "GET":
            raise detail(404, "Backfill not found")
        raise detail(404, f"Could not find backfill with id {backfill_id}")
    return found


async def get_backfill(request: web.Request) -> web.Response:
    return reply(backfill_v2(_backfill(request)))


async def _change(request: web.Request, action: str) -> web.Response:
    state, backfill = request.app[STATE], _backfill(request)
    try:
        if action == "cancel":
            backfills.cancel(state, backfill)
        else:
            backfills.set_paused(state, backfill, action == "pause")
    except backfills.BackfillError as exc:
        raise detail(409, exc.message) from exc
    return reply(backfill_v2(backfill))


async def pause_backfill(request: web.Request) -> web.Response:
    return await _change(request, "pause")


async def unpause_backfill(request: web.Request) -> web.Response:
    return await _change(request, "unpause")


async def cancel_backfill(request: web.Request) -> web.Response:
    return await _change(request, "cancel")


def add_routes(app: web.Application, prefix: str) -> None:
    app.router.add_post(f"{prefix}/backfills/dry_run", dry_run)
    app.router.add_get(f"{prefix}/backfills", list_backfills)
    app.router.add_post(f"{prefix}/backfills", create_backfill)
    app.router.add_get(f"{prefix}/backfills/{{backfill_id}}", get_backfill)
    app.router.add_put(f"{prefix}/backfills/{{backfill_id}}/pause", pause_backfill)
    app.router.add_put(f"{prefix}/backfills/{{backfill_id}}/unpause", unpause_backfill)
    app.router.add_put(f"{prefix}/backfills/{{backfill_id}}/cancel", cancel_backfill)
