"""OpenLineage events of a daily Spark task under an Airflow DAG, shaped as the Airflow
provider and the Spark integration send them (tests/fixtures/openlineage/constructed has the
real producers' own), with the data facets the data-quality checks read."""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

PRODUCER = "https://github.com/OpenLineage/OpenLineage/tree/1.52.0/integration/spark"
SPEC = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
NAMESPACE = "food_delivery"
ORDERS_FIELDS = [("order_id", "bigint"), ("customer_id", "bigint"), ("discount", "double")]

Event = dict[str, Any]


def _facet(name: str, **fields: Any) -> dict[str, Any]:
    return {
        "_producer": PRODUCER,
        "_schemaURL": f"https://openlineage.io/spec/facets/1-0-0/{name}.json#/$defs/{name}",
        **fields,
    }


def _time(value: datetime) -> str:
    return value.isoformat().replace("+00:00", "Z")


def output(
    name: str,
    rows: int | None,
    *,
    fields: list[tuple[str, str]] | None = None,
    lifecycle: str | None = None,
    columns: dict[str, list[tuple[str, str, str]]] | None = None,
    size: int | None = None,
) -> dict[str, Any]:
    facets: dict[str, Any] = {}
    if fields is not None:
        facets["schema"] = _facet(
            "SchemaDatasetFacet", fields=[{"name": n, "type": t} for n, t in fields]
        )
    if lifecycle is not None:
        facets["lifecycleStateChange"] = _facet(
            "LifecycleStateChangeDatasetFacet", lifecycleStateChange=lifecycle
        )
    if columns is not None:
        facets["columnLineage"] = _facet(
            "ColumnLineageDatasetFacet",
            fields={
                column: {
                    "inputFields": [
                        {"namespace": ns, "name": ds, "field": f} for ns, ds, f in inputs
                    ]
                }
                for column, inputs in columns.items()
            },
        )
    stats: dict[str, Any] = {}
    if rows is not None:
        stats["rowCount"] = rows
    if size is not None:
        stats["size"] = size
    item: dict[str, Any] = {"namespace": NAMESPACE, "name": name, "facets": facets}
    if stats:
        item["outputFacets"] = {
            "outputStatistics": _facet("OutputStatisticsOutputDatasetFacet", **stats)
        }
    return item


def daily_run(
    day: date,
    outputs: list[dict[str, Any]],
    *,
    dag: str = "example.etl_orders",
    inputs: list[dict[str, Any]] | None = None,
    attempt: int = 0,
) -> list[Event]:
    """DAG START, task COMPLETE (with the datasets), DAG COMPLETE of the run for `day`;
    `attempt` > 0 is a rerun of that interval, hours later, with new run ids."""
    start = datetime.combine(day, time(), UTC)
    end = start + timedelta(days=1)
    began = end + timedelta(minutes=5, days=3 * attempt)  # reruns come after later days
    dag_run = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{dag}/{day}/{attempt}"))
    task_run = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{dag}/{day}/{attempt}/task"))
    nominal = _facet(
        "NominalTimeRunFacet", nominalStartTime=_time(start), nominalEndTime=_time(end)
    )
    parent = _facet(
        "ParentRunFacet",
        run={"runId": dag_run},
        job={"namespace": NAMESPACE, "name": dag},
        root={"run": {"runId": dag_run}, "job": {"namespace": NAMESPACE, "name": dag}},
    )

    def event(
        kind: str, at: datetime, job: str, run: str, facets: dict[str, Any], **rest: Any
    ) -> Event:
        return {
            "eventType": kind,
            "eventTime": _time(at),
            "run": {"runId": run, "facets": facets},
            "job": {"namespace": NAMESPACE, "name": job, "facets": {}},
            "inputs": rest.get("inputs", []),
            "outputs": rest.get("outputs", []),
            "producer": PRODUCER,
            "schemaURL": SPEC,
        }

    done = began + timedelta(minutes=4)
    return [
        event("START", began, dag, dag_run, {"nominalTime": nominal}),
        event(
            "COMPLETE",
            done,
            f"{dag}.spark_job",
            task_run,
            {"parent": parent},
            inputs=inputs or [],
            outputs=outputs,
        ),
        event("COMPLETE", done + timedelta(seconds=5), dag, dag_run, {"nominalTime": nominal}),
    ]
