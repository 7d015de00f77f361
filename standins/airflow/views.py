"""JSON views of the stand-in's state: Airflow 2's `DAG`/`DAGRun`/`TaskInstance`/`Dataset`
(v1.yaml) and Airflow 3's `DAGResponse`/`DAGRunResponse`/`BackfillResponse`/
`TaskInstanceResponse`/`AssetResponse` (v2-rest-api-generated.yaml)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from standins.airflow.assets import Asset
from standins.airflow.http import iso_v1, iso_v2
from standins.airflow.state import AirflowState, Backfill, DagRun, DagState, TaskInstance

JsonDict = dict[str, Any]


def _next_dagrun(dag: DagState, now: datetime) -> tuple[datetime, datetime, datetime]:
    """(logical date, interval end = run after) of the run the timetable schedules next."""
    timetable = dag.dag.timetable
    start = timetable.align_prev(now)
    end = timetable.following(start)
    return start, start, end


def dag_v1(state: AirflowState, dag: DagState) -> JsonDict:
    logical, start, end = _next_dagrun(dag, state.now())
    timetable = dag.dag.timetable
    return {
        "dag_id": dag.dag_id,
        "dag_display_name": dag.dag_id,
        "root_dag_id": None,
        "is_paused": dag.is_paused,
        "is_active": True,
        "is_subdag": False,
        "last_parsed_time": iso_v1(dag.created_at),
        "last_pickled": None,
        "last_expired": None,
        "scheduler_lock": None,
        "pickle_id": None,
        "default_view": "grid",
        "fileloc": dag.dag.path,
        "file_token": dag.dag.file_token,
        "owners": list(dag.dag.owners),
        "description": dag.dag.description,
        "schedule_interval": {"__type": "CronExpression", "value": timetable.summary()},
        "timetable_description": timetable.description(),
        "tags": [{"name": tag} for tag in dag.dag.tags],
        "max_active_tasks": 16,
        "max_active_runs": dag.dag.max_active_runs,
        "has_task_concurrency_limits": False,
        "has_import_errors": False,
        "next_dagrun": iso_v1(logical),
        "next_dagrun_data_interval_start": iso_v1(start),
        "next_dagrun_data_interval_end": iso_v1(end),
        "next_dagrun_create_after": iso_v1(end),
        "max_consecutive_failed_dag_runs": 0,
    }


def dag_v2(state: AirflowState, dag: DagState) -> JsonDict:
    logical, start, end = _next_dagrun(dag, state.now())
    timetable = dag.dag.timetable
    return {
        "dag_id": dag.dag_id,
        "dag_display_name": dag.dag_id,
        "is_paused": dag.is_paused,
        "is_stale": False,
        "last_parsed_time": iso_v2(dag.created_at),
        "last_parse_duration": 0.05,
        "last_expired": None,
        "bundle_name": "dags-folder",
        "bundle_version": None,
        "relative_fileloc": dag.dag.path.rsplit("/dags/", 1)[-1],
        "fileloc": dag.dag.path,
        "description": dag.dag.description,
        "timetable_summary": timetable.summary(),
        "timetable_description": timetable.description(),
        "timetable_partitioned": False,
        "timetable_periodic": True,
        "tags": [
            {"name": tag, "dag_id": dag.dag_id, "dag_display_name": dag.dag_id}
            for tag in dag.dag.tags
        ],
        "max_active_tasks": 16,
        "max_active_runs": dag.dag.max_active_runs,
        "max_consecutive_failed_dag_runs": 0,
        "has_task_concurrency_limits": False,
        "has_import_errors": False,
        "next_dagrun_logical_date": iso_v2(logical),
        "next_dagrun_data_interval_start": iso_v2(start),
        "next_dagrun_data_interval_end": iso_v2(end),
        "next_dagrun_run_after": iso_v2(end),
        "allowed_run_types": None,
        "owners": list(dag.dag.owners),
        "is_backfillable": True,
        "file_token": dag.dag.file_token,
    }


def run_v1(run: DagRun) -> JsonDict:
    return {
        "dag_run_id": run.run_id,
        "dag_id": run.dag_id,
        "logical_date": iso_v1(run.logical_date),
        "execution_date": iso_v1(run.logical_date),
        "start_date": iso_v1(run.start_date),
        "end_date": iso_v1(run.end_date),
        "data_interval_start": iso_v1(run.data_interval_start),
        "data_interval_end": iso_v1(run.data_interval_end),
        "last_scheduling_decision": iso_v1(run.last_scheduling_decision),
        "run_type": run.run_type,
        "state": run.state,
        "external_trigger": run.external_trigger,
        "conf": run.conf,
        "note": run.note,
    }


def _dag_version(dag: DagState) -> JsonDict:
    """The DAG's one version (DagVersionResponse)."""
    return {
        "id": dag.version_id,
        "version_number": 1,
        "dag_id": dag.dag_id,
        "bundle_name": "dags-folder",
        "bundle_version": None,
        "created_at": iso_v2(dag.created_at),
        "dag_display_name": dag.dag_id,
        "bundle_url": None,
    }


