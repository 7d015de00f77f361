"""JSON views and read queries of the Marquez stand-in, shaped like Marquez 0.51.1's responses.

Every key Marquez serializes is present, nulls included (NOTES.md sections 1.2-1.11).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from standins.marquez.events import RUN_EVENT, JsonDict, iso_z
from standins.marquez.state import (
    Dataset,
    DatasetVersion,
    Job,
    Key,
    MarquezState,
    Namespace,
    Run,
    StoredEvent,
)

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


def _by_event_time(events: list[StoredEvent]) -> list[StoredEvent]:
    # Marquez aggregates facets ORDER BY lineage_event_time, so later eventTimes win.
    return sorted(events, key=lambda e: (e.event_time, e.seq))


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
        "facets": _merged(
            (e.body.get("run") or {}).get("facets") for e in _by_event_time(run.events)
        ),
    }


def _dataset_ids(keys: Iterable[Key]) -> list[JsonDict]:
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
    return _merged((e.body.get("job") or {}).get("facets") for e in _by_event_time(run.events))


def job_facets(job: Job) -> JsonDict:
    """Job facets of the events of the run that produced the job's current version."""
    version = job.current_version
    if version is None or version.latest_run is None:
        return {}
    return run_job_facets(version.latest_run)


def _job_base(job: Job) -> JsonDict:
    return {
        "id": {"namespace": job.namespace, "name": job.name},
        "type": job.type,
        "name": job.name,
        "simpleName": job.simple_name,
        "parentJobName": job.parent.name if job.parent else None,
        "parentJobUuid": str(job.parent.uuid) if job.parent else None,
    }


def job_json(job: Job) -> JsonDict:
    runs = latest_runs(job)[:LATEST_RUNS]
    latest = runs[0] if runs else None
    if latest is not None:
        inputs, outputs = list(latest.inputs), list(latest.outputs)
    elif job.current_version is not None:
        inputs, outputs = list(job.current_inputs), list(job.current_outputs)
    else:
        inputs, outputs = [], []
    return {
        **_job_base(job),
        "createdAt": iso_z(job.created_at),
        "updatedAt": iso_z(job.updated_at),
        "namespace": job.namespace,
        "inputs": _dataset_ids(inputs),
        "outputs": _dataset_ids(outputs),
        "location": job.location,
        "description": job.description,
        "latestRun": run_json(latest) if latest else None,
        "latestRuns": [run_json(r) for r in runs] if runs else None,
        "facets": job_facets(job),
        "currentVersion": str(job.current_version.version) if job.current_version else None,
        "labels": [],
        "tags": [],
    }


def _dataset_base(ds: Dataset) -> JsonDict:
    version = ds.current_version
    return {
        "id": {"namespace": ds.namespace, "name": ds.name},
        "type": "DB_TABLE",
        "name": ds.name,
        "physicalName": ds.name,
        "createdAt": iso_z(ds.created_at),
        "updatedAt": iso_z(ds.updated_at),
        "namespace": ds.namespace,
        "sourceName": ds.source_name,
        "fields": [dict(f) for f in version.fields] if version else [],
        "tags": [],
        "lastModifiedAt": iso_z(ds.last_modified_at),
        "description": ds.description,
        "lastLifecycleState": version.lifecycle_state if version else None,
    }


