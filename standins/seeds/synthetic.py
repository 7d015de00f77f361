"""Synthetic lineage in the exact node shape of Marquez's `GET /api/v1/lineage` response.

Used by property tests and benchmarks, which need graphs far larger or more random than any
seed, without running HTTP. Jobs are described by what they read and write.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class JobSpec:
    """One Marquez job: its name, its DAG (parent) if it is a task, and its datasets."""

    name: str
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    parent: str | None = None
    namespace: str = "synthetic"


@dataclass
class _Node:
    node_id: str
    kind: str
    data: dict[str, Any]
    in_edges: set[tuple[str, str]] = field(default_factory=set)
    out_edges: set[tuple[str, str]] = field(default_factory=set)


def _job_data(spec: JobSpec) -> dict[str, Any]:
    simple = spec.name.removeprefix(f"{spec.parent}.") if spec.parent else spec.name
    return {
        "id": {"namespace": spec.namespace, "name": spec.name},
        "type": "BATCH",
        "name": spec.name,
        "simpleName": simple,
        "parentJobName": spec.parent,
        "namespace": spec.namespace,
        "inputs": [{"namespace": spec.namespace, "name": d} for d in spec.reads],
        "outputs": [{"namespace": spec.namespace, "name": d} for d in spec.writes],
        "latestRun": None,
    }


def _dataset_data(namespace: str, name: str) -> dict[str, Any]:
    return {
        "id": {"namespace": namespace, "name": name},
        "type": "DB_TABLE",
        "name": name,
        "physicalName": name,
        "namespace": namespace,
        "fields": [],
        "tags": [],
    }


def lineage_nodes(jobs: Iterable[JobSpec]) -> list[dict[str, Any]]:
    """The `graph` list Marquez would return for a lineage query covering all these jobs."""
    nodes: dict[str, _Node] = {}

    def dataset(namespace: str, name: str) -> _Node:
        node_id = f"dataset:{namespace}:{name}"
        if node_id not in nodes:
            nodes[node_id] = _Node(node_id, "DATASET", _dataset_data(namespace, name))
        return nodes[node_id]

    for spec in jobs:
        job_id = f"job:{spec.namespace}:{spec.name}"
        job = nodes.setdefault(job_id, _Node(job_id, "JOB", _job_data(spec)))
        for name in spec.reads:
            source = dataset(spec.namespace, name)
            edge = (source.node_id, job_id)
            source.out_edges.add(edge)
            job.in_edges.add(edge)
        for name in spec.writes:
            target = dataset(spec.namespace, name)
            edge = (job_id, target.node_id)
            job.out_edges.add(edge)
            target.in_edges.add(edge)

    def edges(pairs: set[tuple[str, str]]) -> list[dict[str, str]]:
        return [{"origin": a, "destination": b} for a, b in sorted(pairs)]

    return [
        {
            "id": node.node_id,
            "type": node.kind,
            "data": node.data,
            "inEdges": edges(node.in_edges),
            "outEdges": edges(node.out_edges),
        }
        for node in sorted(nodes.values(), key=lambda n: n.node_id)
    ]
