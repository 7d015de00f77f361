"""The in-memory model behind the Marquez stand-in, updated the way OpenLineageDao updates Postgres.

Writes take the event's own `eventTime` as "now", and upserts are last-received-wins, as in
Marquez 0.51.1 (see tests/fixtures/marquez/NOTES.md, section 1.4), with two exceptions that
follow Marquez's source (tests/fixtures/marquez/FIDELITY.md rows 1 and 2):

- a job's `updated_at` is the event time when the job is first inserted, the *server's* clock
  on every later upsert (`R__Jobs_view_and_rewrite_function.sql`: `updated_at = now()` on
  conflict), and the event time again when a terminal event links its version
  (`JobVersionDao.upsertJobVersionOnRunTransition` → `JobDao.updateVersionFor`);
- a job that arrives with a `parent` facet gets its parent's current run as its own current
  run (`OpenLineageDao.upsertJob`, child branch: `parent.getCurrentRunUuid()`), so `/lineage`
  shows an Airflow task's DAG run as the task's `latestRun`.

Rendering lives in `views`; this module only records facts.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from standins.marquez.events import (
    DATASET_EVENT,
    JOB_EVENT,
    DatasetRef,
    EventFormatError,
    EventRejectedError,
    EventValidationError,
    JsonDict,
    ParsedEvent,
    is_valid_namespace,
    name_based_uuid,
    parent_job_name,
    parse_event,
    run_uuid_for,
    sanitize_job_namespace,
)

__all__ = ["EventValidationError", "MarquezState"]

Key = tuple[str, str]  # (namespace, name)
TERMINAL = {"COMPLETED", "FAILED", "ABORTED"}
_STATES = {"COMPLETE": "COMPLETED", "FAIL": "FAILED", "ABORT": "ABORTED", "START": "RUNNING"}


def run_state_for(event_type: str) -> str:
    """OpenLineageDao.getRunState: anything unknown (RUNNING, OTHER, typos) means RUNNING."""
    return _STATES.get(event_type.upper(), "RUNNING")


@dataclass
class Namespace:
    name: str
    created_at: datetime
    updated_at: datetime
    owner_name: str = "anonymous"
    description: str | None = None
    is_hidden: bool = False


@dataclass
class DatasetVersion:
    version: UUID
    created_at: datetime
    run_uuid: UUID | None
    fields: list[JsonDict]
    facets: JsonDict = field(default_factory=dict)
    lifecycle_state: str | None = None


@dataclass
class Dataset:
    namespace: str
    name: str
    created_at: datetime
    updated_at: datetime
    source_name: str = "default"
    description: str | None = None
    current_version: DatasetVersion | None = None
    last_modified_at: datetime | None = None
    versions: dict[UUID, DatasetVersion] = field(default_factory=dict)

    @property
    def key(self) -> Key:
        return (self.namespace, self.name)


@dataclass
class JobVersion:
    version: UUID
    created_at: datetime
    inputs: frozenset[Key]
    outputs: frozenset[Key]
    latest_run: Run | None = None


@dataclass
class Job:
    namespace: str
    simple_name: str
    parent: Job | None
    uuid: UUID
    created_at: datetime
    updated_at: datetime
    type: str = "BATCH"
    description: str | None = None
    location: str | None = None
    current_version: JobVersion | None = None
    current_run: Run | None = None
    # job_versions_io_mapping rows flagged is_current_job_version, per side.
    current_inputs: frozenset[Key] = frozenset()
    current_outputs: frozenset[Key] = frozenset()
    versions: dict[UUID, JobVersion] = field(default_factory=dict)
    runs: list[Run] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.parent.name}.{self.simple_name}" if self.parent else self.simple_name

    @property
    def key(self) -> Key:
        return (self.namespace, self.name)


@dataclass
class StoredEvent:
    seq: int
    kind: str
    event_time: datetime
    body: JsonDict


@dataclass
class Run:
    uuid: UUID
    job: Job
    created_at: datetime
    updated_at: datetime
    args: dict[str, str]
    nominal_start: datetime | None = None
    nominal_end: datetime | None = None
    state: str | None = None  # None reads back as NEW
    transitioned_at: datetime | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    job_version: JobVersion | None = None
    inputs: dict[Key, DatasetVersion] = field(default_factory=dict)
    outputs: dict[Key, DatasetVersion] = field(default_factory=dict)
    input_facets: dict[Key, JsonDict] = field(default_factory=dict)
    output_facets: dict[Key, JsonDict] = field(default_factory=dict)
    events: list[StoredEvent] = field(default_factory=list)


class MarquezState:
    """Namespaces, jobs, runs, datasets and raw events, fed by `ingest(event_dict)`."""

    def __init__(self, clock: Callable[[], datetime] | None = None) -> None:
        self.clock = clock or (lambda: datetime.now(UTC))
        """The database's `now()`: what a job's `updated_at` becomes on a repeated upsert."""
        self.namespaces: dict[str, Namespace] = {}
        self.jobs: dict[Key, Job] = {}
        self.runs: dict[UUID, Run] = {}
        self.datasets: dict[Key, Dataset] = {}
        self.events: list[StoredEvent] = []
        """In the order received; `events_between` reads them by eventTime."""
        self._by_time: list[tuple[datetime, int]] = []  # (eventTime, seq): lineage_events' index

    def events_between(self, after: datetime, before: datetime) -> list[StoredEvent]:
        """Events with `after <= eventTime < before`, by eventTime (then as received)."""
        lo = bisect.bisect_left(self._by_time, (after, -1))
        hi = bisect.bisect_left(self._by_time, (before, -1))
        return [self.events[seq] for _, seq in self._by_time[lo:hi]]

    def ingest(self, body: Any) -> None:
        """Ingest one OpenLineage event (as POST /api/v1/lineage would).

        Raises EventValidationError (422), EventFormatError (400 with a message) or
        EventRejectedError (400, empty body); nothing is recorded when it raises.
        """
        body = _detached(body)
        event = parse_event(body)
        self._check_namespaces(event)
        stored = StoredEvent(len(self.events), event.kind, event.event_time.instant, body)
        self.events.append(stored)
        bisect.insort(self._by_time, (stored.event_time, stored.seq))
        if event.kind == DATASET_EVENT:
            self._dataset_event(event)
        elif event.kind == JOB_EVENT:
            self._job_event(event)
        else:
            self._run_event(event, stored)

    # -- ingestion ------------------------------------------------------------------------

    def _check_namespaces(self, event: ParsedEvent) -> None:
        # Validate up front so a rejected event changes nothing (Marquez runs one transaction).
        names = [ds.namespace for ds in (*event.inputs, *event.outputs)]
        if event.job_namespace is not None:
            names.append(sanitize_job_namespace(event.job_namespace))
        for name in names:
            if not is_valid_namespace(name):
                raise EventRejectedError(f"namespace '{name}' is invalid")

    def _namespace(self, name: str, now: datetime) -> Namespace:
        ns = self.namespaces.get(name)
        if ns is None:
            ns = self.namespaces[name] = Namespace(name, now, now)
        ns.updated_at = now
        return ns

    def _upsert_job(
        self,
        namespace: str,
        simple_name: str,
        parent: Job | None,
        event: ParsedEvent,
        *,
        describe: bool = True,
    ) -> Job:
        now = event.event_time.instant
        key = (namespace, f"{parent.name}.{simple_name}" if parent else simple_name)
        job = self.jobs.get(key)
        if job is None:
            job_uuid = name_based_uuid(f"job:{key[0]}:{key[1]}")
            job = self.jobs[key] = Job(namespace, simple_name, parent, job_uuid, now, now)
        else:
            job.updated_at = self.clock()  # ON CONFLICT DO UPDATE SET updated_at = now()
        job.parent = parent or job.parent
        job.type = _job_type(event.job_facets)
        location = event.job_facets.get("sourceCodeLocation") or {}
        job.location = location.get("url", job.location)
        if describe:  # a parent job created from a child's event gets no description
            doc = event.job_facets.get("documentation") or {}
            job.description = doc.get("description", job.description)
        return job

    def _upsert_run(self, run_uuid: UUID, job: Job, event: ParsedEvent) -> Run:
        now = event.event_time.instant
        run = self.runs.get(run_uuid)
        if run is None:
            run = self.runs[run_uuid] = Run(run_uuid, job, now, now, _run_args(event))
            job.runs.append(run)
        run.updated_at = now
        # COALESCE: an event without the nominalTime facet keeps the earlier values.
        if event.nominal_start is not None:
            run.nominal_start = event.nominal_start.instant
        if event.nominal_end is not None:
            run.nominal_end = event.nominal_end.instant
        if event.event_type is not None:
            self._transition(run, run_state_for(event.event_type), now)
        return run

    @staticmethod
    def _transition(run: Run, state: str, now: datetime) -> None:
        run.state, run.transitioned_at = state, now
        if state in TERMINAL:
            run.ended_at = now
        else:
            run.started_at = now  # every RUNNING-mapped event moves startedAt forward

    def _parent_job(self, event: ParsedEvent, namespace: str) -> Job | None:
        """Find or create the parent job and run named by the `parent` run facet."""
        parent = event.parent
        if parent is None:
            return None
        assert event.job_name is not None
        name = parent.job_name
        if name == event.job_name:  # old Airflow integrations named the parent like the task
            name = parent_job_name(name)
        run_uuid = run_uuid_for(parent.run_id, parent_job_name(parent.job_name))
        existing = self.runs.get(run_uuid)
        if existing is not None:
            if existing.job.key == (parent.job_namespace, name):
                return existing.job
            # Marquez's workaround for Airflow DAGs of one name in two namespaces.
            run_uuid = name_based_uuid(f"{parent.job_namespace}{name}{run_uuid}")
        job = self._upsert_job(namespace, name, None, event, describe=False)
        if run_uuid not in self.runs:
            now = event.event_time.instant
            run = self.runs[run_uuid] = Run(run_uuid, job, now, now, {})
            run.nominal_start = event.nominal_start.instant if event.nominal_start else None
            run.nominal_end = event.nominal_end.instant if event.nominal_end else None
            job.runs.append(run)
            if event.event_type is not None:
                self._transition(run, run_state_for(event.event_type), now)
        # createParentJobRunRecord upserts the parent job with this run as its current one.
        job.current_run = self.runs[run_uuid]
        return job

    def _run_event(self, event: ParsedEvent, stored: StoredEvent) -> None:
        assert event.job_namespace is not None
        assert event.job_name is not None
        assert event.run_id is not None
        now = event.event_time.instant
        namespace = self._namespace(sanitize_job_namespace(event.job_namespace), now).name
        parent = self._parent_job(event, namespace)
        simple = event.job_name
        if parent is not None and simple.startswith(f"{parent.name}."):
            simple = simple[len(parent.name) + 1 :]
        job = self._upsert_job(namespace, simple, parent, event)
        run = self._upsert_run(run_uuid_for(event.run_id), job, event)
        # upsertJob: a child's current run is its parent's (since Marquez 0.50.0), a top-level
        # job's its own.
        job.current_run = parent.current_run if parent is not None else run
        run.events.append(stored)
        for ds in event.inputs:
            dataset, version = self._upsert_dataset(ds, now, run, is_input=True)
            run.inputs.setdefault(dataset.key, version)
            run.input_facets.setdefault(dataset.key, {}).update(ds.io_facets)
        for ds in event.outputs:
            dataset, version = self._upsert_dataset(ds, now, run, is_input=False)
            run.outputs.setdefault(dataset.key, version)
            run.output_facets.setdefault(dataset.key, {}).update(ds.io_facets)
        terminal = event.event_type is not None and run.state in TERMINAL
        streaming = job.type == "STREAM"
        quiet_end = streaming and terminal and not event.inputs and not event.outputs
        # A side that an event does not report stops being "current" job-version IO, until a
        # terminal event re-links the run's datasets (markInputOrOutputDatasetAsPreviousFor).
        if not quiet_end:
            if not event.inputs:
                job.current_inputs = frozenset()
            if not event.outputs:
                job.current_outputs = frozenset()
        if streaming and not quiet_end:
            # Streaming jobs version as soon as their datasets change, not at the end.
            self._link_version(job, run, now, only_if_new=True)
        elif not streaming and terminal:
            self._link_version(job, run, now, only_if_new=False)
            if run.state == "COMPLETED":
                for key in run.outputs:
                    self.datasets[key].last_modified_at = now

    def _link_version(self, job: Job, run: Run, now: datetime, *, only_if_new: bool) -> None:
        """A job version from the union of the run's datasets (upsertJobVersionOnRunTransition)."""
        inputs, outputs = frozenset(run.inputs), frozenset(run.outputs)
        version_uuid = _job_version_uuid(job, inputs, outputs)
        if only_if_new and version_uuid in job.versions:
            return
        version = job.versions.get(version_uuid)
        if version is None:
            version = job.versions[version_uuid] = JobVersion(version_uuid, now, inputs, outputs)
        version.latest_run = run
        run.job_version = version
        if inputs:
            job.current_inputs = inputs
        if outputs:
            job.current_outputs = outputs
        job.current_version, job.updated_at = version, now

    def _upsert_dataset(
        self, ref: DatasetRef, now: datetime, run: Run | None, *, is_input: bool
    ) -> tuple[Dataset, DatasetVersion]:
        self._namespace(ref.namespace, now)
        dataset = self.datasets.get((ref.namespace, ref.name))
        if dataset is None:
            dataset = Dataset(ref.namespace, ref.name, now, now)
            self.datasets[dataset.key] = dataset
        dataset.updated_at = now
        source = ref.facets.get("dataSource") or {}
        dataset.source_name = source.get("name") or dataset.source_name
        doc = ref.facets.get("documentation") or {}
        dataset.description = doc.get("description", dataset.description)
        version = dataset.current_version if is_input else None
        if version is None:
            # Inputs reuse the current version; outputs (and unseen inputs) get a new one.
            fields = [_field(f) for f in (ref.facets.get("schema") or {}).get("fields") or []]
            run_uuid = None if is_input or run is None else run.uuid
            version_uuid = name_based_uuid(
                f"{ref.namespace}:{dataset.source_name}:{ref.name}:{fields}:{run_uuid}"
            )
            version = dataset.versions.get(version_uuid)
            if version is None:
                version = DatasetVersion(version_uuid, now, run_uuid, fields)
                dataset.versions[version_uuid] = version
            dataset.current_version = version
        version.facets.update(ref.facets)
        lifecycle = ref.facets.get("lifecycleStateChange") or {}
        version.lifecycle_state = lifecycle.get("lifecycleStateChange", version.lifecycle_state)
        return dataset, version

    def _dataset_event(self, event: ParsedEvent) -> None:
        self._upsert_dataset(event.outputs[0], event.event_time.instant, None, is_input=False)

    def _job_event(self, event: ParsedEvent) -> None:
        assert event.job_namespace is not None
        assert event.job_name is not None
        now = event.event_time.instant
        namespace = self._namespace(sanitize_job_namespace(event.job_namespace), now).name
        job = self._upsert_job(namespace, event.job_name, None, event)
        sides = [
            frozenset(self._upsert_dataset(ds, now, None, is_input=io)[0].key for ds in refs)
            for refs, io in ((event.inputs, True), (event.outputs, False))
        ]
        version_uuid = _job_version_uuid(job, sides[0], sides[1])
        version = job.versions.setdefault(
            version_uuid, JobVersion(version_uuid, job.created_at, sides[0], sides[1])
        )
        job.current_inputs = sides[0] or job.current_inputs
        job.current_outputs = sides[1] or job.current_outputs
        job.current_version = version


