"""The backfill an alert proposes: how many DAGs and runs it reruns (those of the plan Approve
backfill makes, from the same index and schedules, when the alert can plan it) and about how
long that takes, from each DAG's run history. Pure functions of plain data.

Also: the plan of **Backfill downstream**, for a root that recovered on its own (someone reran
it in Airflow): the same plan without the root, whose rerun already happened.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from math import ceil
from statistics import median

from bot.lineage.rules.planner import Plan, PlanNote


@dataclass(frozen=True)
class Proposal:
    dags: int
    runs: int
    estimate: timedelta | None
    """About how long the backfill takes; None when no DAG of it has run history."""
    unknown: int = 0
    """DAGs without run history (the estimate leaves them out)."""
    planned: bool = True
    """The DAG and run counts are those of the plan Approve backfill runs (same index, same
    schedules); False when the alert could only estimate them (each DAG once per failed
    interval), and then it says so."""


def propose(
    runs_per_dag: Mapping[str, int],
    history: Mapping[str, Sequence[timedelta]],
    *,
    parallel_runs: int,
    planned: bool = True,
) -> Proposal:
    """The proposal for DAGs rerunning `runs_per_dag` runs each. The estimate is the sum over
    DAGs of their median run time times the batches of `parallel_runs` runs their runs need:
    DAGs mostly wait on each other downstream, so they are counted one after another (an upper
    bound when branches run side by side)."""
    total = timedelta(0)
    unknown = 0
    for dag, runs in runs_per_dag.items():
        seen = history.get(dag) or ()
        if not seen:
            unknown += 1
            continue
        typical = timedelta(seconds=median(t.total_seconds() for t in seen))
        total += typical * ceil(runs / max(1, parallel_runs))
    known = len(runs_per_dag) - unknown
    return Proposal(
        dags=len(runs_per_dag),
        runs=sum(runs_per_dag.values()),
        estimate=total if known else None,
        unknown=unknown,
        planned=planned,
    )


def without_root(plan: Plan, *, why: str) -> Plan:
    """The plan minus its root: the downstream DAGs, for the intervals that read what the root
    wrote (its upstream edges to the root are dropped, so they start at once)."""
    root = plan.root
    steps = tuple(
        step._replace(upstream=tuple(u for u in step.upstream if u != root))
        for step in plan.steps
        if step.dag != root
    )
    return replace(plan, steps=steps, notes=(*plan.notes, PlanNote(root.dag_id, why)))
