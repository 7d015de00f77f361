"""The backfill plan: the root DAG and every downstream DAG, each once, in lineage order,
each with the data intervals it must rerun.

Intervals are schedule-aware: the root reruns its runs overlapping the requested days; every
downstream DAG reruns its own runs whose data interval overlaps what its upstream DAGs in the
plan rewrote. A weekly DAG downstream of three daily partitions reruns the weekly run(s) that
read those days, not three daily runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import networkx as nx

from bot.domain.lineage import affected_dags
from bot.domain.model import DagRef, DateRange, Interval, iso
from bot.domain.schedule import Schedule, Unscheduled, intervals_for


class PlanError(ValueError):
    """The plan cannot be made as asked (bad exclusion, too many DAGs)."""


@dataclass(frozen=True)
class PlanStep:
    dag: DagRef
    intervals: tuple[Interval, ...]
    upstream: tuple[DagRef, ...]
    schedule: str
    owners: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "dag_id": self.dag.dag_id,
            "namespace": self.dag.namespace,
            "intervals": [i.to_json() for i in self.intervals],
            "upstream": [u.dag_id for u in self.upstream],
            "schedule": self.schedule,
            "owners": list(self.owners),
        }


@dataclass(frozen=True)
class PlanNote:
    """What the executor found about one DAG of the plan (missing, paused); `blocking` notes
    mean the plan cannot run as it is."""

    dag_id: str
    text: str
    blocking: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"dag_id": self.dag_id, "text": self.text, "blocking": self.blocking}


@dataclass(frozen=True)
class Plan:
    root: DagRef
    date_range: DateRange
    steps: tuple[PlanStep, ...]
    excluded: tuple[DagRef, ...] = ()
    only: bool = False
    notes: tuple[PlanNote, ...] = ()

    @property
    def blocked(self) -> bool:
        return any(n.blocking for n in self.notes)

    @property
    def run_count(self) -> int:
        return sum(len(s.intervals) for s in self.steps)

    def to_json(self) -> dict[str, Any]:
        window = self.date_range.as_interval()
        return {
            "dag_id": self.root.dag_id,
            "namespace": self.root.namespace,
            "start": iso(window.start),
            "end": iso(window.end),
            "range": str(self.date_range),
            "only": self.only,
            "excluded": [d.dag_id for d in self.excluded],
            "steps": [s.to_json() for s in self.steps],
            **({"notes": [n.to_json() for n in self.notes]} if self.notes else {}),
        }


def interval_from_json(data: Mapping[str, str]) -> Interval:
    """The inverse of `Interval.to_json`."""

    def parse(text: str) -> datetime:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))

    return Interval(parse(data["start"]), parse(data["end"]))


def plan_from_json(data: Mapping[str, Any]) -> Plan:
    """The inverse of `Plan.to_json` (plans are stored as JSON with their request)."""
    window = interval_from_json(data)
    refs = {step["dag_id"]: DagRef(step["namespace"], step["dag_id"]) for step in data["steps"]}
    steps = tuple(
        PlanStep(
            dag=refs[step["dag_id"]],
            intervals=tuple(interval_from_json(i) for i in step["intervals"]),
            upstream=tuple(refs.get(u, DagRef(step["namespace"], u)) for u in step["upstream"]),
            schedule=step.get("schedule", ""),
            owners=tuple(step.get("owners", ())),
        )
        for step in data["steps"]
    )
    return Plan(
        root=DagRef(data["namespace"], data["dag_id"]),
        date_range=DateRange(window.start.date(), (window.end - timedelta(days=1)).date()),
        steps=steps,
        excluded=tuple(DagRef(data["namespace"], d) for d in data.get("excluded", ())),
        only=bool(data.get("only", False)),
        notes=tuple(
            PlanNote(n["dag_id"], n["text"], bool(n.get("blocking"))) for n in data.get("notes", ())
        ),
    )


def resolve_exclusions(dags: Any, root: DagRef, names: Iterable[str]) -> tuple[DagRef, ...]:
    """Map `--exclude` DAG ids to downstream DAGs of the root; unknown names are an error."""
    wanted = [n.strip() for n in names if n.strip()]
    if not wanted:
        return ()
    # Reachability, not order: excluding a DAG is how a user breaks a lineage cycle.
    reachable = sorted(nx.descendants(dags, root)) if root in dags else []
    chosen: list[DagRef] = []
    for name in wanted:
        if name == root.dag_id:
            raise PlanError(f"--exclude {name}: the root DAG cannot be excluded; use another DAG")
        hits = [d for d in reachable if d.dag_id == name]
        if not hits:
            raise PlanError(
                f"--exclude {name}: not downstream of {root.dag_id}, so there is nothing to exclude"
            )
        chosen.extend(hits)
    return tuple(dict.fromkeys(chosen))


def check_size(dag_count: int, max_dags: int) -> None:
    """Refuse plans over the configured number of DAGs."""
    if dag_count > max_dags:
        raise PlanError(
            f"The plan would touch {dag_count} DAGs, over the limit of {max_dags} "
            "(limits.max_plan_dags in BOT_CONFIG); use --exclude or --only"
        )


def make_plan(
    dags: Any,
    root: DagRef,
    date_range: DateRange,
    schedules: Mapping[DagRef, Schedule],
    *,
    exclude: Iterable[DagRef] = (),
    only: bool = False,
    owners: Callable[[DagRef], tuple[str, ...]] = lambda _: (),
    max_dags: int | None = None,
) -> Plan:
    """Plan a backfill of `root` over `date_range` and of everything downstream of it."""
    excluded = tuple(exclude)
    affected = affected_dags(dags, root, exclude=excluded, only=only)
    if max_dags is not None:
        check_size(len(affected.order), max_dags)
    rewritten: dict[DagRef, tuple[Interval, ...]] = {}
    steps: list[PlanStep] = []
    for dag in affected.order:
        schedule = schedules.get(dag) or Unscheduled()
        upstream = affected.upstream[dag]
        if dag == root:
            changed: list[Interval] = [date_range.as_interval()]
        else:
            changed = [i for u in upstream for i in rewritten[u]]
        intervals = tuple(intervals_for(schedule, changed))
        rewritten[dag] = intervals
        steps.append(PlanStep(dag, intervals, upstream, schedule.describe(), owners(dag)))
    return Plan(root, date_range, tuple(steps), excluded, only)