def run_v2(state: AirflowState, run: DagRun) -> JsonDict:
    dag = state.dag(run.dag_id)
    versions = [] if dag is None else [_dag_version(dag)]
    return {
        "dag_run_id": run.run_id,
        "dag_id": run.dag_id,
        "logical_date": iso_v2(run.logical_date),
        "queued_at": iso_v2(run.queued_at),
        "start_date": iso_v2(run.start_date),
        "end_date": iso_v2(run.end_date),
        "duration": run.duration,
        "data_interval_start": iso_v2(run.data_interval_start),
        "data_interval_end": iso_v2(run.data_interval_end),
        "run_after": iso_v2(run.run_after),
        "last_scheduling_decision": iso_v2(run.last_scheduling_decision),
        "run_type": run.run_type,
        "state": run.state,
        "triggered_by": run.triggered_by,
        "triggering_user_name": run.triggering_user_name,
        "conf": run.conf,
        "note": run.note,
        "dag_versions": versions,
        "bundle_version": None,
        "dag_display_name": run.dag_id,
        "partition_key": None,
        "partition_date": None,
    }


def backfill_v2(backfill: Backfill) -> JsonDict:
    return {
        "id": backfill.id,
        "dag_id": backfill.dag_id,
        "from_date": iso_v2(backfill.from_date),
        "to_date": iso_v2(backfill.to_date),
        "dag_run_conf": backfill.dag_run_conf,
        "is_paused": backfill.is_paused,
        "reprocess_behavior": backfill.reprocess_behavior,
        "max_active_runs": backfill.max_active_runs,
        "created_at": iso_v2(backfill.created_at),
        "completed_at": iso_v2(backfill.completed_at),
        "updated_at": iso_v2(backfill.updated_at),
        "dag_display_name": backfill.dag_id,
    }


def task_reference_v1(run: DagRun, task_id: str) -> JsonDict:
    return {
        "task_id": task_id,
        "dag_id": run.dag_id,
        "execution_date": iso_v1(run.logical_date),
        "dag_run_id": run.run_id,
    }


def _task_common(task: TaskInstance) -> JsonDict:
    """What both APIs say alike of a task instance (a BashOperator's defaults, no retries)."""
    return {
        "task_id": task.task_id,
        "task_display_name": task.task_id,
        "map_index": -1,
        "duration": task.duration,
        "state": task.state,
        "try_number": task.try_number,
        "max_tries": task.max_tries,
        "hostname": "" if task.start_date is None else "standin",
        "unixname": "airflow",
        "pool": "default_pool",
        "pool_slots": 1,
        "queue": "default",
        "priority_weight": 1,
        "operator": "BashOperator",
        "pid": None,
        "executor": None,
        "executor_config": "{}",
        "note": task.note,
        "rendered_map_index": None,
        "rendered_fields": {},
        "trigger": None,
        "triggerer_job": None,
    }


def task_instance_v1(run: DagRun, task: TaskInstance) -> JsonDict:
    """Airflow 2's `TaskInstance` (TaskInstanceSchema)."""
    return {
        **_task_common(task),
        "dag_id": run.dag_id,
        "dag_run_id": run.run_id,
        "execution_date": iso_v1(run.logical_date),
        "start_date": iso_v1(task.start_date),
        "end_date": iso_v1(task.end_date),
        "queued_when": iso_v1(task.queued_when),
        "sla_miss": None,
    }


