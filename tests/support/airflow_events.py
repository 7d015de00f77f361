"""OpenLineage events shaped exactly as Airflow 3.3.2's OpenLineage provider sends them.

Built from the events the project recorded from a real Airflow
(tests/fixtures/openlineage/airflow-3.3.2/success.json): the DAG run's START and COMPLETE carry
`airflowDagRun` and the DAG's `jobType` facet; each task's START and COMPLETE carry the `parent`
facet naming the DAG run, the `airflow` facet, and the task's datasets. Only names, run ids,
times and datasets change, so every facet Marquez and the bot read keeps its real shape.
"""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

RECORDED = Path(__file__).resolve().parents[1] / "fixtures/openlineage/airflow-3.3.2/success.json"
_DAG_ID, _NAMESPACE = "ol_test.success", "airflow-test"


def _templates() -> dict[str, dict[str, Any]]:
    events: list[dict[str, Any]] = json.loads(RECORDED.read_text())
    dag = [e for e in events if e["job"]["name"] == _DAG_ID]
    task = [e for e in events if e["job"]["name"] == f"{_DAG_ID}.extract"]
    return {
        "dag_start": dag[0],
        "dag_complete": dag[-1],
        "task_start": task[0],
        "task_complete": task[-1],
    }


def _renamed(value: Any, dag_id: str, namespace: str) -> Any:
    """The recorded event with the DAG id and namespace replaced everywhere they appear."""
    text = json.dumps(value)
    text = text.replace(f'"{_NAMESPACE}"', json.dumps(namespace))
    text = text.replace(f'"{_DAG_ID}.', f'"{dag_id}.').replace(f'"{_DAG_ID}"', json.dumps(dag_id))
    return json.loads(text)


def _run_id(*parts: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "/".join(parts)))


def _iso(value: datetime) -> str:
    return value.isoformat()


Datasets = tuple[Sequence[str], Sequence[str]]


def dag_run_events(
    dag_id: str,
    tasks: Mapping[str, Datasets],
    day: date,
    *,
    namespace: str = "airflow",
    dataset_namespace: str = "postgres://warehouse:5432",
    failed: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """One daily DAG run's events in the order Airflow sends them: the DAG's START, each task's
    START and COMPLETE (FAIL for the tasks in `failed`, and then the DAG's FAIL), the DAG's end.
    `tasks` maps a task id to (input table names, output table names)."""
    t = _templates()
    start = datetime(day.year, day.month, day.day, tzinfo=UTC)
    end = start + timedelta(days=1)
    dag_run = _run_id(dag_id, day.isoformat())
    clock = [end + timedelta(minutes=10)]

    def stamp(event: dict[str, Any]) -> dict[str, Any]:
        event["eventTime"] = _iso(clock[0])
        clock[0] += timedelta(seconds=5)
        facets = event["run"]["facets"]
        facets["nominalTime"].update(nominalStartTime=_iso(start), nominalEndTime=_iso(end))
        for key in ("airflowDagRun", "airflow"):
            run = facets.get(key, {}).get("dagRun")
            if run is not None:
                run.update(
                    run_id=f"scheduled__{_iso(start)}",
                    data_interval_start=_iso(start),
                    data_interval_end=_iso(end),
                    logical_date=_iso(start),
                )
        return event

    def dag_event(template: str, event_type: str) -> dict[str, Any]:
        event = _renamed(copy.deepcopy(t[template]), dag_id, namespace)
        event["eventType"] = event_type
        event["run"]["runId"] = dag_run
        if event_type == "FAIL":
            state = event["run"]["facets"].get("airflowState")
            if state is not None:
                state["dagRunState"] = "failed"
                state["tasksState"] = {
                    task: "failed" if task in failed else "success" for task in tasks
                }
        return stamp(event)

    def task_event(task: str, event_type: str, io: Datasets) -> dict[str, Any]:
        template = t["task_start" if event_type == "START" else "task_complete"]
        event = _renamed(copy.deepcopy(template), dag_id, namespace)
        event["eventType"] = event_type
        event["job"]["name"] = f"{dag_id}.{task}"
        event["run"]["runId"] = _run_id(dag_id, task, day.isoformat())
        facets = event["run"]["facets"]
        facets["parent"]["run"]["runId"] = dag_run
        facets["parent"]["root"]["run"]["runId"] = dag_run
        facets["airflow"]["task"]["task_id"] = task
        inputs, outputs = io
        event["inputs"] = [{"namespace": dataset_namespace, "name": n} for n in inputs]
        event["outputs"] = [{"namespace": dataset_namespace, "name": n} for n in outputs]
        return stamp(event)

    events = [dag_event("dag_start", "START")]
    for task, io in tasks.items():
        events.append(task_event(task, "START", io))
        events.append(task_event(task, "FAIL" if task in failed else "COMPLETE", io))
    events.append(dag_event("dag_complete", "FAIL" if failed else "COMPLETE"))
    return events