def dataset_json(ds: Dataset) -> JsonDict:
    version = ds.current_version
    facets = dict(version.facets) if version else {}
    return {
        **_dataset_base(ds),
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


# -- lineage ----------------------------------------------------------------------------------


def _start_job(state: MarquezState, kind: str, key: Key) -> tuple[Job | None, Dataset | None]:
    """The job the graph grows from; for a dataset its newest producer, else newest consumer."""
    if kind == "job":
        return state.jobs.get(key), None
    dataset = state.datasets.get(key)
    if dataset is None:
        return None, None
    best: tuple[int, datetime, Job] | None = None
    for job in state.jobs.values():
        for version in job.versions.values():
            rank = 1 if key in version.outputs else 0 if key in version.inputs else -1
            if rank >= 0 and (best is None or (rank, version.created_at) > best[:2]):
                best = (rank, version.created_at, job)
    return (best[2] if best else None), dataset


def lineage_graph(state: MarquezState, kind: str, key: Key, depth: int) -> list[JsonDict] | None:
    """GET /lineage: undirected growth over current job-version IO; None for an unknown node."""
    start, dataset = _start_job(state, kind, key)
    if start is None:
        if dataset is None:
            return None
        return [_node(f"dataset:{key[0]}:{key[1]}", "DATASET", _dataset_base(dataset), [], [])]
    jobs = _expand(state, start, depth)
    producers: dict[Key, set[str]] = {}
    consumers: dict[Key, set[str]] = {}
    nodes = []
    for job in jobs:
        node_id = f"job:{job.namespace}:{job.name}"
        for ds in job.current_inputs:
            consumers.setdefault(ds, set()).add(node_id)
        for ds in job.current_outputs:
            producers.setdefault(ds, set()).add(node_id)
        ins = [(_dataset_id(ds), node_id) for ds in job.current_inputs]
        outs = [(node_id, _dataset_id(ds)) for ds in job.current_outputs]
        nodes.append(_node(node_id, "JOB", _lineage_job_data(job), ins, outs))
    for ds_key in set(producers) | set(consumers):
        ds_id = _dataset_id(ds_key)
        ins = [(job_id, ds_id) for job_id in producers.get(ds_key, ())]
        outs = [(ds_id, job_id) for job_id in consumers.get(ds_key, ())]
        data = _dataset_base(state.datasets[ds_key])
        nodes.append(_node(ds_id, "DATASET", data, ins, outs))
    return sorted(nodes, key=lambda n: str(n["id"]))


def _expand(state: MarquezState, start: Job, depth: int) -> list[Job]:
    """Jobs whose datasets overlap a job already found, up to `depth` hops (LineageDao CTE)."""
    found = {start.key: start}
    frontier = [start]
    for _ in range(max(depth, 0)):
        touched = set().union(*(j.current_inputs | j.current_outputs for j in frontier))
        frontier = [
            job
            for job in state.jobs.values()
            if job.key not in found and touched & (job.current_inputs | job.current_outputs)
        ]
        if not frontier:
            break
        found.update((job.key, job) for job in frontier)
    return list(found.values())


def _dataset_id(key: Key) -> str:
    return f"dataset:{key[0]}:{key[1]}"


def _node(
    node_id: str, kind: str, data: JsonDict, ins: list[tuple[str, str]], outs: list[tuple[str, str]]
) -> JsonDict:
    def edges(pairs: list[tuple[str, str]]) -> list[JsonDict]:
        return [{"origin": a, "destination": b} for a, b in sorted(set(pairs))]

    return {
        "id": node_id,
        "type": kind,
        "data": data,
        "inEdges": edges(ins),
        "outEdges": edges(outs),
    }


def _lineage_job_data(job: Job) -> JsonDict:
    run = job.current_run
    return {
        **_job_base(job),
        "currentRunUuid": str(run.uuid) if run else None,
        "createdAt": iso_z(job.created_at),
        "updatedAt": iso_z(job.updated_at),
        "namespace": job.namespace,
        "inputs": _dataset_ids(job.current_inputs),
        "outputs": _dataset_ids(job.current_outputs),
        "location": job.location,
        "description": job.description,
        "latestRun": run_json(run) if run else None,
    }


# -- lists ------------------------------------------------------------------------------------


def jobs_page(
    jobs: Iterable[Job], states: set[str] | None, limit: int, offset: int
) -> tuple[list[JsonDict], int]:
    """Jobs by updatedAt DESC; `lastRunStates` filters on the current run, never the count."""
    every = sorted(jobs, key=lambda j: j.name)
    every.sort(key=lambda j: j.updated_at, reverse=True)
    # SQL `current_run_state IN (...) OR r.uuid IS NULL`: a run without a state never matches.
    allowed = RUN_STATES if states is None else states
    kept = [j for j in every if j.current_run is None or j.current_run.state in allowed]
    return [job_json(j) for j in kept[offset : offset + limit]], len(every)


def runs_page(job: Job, limit: int, offset: int) -> tuple[list[JsonDict], int]:
    """Runs by startedAt DESC NULLS LAST."""
    runs = sorted(job.runs, key=lambda r: r.created_at, reverse=True)
    runs.sort(key=lambda r: (r.started_at is None, -(r.started_at or r.created_at).timestamp()))
    return [run_json(r) for r in runs[offset : offset + limit]], len(runs)


def events_page(
    state: MarquezState,
    after: datetime,
    before: datetime,
    ascending: bool,
    limit: int,
    offset: int,
) -> tuple[list[JsonDict], int]:
    """Events with after <= eventTime < before; RUN events listed, every kind counted (also
    with `limit=0`, which Marquez accepts: the count alone)."""
    window = state.events_between(after, before)
    if limit == 0:
        return [], len(window)
    listed = [e for e in window if e.kind == RUN_EVENT]
    if not ascending:
        listed.reverse()
    return [e.body for e in listed[offset : offset + limit]], len(window)


def _ilike(pattern: str) -> re.Pattern[str]:
    # `name ILIKE '%' || q || '%'`: % and _ inside q keep their SQL wildcard meaning.
    body = "".join(".*" if c == "%" else "." if c == "_" else re.escape(c) for c in pattern)
    return re.compile(body, re.IGNORECASE | re.DOTALL)


def search(
    state: MarquezState,
    query: str,
    kind: str | None,
    namespace: str | None,
    after: datetime | None,
    before: datetime | None,
    limit: int,
) -> list[JsonDict]:
    """GET /search: substring match on dataset and job names; no offset, no real ordering."""
    matcher = _ilike(query)
    found: list[tuple[str, str, str, datetime]] = []
    if kind in (None, "DATASET"):
        found += [("DATASET", d.namespace, d.name, d.updated_at) for d in state.datasets.values()]
    if kind in (None, "JOB"):
        found += [("JOB", j.namespace, j.name, j.updated_at) for j in state.jobs.values()]
    results = [
        {
            "type": typ,
            "name": name,
            "updatedAt": iso_z(updated),
            "namespace": ns,
            "nodeId": f"{typ.lower()}:{ns}:{name}",
        }
        for typ, ns, name, updated in sorted(found, key=lambda f: (f[2], f[0], f[1]))
        if matcher.search(name)
        and (namespace is None or ns == namespace)
        and (after is None or updated >= after)
        and (before is None or updated < before)
    ]
    return results[:limit]
