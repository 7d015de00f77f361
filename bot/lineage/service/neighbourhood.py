"""A DAG's downstream lineage fetched from Marquez on demand, for a plan or an alert made while
the local index is still loading (or stale): bounded, so it answers in seconds on any Marquez.

Marquez's `GET /lineage` adds every job sharing a dataset with a job already found, `depth`
hops out (LineageDao's recursive CTE); deep, on a big catalog, that query takes many seconds
(MarquezProject/marquez#3058), and a crawl of the whole catalog is what made the first previews
wait a minute. So the walk asks for `DEPTH` hops at a time around the jobs at its edge, a few
requests at once, and goes downstream only: a DAG reading what an affected DAG writes is
affected, and then every job of it is (a rerun reruns the whole DAG). It stops when every
affected job's consumers have been seen, or at `MAX_REQUESTS` / `BUDGET_S`, and says which.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from bot.clients.marquez import MarquezClient, MarquezError, MarquezNotFound, job_node_id
from bot.core.model import DagRef
from bot.lineage.rules.graph import dag_of, job_io, settled_jobs

DEPTH = 2
"""Job hops per request: enough to see a job's consumers and theirs, shallow enough that the
CTE stays small."""
MAX_REQUESTS = 16
CONCURRENCY = 8
BUDGET_S = 8.0
"""Within Slack's patience for a preview once resolving took its share."""

JobKey = tuple[str, str]


@dataclass(frozen=True)
class Neighbourhood:
    """What the walk found: Marquez Job objects (lineage node data) to index, the requests it
    made, the DAGs found downstream, and whether it saw every affected job's consumers."""

    jobs: list[dict[str, Any]]
    requests: int
    dags: frozenset[DagRef]
    complete: bool


async def fetch_downstream(
    client: MarquezClient,
    root: DagRef,
    known_jobs: Callable[[DagRef], Iterable[JobKey]],
    *,
    max_requests: int = MAX_REQUESTS,
    budget_s: float = BUDGET_S,
) -> Neighbourhood:
    """Walk downstream of `root` from its jobs; `known_jobs` names the jobs the index already
    has for a DAG (its tasks, which Marquez's graph reaches only through their datasets)."""
    found: dict[JobKey, dict[str, Any]] = {}
    dags: dict[JobKey, DagRef] = {}
    settled: set[str] = set()
    queried: set[str] = set()
    affected = {root}
    requests = 0
    loop = asyncio.get_running_loop()
    deadline = loop.time() + budget_s

    failed: list[MarquezError] = []

    async def lineage(node: str) -> list[dict[str, Any]]:
        try:
            return await client.get_lineage(node, depth=DEPTH)
        except MarquezNotFound:
            return []  # a job that never finished a run has no lineage yet
        except MarquezError as exc:  # the rest still count; the walk says it is incomplete
            failed.append(exc)
            return []

    while True:
        affected = _affected(root, found, dags, known_jobs)
        edge = [
            node
            for node in _job_nodes(affected, dags, known_jobs)
            if node not in settled and node not in queried
        ]
        if not edge:
            complete = not failed
            return Neighbourhood(list(found.values()), requests, frozenset(affected), complete)
        batch = edge[: min(CONCURRENCY, max_requests - requests)]
        left = deadline - loop.time()
        if not batch or left <= 0:
            return Neighbourhood(list(found.values()), requests, frozenset(affected), False)
        queried.update(batch)
        requests += len(batch)
        try:
            async with asyncio.timeout(left):
                answers = await asyncio.gather(*map(lineage, batch))
        except TimeoutError:
            return Neighbourhood(list(found.values()), requests, frozenset(affected), False)
        for node, nodes in zip(batch, answers, strict=True):
            settled |= settled_jobs(nodes, node, DEPTH)
            for item in nodes:
                data = item.get("data")
                if item.get("type") != "JOB" or not isinstance(data, dict):
                    continue
                try:
                    dag = dag_of(data)
                except ValueError:
                    continue
                key = (str(data.get("namespace") or dag.namespace), str(data.get("name")))
                found.setdefault(key, data)
                dags.setdefault(key, dag)


def _affected(
    root: DagRef,
    found: dict[JobKey, dict[str, Any]],
    dags: dict[JobKey, DagRef],
    known_jobs: Callable[[DagRef], Iterable[JobKey]],
) -> set[DagRef]:
    """`root` and every DAG reading, transitively, what an affected DAG's jobs write (as far
    as the jobs fetched so far show)."""
    readers: dict[tuple[str, str], set[DagRef]] = {}
    writes: dict[DagRef, set[tuple[str, str]]] = {}
    for key, data in found.items():
        inputs, outputs = job_io(data)
        for dataset in inputs:
            readers.setdefault(dataset, set()).add(dags[key])
        writes.setdefault(dags[key], set()).update(outputs)
    affected = {root}
    todo = [root]
    while todo:
        for dataset in writes.get(todo.pop(), ()):
            for reader in readers.get(dataset, ()):
                if reader not in affected:
                    affected.add(reader)
                    todo.append(reader)
    return affected


def _job_nodes(
    affected: set[DagRef],
    dags: dict[JobKey, DagRef],
    known_jobs: Callable[[DagRef], Iterable[JobKey]],
) -> Sequence[str]:
    """Node ids of every known job of these DAGs, the root's first and then by name."""
    by_dag: dict[DagRef, set[JobKey]] = {}
    for key, of in dags.items():
        by_dag.setdefault(of, set()).add(key)
    keys: set[JobKey] = set()
    for dag in affected:
        jobs = by_dag.get(dag, set()) | set(known_jobs(dag))
        # A DAG with no job known yet: its own job (Airflow's DAG job shows its tasks' graph
        # only through them, but a job that is its own DAG — a cron Spark job — has it all).
        keys |= jobs or {(dag.namespace, dag.dag_id)}
    return [job_node_id(*key) for key in sorted(keys)]
