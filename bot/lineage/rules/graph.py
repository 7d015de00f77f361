"""Directed lineage from Marquez graph nodes, collapsed to DAGs, and downstream impact.

Marquez's `GET /api/v1/lineage` expands *undirected* (it returns upstream and sibling jobs too),
so impact is computed here by following out-edges only: job → its output datasets → the jobs
that read them. Task-level jobs (those with `parentJobName`) are collapsed into their DAG,
because a backfill reruns whole DAGs.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import networkx as nx

from bot.core.model import DagRef, DatasetRef
from bot.events.rules.producers import dag_from_facets
from bot.lineage.rules.errors import PlanningError
from bot.lineage.rules.gc_pause import without_cyclic_gc
from bot.ownership.rules import team_name


class LineageCycleError(PlanningError, ValueError):
    """The affected DAGs depend on each other in a cycle, so no safe order exists."""

    def __init__(self, cycle: Sequence[DagRef]) -> None:
        self.cycle = tuple(cycle)
        path = " → ".join(str(d) for d in (*self.cycle, self.cycle[0]))
        super().__init__(
            f"Lineage has a cycle between DAGs: {path}. A backfill needs an order in which every "
            "DAG runs after the DAGs it reads from; fix the lineage (or --exclude one of them)."
        )


def dag_of(job: Mapping[str, Any]) -> DagRef:
    """The DAG a Marquez job belongs to: what its own latest run's facets say (job type, Airflow
    facets, `parent.root`: bot/events/rules/producers.py), else its parent job for a task, else the
    job itself."""
    namespace = job.get("namespace") or (job.get("id") or {}).get("namespace")
    name = (job.get("id") or {}).get("name") or job.get("name")
    if not isinstance(namespace, str) or not isinstance(name, str):
        raise ValueError(f"job without namespace/name: {dict(job)!r:.200}")
    run = _own_run(job, namespace, name)
    run_facets = run.get("facets") if run is not None else None
    job_facets = job.get("facets")
    if isinstance(run_facets, Mapping):
        # The run's own parent/root/Airflow facets: a Spark or dbt job under an Airflow task
        # belongs to the task's DAG, which `parentJobName` (one level) cannot say.
        found = dag_from_facets(
            namespace, name, job_facets if isinstance(job_facets, Mapping) else {}, run_facets
        )
        if found is not None:
            return DagRef(*found)
    parent = job.get("parentJobName")
    return DagRef(namespace, parent if isinstance(parent, str) and parent else name)


def has_own_run(job: Mapping[str, Any]) -> bool:
    """Whether the job's `latestRun` is its own run (see `_own_run`)."""
    namespace = job.get("namespace") or (job.get("id") or {}).get("namespace")
    name = (job.get("id") or {}).get("name") or job.get("name")
    return (
        isinstance(namespace, str)
        and isinstance(name, str)
        and (_own_run(job, namespace, name) is not None)
    )


def _own_run(job: Mapping[str, Any], namespace: str, name: str) -> Mapping[str, Any] | None:
    """The job's `latestRun` if that run is the job's own, else None.

    Since Marquez 0.50 a child job's current run is its *parent's* current run
    (`OpenLineageDao.upsertJob`, child branch), and `/lineage` shows that run as the node's
    `latestRun`: an Airflow task's node carries its DAG run, `airflowDagRun` facet and all,
    which would read as "this task is a DAG". A top-level job's current run is its own. A
    child's run counts as its own only when Marquez ties it to the job: the run's `jobVersion`
    names the job, or the job's own run list (`latestRuns`, in `GET /jobs` answers) holds it.
    """
    run = job.get("latestRun")
    if not isinstance(run, Mapping):
        return None
    parent = job.get("parentJobName")
    if not isinstance(parent, str) or not parent:
        return run
    version = run.get("jobVersion")
    if (
        isinstance(version, Mapping)
        and version.get("namespace") == namespace
        and version.get("name") == name
    ):
        return run
    runs = job.get("latestRuns")
    run_id = run.get("id")
    listed = isinstance(runs, list) and any(
        isinstance(r, Mapping) and r.get("id") == run_id for r in runs
    )
    return run if run_id is not None and listed else None


