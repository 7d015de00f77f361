"""OpenLineage events of the pipeline, shaped like those of Airflow's OpenLineage integration.

A run of DAG `example.x` over one interval reports two runs: the DAG run (job `example.x`, no
datasets) and its task run (job `example.x.spark_job`, with the datasets it read and wrote and
a `parent` facet naming the DAG run). Marquez files the task under the DAG, and the bot rolls
task lineage up to DAGs the same way. `history_events` builds the very events a scheduler
would have produced over some days, without Spark, to seed a Marquez stand-in quickly.

As the OpenLineage Spark integration does, the task's output datasets carry the
`columnLineage` facet (declared in transforms.COLUMN_LINEAGE), and on COMPLETE the
`outputStatistics` output facet: the rows, bytes and files the run wrote, so a watcher can tell
a run that wrote nothing from one that did.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pyspark
from openlineage.client import OpenLineageClient
from openlineage.client.constants import DEFAULT_PRODUCER
from openlineage.client.event_v2 import (
    InputDataset,
    Job,
    OutputDataset,
    Run,
    RunEvent,
    RunState,
)
from openlineage.client.generated import (
    column_lineage_dataset,
    documentation_dataset,
    documentation_job,
    error_message_run,
    job_type_job,
    nominal_time_run,
    ownership_job,
    parent_run,
    processing_engine_run,
    schema_dataset,
)
from openlineage.client.generated.base import OutputDatasetFacet
from openlineage.client.generated.output_statistics_output_dataset import (
    OutputStatisticsOutputDatasetFacet,
)
from openlineage.client.serde import Serde
from openlineage.client.transport.http import (
    ApiKeyTokenProvider,
    HttpConfig,
    HttpTransport,
    TokenProvider,
)
from openlineage.client.transport.http_common import DEFAULT_RETRY_CONFIG
from openlineage.client.transport.noop import NoopConfig, NoopTransport

from pipeline.food_delivery import catalog
from pipeline.food_delivery.catalog import JOBS, NAMESPACE, TABLES
from pipeline.food_delivery.generator import ORDERS_PER_DAY
from pipeline.food_delivery.stats import HistoryWarehouse, Written
from pipeline.food_delivery.transforms import COLUMN_LINEAGE, Source

JsonDict = dict[str, Any]
TASK = "spark_job"
PRODUCER = DEFAULT_PRODUCER  # built with openlineage-python; the jobType facet names Spark
DEFAULT_FAIL_JOBS = frozenset({"example.etl_orders"})
DEFAULT_EMPTY_JOBS = frozenset({"example.etl_orders"})
_LOG = logging.getLogger(__name__)
_HISTORY_RUN_IDS = uuid.UUID("3c0f3f7e-1f55-5b8e-9d7a-51f0c8e2a6b4")  # uuid5 namespace
# When the scheduler starts each DAG after its interval ends, and for how long it runs
# (minutes), as in the seed: daily loads just after midnight, weekly jobs one after another.
_HISTORY_SLOTS = {
    "example.etl_orders": (5, 5),
    "example.etl_orders_7_days": (60, 7),
    "example.etl_delivery_7_days": (75, 6),
    "example.delivery_times_7_days": (105, 6),
    "example.orders_popular_day_of_week": (135, 5),
}
# Few, quick retries: a run must not wait long on a lineage server that is down.
_RETRY = {**DEFAULT_RETRY_CONFIG, "total": 2, "connect": 0, "read": 1, "backoff_factor": 0.2}


def task_job_name(dag: str) -> str:
    return f"{dag}.{TASK}"


def _time(value: datetime) -> str:
    return value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _owner(team: str) -> dict[str, Any]:
    owners = [ownership_job.Owner(name=f"team:{team}", type="MAINTAINER")] if team else []
    return {"ownership": ownership_job.OwnershipJobFacet(owners=owners)}


def _dataset_facets(name: str) -> dict[str, Any]:
    table = TABLES[name]
    fields = [
        schema_dataset.SchemaDatasetFacetFields(
            name=c.name, type=c.type.simpleString(), description=c.description
        )
        for c in table.columns
    ]
    return {
        "schema": schema_dataset.SchemaDatasetFacet(fields=fields),
        "documentation": documentation_dataset.DocumentationDatasetFacet(
            description=table.description
        ),
    }


def _column_lineage(name: str, namespace: str) -> dict[str, Any]:
    """The columnLineage facet of an output dataset (none for one made from no dataset)."""
    lineage = COLUMN_LINEAGE.get(name)
    if lineage is None:
        return {}

    def field(source: Source) -> column_lineage_dataset.InputField:
        how = column_lineage_dataset.Transformation(
            type=source.kind,
            subtype=source.subtype,
            description=source.description,
            masking=False,  # no hashing or other obfuscation anywhere in the pipeline
        )
        return column_lineage_dataset.InputField(
            namespace=namespace, name=lineage.input, field=source.column, transformations=[how]
        )

    fields = {
        column: column_lineage_dataset.Fields(inputFields=[field(s) for s in sources])
        for column, sources in lineage.fields.items()
    }
    facet = column_lineage_dataset.ColumnLineageDatasetFacet(
        fields=fields, dataset=[field(s) for s in lineage.dataset]
    )
    return {"columnLineage": facet}


def _output(name: str, namespace: str, written: Written | None) -> OutputDataset:
    facets = {**_dataset_facets(name), **_column_lineage(name, namespace)}
    statistics: dict[str, OutputDatasetFacet] = {}
    if written is not None:
        statistics["outputStatistics"] = OutputStatisticsOutputDatasetFacet(
            rowCount=written.rows, size=written.size, fileCount=written.files
        )
    return OutputDataset(namespace=namespace, name=name, facets=facets, outputFacets=statistics)


@dataclass(frozen=True)
class RunEvents:
    """Builds the events of one run of one DAG over [start, end)."""

    dag: str
    start: datetime
    end: datetime
    dag_run_id: str
    task_run_id: str
    namespace: str = NAMESPACE

    def _nominal(self) -> dict[str, Any]:
        return {
            "nominalTime": nominal_time_run.NominalTimeRunFacet(
                nominalStartTime=_time(self.start), nominalEndTime=_time(self.end)
            )
        }

    def _error(self, state: RunState, error: str | None) -> dict[str, Any]:
        if state not in (RunState.FAIL, RunState.ABORT) or error is None:
            return {}
        facet = error_message_run.ErrorMessageRunFacet(message=error, programmingLanguage="python")
        return {"errorMessage": facet}

    def dag_event(self, state: RunState, at: datetime, error: str | None = None) -> RunEvent:
        """The DAG run's event: no datasets (those belong to its task)."""
        job = JOBS[self.dag]
        facets = {
            "jobType": job_type_job.JobTypeJobFacet(
                processingType="BATCH", integration="AIRFLOW", jobType="DAG"
            ),
            "documentation": documentation_job.DocumentationJobFacet(description=job.description),
            **_owner(job.team),
        }
        return RunEvent(
            eventType=state,
            eventTime=_time(at),
            run=Run(runId=self.dag_run_id, facets={**self._nominal(), **self._error(state, error)}),
            job=Job(namespace=self.namespace, name=self.dag, facets=facets),
            inputs=[],
            outputs=[],
            producer=PRODUCER,
        )

    def task_event(
        self,
        state: RunState,
        at: datetime,
        error: str | None = None,
        written: Mapping[str, Written] | None = None,
    ) -> RunEvent:
        """The Spark task's event, with its datasets on every event (as Airflow reports), and
        on COMPLETE what it wrote to each output (`written`, by dataset name)."""
        job = JOBS[self.dag]
        written = written if state == RunState.COMPLETE and written is not None else {}
        parent = parent_run.ParentRunFacet(
            run=parent_run.Run(runId=self.dag_run_id, facets=None),
            job=parent_run.Job(namespace=self.namespace, name=self.dag, facets=None),
        )
        engine = processing_engine_run.ProcessingEngineRunFacet(
            version=pyspark.__version__, name="spark"
        )
        run_facets = {
            **self._nominal(),
            "parent": parent,
            "processing_engine": engine,
            **self._error(state, error),
        }
        job_facets = {
            "jobType": job_type_job.JobTypeJobFacet(
                processingType="BATCH", integration="SPARK", jobType="JOB"
            ),
            "documentation": documentation_job.DocumentationJobFacet(description=job.description),
            **_owner(job.team),
        }
        return RunEvent(
            eventType=state,
            eventTime=_time(at),
            run=Run(runId=self.task_run_id, facets=run_facets),
            job=Job(namespace=self.namespace, name=task_job_name(self.dag), facets=job_facets),
            inputs=[
                InputDataset(namespace=self.namespace, name=n, facets=_dataset_facets(n))
                for n in job.inputs
            ],
            outputs=[_output(n, self.namespace, written.get(n)) for n in job.outputs],
            producer=PRODUCER,
        )


