"""A DAG-level lineage graph kept up to date job by job, for the bot's local lineage index.

`LineageGraph` (graph.py) rebuilds its DAG graph from Marquez nodes in one go, which suits one
request. The index instead changes one job at a time (an event names new datasets, Marquez
reports a changed or deleted job) and must stay small at 50,000 jobs, so it keeps only what
planning needs: each job's DAG and datasets, which DAGs produce and read each dataset, and the
DAG → DAG links those imply, as plain adjacency sets. `DagGraph` is what the pure planning
functions walk: through a snapshot renumbered in (dag id, namespace) order (walk.py), so
the planner's topological sort compares integers instead of name tuples.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from operator import attrgetter
from typing import TypeVar

import networkx as nx

from bot.core.model import DagRef, DatasetRef
from bot.lineage.rules.walk import RankedView, Walk

JobKey = tuple[str, str]  # (namespace, job name), as Marquez names the job


class DagGraph:
    """DAG → DAG links with a count of the datasets behind each, over integer node ids.

    `succ`/`pred` map DAG refs to their neighbours for the generic walks (networkx's shape);
    `walk` is the planner's fast path over the integer ids (no DAG ref hashed per edge).

    Sized for 100,000 DAGs: a node's neighbours are a tuple (a set only past `_SET_FROM`, as a
    hub's are), and a link's count is kept only when more than one dataset makes it.
    """

    def __init__(self) -> None:
        self._ids: dict[DagRef, int] = {}
        self._refs: list[DagRef | None] = []
        self._free: list[int] = []
        self._succ: list[Side] = []
        self._pred: list[Side] = []
        self._edges = 0
        self._extra: dict[int, int] = {}  # link key → datasets behind it beyond the first
        self._view: RankedView | None = None  # what walks read; rebuilt when nodes change

    def __contains__(self, dag: object) -> bool:
        return dag in self._ids

    def __len__(self) -> int:
        return len(self._ids)

    def __iter__(self) -> Iterator[DagRef]:
        return iter(self._ids)

    @property
    def edge_count(self) -> int:
        return self._edges

    @property
    def succ(self) -> Mapping[DagRef, list[DagRef]]:
        return _Neighbours(self, self._succ)

    @property
    def pred(self) -> Mapping[DagRef, list[DagRef]]:
        return _Neighbours(self, self._pred)

    @property
    def rank(self) -> Mapping[DagRef, int]:
        """Each DAG's position in (dag id, namespace) order, the planner's tie-break order."""
        return {dag: position for position, dag in enumerate(self._ranked().refs)}

    def add_node(self, dag: DagRef) -> None:
        if dag in self._ids:
            return
        if self._free:
            index = self._free.pop()
            self._refs[index] = dag
        else:
            index = len(self._refs)
            self._refs.append(dag)
            self._succ.append(())
            self._pred.append(())
        self._ids[dag] = index
        self._view = None

    def remove_node(self, dag: DagRef) -> None:
        """Drop a DAG that has no job left (its links are already gone)."""
        index = self._ids.pop(dag, None)
        if index is None:
            return
        for other in self._succ[index]:
            _drop(self._pred, other, index)
        for other in self._pred[index]:
            _drop(self._succ, other, index)
        self._edges -= len(self._succ[index]) + len(self._pred[index])
        self._succ[index], self._pred[index] = (), ()
        self._refs[index] = None
        self._free.append(index)
        self._view = None

    def link(self, producer: DagRef, consumer: DagRef) -> None:
        a, b = self._ids[producer], self._ids[consumer]
        if b in self._succ[a]:
            key = a << 32 | b
            self._extra[key] = self._extra.get(key, 0) + 1
            return
        _add(self._succ, a, b)
        _add(self._pred, b, a)
        self._edges += 1
        if self._view is not None:
            self._view.link(a, b)

    def unlink(self, producer: DagRef, consumer: DagRef) -> None:
        a, b = self._ids[producer], self._ids[consumer]
        key = a << 32 | b
        more = self._extra.pop(key, 0)
        if more > 1:
            self._extra[key] = more - 1
        elif not more and b in self._succ[a]:
            _drop(self._succ, a, b)
            _drop(self._pred, b, a)
            self._edges -= 1
            if self._view is not None:
                self._view.unlink(a, b)

    def _ranked(self) -> RankedView:
        if self._view is None:
            self._view = RankedView(self._ids, self._succ, self._pred)
        return self._view

    def walk(self, root: DagRef, exclude: Iterable[DagRef] = ()) -> Walk | None:
        """Root and its descendants (never through `exclude`) in lexicographic topological
        order, with their upstream members; None if they contain a cycle (walk.py)."""
        view = self._ranked()
        rank = view.rank
        skip = [rank[self._ids[d]] for d in exclude if d in self._ids]
        return view.walk(rank[self._ids[root]], skip)

    def to_networkx(self, members: Iterable[DagRef] | None = None) -> nx.DiGraph:
        """The graph (or the part among `members`) as networkx, for cycle reports."""
        keep = set(self._ids if members is None else members)
        graph = nx.DiGraph()
        graph.add_nodes_from(sorted(keep))
        graph.add_edges_from(
            (a, b) for a in sorted(keep) for b in sorted(self.succ[a]) if b in keep
        )
        return graph


Side = tuple[int, ...] | set[int]
"""One node's neighbours on one side."""

_SET_FROM = 32  # neighbours from which a set's O(1) membership pays for its size


def _add(sides: list[Side], node: int, other: int) -> None:
    side = sides[node]
    if isinstance(side, set):
        side.add(other)
    elif len(side) + 1 < _SET_FROM:
        sides[node] = (*side, other)
    else:
        sides[node] = {*side, other}


def _drop(sides: list[Side], node: int, other: int) -> None:
    side = sides[node]
    if isinstance(side, set):
        side.discard(other)
    else:
        sides[node] = tuple(n for n in side if n != other)


class _Neighbours(Mapping[DagRef, list[DagRef]]):
    """A read-only DAG ref view of one side of a `DagGraph`'s adjacency."""

    def __init__(self, graph: DagGraph, sides: list[Side]) -> None:
        self._graph, self._sides = graph, sides

    def __getitem__(self, dag: DagRef) -> list[DagRef]:
        refs = self._graph._refs
        return [refs[i] for i in self._sides[self._graph._ids[dag]]]  # type: ignore[misc]

    def __iter__(self) -> Iterator[DagRef]:
        return iter(self._graph._ids)

    def __len__(self) -> int:
        return len(self._graph._ids)


@dataclass(frozen=True, slots=True)
class JobLineage:
    """One job as the index knows it: its DAG and the datasets it reads and writes.

    Datasets are tuples sorted by (namespace, name), not frozensets: the index holds 50,000
    jobs, and a small frozenset costs 216 bytes where a tuple of two costs 56 (`of` sorts).
    """

    dag: DagRef
    inputs: tuple[DatasetRef, ...] = ()
    outputs: tuple[DatasetRef, ...] = ()
    owners: tuple[str, ...] = ()

    @classmethod
    def of(
        cls,
        dag: DagRef,
        inputs: Iterable[DatasetRef] = (),
        outputs: Iterable[DatasetRef] = (),
        owners: Iterable[str] = (),
    ) -> JobLineage:
        return cls(dag, _sorted(inputs), _sorted(outputs), tuple(owners))


K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


def add_to(table: dict[K, tuple[V, ...]], key: K, item: V) -> None:
    """Add `item` to the tuple at `key`, once: the index's small groups are tuples (one or
    two items as a rule, where a set costs 216 bytes)."""
    items = table.get(key, ())
    if item not in items:
        table[key] = (*items, item)


def take_from(table: dict[K, tuple[V, ...]], key: K, item: V) -> None:
    """Remove `item` from the tuple at `key`, and the key with its last item."""
    rest = tuple(i for i in table.get(key, ()) if i != item)
    if rest:
        table[key] = rest
    else:
        table.pop(key, None)


def _sorted(datasets: Iterable[DatasetRef]) -> tuple[DatasetRef, ...]:
    return tuple(sorted(set(datasets), key=attrgetter("namespace", "name")))


class DagLineage:
    """Jobs and their datasets, and the DAG graph derived from them, changed one job at a time.

    A dataset links every DAG producing it to every other DAG reading it (tasks of one DAG
    handing data to each other make no link), exactly as `LineageGraph.rebuild` does.

    At 100,000 jobs the small containers are most of the memory, so a DAG's jobs and a
    dataset's producing and reading DAGs are tuples (a dataset's hold one DAG per job, so a
    DAG is there as many times as it has jobs on that side): one or two entries each as a
    rule, 56 bytes where a set or a Counter costs over 200.
    """

    def __init__(self) -> None:
        self.jobs: dict[JobKey, JobLineage] = {}
        self.graph = DagGraph()
        self.members: dict[DagRef, tuple[JobKey, ...]] = {}
        self._producers: dict[DatasetRef, tuple[DagRef, ...]] = {}
        self._consumers: dict[DatasetRef, tuple[DagRef, ...]] = {}

    def _pairs(self, dataset: DatasetRef) -> set[tuple[DagRef, DagRef]]:
        makers = self._producers.get(dataset)
        readers = self._consumers.get(dataset)
        if not makers or not readers:
            return set()
        return {(a, b) for a in set(makers) for b in set(readers) if a != b}

    def _count(self, job: JobLineage, step: int) -> None:
        for side, datasets in ((self._consumers, job.inputs), (self._producers, job.outputs)):
            for dataset in datasets:
                dags = side.get(dataset, ())
                if step > 0:
                    side[dataset] = (*dags, job.dag)
                    continue
                at = dags.index(job.dag)
                rest = dags[:at] + dags[at + 1 :]
                if rest:
                    side[dataset] = rest
                else:
                    del side[dataset]

    def set_job(self, key: JobKey, job: JobLineage) -> bool:
        """Add or replace a job; returns whether anything the graph shows changed."""
        old = self.jobs.get(key)
        if old == job:
            return False
        touched = {*job.inputs, *job.outputs}
        if old is not None:
            touched.update(old.inputs, old.outputs)
        before = {d: self._pairs(d) for d in touched}
        if old is not None:
            self._count(old, -1)
            self._leave(key, old.dag)
        self.jobs[key] = job
        add_to(self.members, job.dag, key)
        self.graph.add_node(job.dag)
        self._count(job, +1)
        self._relink(before)
        if old is not None and old.dag not in self.members:
            self.graph.remove_node(old.dag)
        return True

    def remove_job(self, key: JobKey) -> bool:
        old = self.jobs.pop(key, None)
        if old is None:
            return False
        before = {d: self._pairs(d) for d in {*old.inputs, *old.outputs}}
        self._count(old, -1)
        self._leave(key, old.dag)
        self._relink(before)
        if old.dag not in self.members:
            self.graph.remove_node(old.dag)
        return True

    def _leave(self, key: JobKey, dag: DagRef) -> None:
        """`key` is no longer one of `dag`'s jobs (a DAG with none left is dropped)."""
        take_from(self.members, dag, key)

    def _relink(self, before: Mapping[DatasetRef, set[tuple[DagRef, DagRef]]]) -> None:
        for dataset, old_pairs in before.items():
            new_pairs = self._pairs(dataset)
            for producer, consumer in old_pairs - new_pairs:
                self.graph.unlink(producer, consumer)
            for producer, consumer in new_pairs - old_pairs:
                self.graph.link(producer, consumer)

    def readers_of(self, dataset: DatasetRef) -> frozenset[DagRef]:
        """Every DAG one of whose jobs reads `dataset`."""
        return frozenset(self._consumers.get(dataset, ()))

    def outputs_of(self, dag: DagRef) -> set[DatasetRef]:
        """Every dataset a DAG's jobs write."""
        found: set[DatasetRef] = set()
        for key in self.members.get(dag, ()):
            found.update(self.jobs[key].outputs)
        return found

    def owners_of(self, dag: DagRef) -> tuple[str, ...]:
        """Owners named by the ownership facets of a DAG's jobs (in job name order)."""
        keys = self.members.get(dag, ())
        if len(keys) == 1:  # most DAGs at scale: an alert asks this of each one downstream
            return self.jobs[keys[0]].owners
        names = [o for key in sorted(keys) for o in self.jobs[key].owners]
        return tuple(dict.fromkeys(names))
