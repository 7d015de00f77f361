"""The `food_delivery` seed: three weeks of OpenLineage history for the Marquez stand-in.

Built on Marquez's quickstart sample (`docker/metadata.template.json` of MarquezProject/marquez,
tag 0.51.1, Apache-2.0; its facets are copied into `data/food_delivery_template.json`, see the
README there). Jobs get the `example.` prefix of the Marquez backfill blog post, real schedules
(nominalTime facets), three failed `example.etl_orders` runs, the sample's data-quality
assertions holding, two Airflow DAGs reported at task level (parent run facets), ownership
facets and a downstream job in a second namespace.
Everything is deterministic: fixed times and uuid5 run ids.
"""

from __future__ import annotations

import copy
import functools
import json
import uuid
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from importlib import resources
from typing import Any

JsonDict = dict[str, Any]

NAMESPACE = "food_delivery"
REPORTING_NAMESPACE = "reporting"
PREFIX = "example."
AIRFLOW_PRODUCER = "https://github.com/OpenLineage/OpenLineage/tree/1.9.1/integration/airflow"
AIRFLOW_SCHEMA_URL = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/definitions/RunEvent"
DAILY_DAYS = tuple(date(2021, 5, 24) + timedelta(days=n) for n in range(21))  # ..2021-06-13
WEEKLY_SUNDAYS = (date(2021, 5, 23), date(2021, 5, 30), date(2021, 6, 6))
REPORTING_MONDAYS = (date(2021, 5, 24), date(2021, 5, 31), date(2021, 6, 7))
FAILED_ORDERS_DAYS = frozenset({date(2021, 6, 4), date(2021, 6, 5), date(2021, 6, 6)})
SOURCE_JOBS = (
    "etl_menus",
    "etl_categories",
    "etl_menu_items",
    "etl_orders",
    "etl_customers",
    "etl_order_status",
    "etl_drivers",
    "etl_restaurants",
)
OWNED_JOBS = frozenset({"etl_orders", "etl_orders_7_days"})
STAGING = "tmp.delivery_7_days_staging"
_RUN_IDS = uuid.UUID("6f1d6a0e-4b8e-5c1a-9f3e-0d2b7c4a1e55")  # uuid5 namespace of the seed


@functools.cache
def _template_text() -> str:
    path = resources.files("standins.seeds").joinpath("data", "food_delivery_template.json")
    return path.read_text(encoding="utf-8")


def _template() -> JsonDict:
    # Parsed per call: every seed gets its own objects, so callers may mutate them.
    data: JsonDict = json.loads(_template_text())
    _passing(data)
    return data


def _passing(value: Any) -> None:
    """Every data-quality assertion of the sample made to hold. The sample's `not_null` check of
    `delivery_7_days.driver_id` fails in each of its runs (a static example, not a story); the
    bot would hold a data incident open on it for good, and the stories told over this seed are
    about the failures and bad data they put there themselves."""
    if isinstance(value, dict):
        if isinstance(value.get("assertions"), list):
            for assertion in value["assertions"]:
                assertion["success"] = True
        for item in value.values():
            _passing(item)
    elif isinstance(value, list):
        for item in value:
            _passing(item)


def _at(day: date, hour: int, minute: int) -> datetime:
    return datetime(day.year, day.month, day.day, hour, minute, tzinfo=UTC)


def _time(value: datetime) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%S.000Z")  # the format docker/seed.sh fills in


def _reproduce(obj: Any, producer: str) -> Any:
    """A copy of facets with every `_producer` replaced (Airflow-reported copies)."""
    if isinstance(obj, dict):
        return {
            k: producer if k == "_producer" else _reproduce(v, producer) for k, v in obj.items()
        }
    if isinstance(obj, list):
        return [_reproduce(v, producer) for v in obj]
    return obj


@dataclass(frozen=True)
class _Run:
    namespace: str
    job: str
    start: datetime
    minutes: int
    interval: tuple[datetime, datetime]
    job_facets: JsonDict
    inputs: tuple[JsonDict, ...] = ()
    outputs: tuple[JsonDict, ...] = ()
    airflow: bool = False
    parent: tuple[str, str] | None = None  # (DAG job name, DAG run id)
    fail_message: str | None = None

    @property
    def run_id(self) -> str:
        key = f"{self.namespace}/{self.job}/{self.interval[0].isoformat()}"
        return str(uuid.uuid5(_RUN_IDS, key))


