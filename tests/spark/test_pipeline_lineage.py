"""OpenLineage: `history_events` against the real runs' events, and a lineage server that is
down or refuses events never failing a job."""

from __future__ import annotations

import json
import logging
from collections import Counter
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest
import requests
from pyspark.sql import SparkSession

from bot.lineage.rules.graph import build_lineage
from pipeline.food_delivery import lineage
from pipeline.food_delivery.catalog import midnight
from pipeline.food_delivery.jobs import PipelineSettings, run_interval
from pipeline.food_delivery.lineage import LineageSink, history_events
from tests.spark.support import (
    FAILED_DAYS,
    FIRST_DAY,
    LAST_DAY,
    ORDERS_PER_DAY,
    Story,
    get_json,
    run_states,
    threaded_standin,
)


def shape(event: dict[str, Any]) -> str:
    """All an event says apart from its time, run ids and the bytes it wrote (which history
    only estimates: `sizes` compares them)."""
    copy = json.loads(json.dumps(event))
    del copy["eventTime"], copy["run"]["runId"]
    parent = copy["run"].get("facets", {}).get("parent")
    if parent is not None:
        del parent["run"]["runId"]
    for output in copy["outputs"]:
        output.get("outputFacets", {}).get("outputStatistics", {}).pop("size", None)
    return json.dumps(copy, sort_keys=True)


def sizes(events: list[dict[str, Any]]) -> dict[tuple[str, str], int]:
    """(task job, nominal start) → bytes written, from the COMPLETE events."""
    return {
        (e["job"]["name"], nominal(e)): o["outputFacets"]["outputStatistics"]["size"]
        for e in events
        if e["eventType"] == "COMPLETE"
        for o in e["outputs"]
    }


def test_history_events_are_deterministic_and_sorted() -> None:
    events = history_events(FIRST_DAY, LAST_DAY, fail_dates=FAILED_DAYS)
    assert events == history_events(FIRST_DAY, LAST_DAY, fail_dates=FAILED_DAYS)
    times = [e["eventTime"] for e in events]
    assert times == sorted(times)
    assert len(events) == 4 * (21 + 3 * 4)
    assert all(e["producer"] == lineage.PRODUCER for e in events)


@pytest.mark.spark
def test_history_events_match_what_the_runs_emitted(story: Story) -> None:
    history = history_events(
        FIRST_DAY, LAST_DAY, fail_dates=FAILED_DAYS, orders_per_day=ORDERS_PER_DAY
    )
    # Row and file counts included: history's are exactly what the runs wrote.
    assert Counter(map(shape, history)) == Counter(map(shape, story.events_after_failure))
    real, estimated = sizes(story.events_after_failure), sizes(history)
    assert real.keys() == estimated.keys()
    for key, size in real.items():
        assert abs(estimated[key] - size) <= 0.1 * size, key
    with threaded_standin() as server:
        for event in history:
            reply = requests.post(f"{server.url}/api/v1/lineage", json=event, timeout=10)
            assert reply.status_code == 201, reply.text
        assert run_states(server) == story.states_after_failure
        nodes = get_json(
            server, "/api/v1/lineage", nodeId="job:food_delivery:example.etl_orders.spark_job"
        )["graph"]
    real = build_lineage(story.lineage_nodes).dags
    assert set(build_lineage(nodes).dags.edges) == set(real.edges)
    assert len(real.edges) == 4


TEAMS = {  # examples/bot-config.yml
    "example.etl_orders": "orders",
    "example.etl_orders_7_days": "orders",
    "example.etl_delivery_7_days": "logistics",
    "example.delivery_times_7_days": "logistics",
    "example.orders_popular_day_of_week": "analytics",
}


def nominal(event: dict[str, Any]) -> str:
    start: str = event["run"]["facets"]["nominalTime"]["nominalStartTime"]
    return start


def test_task_events_name_their_dag_run_as_parent() -> None:
    events = history_events(date(2021, 6, 6), date(2021, 6, 12))
    dag_runs = {
        (e["job"]["name"], nominal(e)): e["run"]["runId"]
        for e in events
        if e["job"]["name"] in TEAMS
    }
    assert len(dag_runs) == 7 + 4  # seven days, one week of four weekly DAGs
    for event in events:
        name = event["job"]["name"]
        facets = event["run"]["facets"]
        dag = name.removesuffix(".spark_job")
        if name != dag:
            assert facets["parent"]["job"] == {"namespace": "food_delivery", "name": dag}
            assert facets["parent"]["run"]["runId"] == dag_runs[dag, nominal(event)]
            assert event["inputs"] or event["outputs"]
        else:
            assert "parent" not in facets
            assert event["inputs"] == event["outputs"] == []
        owners = event["job"]["facets"]["ownership"]["owners"]
        assert owners == [{"name": f"team:{TEAMS[dag]}", "type": "MAINTAINER"}]


def test_sink_sends_the_api_key_as_bearer_and_nothing_without_url() -> None:
    sink = LineageSink("http://127.0.0.1:9/base", "s3cret")
    assert sink._client is not None
    transport: Any = sink._client.transport
    assert transport._auth_headers(transport.config.auth) == {"Authorization": "Bearer s3cret"}
    assert transport.url == "http://127.0.0.1:9/base/"
    assert LineageSink(None)._client is None


@pytest.mark.spark
def test_unreachable_lineage_warns_once_and_runs_succeed(
    spark: SparkSession,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(lineage, "_warned_unreachable", False)
    settings = PipelineSettings(
        warehouse=tmp_path, lineage_url="http://127.0.0.1:9", orders_per_day=ORDERS_PER_DAY
    )
    day = midnight(date(2021, 6, 1))
    with caplog.at_level(logging.WARNING, logger="pipeline.food_delivery"):
        for n in range(2):
            start = day + timedelta(days=n)
            result = run_interval(
                spark, "example.etl_orders", start, start + timedelta(1), settings
            )
            assert result.rows_written > 0
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1
    assert "unreachable" in warnings[0].getMessage()


@pytest.mark.spark
def test_rejected_events_are_logged_and_the_run_succeeds(
    spark: SparkSession, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with threaded_standin() as server:
        # Marquez refuses dataset namespaces with spaces (400): the task's events are lost.
        settings = PipelineSettings(
            warehouse=tmp_path,
            lineage_url=server.url,
            namespace="food delivery",
            orders_per_day=ORDERS_PER_DAY,
        )
        day = midnight(date(2021, 6, 1))
        with caplog.at_level(logging.WARNING, logger="pipeline.food_delivery"):
            result = run_interval(spark, "example.etl_orders", day, day + timedelta(1), settings)
        stored = [e.body["job"]["name"] for e in server.state.events]
    assert result.rows_written > 0
    # Marquez refuses the event naming the bad namespace as it updates its model (its START
    # names no dataset and passes) and keeps the refused event's raw row all the same
    # (FIDELITY.md row 5): the DAG run's two events and the task's two are all in its feed.
    assert stored.count("example.etl_orders") == 2
    assert len(stored) == 4
    rejected = [r.getMessage() for r in caplog.records if "rejected" in r.getMessage()]
    assert len(rejected) == 1
    assert "HTTP 400" in rejected[0]
