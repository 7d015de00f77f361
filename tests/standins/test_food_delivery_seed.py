"""The `food_delivery` seed: deterministic history with the schedules, failures and DAGs."""

from __future__ import annotations

from collections import defaultdict
from datetime import date, datetime, timedelta
from typing import Any

import pytest

from standins.marquez.state import MarquezState
from standins.seeds.food_delivery import food_delivery_events

AIRFLOW = "https://github.com/OpenLineage/OpenLineage/tree/1.9.1/integration/airflow"
FD = "food_delivery"
SOURCES = [
    "etl_menus", "etl_categories", "etl_menu_items", "etl_orders",
    "etl_customers", "etl_order_status", "etl_drivers", "etl_restaurants",
]  # fmt: skip
DAILY = [f"example.{name}" for name in SOURCES] + ["example.email_discounts"]
WEEKLY = [
    "example.etl_orders_7_days", "example.etl_delivery_7_days",
    "example.delivery_times_7_days", "example.orders_popular_day_of_week",
]  # fmt: skip
TASKS = {
    "example.etl_delivery_7_days.extract": "example.etl_delivery_7_days",
    "example.etl_delivery_7_days.load": "example.etl_delivery_7_days",
    "example.delivery_times_7_days.top_delivery_times": "example.delivery_times_7_days",
    "example.delivery_times_7_days.discounts": "example.delivery_times_7_days",
}
# What each job reads and writes (the template's graph, with the two DAGs split into tasks).
IO = {
    **{f"example.{n}": (set(), {f"public.{n.removeprefix('etl_')}"}) for n in SOURCES},
    "example.etl_orders_7_days": (
        {"public.menus", "public.menu_items", "public.orders", "public.categories"},
        {"public.orders_7_days"},
    ),
    "example.etl_delivery_7_days.extract": (
        {
            "public.orders_7_days",
            "public.customers",
            "public.order_status",
            "public.drivers",
            "public.restaurants",
        },
        {"tmp.delivery_7_days_staging"},
    ),
    "example.etl_delivery_7_days.load": (
        {"tmp.delivery_7_days_staging"},
        {"public.delivery_7_days"},
    ),
    "example.delivery_times_7_days.top_delivery_times": (
        {"public.delivery_7_days"},
        {"public.top_delivery_times"},
    ),
    "example.delivery_times_7_days.discounts": ({"public.delivery_7_days"}, {"public.discounts"}),
    "example.orders_popular_day_of_week": (
        {"public.top_delivery_times", "public.customers"},
        {"public.popular_orders_day_of_week"},
    ),
    "example.email_discounts": ({"public.discounts", "public.customers"}, set()),
    "example.etl_delivery_7_days": (set(), set()),
    "example.delivery_times_7_days": (set(), set()),
}