def job_key(job: Mapping[str, Any]) -> tuple[str, str]:
    """(namespace, name) of a Marquez job, as `dag_of` reads them."""
    ref = dag_of({**job, "parentJobName": None, "latestRun": None})
    return ref.namespace, ref.dag_id


def top_dag(dag: DagRef, parent_of: Callable[[DagRef], DagRef | None], limit: int = 8) -> DagRef:
    """Follow a job's DAG up while that DAG is itself another job's child: Marquez files a
    Spark application under its Airflow task (`parentJobName` `dag.task`), and that task under
    its DAG; dbt nests sql under model under `dbt run` under a task. Cycles and chains longer
    than `limit` stop where they are."""
    seen = {dag}
    for _ in range(limit):
        parent = parent_of(dag)
        if parent is None or parent in seen:
            return dag
        seen.add(parent)
        dag = parent
    return dag


def _dataset_ref(data: Mapping[str, Any], node_id: str) -> DatasetRef:
    ident = data.get("id") or {}
    namespace = ident.get("namespace") or data.get("namespace")
    name = ident.get("name") or data.get("name")
    if not isinstance(namespace, str) or not isinstance(name, str):
        raise ValueError(f"dataset node {node_id} has no namespace/name")
    return DatasetRef(namespace, name)


@dataclass
class LineageGraph:
    """Jobs and datasets with their directed edges, plus the DAG-level graph derived from them."""

    jobs: dict[str, DagRef] = field(default_factory=dict)  # job node id -> its DAG
    datasets: dict[str, DatasetRef] = field(default_factory=dict)
    edges: set[tuple[str, str]] = field(default_factory=set)
    dags: Any = field(default_factory=nx.DiGraph)  # DagRef -> DagRef, attr "datasets"
    outputs: dict[DagRef, set[DatasetRef]] = field(default_factory=dict)

    def merge_nodes(self, nodes: Iterable[Mapping[str, Any]], *, rebuild: bool = True) -> None:
        """Add Marquez lineage nodes (several responses may overlap); `rebuild=False` defers
        the DAG-level rebuild when merging many responses at once."""
        for node in nodes:
            node_id = node["id"]
            data = node.get("data") or {}
            if node.get("type") == "JOB":
                # A node whose latestRun is another job's (Marquez 0.50+: a child shows its
                # parent's run) says less than the catalog's answer for the same job.
                if node_id not in self.jobs or has_own_run(data):
                    self.jobs[node_id] = dag_of(data)
            elif node.get("type") == "DATASET":
                self.datasets[node_id] = _dataset_ref(data, node_id)
            else:
                continue
            for edge in (*node.get("inEdges", ()), *node.get("outEdges", ())):
                self.edges.add((edge["origin"], edge["destination"]))
        if rebuild:
            self.rebuild()

    def rebuild(self) -> None:
        """Recompute the DAG-level graph and outputs from the job/dataset edges."""
        jobs = self.jobs

        def parent_of(dag: DagRef) -> DagRef | None:
            above = jobs.get(f"job:{dag.namespace}:{dag.dag_id}")  # Marquez's node id
            return above if above is not None and above != dag else None

        # A job under a task (Spark, dbt) belongs to the task's DAG.
        self.jobs = {node: top_dag(dag, parent_of) for node, dag in jobs.items()}
        producers: dict[str, set[DagRef]] = {}
        consumers: dict[str, set[DagRef]] = {}
        for origin, destination in self.edges:
            if origin in self.jobs and destination in self.datasets:
                producers.setdefault(destination, set()).add(self.jobs[origin])
            elif origin in self.datasets and destination in self.jobs:
                consumers.setdefault(origin, set()).add(self.jobs[destination])
        links: dict[tuple[DagRef, DagRef], set[DatasetRef]] = {}
        outputs: dict[DagRef, set[DatasetRef]] = {}
        for dataset_id, makers in producers.items():
            dataset = self.datasets[dataset_id]
            readers = consumers.get(dataset_id, set())
            for producer in makers:
                outputs.setdefault(producer, set()).add(dataset)
                for consumer in readers - {producer}:  # tasks of one DAG handing data over
                    links.setdefault((producer, consumer), set()).add(dataset)
        dags = nx.DiGraph()
        dags.add_nodes_from(set(self.jobs.values()))
        dags.add_edges_from((a, b, {"datasets": found}) for (a, b), found in links.items())
        self.dags = dags
        self.outputs = outputs

    def dag_ids(self) -> set[DagRef]:
        return set(self.dags.nodes)