class _Builder:
    def __init__(self) -> None:
        self.data = _template()
        self.producer: str = self.data["producer"]
        self.events: list[JsonDict] = []

    def job(self, name: str) -> JsonDict:
        job: JsonDict = self.data["jobs"][name]
        return job

    def facet(self, schema: str, producer: str, **fields: Any) -> JsonDict:
        return {"_producer": producer, "_schemaURL": schema, **fields}

    def emit(self, run: _Run) -> None:
        producer = AIRFLOW_PRODUCER if run.airflow else self.producer
        schema_url = AIRFLOW_SCHEMA_URL if run.airflow else self.data["schemaURL"]
        nominal = self.facet(
            self.data["nominalTimeSchemaURL"],
            producer,
            nominalStartTime=_time(run.interval[0]),
            nominalEndTime=_time(run.interval[1]),
        )
        start_facets: JsonDict = {"nominalTime": nominal}
        end_facets: JsonDict = {}
        if run.parent is not None:
            parent = self.facet(
                "https://openlineage.io/spec/facets/1-0-0/ParentRunFacet.json",
                producer,
                run={"runId": run.parent[1]},
                job={"namespace": run.namespace, "name": run.parent[0]},
            )
            start_facets["parent"] = end_facets["parent"] = parent
        if run.fail_message is not None:
            end_facets["errorMessage"] = self.facet(
                "https://openlineage.io/spec/facets/1-0-0/ErrorMessageRunFacet.json",
                producer,
                message=run.fail_message,
                programmingLanguage="SQL",
            )
        job_facets, inputs, outputs = run.job_facets, list(run.inputs), list(run.outputs)
        if run.airflow:
            job_facets = _reproduce(job_facets, producer)
            inputs, outputs = _reproduce(inputs, producer), _reproduce(outputs, producer)
        start: JsonDict = {
            "eventType": "START",
            "eventTime": _time(run.start),
            "run": {"runId": run.run_id, "facets": start_facets},
            "job": {"namespace": run.namespace, "name": run.job, "facets": job_facets},
            "inputs": inputs,
            "outputs": outputs,
            "producer": producer,
            "schemaURL": schema_url,
        }
        end: JsonDict = {
            "eventType": "COMPLETE" if run.fail_message is None else "FAIL",
            "eventTime": _time(run.start + timedelta(minutes=run.minutes)),
            "run": {"runId": run.run_id, **({"facets": end_facets} if end_facets else {})},
            "job": {"namespace": run.namespace, "name": run.job},
            "producer": producer,
            "schemaURL": schema_url,
        }
        if run.airflow:  # the Airflow integration repeats the datasets on completion
            end["inputs"], end["outputs"] = inputs, outputs
        self.events += [start, end]

    def template_run(self, name: str, start: datetime, interval: tuple[datetime, datetime]) -> None:
        job = self.job(name)
        facets = dict(job["facets"])
        if name in OWNED_JOBS:
            facets["ownership"] = self.facet(
                "https://openlineage.io/spec/facets/1-0-1/OwnershipJobFacet.json",
                self.producer,
                owners=[{"name": "team:orders", "type": "MAINTAINER"}],
            )
        failed = name == "etl_orders" and interval[0].date() in FAILED_ORDERS_DAYS
        message = 'relation "tmp_orders" does not exist' if failed else None
        self.emit(
            _Run(
                NAMESPACE, PREFIX + name, start, job["runMinutes"], interval, facets,
                tuple(job["inputs"]), tuple(job["outputs"]), fail_message=message,
            )
        )  # fmt: skip

    def dag(
        self,
        dag: str,
        start: datetime,
        interval: tuple[datetime, datetime],
        tasks: list[tuple[str, int, int, JsonDict, list[JsonDict], list[JsonDict]]],
    ) -> None:
        """One Airflow DAG run: DAG-level START/COMPLETE plus task runs pointing at it."""
        doc = {"documentation": self.job(dag)["facets"]["documentation"]}
        end_minute = max(offset + minutes for _, offset, minutes, *_ in tasks) + 1
        dag_run = _Run(NAMESPACE, PREFIX + dag, start, end_minute, interval, doc, airflow=True)
        self.emit(dag_run)
        for task, offset, minutes, facets, inputs, outputs in tasks:
            self.emit(
                _Run(
                    NAMESPACE, f"{PREFIX}{dag}.{task}", start + timedelta(minutes=offset),
                    minutes, interval, facets, tuple(inputs), tuple(outputs), airflow=True,
                    parent=(PREFIX + dag, dag_run.run_id),
                )
            )  # fmt: skip


def _sql(builder: _Builder, query: str, description: str) -> JsonDict:
    producer = builder.producer
    return {
        "sql": builder.facet(
            "https://openlineage.io/spec/facets/1-0-0/SQLJobFacet.json", producer, query=query
        ),
        "documentation": builder.facet(
            "https://openlineage.io/spec/facets/1-0-0/DocumentationJobFacet.json",
            producer,
            description=description,
        ),
    }


def _ref(namespace: str, name: str) -> JsonDict:
    return {"namespace": namespace, "name": name}