def when(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


@pytest.fixture(scope="module")
def events() -> list[dict[str, Any]]:
    return food_delivery_events()


def starts(events: list[dict[str, Any]], job: str) -> list[dict[str, Any]]:
    return [e for e in events if e["job"]["name"] == job and e["eventType"] == "START"]


def test_deterministic_sorted_and_independent(events: list[dict[str, Any]]) -> None:
    again = food_delivery_events()
    assert again == events
    assert [when(e["eventTime"]) for e in events] == sorted(when(e["eventTime"]) for e in events)
    # Mutating one event (or one call's list) must not leak into another.
    name = again[0]["job"]["name"]
    again[0]["job"]["facets"]["sql"]["query"] = "changed"
    next_start = next(
        e for e in again[1:] if e["job"]["name"] == name and e["eventType"] == "START"
    )
    assert next_start["job"]["facets"]["sql"]["query"] != "changed"
    assert food_delivery_events() == events


def test_every_run_has_one_start_and_one_end_with_a_stable_id(events: list[dict[str, Any]]) -> None:
    by_run: dict[str, list[str]] = defaultdict(list)
    for e in events:
        by_run[e["run"]["runId"]].append(e["eventType"])
    assert all(types[0] == "START" and len(types) == 2 for types in by_run.values())
    assert len(by_run) == 21 * 9 + 3 * (2 + 3 + 3) + 3  # daily, weekly (DAG + tasks), reporting
    jobs = {e["job"]["name"] for e in events}
    assert jobs == set(DAILY) | set(WEEKLY) | set(TASKS) | {"reporting.weekly_kpis"}


def test_everything_is_ingestible(events: list[dict[str, Any]]) -> None:
    state = MarquezState()
    for e in events:
        state.ingest(e)
    assert set(state.namespaces) == {FD, "reporting"}


@pytest.mark.parametrize("job", DAILY)
def test_daily_jobs_cover_each_day_and_start_after_their_interval(
    events: list[dict[str, Any]], job: str
) -> None:
    runs = starts(events, job)
    nominal = [r["run"]["facets"]["nominalTime"] for r in runs]
    days = [when(n["nominalStartTime"]).date() for n in nominal]
    assert days == [date(2021, 5, 24) + timedelta(days=d) for d in range(21)]
    for run, n in zip(runs, nominal, strict=True):
        end = when(n["nominalEndTime"])
        assert end - when(n["nominalStartTime"]) == timedelta(days=1)
        assert timedelta(0) < when(run["eventTime"]) - end < timedelta(hours=4)


@pytest.mark.parametrize("job", [*WEEKLY, *TASKS])
def test_weekly_jobs_run_over_sunday_to_sunday(events: list[dict[str, Any]], job: str) -> None:
    nominal = [r["run"]["facets"]["nominalTime"] for r in starts(events, job)]
    sundays = [when(n["nominalStartTime"]).date() for n in nominal]
    assert sundays == [date(2021, 5, 23), date(2021, 5, 30), date(2021, 6, 6)]
    assert all(d.weekday() == 6 for d in sundays)
    assert all(
        when(n["nominalEndTime"]) - when(n["nominalStartTime"]) == timedelta(days=7)
        for n in nominal
    )


def test_runs_last_five_to_ten_minutes(events: list[dict[str, Any]]) -> None:
    start_at = {
        e["run"]["runId"]: when(e["eventTime"]) for e in events if e["eventType"] == "START"
    }
    for e in events:
        if e["eventType"] != "START" and e["job"]["name"] not in WEEKLY[1:3]:  # DAGs span tasks
            assert (
                timedelta(minutes=5)
                <= when(e["eventTime"]) - start_at[e["run"]["runId"]]
                <= timedelta(minutes=10)
            )


def test_only_three_etl_orders_runs_fail(events: list[dict[str, Any]]) -> None:
    fails = [e for e in events if e["eventType"] == "FAIL"]
    assert {e["job"]["name"] for e in fails} == {"example.etl_orders"}
    start_of = {e["run"]["runId"]: e for e in starts(events, "example.etl_orders")}
    days = sorted(
        start_of[e["run"]["runId"]]["run"]["facets"]["nominalTime"]["nominalStartTime"][:10]
        for e in fails
    )
    assert days == ["2021-06-04", "2021-06-05", "2021-06-06"]
    assert all(e["run"]["facets"]["errorMessage"]["message"] for e in fails)
    assert sum(e["eventType"] == "COMPLETE" for e in events) == len(events) // 2 - 3


def test_task_events_point_at_their_dag_run(events: list[dict[str, Any]]) -> None:
    dag_runs = {
        e["run"]["runId"]: e
        for e in events
        if e["job"]["name"] in TASKS.values() and e["eventType"] == "START"
    }
    for e in events:
        name = e["job"]["name"]
        if name in TASKS:
            parent = e["run"]["facets"]["parent"]
            assert parent["job"] == {"namespace": FD, "name": TASKS[name]}
            dag_start = dag_runs[parent["run"]["runId"]]
            if e["eventType"] == "START":
                assert (
                    e["run"]["facets"]["nominalTime"] == dag_start["run"]["facets"]["nominalTime"]
                )
                assert e["eventTime"] > dag_start["eventTime"]
        if name in TASKS or name in TASKS.values():
            assert e["producer"] == AIRFLOW
        else:
            assert e["producer"] != AIRFLOW
            assert "parent" not in e["run"].get("facets", {})
    assert all(not e["inputs"] and not e["outputs"] for e in dag_runs.values())


@pytest.mark.parametrize("job", sorted(IO))
def test_jobs_read_and_write_the_template_datasets(events: list[dict[str, Any]], job: str) -> None:
    for e in starts(events, job):
        assert {i["name"] for i in e["inputs"]} == IO[job][0]
        assert {o["name"] for o in e["outputs"]} == IO[job][1]
        assert {d["namespace"] for d in e["inputs"] + e["outputs"]} <= {FD}


def test_ownership_only_on_the_orders_jobs(events: list[dict[str, Any]]) -> None:
    owned = {e["job"]["name"] for e in events if "ownership" in e["job"].get("facets", {})}
    assert owned == {"example.etl_orders", "example.etl_orders_7_days"}
    facet = starts(events, "example.etl_orders")[0]["job"]["facets"]["ownership"]
    assert facet["owners"] == [{"name": "team:orders", "type": "MAINTAINER"}]
    assert facet["_producer"]
    assert facet["_schemaURL"]


def test_reporting_job_reads_across_namespaces_every_monday(events: list[dict[str, Any]]) -> None:
    runs = starts(events, "reporting.weekly_kpis")
    assert {r["job"]["namespace"] for r in runs} == {"reporting"}
    mondays = [when(r["run"]["facets"]["nominalTime"]["nominalStartTime"]).date() for r in runs]
    assert mondays == [date(2021, 5, 24), date(2021, 5, 31), date(2021, 6, 7)]
    assert all(
        r["inputs"] == [{"namespace": FD, "name": "public.delivery_7_days"}]
        and [(o["namespace"], o["name"]) for o in r["outputs"]] == [("reporting", "kpis.weekly")]
        for r in runs
    )