def task_instance_v2(state: AirflowState, run: DagRun, task: TaskInstance) -> JsonDict:
    """Airflow 3's `TaskInstanceResponse`."""
    dag = state.dag(run.dag_id)
    return {
        **_task_common(task),
        "id": task.id,
        "dag_id": run.dag_id,
        "dag_run_id": run.run_id,
        "dag_display_name": run.dag_id,
        "logical_date": iso_v2(run.logical_date),
        "run_after": iso_v2(run.run_after),
        "start_date": iso_v2(task.start_date),
        "end_date": iso_v2(task.end_date),
        "queued_when": iso_v2(task.queued_when),
        "scheduled_when": iso_v2(task.queued_when),
        "operator_name": "BashOperator",
        "dag_version": None if dag is None else _dag_version(dag),
    }


def _asset_refs(asset: Asset, iso: Callable[[datetime | None], str | None]) -> JsonDict:
    at = iso(asset.created_at)
    return {
        "producing_tasks": [
            {"dag_id": dag_id, "task_id": task_id, "created_at": at, "updated_at": at}
            for dag_id, task_id in asset.producers
        ],
        "consumers": [
            {"dag_id": dag_id, "created_at": at, "updated_at": at} for dag_id in asset.consumers
        ],
    }


def asset_v2(asset: Asset) -> JsonDict:
    """Airflow 3's `AssetResponse`: consumers are `scheduled_dags`."""
    refs = _asset_refs(asset, iso_v2)
    return {
        "id": asset.id,
        "name": asset.uri,
        "uri": asset.uri,
        "group": "asset",
        "extra": {},
        "created_at": iso_v2(asset.created_at),
        "updated_at": iso_v2(asset.created_at),
        "scheduled_dags": refs["consumers"],
        "producing_tasks": refs["producing_tasks"],
        "consuming_tasks": [],
        "aliases": [],
        "watchers": [],
        "last_asset_event": {"id": None, "timestamp": None},
    }


def dataset_v1(asset: Asset) -> JsonDict:
    """Airflow 2's `Dataset` (DatasetSchema, which adds `aliases` to the spec's fields):
    consumers are `consuming_dags`."""
    refs = _asset_refs(asset, iso_v1)
    return {
        "id": asset.id,
        "uri": asset.uri,
        "extra": {},
        "created_at": iso_v1(asset.created_at),
        "updated_at": iso_v1(asset.created_at),
        "consuming_dags": refs["consumers"],
        "producing_tasks": refs["producing_tasks"],
        "aliases": [],
    }


def _params(dag: DagState, param_class: str) -> JsonDict:
    """The DAG's params as `Param.dump()` writes each (airflow/models/param.py: the class under
    `__class`, then the Param's attributes: value, description, schema; Airflow 3 adds source)."""
    found: JsonDict = {}
    for name, value, kind in dag.dag.params:
        schema: JsonDict = {"type": kind} if kind else {}
        found[name] = {"__class": param_class, "value": value, "description": None,
                       "schema": schema}  # fmt: skip
        if param_class.startswith("airflow.sdk"):
            found[name]["source"] = None
    return found


def dag_details_v1(state: AirflowState, dag: DagState) -> JsonDict:
    """GET /api/v1/dags/{dag_id}/details: the DAG and its details (DAGDetailSchema)."""
    return {
        **dag_v1(state, dag),
        "timezone": "Timezone('UTC')",
        "catchup": False,
        "orientation": "LR",
        "concurrency": 16,
        "start_date": iso_v1(dag.created_at),
        "dag_run_timeout": None,
        "dataset_expression": None,
        "doc_md": None,
        "params": _params(dag, "airflow.models.param.Param"),
        "end_date": None,
        "is_paused_upon_creation": None,
        "last_parsed": iso_v1(dag.created_at),
        "template_search_path": None,
        "render_template_as_native_obj": False,
    }


def dag_details_v2(state: AirflowState, dag: DagState) -> JsonDict:
    """GET /api/v2/dags/{dag_id}/details (DAGDetailsResponse)."""
    return {
        **dag_v2(state, dag),
        "catchup": False,
        "dag_run_timeout": None,
        "asset_expression": None,
        "doc_md": None,
        "start_date": iso_v2(dag.created_at),
        "end_date": None,
        "is_paused_upon_creation": None,
        "params": _params(dag, "airflow.sdk.definitions.param.Param"),
        "render_template_as_native_obj": False,
        "template_search_path": None,
        "timezone": "UTC",
        "last_parsed": iso_v2(dag.created_at),
        "default_args": {},
        "is_favorite": False,
        "active_runs_count": 0,
        "concurrency": 16,
        "latest_dag_version": None,
    }