def _detached(body: Any) -> Any:
    """A private copy, so a caller reusing its dict for the next event cannot rewrite history."""
    try:
        return json.loads(json.dumps(body))
    except (TypeError, ValueError) as exc:
        raise EventFormatError(f"The event is not JSON: {exc}") from exc


def _job_type(job_facets: JsonDict) -> str:
    job_type = job_facets.get("jobType") or {}
    processing = job_type.get("processingType") if isinstance(job_type, dict) else None
    return "STREAM" if str(processing).upper() == "STREAMING" else "BATCH"


def _run_args(event: ParsedEvent) -> dict[str, str]:
    """OpenLineageDao.createRunArgs, stored once per run (the first event's)."""
    args: dict[str, str] = {}
    if event.nominal_start is not None:
        args["nominal_start_time"] = event.nominal_start.java
    if event.nominal_end is not None:
        args["nominal_end_time"] = event.nominal_end.java
    if event.parent is not None:
        args["run_id"] = event.parent.run_id
        args["name"] = event.parent.job_name
        args["namespace"] = event.parent.job_namespace
    return args


def _field(raw: Any) -> JsonDict:
    item = raw if isinstance(raw, dict) else {}
    return {
        "name": item.get("name"),
        "type": item.get("type"),
        "tags": [],
        "description": item.get("description"),
    }


def _job_version_uuid(job: Job, inputs: frozenset[Key], outputs: frozenset[Key]) -> UUID:
    """Utils.newJobVersionFor: a name-based UUID of the job and its sorted datasets."""
    return name_based_uuid(
        f"{job.namespace}:{job.name}:{sorted(inputs)}:{sorted(outputs)}:{job.location}"
    )
