"""`GET /api/v1/lineage?nodeId=…&depth=…` as OpenLineageResource.getLineage answers it (#L111-L123).

In Marquez's order: Jersey converts `nodeId` with NodeId's constructor (a prefix outside
dataset|datasetField|job|run → 404, NodeId.java#L59-L69) and `depth` as a plain int (404 when it
is not one); `throwIfNotExists` (BaseResource.java#L158-L170) splits the id with
`NodeId.parts` (#L212-L241: too few parts → UnsupportedOperationException, too few splittable
colons → IllegalStateException, both 500) and answers Marquez's NotFoundException texts; then
LineageService.lineage (#L71-L124) grows the graph from the node's job — a `run:` node is
"Node '…' must be of type dataset or job!" (#L263-L277).
"""

from __future__ import annotations

import re
import uuid
from datetime import datetime
from weakref import WeakKeyDictionary

from standins.marquez.errors import ApiError, not_found, server_error
from standins.marquez.events import JsonDict, is_valid_namespace, iso_z
from standins.marquez.model import Dataset, Job, Key
from standins.marquez.state import MarquezState
from standins.marquez.views import dataset_base, dataset_ids, job_base, run_json

__all__ = ["lineage_answer"]

_NODE_ID = re.compile(r"(dataset|datasetField|job|run):.*")  # Java's `.` stops at line breaks
_SPLITTABLE_COLON = re.compile(r":(?!//|\d+)")  # colons of `scheme://` and `host:port` stay


def lineage_answer(state: MarquezState, node_id: str, depth: int) -> JsonDict:
    """The `{"graph": [...]}` answer, or ApiError as Marquez answers."""
    if _NODE_ID.fullmatch(node_id) is None:
        raise ApiError(404, {"code": 404, "message": "HTTP 404 Not Found"})
    has_version = "#" in node_id
    if not has_version:
        _throw_if_not_exists(state, node_id)
    if node_id.startswith("job"):
        _, namespace, name = _parts(node_id, 3)
        start = state.visible_job((namespace, name))
        dataset_key: Key | None = None
    elif node_id.startswith("dataset:"):
        namespace, name = _dataset_id(node_id)
        dataset = state.visible_dataset((namespace, name))
        start = _start_job(state, dataset)
        dataset_key = dataset.key if dataset is not None else None
    else:
        raise not_found(f"Node '{node_id}' must be of type dataset or job!")
    if start is None:  # toLineageWithOrphanDataset(nodeId.asDatasetId())
        return {"graph": [_orphan(state, node_id)]}
    graph = _graph(state, start, depth)
    if dataset_key is not None and f"dataset:{dataset_key[0]}:{dataset_key[1]}" not in graph:
        # "Found jobs … which no longer share lineage with dataset … - discarding" (#L110-L121)
        return {"graph": [_orphan(state, node_id)]}
    return {"graph": [graph[key] for key in sorted(graph)]}


def _parts(value: str, expected: int) -> list[str]:
    """NodeId.parts: split on ':' and '#'; with too many parts, only the colons not followed by
    '//' or digits separate and the last part keeps the rest."""
    parts = re.split(r"[:#]", value)
    while parts and parts[-1] == "":  # Java's String.split drops trailing empty strings
        parts.pop()
    if len(parts) < expected:  # UnsupportedOperationException
        raise server_error()
    if len(parts) == expected:
        return parts
    separators = list(_SPLITTABLE_COLON.finditer(value))[: expected - 1]
    if len(separators) < expected - 1:  # Matcher.start(): IllegalStateException
        raise server_error()
    result, previous = [], 0
    for match in separators:
        result.append(value[previous : match.start()])
        previous = match.end()
    return [*result, value[previous:]]


def _checked(namespace: str, name: str) -> Key:
    """NamespaceName.of / JobName.of / DatasetName.of: IllegalArgumentException → 500."""
    if not is_valid_namespace(namespace) or not name.strip():
        raise server_error()
    return namespace, name


def _dataset_id(node_id: str) -> Key:
    _, namespace, name = _parts(node_id, 3)
    return _checked(namespace, name)


def _throw_if_not_exists(state: MarquezState, node_id: str) -> None:
    if node_id.startswith("dataset:"):
        key = _dataset_id(node_id)
        if state.visible_dataset(key) is None:
            raise not_found(f"Dataset '{key[1]}' not found.")
    elif node_id.startswith("datasetField"):
        _, namespace, name, field = _parts(node_id, 4)
        _checked(namespace, name)
        if not field.strip():
            raise server_error()
        dataset = state.visible_dataset((namespace, name))
        version = dataset.current_version if dataset else None
        if field not in {f.get("name") for f in (version.fields if version else [])}:
            raise not_found(f"Field '{field}' not found for dataset '{name}'.")
    elif node_id.startswith("job"):
        key = _checked(*_parts(node_id, 3)[1:])
        if state.visible_job(key) is None:
            raise not_found(f"Job '{key[1]}' not found.")
    else:
        raw = _parts(node_id, 2)[1]
        try:
            run_uuid = uuid.UUID(raw)
        except ValueError:
            raise server_error() from None
        if run_uuid not in state.runs:
            raise not_found(f"Run '{run_uuid}' not found.")


