"""The backfill plan: the root DAG and every downstream DAG, each once, in lineage order,
each with the data intervals it must rerun.

Intervals are schedule-aware: the root reruns its runs overlapping the requested days; every
downstream DAG reruns its own runs whose data interval overlaps what its upstream DAGs in the
plan rewrote. A weekly DAG downstream of three daily partitions reruns the weekly run(s) that
read those days, not three daily runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from itertools import repeat
from typing import Any, NamedTuple, cast

from bot.core.model import DagRef, DateRange, Interval, iso, merge_intervals
from bot.lineage.rules.errors import PlanningError
from bot.lineage.rules.gc_pause import without_cyclic_gc
from bot.lineage.rules.graph import Affected, affected_dags, descendants
from bot.lineage.rules.schedule import Schedule, Unscheduled


class PlanError(PlanningError, ValueError):
    """The plan cannot be made as asked (bad exclusion, too many DAGs)."""


class PlanStep(NamedTuple):
    """One DAG of a plan: the intervals it reruns, after which DAGs, and who owns it.

    A named tuple rather than a frozen dataclass: a large plan makes 45,000 of them, and a
    tuple is built in one step where a frozen dataclass's `__init__` sets field after field.
    """

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
class LineageLoading:
    """The local index was still loading (or stale) when the plan was made: how far it had
    read Marquez, and what was fetched from Marquez on demand to plan anyway."""

    jobs_read: int
    jobs_total: int | None
    fetched_dags: int
    """DAGs whose downstream lineage came from Marquez for this plan."""
    complete: bool
    """False when the on-demand fetch stopped at its bound: DAGs further down may be missing."""

    def to_json(self) -> dict[str, Any]:
        return {
            "jobs_read": self.jobs_read,
            "jobs_total": self.jobs_total,
            "fetched_dags": self.fetched_dags,
            "complete": self.complete,
        }

    @staticmethod
    def from_json(data: Any) -> LineageLoading | None:
        if not isinstance(data, Mapping):
            return None
        total = data.get("jobs_total")
        return LineageLoading(
            int(data.get("jobs_read") or 0),
            total if isinstance(total, int) else None,
            int(data.get("fetched_dags") or 0),
            bool(data.get("complete")),
        )


@dataclass(frozen=True)
class Plan:
    root: DagRef
    date_range: DateRange
    steps: tuple[PlanStep, ...]
    excluded: tuple[DagRef, ...] = ()
    only: bool = False
    notes: tuple[PlanNote, ...] = ()
    lineage_as_of: datetime | None = None
    """When the lineage planned from was last reconciled with Marquez (the local index's
    freshness; None when it was read from Marquez for this plan)."""
    lineage_loading: LineageLoading | None = None
    """Set when the index was still loading: the plan came partly from an on-demand fetch."""

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
            **({"lineage_as_of": iso(self.lineage_as_of)} if self.lineage_as_of else {}),
            **({"lineage_loading": self.lineage_loading.to_json()} if self.lineage_loading else {}),
        }


def interval_from_json(data: Mapping[str, str]) -> Interval:
    """The inverse of `Interval.to_json`."""

    def parse(text: str) -> datetime:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))

    return Interval(parse(data["start"]), parse(data["end"]))


def plan_from_json(data: Mapping[str, Any]) -> Plan:
    """The inverse of `Plan.to_json` (plans are stored as JSON with their request): the one way
    the bot reads a stored plan. `upstream` may be absent, as the request store allows."""
    window = interval_from_json(data)
    refs = {step["dag_id"]: DagRef(step["namespace"], step["dag_id"]) for step in data["steps"]}
    steps = tuple(
        PlanStep(
            dag=refs[step["dag_id"]],
            intervals=tuple(interval_from_json(i) for i in step["intervals"]),
            upstream=tuple(
                refs.get(u, DagRef(step["namespace"], u)) for u in step.get("upstream", ())
            ),
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
        lineage_as_of=(
            datetime.fromisoformat(data["lineage_as_of"].replace("Z", "+00:00"))
            if isinstance(data.get("lineage_as_of"), str)
            else None
        ),
        lineage_loading=LineageLoading.from_json(data.get("lineage_loading")),
    )


def resolve_exclusions(dags: Any, root: DagRef, names: Iterable[str]) -> tuple[DagRef, ...]:
    """Map `--exclude` DAG ids to downstream DAGs of the root; unknown names are an error."""
    wanted = [n.strip() for n in names if n.strip()]
    if not wanted:
        return ()
    # Reachability, not order: excluding a DAG is how a user breaks a lineage cycle.
    reachable = sorted(descendants(dags, root)) if root in dags else []
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


DAG_ID_MAX = 250
"""Airflow's limit for a DAG id (ID_LEN), and the size of backfill_requests.root_dag and
backfill_steps.dag_id. Marquez takes longer job names; such a job is no Airflow DAG."""


def check_dag_ids(order: Sequence[DagRef]) -> None:
    """Refuse a plan with a DAG whose id cannot be an Airflow DAG id (nor be stored)."""
    for index, dag in enumerate(order):
        if len(dag.dag_id) > DAG_ID_MAX:
            fix = " Exclude it with --exclude." if index else ""
            raise PlanError(
                f"The DAG {dag.dag_id[:60]}… has an id of {len(dag.dag_id)} characters, over "
                f"Airflow's limit of {DAG_ID_MAX} for a DAG id: it cannot be backfilled.{fix}"
            )


class _Intervals:
    """`intervals_for` memoized per (schedule, changed windows): downstream DAGs mostly share
    one schedule and one rewritten window, so each distinct pair is computed once per plan,
    and every step with it shares one interval tuple.

    Schedules and results are numbered as they are met, so the memo is keyed by small
    integers: no schedule or interval is hashed per DAG.
    """

    def __init__(self, window: Interval) -> None:
        self.texts: list[str] = []  # describe() by schedule number
        self.results: list[tuple[Interval, ...]] = [(window,)]  # 0: the requested window
        self._slots: dict[int, int] = {}  # id(schedule object) → number of its value
        self._schedules: list[Schedule] = []
        self._by_value: dict[Schedule, int] = {}
        self._found: dict[tuple[int, ...], int] = {}  # (schedule, changed results…) → result
        # Equal results share the first one's object (not the window's: equal datetimes may
        # still differ in `fold`, and a step shows the intervals its schedule produced).
        self._numbers: dict[tuple[Interval, ...], int] = {}
        self._alive: list[Schedule | None] = []  # keeps the ids in `_slots` valid
        self._unscheduled = Unscheduled()

    def numbers(self, schedules: list[Schedule | None]) -> list[int]:
        """Each schedule's number (None: unscheduled); equal schedules share one."""
        found = list(map(self._slots.get, map(id, schedules)))
        if None in found:
            for index, number in enumerate(found):
                if number is None:
                    found[index] = self._slot(schedules[index])
        return cast(list[int], found)

    def _slot(self, schedule: Schedule | None) -> int:
        number = self._slots.get(id(schedule))
        if number is not None:
            return number
        self._alive.append(schedule)
        same = schedule or self._unscheduled
        try:
            number = self._by_value.setdefault(same, len(self._schedules))
        except TypeError:  # an unhashable Schedule implementation shares nothing
            number = len(self._schedules)
        if number == len(self._schedules):
            self._schedules.append(same)
            self.texts.append(same.describe())
        self._slots[id(schedule)] = number
        return number

    def follow(
        self, numbers: list[int], keys: Sequence[int], parents: Sequence[tuple[int, ...]]
    ) -> list[int]:
        """The result number of each DAG in order: the root (no parents) reruns what covers
        the window; every other DAG what covers the results of its parents."""
        made = [0] * (max(keys) + 1)  # result number by DAG key (keys are small integers)
        found, made_by = self._found, made.__getitem__
        for number, key, above in zip(numbers, keys, parents, strict=True):
            memo_key = (number, *map(made_by, above)) if above else (number, 0)
            result = found.get(memo_key)
            made[key] = self._compute(memo_key) if result is None else result
        return list(map(made_by, keys))

    def _compute(self, key: tuple[int, ...]) -> int:
        schedule = self._schedules[key[0]]
        changed = [i for number in key[1:] for i in self.results[number]]
        result: set[Interval] = set()
        for window in merge_intervals(changed):
            result.update(schedule.intervals(window))
        found = tuple(sorted(result))
        number = self._numbers.setdefault(found, len(self.results))  # equal results: one
        if number == len(self.results):
            self.results.append(found)
        self._found[key] = number
        return number