def _delivery_tasks(
    b: _Builder,
) -> list[tuple[str, int, int, JsonDict, list[JsonDict], list[JsonDict]]]:
    job = b.job("etl_delivery_7_days")
    final = job["outputs"][0]
    staging = copy.deepcopy(final)
    staging["name"] = STAGING
    staging["facets"] = {k: v for k, v in staging["facets"].items() if k != "columnLineage"}
    staging["facets"]["documentation"]["description"] = "Staging copy of the week's deliveries."
    extract_sql = job["facets"]["sql"]["query"].replace(
        "INSERT INTO delivery_7_days", f"INSERT INTO {STAGING}"
    )
    return [
        ("extract", 1, 6, _sql(b, extract_sql, "Extracts the week's deliveries into staging."),
         job["inputs"], [staging]),
        ("load", 8, 5, _sql(b, f"INSERT INTO delivery_7_days SELECT * FROM {STAGING};",
                            "Loads staged deliveries into delivery_7_days."),
         [_ref(NAMESPACE, STAGING)], [final]),
    ]  # fmt: skip


def _delivery_times_tasks(
    b: _Builder,
) -> list[tuple[str, int, int, JsonDict, list[JsonDict], list[JsonDict]]]:
    job = b.job("delivery_times_7_days")
    top, discounts = job["outputs"]
    top_sql, discounts_sql = (q.strip() + ";" for q in job["facets"]["sql"]["query"].split(";")[:2])
    source = [_ref(NAMESPACE, "public.delivery_7_days")]
    return [
        ("top_delivery_times", 1, 6, _sql(b, top_sql, "Top delivery times by restaurant."),
         source, [top]),
        ("discounts", 1, 5, _sql(b, discounts_sql, "Discounts for slow deliveries."),
         source, [discounts]),
    ]  # fmt: skip


def _weekly_kpis(b: _Builder, monday: date) -> None:
    interval = (_at(monday, 0, 0), _at(monday + timedelta(days=7), 0, 0))
    output = _ref(REPORTING_NAMESPACE, "kpis.weekly")
    output["facets"] = {
        "schema": b.facet(
            "https://openlineage.io/spec/facets/1-0-0/SchemaDatasetFacet.json",
            b.producer,
            fields=[
                {"name": "week_start", "type": "DATE", "description": "First day of the week."},
                {"name": "deliveries", "type": "INTEGER", "description": "Deliveries made."},
                {"name": "avg_delivery_minutes", "type": "DOUBLE", "description": "Mean time."},
            ],
        ),
        "dataSource": b.facet(
            "https://openlineage.io/spec/facets/1-0-0/DatasourceDatasetFacet.json",
            b.producer,
            name="reporting_db",
            uri="postgres://reporting@postgres:5432/reporting",
        ),
    }
    facets = _sql(
        b,
        "INSERT INTO kpis.weekly SELECT ... FROM food_delivery.public.delivery_7_days;",
        "Weekly delivery KPIs for the reporting team.",
    )
    b.emit(
        _Run(
            REPORTING_NAMESPACE, "reporting.weekly_kpis", _at(interval[1].date(), 4, 0), 6,
            interval, facets, (_ref(NAMESPACE, "public.delivery_7_days"),), (output,),
        )
    )  # fmt: skip


def food_delivery_events() -> list[dict[str, Any]]:
    """The seed's OpenLineage RunEvents, sorted by eventTime (fresh objects on every call)."""
    b = _Builder()
    for day in DAILY_DAYS:
        interval = (_at(day, 0, 0), _at(day + timedelta(days=1), 0, 0))
        next_day = day + timedelta(days=1)
        for index, name in enumerate(SOURCE_JOBS):
            b.template_run(name, _at(next_day, 0, 5 + index), interval)
        b.template_run("email_discounts", _at(next_day, 3, 0), interval)
    for sunday in WEEKLY_SUNDAYS:
        interval = (_at(sunday, 0, 0), _at(sunday + timedelta(days=7), 0, 0))
        run_day = interval[1].date()
        b.template_run("etl_orders_7_days", _at(run_day, 1, 0), interval)
        b.dag("etl_delivery_7_days", _at(run_day, 1, 15), interval, _delivery_tasks(b))
        b.dag("delivery_times_7_days", _at(run_day, 1, 45), interval, _delivery_times_tasks(b))
        b.template_run("orders_popular_day_of_week", _at(run_day, 2, 15), interval)
    for monday in REPORTING_MONDAYS:
        _weekly_kpis(b, monday)
    order = {id(e): n for n, e in enumerate(b.events)}
    events = sorted(b.events, key=lambda e: (e["eventTime"], order[id(e)]))
    # Events share template facets while being built; a JSON round trip makes each one its own.
    fresh: list[dict[str, Any]] = json.loads(json.dumps(events))
    return fresh
