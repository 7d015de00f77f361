"""Errors, result types and response parsing of the Airflow client (`bot.clients.airflow`).

Every parser is defensive: a missing or mistyped field that the API spec marks as required
raises `AirflowBadResponse` naming the endpoint and the field, never a KeyError or TypeError.
Datetimes come back UTC-aware.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from bot.core.http import ApiError, error_message, truncate

__all__ = [
    "AirflowAuthError",
    "AirflowBadResponse",
    "AirflowConflict",
    "AirflowError",
    "AirflowNotFound",
    "AirflowRequestError",
    "AirflowUnavailable",
    "AssetConsumer",
    "BackfillInfo",
    "ClearedTasks",
    "DagInfo",
    "DagRunInfo",
    "TaskInstanceInfo",
]


class AirflowError(ApiError):
    """Base of every error the Airflow clients raise.

    `detail` is a sentence a Slack user can read (Airflow's own text for 4xx answers);
    `status` is the HTTP status, None when no answer came; `endpoint` is e.g. "GET /api/v2/dags/x".
    """

    system = "airflow"

    def __init__(self, detail: str, *, status: int | None = None, endpoint: str = "") -> None:
        super().__init__(detail)
        self.detail = detail
        self.status = status
        self.endpoint = endpoint

    def __str__(self) -> str:
        if self.status is None or not self.endpoint or self.endpoint in self.detail:
            return self.detail
        return f"{self.detail} (HTTP {self.status} from {self.endpoint})"


class AirflowUnavailable(AirflowError):
    """Connection refused, timeout, or 5xx after retries (or a non-retryable call's first try),
    or 429 (rate-limited): something that may pass, worth trying again later."""

    kind = "unavailable"


class AirflowAuthError(AirflowError):
    """401/403 that renewing the token (or re-sending basic auth) did not fix."""

    kind = "auth"


class AirflowNotFound(AirflowError):
    """404: no such DAG, run or backfill."""

    kind = "not_found"


class AirflowConflict(AirflowError):
    """409: e.g. a backfill of this DAG is already running, or the run id exists."""

    kind = "conflict"


class AirflowBadResponse(AirflowError):
    """A 2xx (or 3xx) answer that is not what the spec promises."""

    kind = "bad_response"


class AirflowRequestError(AirflowError):
    """Another 4xx (400, 422, ...) carrying Airflow's explanation."""


@dataclass(frozen=True)
class DagInfo:
    dag_id: str
    is_paused: bool
    is_active: bool | None = None
    timetable_description: str | None = None
    max_active_runs: int | None = None
    """How many runs of the DAG Airflow lets be active at once (null in the API: its default)."""


@dataclass(frozen=True)
class DagParam:
    """One of a DAG's params as its details show it (`Param.dump()`): its default and the
    JSON types its schema allows (empty: any)."""

    name: str
    default: Any = None
    types: tuple[str, ...] = ()


@dataclass(frozen=True)
class DagRunInfo:
    dag_id: str
    run_id: str
    state: str
    run_type: str
    logical_date: datetime | None
    data_interval_start: datetime | None
    data_interval_end: datetime | None
    start_date: datetime | None
    end_date: datetime | None


@dataclass(frozen=True)
class BackfillInfo:
    id: int
    dag_id: str
    from_date: datetime
    to_date: datetime
    reprocess_behavior: str
    max_active_runs: int
    is_paused: bool
    created_at: datetime | None
    completed_at: datetime | None


@dataclass(frozen=True)
class TaskInstanceInfo:
    """One task of a DAG run. `state` is None for a task not scheduled yet (or just cleared);
    `try_number` counts the tries that started, so a cleared task that ran again has one more
    and a task left alone keeps its own."""

    task_id: str
    state: str | None
    try_number: int
    start_date: datetime | None
    end_date: datetime | None


@dataclass(frozen=True)
class ClearedTasks:
    """What `clear_task_instances` cleared: `tasks` are the (dag_run_id, task_id) pairs, in
    Airflow's order, each once; `count` is how many task instances that was (a mapped task
    has one per map index)."""

    tasks: tuple[tuple[str, str], ...]
    count: int

    @property
    def run_ids(self) -> tuple[str, ...]:
        """The runs that had tasks cleared, each once, to follow with `get_dag_run`."""
        return tuple(dict.fromkeys(run_id for run_id, _ in self.tasks))


@dataclass(frozen=True)
class AssetConsumer:
    """A DAG scheduled on an asset (Airflow 2: a dataset) that another DAG produces: a run of
    the producer can trigger it. `name` is the asset's name (Airflow 2: its URI)."""

    uri: str
    name: str
    dag_id: str


def error_detail(raw: bytes, reason: str | None) -> str:
    """Airflow's explanation in an error body.

    Airflow 3 (FastAPI) sends `{"detail": "text"}` or, for validation errors,
    `{"detail": [{"loc": [...], "msg": "..."}]}`; Airflow 2 sends RFC 7807 problems
    (`title`, `detail`).
    """
    try:
        data = json.loads(raw)
    except ValueError:
        data = None
    if isinstance(data, dict):
        detail = data.get("detail")
        if isinstance(detail, str) and detail.strip():
            return truncate(detail)
        if isinstance(detail, list) and detail:
            return truncate("; ".join(_validation_item(item) for item in detail))
        if isinstance(detail, dict) and detail:
            return truncate(json.dumps(detail, sort_keys=True))
        title = data.get("title")
        if isinstance(title, str) and title.strip():
            return truncate(title)
    return error_message(raw, reason)


def _validation_item(item: object) -> str:
    if not isinstance(item, dict):
        return str(item)
    msg = str(item.get("msg", item))
    loc = item.get("loc")
    if isinstance(loc, list):
        # ["body", "from_date"] -> "from_date"; the first element is where (body/query/path).
        where = ".".join(str(part) for part in loc[1:] or loc)
        if where:
            return f"{where}: {msg}"
    return msg


class Parser:
    """Reads typed fields out of one decoded JSON answer of `endpoint`."""

    def __init__(self, endpoint: str, status: int) -> None:
        self.endpoint = endpoint
        self.status = status

    def bad(self, problem: str) -> AirflowBadResponse:
        return AirflowBadResponse(
            f"Airflow sent an unexpected answer to {self.endpoint}: {problem}",
            status=self.status,
            endpoint=self.endpoint,
        )

    def obj(self, data: object, what: str = "the body") -> Mapping[str, Any]:
        if not isinstance(data, dict):
            raise self.bad(f"{what} is not a JSON object")
        return data

    def objects(self, data: object, key: str) -> list[Mapping[str, Any]]:
        items = self.obj(data).get(key)
        if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
            raise self.bad(f"{key!r} is not a list of objects")
        return items

    def str_(self, data: Mapping[str, Any], key: str) -> str:
        value = data.get(key)
        if not isinstance(value, str):
            raise self.bad(f"{key!r} is missing or not a string")
        return value

    def opt_str(self, data: Mapping[str, Any], key: str) -> str | None:
        value = data.get(key)
        if value is not None and not isinstance(value, str):
            raise self.bad(f"{key!r} is not a string")
        return value

    def bool_(self, data: Mapping[str, Any], key: str, *, null_as: bool | None = None) -> bool:
        value = data.get(key)
        if value is None and null_as is not None and key in data:
            return null_as
        if not isinstance(value, bool):
            raise self.bad(f"{key!r} is missing or not a boolean")
        return value

    def int_(self, data: Mapping[str, Any], key: str) -> int:
        value = data.get(key)
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.bad(f"{key!r} is missing or not an integer")
        return value

    def opt_int(self, data: Mapping[str, Any], key: str) -> int | None:
        return None if data.get(key) is None else self.int_(data, key)

    def dt(self, data: Mapping[str, Any], key: str) -> datetime:
        value = self.opt_dt(data, key)
        if value is None:
            raise self.bad(f"{key!r} is missing")
        return value

    def opt_dt(self, data: Mapping[str, Any], key: str) -> datetime | None:
        value = data.get(key)
        if value is None:
            return None
        if not isinstance(value, str):
            raise self.bad(f"{key!r} is not a date-time string")
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            raise self.bad(f"{key!r} is not an ISO-8601 date-time: {value!r}") from None
        if parsed.tzinfo is None or parsed.utcoffset() is None:
            raise self.bad(f"{key!r} has no UTC offset: {value!r}")
        return parsed.astimezone(UTC)

    def dag_v3(self, data: object) -> DagInfo:
        dag = self.obj(data)
        stale = dag.get("is_stale")
        if stale is not None and not isinstance(stale, bool):
            raise self.bad("'is_stale' is not a boolean")
        return DagInfo(
            dag_id=self.str_(dag, "dag_id"),
            is_paused=self.bool_(dag, "is_paused"),
            is_active=None if stale is None else not stale,
            timetable_description=self.opt_str(dag, "timetable_description"),
            max_active_runs=self.opt_int(dag, "max_active_runs"),
        )

    def dag_params(self, data: object) -> dict[str, DagParam]:
        """The `params` of a DAG's details, v1 or v2: each `Param.dump()` ({"value",
        "schema", …}) or, from an older Airflow, a bare value."""
        raw = self.obj(data).get("params")
        if raw is None:
            return {}
        if not isinstance(raw, Mapping):
            raise self.bad("'params' is not an object")
        found = {}
        for name, dumped in raw.items():
            if not isinstance(dumped, Mapping):
                found[str(name)] = DagParam(str(name), dumped)
                continue
            schema = dumped.get("schema")
            kind = schema.get("type") if isinstance(schema, Mapping) else None
            types = (
                (kind,)
                if isinstance(kind, str)
                else tuple(str(k) for k in kind if isinstance(k, str))
                if isinstance(kind, list)
                else ()
            )
            found[str(name)] = DagParam(str(name), dumped.get("value"), types)
        return found

    def dag_v1(self, data: object) -> DagInfo:
        dag = self.obj(data)
        active = dag.get("is_active")
        if active is not None and not isinstance(active, bool):
            raise self.bad("'is_active' is not a boolean")
        return DagInfo(
            dag_id=self.str_(dag, "dag_id"),
            # v1 marks is_paused nullable; a DAG that never had it set is not paused.
            is_paused=self.bool_(dag, "is_paused", null_as=False),
            is_active=active,
            timetable_description=self.opt_str(dag, "timetable_description"),
            max_active_runs=self.opt_int(dag, "max_active_runs"),
        )

    def dag_run(self, data: object) -> DagRunInfo:
        run = self.obj(data, "a DAG run")
        logical = "logical_date" if "logical_date" in run else "execution_date"
        return DagRunInfo(
            dag_id=self.str_(run, "dag_id"),
            run_id=self.str_(run, "dag_run_id"),
            state=self.str_(run, "state"),
            run_type=self.str_(run, "run_type"),
            logical_date=self.opt_dt(run, logical),
            data_interval_start=self.opt_dt(run, "data_interval_start"),
            data_interval_end=self.opt_dt(run, "data_interval_end"),
            start_date=self.opt_dt(run, "start_date"),
            end_date=self.opt_dt(run, "end_date"),
        )

    def backfill(self, data: object) -> BackfillInfo:
        backfill = self.obj(data, "a backfill")
        return BackfillInfo(
            id=self.int_(backfill, "id"),
            dag_id=self.str_(backfill, "dag_id"),
            from_date=self.dt(backfill, "from_date"),
            to_date=self.dt(backfill, "to_date"),
            reprocess_behavior=self.str_(backfill, "reprocess_behavior"),
            max_active_runs=self.int_(backfill, "max_active_runs"),
            is_paused=self.bool_(backfill, "is_paused"),
            created_at=self.opt_dt(backfill, "created_at"),
            completed_at=self.opt_dt(backfill, "completed_at"),
        )

    def task_instance(self, data: object) -> TaskInstanceInfo:
        task = self.obj(data, "a task instance")
        return TaskInstanceInfo(
            task_id=self.str_(task, "task_id"),
            # Airflow 2 before 2.7 wrote "none" for no state; null since.
            state=None if task.get("state") == "none" else self.opt_str(task, "state"),
            try_number=self.int_(task, "try_number"),
            start_date=self.opt_dt(task, "start_date"),
            end_date=self.opt_dt(task, "end_date"),
        )

    def cleared(self, data: object) -> ClearedTasks:
        """A clear's answer: Airflow 3's task instances and `total_entries`, or Airflow 2's
        references (`task_id`, `dag_run_id`; no total)."""
        items = self.objects(data, "task_instances")
        pairs = [(self.str_(item, "dag_run_id"), self.str_(item, "task_id")) for item in items]
        total = self.obj(data).get("total_entries")
        count = total if isinstance(total, int) and not isinstance(total, bool) else len(items)
        return ClearedTasks(tuple(dict.fromkeys(pairs)), count)

    def asset_consumers(
        self, data: object, producer: str, consumers_key: str
    ) -> list[AssetConsumer]:
        """The DAGs (but `producer`) scheduled on one asset (Airflow 3's `AssetResponse`,
        consumers under `scheduled_dags`; Airflow 2's `Dataset`, under `consuming_dags`),
        none unless `producer` produces it."""
        asset = self.obj(data, "an asset")
        uri = self.str_(asset, "uri")
        name = self.opt_str(asset, "name") or uri
        producers = {
            self.opt_str(task, "dag_id") for task in self.objects(asset, "producing_tasks")
        }
        if producer not in producers:
            return []
        dag_ids = {self.opt_str(dag, "dag_id") for dag in self.objects(asset, consumers_key)}
        return [
            AssetConsumer(uri, name, dag_id)
            for dag_id in sorted(d for d in dag_ids if d is not None and d != producer)
        ]