# Builds a PlanStep from a 5-tuple without a Python-level call (a plan may hold 45,000).
_new_step = cast(Callable[[tuple[Any, ...]], PlanStep], partial(tuple.__new__, PlanStep))


@without_cyclic_gc
def make_plan(
    dags: Any,
    root: DagRef,
    date_range: DateRange,
    schedules: Mapping[DagRef, Schedule],
    *,
    exclude: Iterable[DagRef] = (),
    only: bool = False,
    owners: Callable[[DagRef], tuple[str, ...]] | None = None,
    max_dags: int | None = None,
    affected: Affected | None = None,
) -> Plan:
    """Plan a backfill of `root` over `date_range` and of everything downstream of it.

    `affected` is `affected_dags(dags, root, exclude=…, only=…)` when the caller has it already.
    """
    excluded = tuple(exclude)
    if affected is None:
        affected = affected_dags(dags, root, exclude=excluded, only=only)
    if max_dags is not None:
        check_size(len(affected.order), max_dags)
    check_dag_ids(affected.order)
    # The per-DAG work runs as C-level maps over the order (schedule look-up, step build);
    # only the interval memo, which follows the order, is a Python loop.
    order = affected.order
    memo = _Intervals(date_range.as_interval())
    numbers = memo.numbers(list(map(schedules.get, order)))
    made = memo.follow(numbers, affected.keys, affected.parents)
    intervals = map(memo.results.__getitem__, made)
    texts = map(memo.texts.__getitem__, numbers)
    teams = repeat(()) if owners is None else map(owners, order)
    rows = zip(order, intervals, affected.upstreams, texts, teams, strict=False)
    return Plan(root, date_range, tuple(map(_new_step, rows)), excluded, only)
