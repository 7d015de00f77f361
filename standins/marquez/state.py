"""The in-memory model behind the Marquez stand-in, updated the way OpenLineageDao updates Postgres.

Writes take the event's own `eventTime` as "now", and upserts are last-received-wins, as in
Marquez 0.51.1 (see tests/fixtures/marquez/NOTES.md, section 1.4), with the exceptions that
follow Marquez's source (tests/fixtures/marquez/FIDELITY.md):

- a job's `updated_at` is the event time when the job is first inserted, the *server's* clock
  on every later upsert (`R__Jobs_view_and_rewrite_function.sql`: `updated_at = now()` on
  conflict), and the event time again when a terminal event links its version
  (`JobVersionDao.upsertJobVersionOnRunTransition` → `JobDao.updateVersionFor`);
- a job that arrives with a `parent` facet gets its parent's current run as its own current
  run (`OpenLineageDao.upsertJob`, child branch: `parent.getCurrentRunUuid()`), so `/lineage`
  shows an Airflow task's DAG run as the task's `latestRun`;
- the raw event is stored before the model is updated and stays when the update fails
  (OpenLineageService.java#L122-L157: two independent futures, no transaction around the
  update, each statement commits on its own), so the rows written before the failure stay too.

Rendering lives in `views`; this module only records facts.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Callable
from datetime import UTC, datetime, tzinfo
from typing import Any
from uuid import UUID

from standins.marquez.binding import parse_event
from standins.marquez.datasets import DatasetWriter
from standins.marquez.decisions import (
    dataset_ids,
    is_streaming,
    job_version_uuid,
    kept_run_facets,
    quiet_streaming_end,
    run_args,
    source_location,
)
from standins.marquez.events import (
    DATASET_EVENT,
    JOB_EVENT,
    EventFailedError,
    EventFormatError,
    EventRejectedError,
    EventValidationError,
    ParsedEvent,
    is_valid_namespace,
    name_based_uuid,
    parent_job_name,
    parent_run_uuid,
    run_uuid_for,
    sanitize_job_namespace,
    to_name_based_uuid,
)
from standins.marquez.model import (
    TERMINAL,
    Dataset,
    FacetRow,
    Job,
    JobVersion,
    Key,
    Namespace,
    Run,
    StoredEvent,
    run_state_for,
)

__all__ = ["EventValidationError", "MarquezState"]


class MarquezState(DatasetWriter):
    """Namespaces, jobs, runs, datasets and raw events, fed by `ingest(event_dict)`."""

    def __init__(self, clock: Callable[[], datetime] | None = None, zone: tzinfo = UTC) -> None:
        self.clock = clock or (lambda: datetime.now(UTC))
        """The database's `now()`: what a job's `updated_at` becomes on a repeated upsert."""
        self.zone = zone
        """The server JVM's zone, for event times without an offset (FIDELITY.md row 14)."""
        self.namespaces: dict[str, Namespace] = {}
        self.jobs: dict[Key, Job] = {}
        self.runs: dict[UUID, Run] = {}
        self.datasets: dict[Key, Dataset] = {}
        """Every name a dataset answers to (its aliases too) → the dataset (`datasets_view`)."""
        self.events: list[StoredEvent] = []
        """In the order received; `events_between` reads them by eventTime."""
        self._by_time: list[tuple[datetime, int]] = []  # (eventTime, seq): lineage_events' index
        self.generation = 0
        """Bumped by every change to jobs (an event, a deletion): what a cached listing checks."""

    def visible_dataset(self, key: Key) -> Dataset | None:
        """The dataset `datasets_view` shows under `key` (hidden ones are not in the view)."""
        dataset = self.datasets.get(key)
        return None if dataset is None or dataset.is_hidden else dataset

    def visible_job(self, key: Key) -> Job | None:
        """The job `jobs_view` shows under `key`."""
        job = self.jobs.get(key)
        return None if job is None or job.is_hidden else job

    def events_between(self, after: datetime, before: datetime) -> list[StoredEvent]:
        """Events with `after <= eventTime < before`, by eventTime (then as received)."""
        lo = bisect.bisect_left(self._by_time, (after, -1))
        hi = bisect.bisect_left(self._by_time, (before, -1))
        return [self.events[seq] for _, seq in self._by_time[lo:hi]]

    def ingest(self, body: Any) -> None:
        """Ingest one OpenLineage event (as POST /api/v1/lineage would).

        Raises EventValidationError (422) or EventFormatError (Jackson, 500) with nothing
        recorded; EventRejectedError (400) or EventFailedError (500) after the raw event — and
        whatever the update wrote before it failed — were recorded.
        """
        try:
            self._ingest(body)
        finally:  # a failed event may have written part of its update
            self.generation += 1

    def _ingest(self, body: Any) -> None:
        posted = _detached(body)
        event = parse_event(posted, self.zone)
        stored = StoredEvent(
            len(self.events), event.kind, event.event_time.instant, posted, event.feed
        )
        self.events.append(stored)
        bisect.insort(self._by_time, (stored.event_time, stored.seq))
        if event.kind == DATASET_EVENT:
            self._dataset_event(event)
        elif event.kind == JOB_EVENT:
            self._job_event(event)
        else:
            self._run_event(event, stored.seq)

    # -- jobs and runs --------------------------------------------------------------------

    def _upsert_job(
        self, namespace: str, simple_name: str, parent: Job | None, event: ParsedEvent, *,
        description: str | None, location: str | None,
    ) -> Job:  # fmt: skip
        """JobDao.upsertJob through rewrite_jobs_fqn_table (R__Jobs_view…sql#L42-L78)."""
        now = event.event_time.instant
        name = f"{parent.name}.{simple_name}" if parent else simple_name
        job = self.jobs.get((namespace, name))
        if job is None:
            job_uuid = name_based_uuid(f"job:{namespace}:{name}")
            job = Job(namespace, name, simple_name, parent, job_uuid, now, now)
            self.jobs[job.key] = job
        else:
            job.updated_at = self.clock()  # ON CONFLICT DO UPDATE SET updated_at = now()
            job.parent = job.parent or parent  # COALESCE(jobs.parent_job_uuid, EXCLUDED…)
            # simple_name = CASE WHEN EXCLUDED.parent_job_uuid IS NOT NULL … ELSE jobs.name
            job.simple_name = simple_name if parent is not None else job.name
        job.is_hidden = False  # `is_hidden = false` on conflict
        job.type = "STREAM" if is_streaming(event) else "BATCH"
        job.description, job.location = description, location  # EXCLUDED.…, nulls included
        return job

    def _upsert_run(
        self, run_uuid: UUID, job: Job, event: ParsedEvent, args: dict[str, str]
    ) -> Run:
        now = event.event_time.instant
        run = self.runs.get(run_uuid)
        if run is None:
            run = self.runs[run_uuid] = Run(run_uuid, job, now, now, args)
            job.runs.append(run)
        run.updated_at = now
        # COALESCE: an event without the nominalTime facet keeps the earlier values.
        if event.nominal_start is not None:
            run.nominal_start = event.nominal_start.instant
        if event.nominal_end is not None:
            run.nominal_end = event.nominal_end.instant
        return run

    @staticmethod
    def _transition(run: Run, state: str | None, now: datetime) -> None:
        run.state, run.transitioned_at = state, now
        if state in TERMINAL:
            run.ended_at = now
        elif state is not None:
            run.started_at = now  # every RUNNING-mapped event moves startedAt forward

    def _parent_job(self, event: ParsedEvent, namespace: str) -> Job | None:
        """OpenLineageDao.findParentJobRow (#L596-L672): the job of the parent run when its name
        matches, else (or when the run is new) createParentJobRunRecord."""
        parent = event.parent
        if parent is None:
            return None
        facet_name = parent.job_name
        # Old Airflow integrations named the parent like the task: its name up to the last dot.
        name = parent_job_name(facet_name) if facet_name == event.job_name else facet_name
        run_uuid = parent_run_uuid(parent.job_namespace, facet_name, parent.run_id)
        existing = self.runs.get(run_uuid)
        if existing is not None:
            if existing.job.key == (parent.job_namespace, name):
                return existing.job
            # "Assuming Run UUID conflict": DAGs of one name in two namespaces (#L625-L651).
            run_uuid = to_name_based_uuid(parent.job_namespace, name, str(run_uuid))
        return self._parent_job_run_record(event, namespace, name, run_uuid)

    def _parent_job_run_record(
        self, event: ParsedEvent, namespace: str, name: str, run_uuid: UUID
    ) -> Job:
        """createParentJobRunRecord (#L674-L744): upserts the parent job in the *child's*
        namespace with no description, the child's type and location, and this run as its
        current one; upserts the run with the child's nominal times and state."""
        job = self._upsert_job(
            namespace, name, None, event, description=None, location=source_location(event)
        )
        run = self._upsert_run(run_uuid, job, event, {})
        now = event.event_time.instant
        # The 14-argument RunDao.upsert: `current_run_state = EXCLUDED…` even when null.
        state = None if event.event_type is None else run_state_for(event.event_type)
        self._transition(run, state, now)
        job.current_run = run
        return job

    def _run_event(self, event: ParsedEvent, seq: int) -> None:
        """OpenLineageDao.updateMarquezModel → updateBaseMarquezModel (#L167-L404), in order."""
        assert event.job_namespace is not None
        assert event.job_name is not None
        assert event.run_id is not None
        now = event.event_time.instant
        namespace = self._namespace(sanitize_job_namespace(event.job_namespace), now).name
        parent = self._parent_job(event, namespace)
        # buildJobFromEvent evaluates toDatasetId(inputs) before JobDao.upsertJob (#L578).
        dataset_ids(event.inputs)
        simple = event.job_name
        if parent is not None and simple.startswith(f"{parent.name}."):
            simple = simple[len(parent.name) + 1 :]
        doc = (event.job_facets or {}).get("documentation") or {}
        job = self._upsert_job(
            namespace, simple, parent, event,
            description=doc.get("description"), location=source_location(event),
        )  # fmt: skip
        run = self._upsert_run(run_uuid_for(event.run_id), job, event, run_args(event))
        # upsertJob: a child's current run is its parent's (since Marquez 0.50.0), a top-level
        # job's its own.
        job.current_run = parent.current_run if parent is not None else run
        if event.run_facets is not None:
            if event.event_type is None:  # RunFacetsDao.java#L94-L99: @NonNull lineageEventType
                raise EventFailedError("lineageEventType is marked non-null but is null")
            run.run_facets.append(FacetRow(now, seq, kept_run_facets(run, event.run_facets)))
        if event.event_type is not None:
            self._transition(run, run_state_for(event.event_type), now)
        if event.job_facets is not None:
            run.job_facets.append(FacetRow(now, seq, event.job_facets))
        self._run_datasets(event, job, run)
        self._after_update(event, job, run)

    def _run_datasets(self, event: ParsedEvent, job: Job, run: Run) -> None:
        now = event.event_time.instant
        quiet_end = quiet_streaming_end(event)
        for refs, is_input in ((event.inputs, True), (event.outputs, False)):
            for ref in refs:
                if ref is None:  # upsertLineageDataset(null): NPE
                    raise EventFailedError("Cannot invoke Dataset.getNamespace() on null")
                dataset, version = self._upsert_dataset(ref, now, run, is_input=is_input)
                mapping = run.inputs if is_input else run.outputs
                mapping.setdefault(dataset.key, version)
                io_facets = run.input_facets if is_input else run.output_facets
                io_facets.setdefault(dataset.key, {}).update(ref.io_facets or {})
            # A side that an event does not report stops being "current" job-version IO, until
            # a terminal event re-links the run's datasets (markInputOrOutputDatasetAsPreviousFor).
            if not refs and not quiet_end:
                if is_input:
                    job.current_inputs = frozenset()
                else:
                    job.current_outputs = frozenset()

    def _after_update(self, event: ParsedEvent, job: Job, run: Run) -> None:
        """updateMarquezModel's job versions (#L167-L178), then OpenLineageService's listener
        updates, whose `NamespaceName.of` throws for a namespace Marquez stored unchecked."""
        now = event.event_time.instant
        streaming = is_streaming(event)
        if streaming:
            if not quiet_streaming_end(event):
                self._link_version(job, run, now, only_if_new=True)
        elif event.event_type is not None and run.state in TERMINAL:
            self._link_version(job, run, now, only_if_new=False)
            if run.state == "COMPLETED":
                for key in run.outputs:
                    self.datasets[key].last_modified_at = now
        if event.event_type is None:
            return
        names = []
        # buildJobOutputUpdate runs on COMPLETE (or streaming) over every version the run wrote;
        # buildJobInputUpdate when the event had inputs (OpenLineageService.java#L139-L157).
        if (event.event_type.upper() == "COMPLETE" or streaming) and (run.outputs or event.outputs):
            names += [job.namespace, *(version.namespace for version in run.outputs.values())]
        if event.inputs and run.inputs:
            names += [job.namespace, *(version.namespace for version in run.inputs.values())]
        for name in names:
            if not is_valid_namespace(name):
                raise EventRejectedError(f"namespace '{name}' must contain only letters …")

    def _link_version(self, job: Job, run: Run, now: datetime, *, only_if_new: bool) -> None:
        """A job version from the union of the run's datasets (upsertJobVersionOnRunTransition)."""
        inputs, outputs = frozenset(run.inputs), frozenset(run.outputs)
        version_uuid = job_version_uuid(job, inputs, outputs)
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

    # -- dataset and job events -----------------------------------------------------------

    def _dataset_event(self, event: ParsedEvent) -> None:
        """updateMarquezModel(DatasetEvent) (#L180-L210); `dataset` may be null (no @NotNull)."""
        ref = event.dataset
        if ref is None:
            raise EventFailedError("Cannot invoke Dataset.getNamespace() on null")
        now = event.event_time.instant
        self._namespace(sanitize_job_namespace(ref.namespace), now)
        dataset, version = self._upsert_dataset(ref, now, None, is_input=False)
        dataset.current_version, dataset.updated_at = version, self.clock()  # Instant.now()

    def _job_event(self, event: ParsedEvent) -> None:
        """updateMarquezModel(JobEvent) (#L212-L285): no parent, no run (current run null)."""
        assert event.job_namespace is not None
        assert event.job_name is not None
        now = event.event_time.instant
        namespace = self._namespace(sanitize_job_namespace(event.job_namespace), now).name
        doc = (event.job_facets or {}).get("documentation") or {}
        job = self._upsert_job(
            namespace, event.job_name, None, event,
            description=doc.get("description"), location=source_location(event),
        )  # fmt: skip
        job.current_run = None
        sides = []
        for refs, is_input in ((event.inputs, True), (event.outputs, False)):
            keys = set()
            for ref in refs:
                if ref is None:
                    raise EventFailedError("Cannot invoke Dataset.getNamespace() on null")
                keys.add(self._upsert_dataset(ref, now, None, is_input=is_input)[0].key)
            sides.append(frozenset(keys))
        version_uuid = job_version_uuid(job, sides[0], sides[1])
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