def build_lineage(nodes: Iterable[Mapping[str, Any]]) -> LineageGraph:
    """A LineageGraph from the `graph` list(s) of Marquez lineage responses."""
    lineage = LineageGraph()
    lineage.merge_nodes(nodes)
    return lineage


@dataclass(frozen=True)
class Affected:
    """The root DAG and everything downstream of it, each once, in a safe execution order."""

    root: DagRef
    order: tuple[DagRef, ...]
    keys: tuple[int, ...]
    """A small non-negative integer per DAG of `order`, distinct within this result (the
    DAG's rank in the graph, else its position)."""
    upstreams: tuple[tuple[DagRef, ...], ...]
    """Each DAG's upstream members in (dag id, namespace) order, position by position with
    `order` (the root, first, has none)."""
    parents: tuple[tuple[int, ...], ...]
    """The same upstream members by key: the planner follows these, so a large plan hashes no
    DAG ref per edge."""

    @property
    def downstream(self) -> tuple[DagRef, ...]:
        return self.order[1:]

    @cached_property
    def upstream(self) -> Mapping[DagRef, tuple[DagRef, ...]]:
        """`upstreams` by DAG (built on first use: the planner does not need it)."""
        return dict(zip(self.order, self.upstreams, strict=True))


def _order_key(dag: DagRef) -> tuple[str, str]:
    return (dag.dag_id, dag.namespace)


def descendants(dags: Any, root: DagRef, exclude: Iterable[DagRef] = ()) -> set[DagRef]:
    """DAGs reachable from `root` (not itself) along out-edges, never through `exclude`.

    Works on a networkx DiGraph and on a `DagGraph` alike (both expose `succ`).
    """
    excluded = set(exclude)
    succ = dags.succ
    found: set[DagRef] = set()
    stack = [root]
    while stack:
        for child in succ[stack.pop()]:
            if child not in found and child not in excluded and child != root:
                found.add(child)
                stack.append(child)
    return found


@without_cyclic_gc
def affected_dags(
    dags: Any, root: DagRef, *, exclude: Iterable[DagRef] = (), only: bool = False
) -> Affected:
    """Root plus its descendants in the DAG graph, in topological order (ties by name).

    Excluded DAGs are removed before the walk: their data does not change, so DAGs that are
    downstream only through them are not affected either. The walk reads the graph in place
    (no subgraph copy) and orders by integer rank when the graph has one (`DagGraph.rank`).
    """
    if only or root not in dags:
        return Affected(root, (root,), (0,), ((),), ((),))
    fast = getattr(dags, "walk", None)  # DagGraph: integer ids throughout
    walked = fast(root, exclude) if fast is not None else None
    if walked is not None:
        return Affected(root, *walked)
    members = {root} | descendants(dags, root, exclude)
    succ, pred = dags.succ, dags.pred
    key: Callable[[DagRef], Any] = _order_key
    waiting = dict.fromkeys(members, 0)
    for node in members:
        for child in succ[node]:
            if child in waiting:
                waiting[child] += 1
    ready = [(key(node), node) for node, count in waiting.items() if count == 0]
    heapq.heapify(ready)
    order: list[DagRef] = []
    while ready:
        node = heapq.heappop(ready)[1]
        order.append(node)
        for child in succ[node]:
            if child in waiting:
                waiting[child] -= 1
                if waiting[child] == 0:
                    heapq.heappush(ready, (key(child), child))
    if len(order) < len(members):
        sub = dags.subgraph(members).copy() if isinstance(dags, nx.DiGraph) else None
        sub = sub if sub is not None else dags.to_networkx(members)
        raise LineageCycleError([edge[0] for edge in nx.find_cycle(sub)])
    position = {node: index for index, node in enumerate(order)}
    upstreams = tuple(
        tuple(sorted((p for p in pred[node] if p in waiting), key=key)) for node in order
    )
    parents = tuple(tuple(position[p] for p in ups) for ups in upstreams)
    return Affected(root, tuple(order), tuple(range(len(order))), upstreams, parents)


