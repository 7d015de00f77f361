"""What OpenLineageDao decides from one event, apart from the rows it writes: the checks that
throw, streaming, run args, facets kept, job version UUIDs (used by state.py)."""

from __future__ import annotations

from uuid import UUID

from standins.marquez.events import (
    DatasetRef,
    EventFailedError,
    EventRejectedError,
    JsonDict,
    ParsedEvent,
    is_valid_namespace,
    name_based_uuid,
)
from standins.marquez.model import Job, Key, Run

# RunFacetsDao.java#L100-L117: never stored, or stored from the first event only.
SPARK_UNKNOWN, SPARK_LOGICAL_PLAN = "spark_unknown", "spark.logicalplan"


def dataset_ids(refs: tuple[DatasetRef | None, ...]) -> None:
    """OpenLineageDao.toDatasetId (#L746-L757): NamespaceName.of / DatasetName.of throw
    IllegalArgumentException (400) for a namespace outside NamespaceName's pattern or a blank
    name; a null list item is an NPE (500)."""
    for ref in refs:
        if ref is None:
            raise EventFailedError("Cannot invoke Dataset.getNamespace() on null")
        if not is_valid_namespace(ref.namespace):
            raise EventRejectedError(f"namespace '{ref.namespace}' must contain only letters …")
        if not ref.name.strip():
            raise EventRejectedError("value must not be blank")


def is_streaming(event: ParsedEvent) -> bool:
    """LineageEvent.Job.isStreamingJob: the event's jobType facet says STREAMING (any case)."""
    job_type = (event.job_facets or {}).get("jobType") or {}
    return str(job_type.get("processingType")).upper() == "STREAMING"


def quiet_streaming_end(event: ParsedEvent) -> bool:
    """isTerminalEventForStreamingJobWithNoDatasets: COMPLETE or FAIL (not ABORT), streaming,
    no inputs, no outputs (LineageEvent.java#L55-L67)."""
    terminal = (event.event_type or "").upper() in ("COMPLETE", "FAIL")
    return terminal and is_streaming(event) and not event.inputs and not event.outputs


def source_location(event: ParsedEvent) -> str | None:
    source = (event.job_facets or {}).get("sourceCodeLocation") or {}
    url = source.get("url")
    return url if isinstance(url, str) else None


def kept_run_facets(run: Run, facets: JsonDict) -> JsonDict:
    """RunFacetsDao.insertRunFacetsFor drops `spark_unknown` and keeps `spark.logicalPlan` only
    from the first event that had it (case-insensitive names)."""
    seen = {name.lower() for row in run.run_facets for name in row.facets}
    return {
        name: value
        for name, value in facets.items()
        if name.lower() != SPARK_UNKNOWN
        and not (name.lower() == SPARK_LOGICAL_PLAN and SPARK_LOGICAL_PLAN in seen)
    }


def run_args(event: ParsedEvent) -> dict[str, str]:
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


def job_version_uuid(job: Job, inputs: frozenset[Key], outputs: frozenset[Key]) -> UUID:
    """Utils.newJobVersionFor: a name-based UUID of the job and its sorted datasets."""
    return name_based_uuid(
        f"{job.namespace}:{job.name}:{sorted(inputs)}:{sorted(outputs)}:{job.location}"
    )
