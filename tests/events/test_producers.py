"""What an event means, decided from its job and run facets alone
(bot/events/rules/producers.py)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bot.events.rules.producers import (
    AirflowRef,
    Owner,
    RunLink,
    airflow_interval,
    airflow_ref,
    failed_tasks_message,
    job_type_of,
    owner_of,
)

RUN, DAG_RUN, ROOT_RUN = "run-1", "dag-run-1", "root-run-1"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures/openlineage"


def owner(
    name: str = "job",
    *,
    job_type: str | None = None,
    facets: dict[str, Any] | None = None,
    parent: RunLink | None = None,
    root: RunLink | None = None,
) -> Owner:
    return owner_of(
        namespace="ns",
        name=name,
        run_id=RUN,
        job_type=job_type,
        facets=facets or {},
        parent=parent,
        root=root,
    )


def test_a_job_without_parent_is_its_own_dag() -> None:
    assert owner("etl") == Owner("ns", "etl", RUN, "self")


def test_a_job_that_says_it_is_a_dag_stays_its_own_even_with_a_parent() -> None:
    # Airflow 3.3: a DAG run triggered by another DAG names the triggering task as parent.
    parent = RunLink("ns", "upstream_dag.trigger", "task-run")
    root = RunLink("ns", "upstream_dag", ROOT_RUN)
    assert owner("downstream_dag", job_type="DAG", parent=parent, root=root) == Owner(
        "ns", "downstream_dag", RUN, "self"
    )
    facets = {"airflowDagRun": {"dag": {"dag_id": "downstream_dag"}, "dagRun": {}}}
    assert owner("downstream_dag", facets=facets, parent=parent).via == "self"


def test_an_airflow_task_belongs_to_the_dag_its_airflow_facet_names_not_to_the_root() -> None:
    facets = {"airflow": {"dag": {"dag_id": "triggered"}, "task": {"task_id": "load"}}}
    parent = RunLink("ns", "triggered", DAG_RUN)
    root = RunLink("ns", "triggering", ROOT_RUN)
    assert owner("triggered.load", job_type="TASK", facets=facets, parent=parent, root=root) == (
        Owner("ns", "triggered", DAG_RUN, "airflow")
    )


def test_a_job_under_a_task_belongs_to_the_root_and_remembers_its_parent_run() -> None:
    parent = RunLink("ns", "etl.load", "task-run")
    root = RunLink("airflow", "etl", ROOT_RUN)
    found = owner("spark_app", job_type="APPLICATION", parent=parent, root=root)
    assert found == Owner("airflow", "etl", ROOT_RUN, "root", parent_run_id="task-run")


def test_without_a_root_the_direct_parent_is_the_dag() -> None:
    parent = RunLink("ns", "etl", DAG_RUN)
    assert owner("etl.load", parent=parent) == Owner(
        "ns", "etl", DAG_RUN, "parent", parent_run_id=DAG_RUN
    )
    # a root without a run id says too little: the parent is used
    found = owner("etl.load", parent=parent, root=RunLink("ns", "top", None))
    assert (found.name, found.via) == ("etl", "parent")


@pytest.mark.parametrize(
    ("facet", "expected"),
    [
        ({"jobType": "dag", "integration": "AIRFLOW"}, "DAG"),
        ({"jobType": " TASK "}, "TASK"),
        ({"jobType": 3}, None),
        ({"jobType": ""}, None),
        ({"jobType": "X" * 40}, None),
        ("DAG", None),
    ],
)
def test_job_type_is_read_leniently(facet: Any, expected: str | None) -> None:
    assert job_type_of({"facets": {"jobType": facet}}) == expected


def test_the_interval_comes_from_the_airflow_dag_run_facets() -> None:
    dag_run = {
        "data_interval_start": "2021-06-04T00:00:00+00:00",
        "data_interval_end": "2021-06-05T00:00:00+00:00",
        "logical_date": "2021-06-04T00:00:00+00:00",
    }
    expected = (datetime(2021, 6, 4, tzinfo=UTC), datetime(2021, 6, 5, tzinfo=UTC))
    assert airflow_interval({"airflowDagRun": {"dagRun": dag_run}}) == expected
    assert airflow_interval({"airflow": {"dagRun": dag_run}}) == expected


def test_a_run_without_a_data_interval_is_its_logical_date() -> None:
    dag_run = {"data_interval_start": None, "logical_date": "2021-06-04T10:30:00Z"}
    point = datetime(2021, 6, 4, 10, 30, tzinfo=UTC)
    assert airflow_interval({"airflow": {"dagRun": dag_run}}) == (point, point)


@pytest.mark.parametrize(
    "value", ["9999-12-31T00:00:00+00:00", "not a date", "0001-01-01T00:00:00Z", 17, "2021"]
)
def test_absurd_or_malformed_facet_times_are_ignored(value: Any) -> None:
    facets = {"airflow": {"dagRun": {"data_interval_start": value, "logical_date": value}}}
    assert airflow_interval(facets) == (None, None)


def test_an_end_before_the_start_is_dropped() -> None:
    dag_run = {
        "data_interval_start": "2021-06-04T00:00:00Z",
        "data_interval_end": "2021-06-03T00:00:00Z",
    }
    assert airflow_interval({"airflow": {"dagRun": dag_run}}) == (
        datetime(2021, 6, 4, tzinfo=UTC),
        None,
    )


def test_failed_tasks_are_named_from_the_airflow_state_facet() -> None:
    facet = {"dagRunState": "failed", "tasksState": {"b": "failed", "a": "success", "c": "failed"}}
    assert failed_tasks_message(facet) == "Tasks failed: b, c"
    many = {"tasksState": {f"t{n:02}": "failed" for n in range(8)}}
    assert failed_tasks_message(many) == "Tasks failed: t00, t01, t02, t03, t04 and 3 more"
    assert failed_tasks_message({"tasksState": {"a": "success"}}) is None
    assert failed_tasks_message("failed") is None


@pytest.mark.parametrize("dag_id", ["x" * 1025, "a\x00b", "\ud800", "   ", 7])
def test_an_unusable_dag_id_in_the_airflow_facet_is_not_taken(dag_id: Any) -> None:
    facets = {"airflow": {"dag": {"dag_id": dag_id}}}
    parent = RunLink("ns", "etl", DAG_RUN)
    assert owner("etl.load", facets=facets, parent=parent).name == "etl"


def test_names_from_facets_carry_no_nul() -> None:
    assert job_type_of({"facets": {"jobType": {"jobType": "TASK\x00"}}}) is None
    assert failed_tasks_message({"tasksState": {"a\x00b": "failed"}}) == "Task failed: ab"


# -- where an event sits in Airflow -------------------------------------------------------------

SCHEDULED = "scheduled__2021-06-04T00:00:00+00:00"


def task_facets(run_id: Any = SCHEDULED, task_id: Any = "load", try_number: Any = 2) -> Any:
    return {
        "airflow": {
            "dag": {"dag_id": "etl"},
            "dagRun": {"dag_id": "etl", "run_id": run_id},
            "task": {"task_id": task_id},
            "taskInstance": {"try_number": try_number, "pool": "default_pool"},
        }
    }


def test_a_real_airflow_3_failure_names_its_run_task_and_try() -> None:
    # what a real Airflow 3.3.2 sent (tests/fixtures/openlineage/airflow-3.3.2/README.md)
    events = json.loads((FIXTURES / "airflow-3.3.2/failure.json").read_text())
    run_id = "manual__2026-11-24T01:09:59.421277+00:00"
    task_fail, dag_fail = (e for e in events if e["eventType"] == "FAIL")
    assert airflow_ref(task_fail["run"]["facets"]) == AirflowRef(run_id, "load", 1)
    # the DAG run's own event names its run and no task
    assert airflow_ref(dag_fail["run"]["facets"]) == AirflowRef(run_id)


def test_a_cleared_task_reports_its_next_try() -> None:
    events = json.loads((FIXTURES / "constructed/airflow33_triggered_dag.json").read_text())
    tries = [
        airflow_ref(e["run"]["facets"]).try_number
        for e in events
        if e["job"]["name"] == "food_delivery_courier_payouts.compute_payouts"
    ]
    assert tries == [1, 1, 2, 2]


def test_task_facets_are_read_from_the_airflow_run_facet() -> None:
    assert airflow_ref(task_facets()) == AirflowRef(SCHEDULED, "load", 2)
    assert airflow_ref({}) == AirflowRef()
    assert airflow_ref({"airflow": "load"}) == AirflowRef()


def test_the_dag_run_facet_wins_and_names_no_task() -> None:
    # `airflowDagRun` makes an event the DAG run's own (as for owner_of), even beside `airflow`
    facets = {**task_facets(), "airflowDagRun": {"dagRun": {"run_id": "manual__x"}}}
    assert airflow_ref(facets) == AirflowRef("manual__x")


@pytest.mark.parametrize(
    "value", [None, 7, "", "   ", "x" * 251, "a\x00b", "\ud800", ["scheduled__x"], {"id": 1}]
)
def test_unusable_ids_are_dropped_not_cut(value: Any) -> None:
    # a cut id would name another run or task: a link to it would mislead
    assert airflow_ref(task_facets(run_id=value)).run_id is None
    assert airflow_ref(task_facets(task_id=value)).task_id is None
    dag_run = {"airflowDagRun": {"dagRun": {"run_id": value}}}
    assert airflow_ref(dag_run) == AirflowRef()


def test_ids_up_to_airflows_own_length_are_kept_as_sent() -> None:
    longest = "r" * 250
    odd = "manual__2021-06-04T00:00:00+00:00/?#&%20 é"
    assert airflow_ref(task_facets(run_id=longest)).run_id == longest
    assert airflow_ref(task_facets(run_id=odd, task_id=odd)) == AirflowRef(odd, odd, 2)


@pytest.mark.parametrize(
    "value", [0, -1, 100_001, 2**63, True, False, 2.0, "2", None, [2], float("nan")]
)
def test_a_try_number_is_a_sane_positive_int_or_nothing(value: Any) -> None:
    assert airflow_ref(task_facets(try_number=value)) == AirflowRef(SCHEDULED, "load", None)


def test_the_sane_try_numbers_are_kept() -> None:
    assert airflow_ref(task_facets(try_number=1)).try_number == 1
    assert airflow_ref(task_facets(try_number=100_000)).try_number == 100_000


def test_a_try_without_its_task_is_dropped() -> None:
    assert airflow_ref(task_facets(task_id=None)) == AirflowRef(SCHEDULED)
