"""The DAG graph renumbered by name, as compact tuples: what every plan and impact walks.

`DagGraph` (dag_graph.py) changes one link at a time and keeps mutable adjacency sets. A plan
over 100,000 DAGs must be computed in well under 100 ms, and at that size the walk's cost is
memory traffic, not arithmetic: sets are large and scattered, and each DAG ref touched is a
cache miss. So walks read this snapshot instead. Node numbers are ranks in (dag id, namespace)
order, the planner's tie-break, so the topological sort's heap holds plain integers and sorted
integers are names in order; adjacency is tuples allocated together; each DAG's upstream DAGs
are kept sorted, with their refs as one tuple that every plan step shares.

The graph rebuilds it after a node is added or removed (ranks shift) and patches it in place
when a link appears or disappears.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping, Sequence
from itertools import compress
from operator import ne

from bot.core.model import DagRef

Walk = tuple[
    tuple[DagRef, ...], tuple[int, ...], tuple[tuple[DagRef, ...], ...], tuple[tuple[int, ...], ...]
]
"""`Affected`'s order, keys, upstreams and parents (bot/lineage/rules/graph.py)."""


class RankedView:
    """A snapshot of a `DagGraph` in rank space (rank = position in name order)."""

    __slots__ = ("above", "above_refs", "rank", "refs", "succ")

    def __init__(
        self,
        ids: Mapping[DagRef, int],
        succ: Sequence[Iterable[int]],
        pred: Sequence[Iterable[int]],
    ) -> None:
        live = sorted(ids.items(), key=lambda item: (item[0].dag_id, item[0].namespace))
        rank = [-1] * len(succ)  # node id → rank (-1: a free id)
        for position, (_, index) in enumerate(live):
            rank[index] = position
        rank_of = rank.__getitem__
        self.rank = rank
        self.refs = [dag for dag, _ in live]
        self.succ = [tuple(map(rank_of, succ[index])) for _, index in live]
        self.above = [tuple(sorted(map(rank_of, pred[index]))) for _, index in live]
        ref_of = self.refs.__getitem__
        self.above_refs = [tuple(map(ref_of, above)) for above in self.above]

    def link(self, a: int, b: int) -> None:
        """Node ids a → b are now linked (they were not)."""
        ra, rb = self.rank[a], self.rank[b]
        self.succ[ra] = (*self.succ[ra], rb)
        self._set_above(rb, sorted((*self.above[rb], ra)))

    def unlink(self, a: int, b: int) -> None:
        """Node ids a → b are no longer linked."""
        ra, rb = self.rank[a], self.rank[b]
        self.succ[ra] = tuple(r for r in self.succ[ra] if r != rb)
        self._set_above(rb, [r for r in self.above[rb] if r != ra])

    def _set_above(self, node: int, above: list[int]) -> None:
        self.above[node] = tuple(above)
        self.above_refs[node] = tuple(self.refs[r] for r in above)

    def walk(self, root: int, exclude: Iterable[int] = ()) -> Walk | None:
        """Root (a rank) and its descendants, never through `exclude`, in lexicographic
        topological order, with each one's upstream members; None if they contain a cycle."""
        succ = self.succ
        excluded = set(exclude) - {root}
        # One pass finds the members and counts each one's edges from members. Counts live in
        # a list by rank (cheaper than a dict at this size): every member but the root has at
        # least one, and the root has some only in a cycle.
        counts = [0] * len(succ)
        members = 1
        stack = [root]
        while stack:
            for child in succ[stack.pop()]:
                if counts[child]:
                    counts[child] += 1
                elif child == root:
                    counts[child] = 1
                elif child not in excluded:
                    counts[child] = 1
                    members += 1
                    stack.append(child)
        # Kahn's algorithm; a heap of ranks pops the smallest name among the ready DAGs.
        waiting = counts[:]
        ready = [] if counts[root] else [root]
        order: list[int] = []
        push, pop = heapq.heappush, heapq.heappop
        while ready:
            node = pop(ready)
            order.append(node)
            for child in succ[node]:
                count = waiting[child]  # 0: not a member (or no longer waiting)
                if count:
                    if count == 1:
                        push(ready, child)
                    waiting[child] = count - 1
        if len(order) < members:
            return None
        # A DAG whose upstream DAGs are all members (most of them) shares the stored tuples;
        # the others, found with C-level maps, keep only their members.
        refs, above = self.refs, self.above
        upstreams = list(map(self.above_refs.__getitem__, order))
        parents = list(map(above.__getitem__, order))
        partial = map(ne, map(counts.__getitem__, order), map(len, parents))
        for index in compress(range(len(order)), partial):
            mine = tuple([p for p in parents[index] if counts[p] or p == root])
            upstreams[index] = tuple([refs[p] for p in mine])
            parents[index] = mine
        return tuple(map(refs.__getitem__, order)), tuple(order), tuple(upstreams), tuple(parents)
