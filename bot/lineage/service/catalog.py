"""The DAGs Marquez knows, and resolving a DAG name the way a user types it.

Names are resolved across all Marquez namespaces (a default namespace, MARQUEZ_NAMESPACE, wins
when the DAG exists there); an ambiguous name asks for a namespace, an unknown one comes with
the closest names.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bot.clients.marquez import MarquezClient
from bot.core.model import DagRef
from bot.lineage.rules.errors import PlanningError
from bot.lineage.rules.graph import dag_of, facet_owners, job_key, top_dag


class UnknownDag(PlanningError, LookupError):
    """No DAG of that name; `suggestions` holds the closest known names."""

    def __init__(self, name: str, suggestions: Iterable[str], namespace: str | None) -> None:
        self.name = name
        self.suggestions = tuple(suggestions)
        where = f" in namespace {namespace}" if namespace else ""
        hint = f" Did you mean: {', '.join(self.suggestions)}?" if self.suggestions else ""
        super().__init__(f"Unknown DAG '{name}'{where}: Marquez has no job by that name.{hint}")


class AmbiguousDag(PlanningError, LookupError):
    """The name exists in several namespaces; `candidates` lists them."""

    def __init__(self, name: str, candidates: Iterable[DagRef]) -> None:
        self.name = name
        self.candidates = tuple(sorted(candidates))
        namespaces = ", ".join(c.namespace for c in self.candidates)
        super().__init__(
            f"DAG '{name}' exists in several Marquez namespaces ({namespaces}); "
            "say which one with --namespace."
        )


class TaskNotDag(PlanningError, LookupError):
    """The name is a task of a DAG; backfills run whole DAGs."""

    def __init__(self, name: str, dag: DagRef) -> None:
        self.name = name
        self.dag = dag
        super().__init__(
            f"'{name}' is a task of DAG '{dag.dag_id}' (namespace {dag.namespace}); "
            f"backfills rerun whole DAGs, so name the DAG: {dag.dag_id}"
        )


def _has_io(job: Mapping[str, Any]) -> bool:
    return bool(job.get("inputs") or job.get("outputs"))


@dataclass
class Catalog:
    """All Marquez jobs grouped by the DAG they belong to."""

    jobs: list[dict[str, Any]]
    members: dict[DagRef, list[dict[str, Any]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        own = {(job_key(job)): dag_of(job) for job in self.jobs}
        # Marquez creates the job a `parent` facet names (a Spark application, `dbt run`)
        # without runs or datasets; it belongs where the jobs under it belong.
        # Marquez gives a child only its parent's name: a parent is looked for in the child's
        # own namespace, so a DAG of the same name elsewhere never takes its jobs.
        below: dict[tuple[str, str], set[DagRef]] = {}
        for job in self.jobs:
            parent = job.get("parentJobName")
            if isinstance(parent, str) and parent:
                below.setdefault((job_key(job)[0], parent), set()).add(own[job_key(job)])
        for job in self.jobs:
            key = job_key(job)
            homes = below.get(key, set()) - {DagRef(*key)}
            run = job.get("latestRun")
            reported = isinstance(run, Mapping) and bool(run.get("facets"))
            if not reported and not _has_io(job) and len(homes) == 1:
                own[key] = next(iter(homes))

        def parent_of(dag: DagRef) -> DagRef | None:
            above = own.get((dag.namespace, dag.dag_id))
            return above if above is not None and above != dag else None

        for job in self.jobs:
            self.members.setdefault(top_dag(own[job_key(job)], parent_of), []).append(job)

    @property
    def dags(self) -> list[DagRef]:
        return sorted(self.members)

    def owners_from_facets(self) -> dict[DagRef, tuple[str, ...]]:
        return facet_owners(self.jobs)

    def jobs_of(self, dag: DagRef) -> list[tuple[str, str]]:
        """(namespace, job name) of a DAG's jobs, those with datasets first.

        All jobs count: Marquez shows only the latest run's datasets on a job, so a task whose
        retry is still running may show none while its lineage edges are still there.
        """
        jobs = sorted(self.members.get(dag, []), key=lambda j: (not _has_io(j), j["name"]))
        return [(j["namespace"], j["name"]) for j in jobs]

    def resolve(
        self, name: str, *, namespace: str | None = None, default_namespace: str | None = None
    ) -> DagRef:
        """The DAG a user means by `name` (optionally pinned to a namespace)."""

        def task_dag(task: str) -> DagRef | None:
            job = next(
                (j for j in self.jobs if j.get("name") == task and j.get("parentJobName")), None
            )
            return dag_of(job) if job is not None else None

        named = [d for d in self.dags if d.dag_id == name.strip()]
        return resolve_among(
            name,
            named,
            self.dags,
            task_dag,
            namespace=namespace,
            default_namespace=default_namespace,
        )


def resolve_among(
    name: str,
    named: Sequence[DagRef],
    every: Callable[[], Iterable[DagRef]] | Iterable[DagRef],
    task_dag: Callable[[str], DagRef | None],
    *,
    namespace: str | None = None,
    default_namespace: str | None = None,
) -> DagRef:
    """Name resolution shared by the Marquez catalog and the local index: `named` are the
    known DAGs with this id (sorted), `every` all DAGs (only read to suggest close names),
    `task_dag` the DAG of a task job of that name, if any."""
    name = name.strip()

    def all_dags() -> list[DagRef]:
        return sorted(every() if callable(every) else every)

    if namespace:
        ref = DagRef(namespace, name)
        if ref in named:
            return ref
        in_ns = [d.dag_id for d in all_dags() if d.namespace == namespace]
        raise UnknownDag(name, _closest(name, in_ns), namespace)
    hits = sorted(named)
    if default_namespace and DagRef(default_namespace, name) in hits:
        return DagRef(default_namespace, name)
    if len(hits) == 1:
        return hits[0]
    if len(hits) > 1:
        raise AmbiguousDag(name, hits)
    task = task_dag(name)
    if task is not None:
        raise TaskNotDag(name, task)
    raise UnknownDag(name, _closest(name, [d.dag_id for d in all_dags()]), None)


def _closest(name: str, names: Iterable[str]) -> list[str]:
    pool = sorted(set(names))
    close = difflib.get_close_matches(name, pool, n=5, cutoff=0.6)
    lowered = name.lower()
    contained = [n for n in pool if lowered in n.lower() and n not in close]
    return (close + contained)[:5]


async def load_catalog(client: MarquezClient) -> Catalog:
    """Every job in every namespace (`GET /api/v1/jobs`, all pages)."""
    return Catalog(await client.list_jobs())
