"""Links into the Airflow 2 and 3 UIs, as pure functions of plain data
(bot/incidents/rules/airflow_links.py)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import pytest

from bot.incidents.rules.airflow_links import run_url, task_log_url

BASE = "https://airflow.example.com"
SCHEDULED = "scheduled__2021-06-04T00:00:00+00:00"
ENCODED = "scheduled__2021-06-04T00%3A00%3A00%2B00%3A00"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures/openlineage"


# -- Airflow 3 ----------------------------------------------------------------------------------


def test_airflow_3_run_page() -> None:
    assert run_url(BASE, 3, "etl_orders", SCHEDULED) == (f"{BASE}/dags/etl_orders/runs/{ENCODED}")


def test_airflow_3_task_log_selects_the_try() -> None:
    assert task_log_url(BASE, 3, "etl_orders", SCHEDULED, "load", 2) == (
        f"{BASE}/dags/etl_orders/runs/{ENCODED}/tasks/load?try_number=2"
    )


@pytest.mark.parametrize("try_number", [None, 0, -1, True])
def test_airflow_3_without_a_usable_try_the_ui_shows_the_latest(try_number: Any) -> None:
    assert task_log_url(BASE, 3, "etl_orders", SCHEDULED, "load", try_number) == (
        f"{BASE}/dags/etl_orders/runs/{ENCODED}/tasks/load"
    )


def test_airflow_3_links_are_the_ones_airflow_itself_sends() -> None:
    # the provider puts TaskInstance.log_url of a real Airflow 3.3.2 in its `airflow` facet
    events = json.loads((FIXTURES / "airflow-3.3.2/failure.json").read_text())
    task_fail = next(e for e in events if e["eventType"] == "FAIL")
    facet = task_fail["run"]["facets"]["airflow"]
    sent = facet["taskInstance"]["log_url"]
    base = sent[: sent.index("/dags/")]
    ours = task_log_url(
        base,
        3,
        facet["dag"]["dag_id"],
        facet["dagRun"]["run_id"],
        facet["task"]["task_id"],
        facet["taskInstance"]["try_number"],
    )
    assert ours == sent


def test_later_versions_use_the_airflow_3_routes() -> None:
    assert run_url(BASE, 4, "etl", "r") == f"{BASE}/dags/etl/runs/r"


# -- Airflow 2 ----------------------------------------------------------------------------------


def test_airflow_2_run_is_selected_in_the_grid() -> None:
    assert run_url(BASE, 2, "etl_orders", SCHEDULED) == (
        f"{BASE}/dags/etl_orders/grid?dag_run_id={ENCODED}"
    )


def test_airflow_2_task_log_is_the_grids_logs_tab() -> None:
    # the grid has no parameter for the try: its log tab opens on the latest
    assert task_log_url(BASE, 2, "etl_orders", SCHEDULED, "load", 3) == (
        f"{BASE}/dags/etl_orders/grid?dag_run_id={ENCODED}&task_id=load&tab=logs"
    )


def test_airflow_2_base_date_brings_an_older_run_into_the_grid() -> None:
    logical = datetime(2021, 6, 4, 2, tzinfo=timezone(timedelta(hours=2)))
    url = task_log_url(BASE, 2, "etl", SCHEDULED, "load", 1, logical_date=logical)
    query = parse_qs(urlsplit(url).query)
    assert query == {
        "dag_run_id": [SCHEDULED],
        "task_id": ["load"],
        "base_date": ["2021-06-04T00:00:00+00:00"],
        "tab": ["logs"],
    }
    naive = datetime(2021, 6, 4)  # taken as UTC
    assert "base_date=2021-06-04T00%3A00%3A00%2B00%3A00" in run_url(
        BASE, 2, "etl", SCHEDULED, logical_date=naive
    )


def test_airflow_3_ignores_the_logical_date() -> None:
    at = datetime(2021, 6, 4, tzinfo=UTC)
    assert run_url(BASE, 3, "etl", "r", logical_date=at) == run_url(BASE, 3, "etl", "r")


# -- hostile ids and bases ----------------------------------------------------------------------

HOSTILE = [
    "a/b",
    "../../admin",
    "x?y=1",
    "x#frag",
    "x&tab=code",
    "50%",
    "a b+c",
    "é ü 漢",
    "<script>",
    "'\"`",
    "line\nbreak",
]


@pytest.mark.parametrize("hostile", HOSTILE)
def test_airflow_3_hostile_ids_stay_single_path_segments(hostile: str) -> None:
    url = task_log_url(BASE, 3, hostile, hostile, hostile, 1)
    parts = urlsplit(url)
    assert (parts.scheme, parts.netloc, parts.query, parts.fragment) == (
        "https",
        "airflow.example.com",
        "try_number=1",
        "",
    )
    segments = parts.path.split("/")
    assert [segments[i] for i in (0, 1, 3, 5)] == ["", "dags", "runs", "tasks"]
    assert len(segments) == 7
    assert [unquote(segments[i]) for i in (2, 4, 6)] == [hostile] * 3


@pytest.mark.parametrize("hostile", HOSTILE)
def test_airflow_2_hostile_ids_stay_single_query_values(hostile: str) -> None:
    url = task_log_url(BASE, 2, hostile, hostile, hostile, 1)
    parts = urlsplit(url)
    assert parts.fragment == ""
    segments = parts.path.split("/")
    assert segments[:2] + segments[3:] == ["", "dags", "grid"]
    assert unquote(segments[2]) == hostile
    assert parse_qs(parts.query, keep_blank_values=True) == {
        "dag_run_id": [hostile],
        "task_id": [hostile],
        "tab": ["logs"],
    }


def test_every_reserved_character_is_encoded() -> None:
    url = run_url(BASE, 3, "d", ":/?#[]@!$&'()*+,;=%")
    assert url == f"{BASE}/dags/d/runs/%3A%2F%3F%23%5B%5D%40%21%24%26%27%28%29%2A%2B%2C%3B%3D%25"


def test_a_lone_surrogate_becomes_a_replacement_not_a_crash() -> None:
    assert run_url(BASE, 3, "d", "a\ud800b") == f"{BASE}/dags/d/runs/a%3Fb"


@pytest.mark.parametrize(
    "base",
    ["https://h/airflow", "https://h/airflow/", "https://h/airflow//", " https://h/airflow "],
)
def test_a_base_under_a_path_keeps_it_once(base: str) -> None:
    assert run_url(base, 3, "etl", "r") == "https://h/airflow/dags/etl/runs/r"


@pytest.mark.parametrize(
    ("base", "version", "dag_id", "run_id"),
    [
        ("", 3, "etl", "r"),
        ("  /  ", 3, "etl", "r"),
        (BASE, 3, "", "r"),
        (BASE, 3, "etl", "   "),
        (BASE, 1, "etl", "r"),
        (BASE, True, "etl", "r"),
    ],
)
def test_a_link_without_what_it_needs_is_refused(
    base: str, version: Any, dag_id: str, run_id: str
) -> None:
    with pytest.raises(ValueError, match=r"an Airflow UI link needs|no Airflow UI links"):
        run_url(base, version, dag_id, run_id)


def test_a_task_log_without_a_task_is_refused() -> None:
    with pytest.raises(ValueError, match="needs a task_id"):
        task_log_url(BASE, 3, "etl", "r", "", 1)