_warned_lock = threading.Lock()
_warned_unreachable = False


def _warn_unreachable(url: str, exc: Exception) -> None:
    global _warned_unreachable
    with _warned_lock:
        first, _warned_unreachable = not _warned_unreachable, True
    level = logging.WARNING if first else logging.DEBUG
    _LOG.log(level, "OpenLineage endpoint %s unreachable (%s); jobs run without lineage", url, exc)


_clients_lock = threading.Lock()
_clients: dict[tuple[str, str | None], OpenLineageClient] = {}


def _client(url: str, api_key: str | None) -> OpenLineageClient:
    """One client per endpoint and key for the process: its HTTP connections are reused."""
    with _clients_lock:
        client = _clients.get((url, api_key))
        if client is None:
            auth = ApiKeyTokenProvider({"apiKey": api_key}) if api_key else TokenProvider({})
            config = HttpConfig(
                url=url.rstrip("/") + "/",  # so a base path survives urljoin
                endpoint="api/v1/lineage",
                timeout=5.0,
                auth=auth,
                retry=_RETRY,
            )
            client = _clients[url, api_key] = OpenLineageClient(transport=HttpTransport(config))
        return client


class LineageSink:
    """Posts one run's events to `{url}/api/v1/lineage` (nothing when url is None); never
    raises. Once the endpoint proved unreachable, the run's remaining events are dropped rather
    than each waiting for a time-out."""

    def __init__(self, url: str | None, api_key: str | None = None) -> None:
        self.url = url
        self._client = None if url is None else _client(url, api_key)

    def send(self, event: RunEvent) -> None:
        if self._client is None:
            return
        try:
            self._client.emit(event)
        except Exception as exc:  # lineage must never fail a job
            response = getattr(exc, "response", None)
            if response is not None and response.status_code < 500:
                _LOG.warning(
                    "OpenLineage endpoint %s rejected %s %s event (HTTP %s): %.300s",
                    self.url, event.job.name, event.eventType.value if event.eventType else "",
                    response.status_code, response.text,
                )  # fmt: skip
                return
            self._client = None
            _warn_unreachable(str(self.url), exc)


