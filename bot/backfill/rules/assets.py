"""Asset-triggered consumers as steps of a plan (`--with-asset-consumers`).

A DAG scheduled on an Airflow asset runs whenever a producer updates it, so every interval a
backfill reruns triggers it again (apache/airflow#33272), and Airflow may fold several updates
into one run. Included in the plan, each consumer becomes an ordinary step after the producers
it reads: one run per interval they rerun, in the plan's order, counted, followed and budgeted
like the rest. Airflow 3 cannot backfill such a DAG (its timetable never schedules anything),
so those steps run as one triggered run per interval (bot/backfill/run/airflow2.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime

from bot.core.model import DagRef, Interval
from bot.lineage.rules.planner import Plan, PlanStep

ASSET_SCHEDULE = "assets"
"""The schedule a consumer step shows: it is scheduled on assets, not on a timetable."""


def with_consumers(
    plan: Plan,
    found: Sequence[Mapping[str, str]],
    owners: Mapping[str, tuple[str, ...]] | None = None,
) -> tuple[Plan, tuple[str, ...]]:
    """The plan with each consumer in `found` ({"dag", "asset", "consumer"}, as the preview
    reads them) that it does not hold yet appended after its producers, rerunning every
    interval any of them reruns; and the consumers' DAG ids, in the order they were added.

    Appended at the end, a consumer's producers all come before it, so the plan keeps its
    lineage order whatever the consumers are."""
    steps = {s.dag.dag_id: s for s in plan.steps}
    producers: dict[str, list[PlanStep]] = {}
    for entry in found:
        producer, consumer = steps.get(entry.get("dag", "")), entry.get("consumer", "")
        if producer is None or not consumer or consumer in steps:
            continue
        if all(p.dag != producer.dag for p in producers.setdefault(consumer, [])):
            producers[consumer].append(producer)
    added = tuple(
        PlanStep(
            dag=DagRef(made_by[0].dag.namespace, consumer),
            intervals=_union(s.intervals for s in made_by),
            upstream=tuple(s.dag for s in made_by),
            schedule=ASSET_SCHEDULE,
            owners=(owners or {}).get(consumer, ()),
        )
        for consumer, made_by in producers.items()
    )
    if not added:
        return plan, ()
    return replace(plan, steps=(*plan.steps, *added)), tuple(s.dag.dag_id for s in added)


def without_consumers(plan: Plan, added: Sequence[str]) -> Plan:
    """The plan without the consumer steps `with_consumers` added (Review plan unticked)."""
    gone = set(added)
    return replace(plan, steps=tuple(s for s in plan.steps if s.dag.dag_id not in gone))


def _union(groups: Iterable[Sequence[Interval]]) -> tuple[Interval, ...]:
    seen: dict[datetime, Interval] = {}
    for group in groups:
        for interval in group:
            seen.setdefault(interval.start, interval)
    return tuple(sorted(seen.values(), key=lambda i: i.start))