def facet_owners(jobs: Iterable[Mapping[str, Any]]) -> dict[DagRef, tuple[str, ...]]:
    """Owners named by OpenLineage `ownership` job facets, by DAG (`team:x` is shown as `x`)."""
    found: dict[DagRef, list[str]] = {}
    for job in jobs:
        facet = (job.get("facets") or {}).get("ownership") or {}
        owners = facet.get("owners") if isinstance(facet, dict) else None
        if not isinstance(owners, list):
            continue
        names = [
            o["name"] for o in owners if isinstance(o, dict) and isinstance(o.get("name"), str)
        ]
        if names:
            bucket = found.setdefault(dag_of(job), [])
            bucket.extend(team_name(n) for n in names)
    return {dag: tuple(dict.fromkeys(names)) for dag, names in found.items()}


def settled_jobs(nodes: Iterable[Mapping[str, Any]], start: str, depth: int) -> set[str]:
    """Job node ids whose edges a Marquez lineage response (from `start`, `depth`) has in full.

    Marquez adds jobs sharing a dataset with a job already in the graph, up to `depth` hops,
    and drops edges to jobs it did not add; so a job fewer than `depth` hops from the start has
    all its neighbours in the response, while one at the boundary may be missing consumers.
    """
    adjacency: dict[str, set[str]] = {}
    kinds: dict[str, str] = {}
    for node in nodes:
        node_id = node["id"]
        kinds[node_id] = str(node.get("type"))
        for edge in (*node.get("inEdges", ()), *node.get("outEdges", ())):
            a, b = edge["origin"], edge["destination"]
            adjacency.setdefault(a, set()).add(b)
            adjacency.setdefault(b, set()).add(a)
    if start not in kinds:
        return set()
    hops = {start: 0}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for job in frontier:
            for dataset in adjacency.get(job, ()):
                for other in adjacency.get(dataset, ()):
                    if other not in hops and kinds.get(other) == "JOB":
                        hops[other] = hops[job] + 1
                        following.append(other)
        frontier = following
    return {job for job, hop in hops.items() if hop < depth}


def _dataset_ids(items: Any, key: str | None = None) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for item in items if isinstance(items, list) else ():
        ident = item.get(key) if key and isinstance(item, dict) else item
        if not isinstance(ident, dict):
            continue
        namespace, name = ident.get("namespace"), ident.get("name")
        if isinstance(namespace, str) and isinstance(name, str):
            found.append((namespace, name))
    return found


def job_io(job: Mapping[str, Any]) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    inputs, outputs = _dataset_ids(job.get("inputs")), _dataset_ids(job.get("outputs"))
    if inputs or outputs:
        return inputs, outputs
    # A retry still running without datasets hides the job's IO; its last run with IO stands.
    for run in job.get("latestRuns") or ():
        if not isinstance(run, dict):
            continue
        inputs = _dataset_ids(run.get("inputDatasetVersions"), "datasetVersionId")
        outputs = _dataset_ids(run.get("outputDatasetVersions"), "datasetVersionId")
        if inputs or outputs:
            return inputs, outputs
    return [], []


def catalog_nodes(jobs: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Lineage nodes from Marquez Job objects (`GET /api/v1/jobs`): a directed edge source that
    complements `GET /lineage`, which drops a job's edges while a run without datasets is the
    job's latest."""
    nodes: list[dict[str, Any]] = []
    datasets: set[tuple[str, str]] = set()
    for job in jobs:
        try:
            dag_of(job)
        except ValueError:
            continue
        job_id = f"job:{job['namespace']}:{job['name']}"
        inputs, outputs = job_io(job)
        datasets.update(inputs)
        datasets.update(outputs)
        nodes.append(
            {
                "id": job_id,
                "type": "JOB",
                "data": job,
                "inEdges": [
                    {"origin": f"dataset:{ns}:{n}", "destination": job_id} for ns, n in inputs
                ],
                "outEdges": [
                    {"origin": job_id, "destination": f"dataset:{ns}:{n}"} for ns, n in outputs
                ],
            }
        )
    for ns, name in sorted(datasets):
        data = {"id": {"namespace": ns, "name": name}, "namespace": ns, "name": name}
        nodes.append({"id": f"dataset:{ns}:{name}", "type": "DATASET", "data": data})
    return nodes