def _start_job(state: MarquezState, dataset: Dataset | None) -> Job | None:
    """LineageDao.getJobFromInputOrOutput (#L129-L138): over every version of every job,
    `ORDER BY io_type DESC, jv.created_at DESC` — the newest producer, else the newest reader
    (from `jobs`, so hidden ones too)."""
    if dataset is None:
        return None
    best: tuple[int, datetime, Job] | None = None
    for job in state.jobs.values():
        for version in job.versions.values():
            rank = (
                1 if dataset.key in version.outputs else 0 if dataset.key in version.inputs else -1
            )
            if rank >= 0 and (best is None or (rank, version.created_at) > best[:2]):
                best = (rank, version.created_at, job)
    return best[2] if best else None


def _orphan(state: MarquezState, node_id: str) -> JsonDict:
    """The dataset alone, under its primary name (getDatasetData keeps `is_primary` rows);
    none at all is an NPE (a `#version` node of nothing)."""
    dataset = state.visible_dataset(_dataset_id(node_id))
    if dataset is None:
        raise server_error()
    return _node(f"dataset:{dataset.namespace}:{dataset.name}", "DATASET", dataset_base(dataset),
                 [], [])  # fmt: skip


def _graph(state: MarquezState, start: Job, depth: int) -> dict[str, JsonDict]:
    """Job nodes of the undirected growth over current job-version IO, their datasets, edges
    clipped to the jobs returned. The growth walks through hidden jobs and datasets
    (`job_versions_io_mapping`), the answer leaves them out (jobs_view, datasets_view)."""
    producers: dict[Key, set[str]] = {}
    consumers: dict[Key, set[str]] = {}
    nodes: dict[str, JsonDict] = {}
    for job in _expand(state, start, depth):
        if job.is_hidden:
            continue
        node_id = f"job:{job.namespace}:{job.name}"
        inputs = _visible(state, job.current_inputs)
        outputs = _visible(state, job.current_outputs)
        for ds in inputs:
            consumers.setdefault(ds, set()).add(node_id)
        for ds in outputs:
            producers.setdefault(ds, set()).add(node_id)
        ins = [(_dataset_node_id(ds), node_id) for ds in inputs]
        outs = [(node_id, _dataset_node_id(ds)) for ds in outputs]
        nodes[node_id] = _node(node_id, "JOB", _lineage_job_data(job, inputs, outputs), ins, outs)
    for ds_key in set(producers) | set(consumers):
        ds_id = _dataset_node_id(ds_key)
        ins = [(job_id, ds_id) for job_id in producers.get(ds_key, ())]
        outs = [(ds_id, job_id) for job_id in consumers.get(ds_key, ())]
        nodes[ds_id] = _node(ds_id, "DATASET", dataset_base(state.datasets[ds_key]), ins, outs)
    return nodes


def _visible(state: MarquezState, keys: frozenset[Key]) -> frozenset[Key]:
    return frozenset(key for key in keys if not state.datasets[key].is_hidden)


def _expand(state: MarquezState, start: Job, depth: int) -> list[Job]:
    """Jobs whose datasets overlap a job already found, up to `depth` hops (LineageDao CTE),
    each hop in the order the jobs were stored."""
    jobs_of, position = _io_index(state)
    found = {start.key: start}
    frontier = [start]
    for _ in range(max(depth, 0)):
        touched = set().union(*(j.current_inputs | j.current_outputs for j in frontier))
        near = {job.key: job for ds in touched for job in jobs_of.get(ds, ())}
        frontier = sorted(
            (job for key, job in near.items() if key not in found), key=lambda j: position[j.key]
        )
        if not frontier:
            break
        found.update((job.key, job) for job in frontier)
    return list(found.values())


_IO_INDEXES: WeakKeyDictionary[MarquezState, tuple[tuple[int, int], IoIndex]] = WeakKeyDictionary()
IoIndex = tuple[dict[Key, list[Job]], dict[Key, int]]


def _io_index(state: MarquezState) -> IoIndex:
    """Each dataset's jobs (current versions' IO, hidden jobs too) and each job's place in the
    stored order, kept until the jobs change: scanning every job per hop made a lineage
    request on 100,000 jobs cost the stand-in what Marquez's indexed CTE does not."""
    key = (state.generation, len(state.jobs))
    cached = _IO_INDEXES.get(state)
    if cached is None or cached[0] != key:
        jobs_of: dict[Key, list[Job]] = {}
        position: dict[Key, int] = {}
        for n, job in enumerate(state.jobs.values()):
            position[job.key] = n
            for ds in job.current_inputs | job.current_outputs:
                jobs_of.setdefault(ds, []).append(job)
        cached = _IO_INDEXES[state] = (key, (jobs_of, position))
    return cached[1]


def _dataset_node_id(key: Key) -> str:
    return f"dataset:{key[0]}:{key[1]}"


def _node(
    node_id: str, kind: str, data: JsonDict, ins: list[tuple[str, str]], outs: list[tuple[str, str]]
) -> JsonDict:
    def edges(pairs: list[tuple[str, str]]) -> list[JsonDict]:
        return [{"origin": a, "destination": b} for a, b in sorted(set(pairs))]

    return {"id": node_id, "type": kind, "data": data, "inEdges": edges(ins),
            "outEdges": edges(outs)}  # fmt: skip


def _lineage_job_data(job: Job, inputs: frozenset[Key], outputs: frozenset[Key]) -> JsonDict:
    run = job.current_run
    return {
        **job_base(job),
        "currentRunUuid": str(run.uuid) if run else None,
        "createdAt": iso_z(job.created_at),
        "updatedAt": iso_z(job.updated_at),
        "namespace": job.namespace,
        "inputs": dataset_ids(inputs),
        "outputs": dataset_ids(outputs),
        "location": job.location,
        "description": job.description,
        "latestRun": run_json(run) if run else None,
    }
