"""JSON views and read queries of the Marquez stand-in, shaped like Marquez 0.51.1's responses.

Every key Marquez serializes is present, nulls included (NOTES.md sections 1.2-1.11).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from standins.marquez.events import JsonDict, iso_z
from standins.marquez.model import Dataset, DatasetVersion, FacetRow, Job, Key, Namespace, Run

LATEST_RUNS = 10
RUN_STATES = frozenset({"NEW", "RUNNING", "COMPLETED", "ABORTED", "FAILED", "OTHER"})


def namespace_json(ns: Namespace) -> JsonDict:
    return {
        "name": ns.name,
        "createdAt": iso_z(ns.created_at),
        "updatedAt": iso_z(ns.updated_at),
        "ownerName": ns.owner_name,
        "description": ns.description,
        "isHidden": ns.is_hidden,
    }


def _merged(facet_maps: Iterable[Any]) -> JsonDict:
    merged: JsonDict = {}
    for facets in facet_maps:
        if isinstance(facets, dict):
            merged.update(facets)
    return merged


def _by_event_time(rows: list[FacetRow]) -> list[JsonDict]:
    # Marquez aggregates facets ORDER BY lineage_event_time, so later eventTimes win.
    return [row.facets for row in sorted(rows, key=lambda r: (r.event_time, r.seq))]


def _version_refs(versions: dict[Key, DatasetVersion], facets: dict[Key, JsonDict]) -> list[Any]:
    return [
        {
            "datasetVersionId": {"namespace": ns, "name": name, "version": str(v.version)},
            "facets": facets.get((ns, name), {}),
        }
        for (ns, name), v in versions.items()
    ]


def run_json(run: Run) -> JsonDict:
    duration = None
    if run.started_at is not None and run.ended_at is not None:
        duration = round((run.ended_at - run.started_at).total_seconds() * 1000)
    version = run.job_version
    return {
        "id": str(run.uuid),
        "createdAt": iso_z(run.created_at),
        "updatedAt": iso_z(run.updated_at),
        "nominalStartTime": iso_z(run.nominal_start),
        "nominalEndTime": iso_z(run.nominal_end),
        "state": run.state or "NEW",
        "startedAt": iso_z(run.started_at),
        "endedAt": iso_z(run.ended_at),
        "durationMs": duration,
        "args": dict(run.args),
        "jobVersion": None
        if version is None
        else {
            "namespace": run.job.namespace,
            "name": run.job.name,
            "version": str(version.version),
        },
        "inputDatasetVersions": _version_refs(run.inputs, run.input_facets),
        "outputDatasetVersions": _version_refs(run.outputs, run.output_facets),
        "facets": _merged(_by_event_time(run.run_facets)),
    }


def dataset_ids(keys: Iterable[Key]) -> list[JsonDict]:
    return [{"namespace": ns, "name": name} for ns, name in sorted(set(keys))]


def _desc_nulls_first(value: datetime | None) -> tuple[int, float]:
    # Postgres sorts NULLs first under DESC; sort ascending on this key.
    return (0, 0.0) if value is None else (1, -value.timestamp())


def latest_runs(job: Job) -> list[Run]:
    """RunDao.findByLatestJob: transitioned_at DESC, started_at DESC (NULLs first), uuid DESC."""
    runs = sorted(job.runs, key=lambda r: str(r.uuid), reverse=True)
    runs.sort(key=lambda r: _desc_nulls_first(r.started_at))
    runs.sort(key=lambda r: _desc_nulls_first(r.transitioned_at))
    return runs


def run_job_facets(run: Run) -> JsonDict:
    """The job facets sent with a run's events, merged (GET /jobs/runs/{id}/facets?type=job)."""
    return _merged(_by_event_time(run.job_facets))


def job_facets(job: Job) -> JsonDict:
    """Job facets of the events of the run that produced the job's current version."""
    version = job.current_version
    if version is None or version.latest_run is None:
        return {}
    return run_job_facets(version.latest_run)


def job_base(job: Job) -> JsonDict:
    return {
        "id": {"namespace": job.namespace, "name": job.name},
        "type": job.type,
        "name": job.name,
        "simpleName": job.simple_name,
        "parentJobName": job.parent.name if job.parent else None,
        "parentJobUuid": str(job.parent.uuid) if job.parent else None,
    }


def _labels(facets: JsonDict) -> list[str]:
    """JobMapper.getLabels (#L100-L114): the jobType facet's `jobType`, then `integration`."""
    job_type = facets.get("jobType")
    if not isinstance(job_type, dict):
        return []
    return [
        str(job_type[key]) for key in ("jobType", "integration") if job_type.get(key) is not None
    ]


def job_json(job: Job) -> JsonDict:
    facets = job_facets(job)
    runs = latest_runs(job)[:LATEST_RUNS]
    latest = runs[0] if runs else None
    if latest is not None:
        inputs, outputs = list(latest.inputs), list(latest.outputs)
    elif job.current_version is not None:
        inputs, outputs = list(job.current_inputs), list(job.current_outputs)
    else:
        inputs, outputs = [], []
    return {
        **job_base(job),
        "createdAt": iso_z(job.created_at),
        "updatedAt": iso_z(job.updated_at),
        "namespace": job.namespace,
        "inputs": dataset_ids(inputs),
        "outputs": dataset_ids(outputs),
        "location": job.location,
        "description": job.description,
        "latestRun": run_json(latest) if latest else None,
        "latestRuns": [run_json(r) for r in runs] if runs else None,
        "facets": facets,
        "currentVersion": str(job.current_version.version) if job.current_version else None,
        "labels": _labels(facets),
        "tags": [],
    }


def dataset_base(ds: Dataset, key: Key | None = None) -> JsonDict:
    """A `datasets_view` row: `key` is the name it is shown under (an alias's, or its own)."""
    namespace, name = key or ds.key
    version = ds.current_version
    return {
        "id": {"namespace": namespace, "name": name},
        "type": "DB_TABLE",
        "name": name,
        "physicalName": ds.physical_name or ds.name,
        "createdAt": iso_z(ds.created_at),
        "updatedAt": iso_z(ds.updated_at),
        "namespace": namespace,
        "sourceName": ds.source_name,
        "fields": [dict(f) for f in version.fields] if version else [],
        "tags": [],
        "lastModifiedAt": iso_z(ds.last_modified_at),
        "description": ds.description,
        "lastLifecycleState": version.lifecycle_state if version else None,
    }


def dataset_json(ds: Dataset, key: Key | None = None) -> JsonDict:
    version = ds.current_version
    facets = dict(version.facets) if version else {}
    return {
        **dataset_base(ds, key),
        "currentVersion": str(version.version) if version else None,
        "columnLineage": _column_lineage(facets.get("columnLineage")),
        "facets": facets,
        "deleted": False,
    }


def _column_lineage(facet: Any) -> list[JsonDict] | None:
    fields = facet.get("fields") if isinstance(facet, dict) else None
    if not isinstance(fields, dict):
        return None
    return [
        {
            "name": name,
            "inputFields": [
                {
                    "namespace": f.get("namespace"),
                    "dataset": f.get("name"),
                    "field": f.get("field"),
                    "transformationDescription": spec.get("transformationDescription"),
                    "transformationType": spec.get("transformationType"),
                }
                for f in spec.get("inputFields") or []
            ],
        }
        for name, spec in fields.items()
        if isinstance(spec, dict)
    ]