def history_events(
    first_day: date,
    last_day: date,
    *,
    fail_dates: Iterable[date] = (),
    namespace: str = NAMESPACE,
    fail_jobs: Collection[str] = DEFAULT_FAIL_JOBS,
    empty_dates: Iterable[date] = (),
    empty_jobs: Collection[str] = DEFAULT_EMPTY_JOBS,
    orders_per_day: int = ORDERS_PER_DAY,
) -> list[JsonDict]:
    """The events the pipeline would emit if every job ran every scheduled interval between
    those days (inclusive; see `catalog.scheduled_intervals`) on an empty warehouse, as JSON
    dicts sorted by time.

    Deterministic: fixed event times (after each interval's end, like a scheduler's runs) and
    uuid5 run ids. A job failing under the failure switch gets FAIL events with the same error
    message a real run reports. Each COMPLETE carries the rows a real run with these settings
    writes (`stats.HistoryWarehouse`): none on the zero-rows switch's `empty_dates` for
    `empty_jobs`, and fewer downstream of those days and of failed ones.
    """
    failing, emptied = frozenset(fail_dates), frozenset(empty_dates)
    warehouse = HistoryWarehouse(orders_per_day)
    # The client adds facets when it sends (its version tag, configured tags and environment
    # variables); a client that sends nothing adds the same here.
    client = OpenLineageClient(transport=NoopTransport(NoopConfig()))
    events: list[tuple[datetime, int, RunEvent]] = []
    for job in JOBS.values():
        delay, minutes = _HISTORY_SLOTS[job.name]
        for start, end in catalog.scheduled_intervals(job, first_day, last_day):
            periods = catalog.periods_of(job, start, end)
            error = catalog.injected_failure(job, periods, failing, fail_jobs)
            empty = catalog.empty_periods(job, periods, emptied, empty_jobs)
            written = None if error else warehouse.run(job, periods, empty)
            key = f"{namespace}/{job.name}/{start.isoformat()}"
            run = RunEvents(
                job.name, start, end,
                str(uuid.uuid5(_HISTORY_RUN_IDS, key)),
                str(uuid.uuid5(_HISTORY_RUN_IDS, f"{key}/{TASK}")),
                namespace,
            )  # fmt: skip
            began = end + timedelta(minutes=delay)
            finished = began + timedelta(minutes=minutes)
            state = RunState.COMPLETE if error is None else RunState.FAIL
            events += [
                (began, 0, run.dag_event(RunState.START, began)),
                (began, 1, run.task_event(RunState.START, began)),
                (finished, 2, run.task_event(state, finished, error, written)),
                (finished, 3, run.dag_event(state, finished, error)),
            ]
    events.sort(key=lambda e: (e[0], e[1]))
    return [
        Serde.to_dict(client.add_environment_facets(client.update_event_tags_facets(event)))
        for _, _, event in events
    ]
