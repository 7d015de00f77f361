"""What a Retry of a failed backfill reruns: the plan of the DAGs that did not succeed."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace

from bot.lineage.rules.planner import Plan


def retry_plan(plan: Plan, dag_ids: Collection[str]) -> Plan:
    """`plan` restricted to the steps of `dag_ids`, in its order, with the same intervals.

    Upstream edges to DAGs left out are dropped: those succeeded, so nothing waits for them.
    The first kept step (plan order is topological, so none of its upstream is kept) becomes
    the root the preview names and whose owners approve.
    """
    steps = tuple(
        step._replace(upstream=tuple(u for u in step.upstream if u.dag_id in dag_ids))
        for step in plan.steps
        if step.dag.dag_id in dag_ids
    )
    if not steps:
        raise ValueError("a retry needs at least one DAG of the plan")
    return replace(
        plan,
        root=steps[0].dag,
        steps=steps,
        notes=tuple(n for n in plan.notes if n.dag_id in dag_ids),
    )
