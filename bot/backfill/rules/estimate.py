"""When a backfill's reports read correct data again, from how long its DAGs' runs usually take.

A step reruns its intervals in waves of its runs at once (its `--max-active`, or what the
budget granted), each wave as long as the DAG's typical run (the median of its recent
successful runs in Airflow); it starts when every upstream step of the plan has ended. A report
is correct again once the plan's DAGs that write what it reads have ended (every DAG of the plan
when the writers are not known). Rough by design: it ignores `max_parallel_steps` and the
queue; the words say "about" and round to ten minutes.

Pure: the clock is an argument.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from bot.backfill.rules.progress import Counts
from bot.backfill.rules.states import STEP_FINAL
from bot.backfill.rules.status import ReportEstimate, StoredRequest
from bot.core.windows import Deadline
from bot.lineage.rules.planner import Plan

ROUND = timedelta(minutes=10)
DEADLINES = "deadlines"
"""The request's `options` key for the reports downstream that say when they are read:
[{report, team, deadline: Deadline JSON, dags: the plan's DAGs that write what it reads}]
(bot/backfill/service/planned.py writes it)."""
PACE = "pace"
REPORTS = "reports"
"""The request's `options` key for every report downstream whose data it rewrites: [{report,
team, deadline (or None), dags}] (its owners hear which of their dates it restated)."""


@dataclass(frozen=True)
class StepPace:
    dag_id: str
    upstream: tuple[str, ...]
    runs_left: int
    at_once: int
    run_s: float | None
    """Typical seconds of one run (None: no history)."""


def typical_run_s(durations: Iterable[float]) -> float | None:
    """The median of recent run durations in seconds (None without any)."""
    found = [d for d in durations if d >= 0]
    return statistics.median(found) if found else None


def finishes(steps: Sequence[StepPace], start: datetime) -> dict[str, datetime | None]:
    """When each step ends if the backfill goes on from `start` (steps in plan order; None where
    a step or one upstream of it has no run-time history)."""
    found: dict[str, datetime | None] = {}
    for step in steps:
        before = [found[u] for u in step.upstream if u in found]
        if step.runs_left <= 0 and all(b is not None for b in before):
            found[step.dag_id] = max([start, *(b for b in before if b is not None)])
            continue
        if step.run_s is None or any(b is None for b in before):
            found[step.dag_id] = None
            continue
        begin = max([start, *(b for b in before if b is not None)])
        waves = math.ceil(step.runs_left / max(1, step.at_once))
        found[step.dag_id] = begin + timedelta(seconds=waves * step.run_s)
    return found


def correct_by(ends: Mapping[str, datetime | None], writers: Sequence[str]) -> datetime | None:
    """When a report reading what `writers` write is correct again (None: cannot tell)."""
    dags = [d for d in writers if d in ends] or list(ends)
    times = [ends[d] for d in dags]
    if not times or any(t is None for t in times):
        return None
    return round_up(max(t for t in times if t is not None))


def round_up(moment: datetime) -> datetime:
    """To the next ten minutes: an estimate is not a promise to the minute."""
    epoch = datetime(2000, 1, 1, tzinfo=moment.tzinfo)
    steps = math.ceil((moment - epoch) / ROUND)
    return epoch + steps * ROUND


def report_estimates(
    entries: Iterable[Mapping[str, Any]], steps: Sequence[StepPace], now: datetime
) -> list[ReportEstimate]:
    """Each report a backfill's request names (`deadlines` entries: report, team, deadline,
    the plan's DAGs that write what it reads), estimated as if the rest runs from `now`."""
    ends = finishes(steps, now)
    found = []
    for entry in entries:
        deadline = Deadline.from_json(entry.get("deadline"))
        ready = correct_by(ends, [str(d) for d in entry.get("dags") or ()])
        found.append(
            ReportEstimate(
                report=str(entry.get("report") or "?"),
                team=str(entry["team"]) if entry.get("team") else None,
                read_at=deadline.next_after(now) if deadline is not None else None,
                ready=ready,
                takes=None if ready is None else max(ROUND, ready - now),
            )
        )
    return found


def granted(executor_state: Mapping[str, Any] | None) -> int | None:
    """The runs at once the budget granted a step (bot/backfill/run/budget.py keeps it in the
    step's executor state; None: no budget)."""
    value = (executor_state or {}).get("budget")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


"""The request's `options` key: {dag_id: {run_s, at_once}}."""


def _pace(paces: Mapping[str, Any], dag_id: str) -> tuple[float | None, int]:
    pace = paces.get(dag_id)
    if not isinstance(pace, Mapping):
        return None, 1
    run_s, at_once = pace.get("run_s"), pace.get("at_once")
    seconds = float(run_s) if isinstance(run_s, int | float) and run_s >= 0 else None
    runs = at_once if isinstance(at_once, int) and at_once > 0 else 1
    return seconds, runs


def for_plan(plan: Plan, options: Mapping[str, Any], now: datetime) -> list[ReportEstimate]:
    """The preview's estimates: as if the backfill started `now`."""
    entries = [e for e in options.get(DEADLINES) or () if isinstance(e, Mapping)]
    if not entries:
        return []
    paces = options.get(PACE) or {}
    steps = []
    for step in plan.steps:
        run_s, at_once = _pace(paces, step.dag.dag_id)
        steps.append(StepPace(step.dag.dag_id, tuple(u.dag_id for u in step.upstream),
                              len(step.intervals), at_once, run_s))  # fmt: skip
    return report_estimates(entries, steps, now)


def for_request(request: StoredRequest, now: datetime) -> list[ReportEstimate]:
    """A stored request's estimates from `now`: what its steps have left, at the runs at once
    the budget granted them (or they asked for)."""
    options = request.options or {}
    entries = [e for e in options.get(DEADLINES) or () if isinstance(e, Mapping)]
    if not entries:
        return []
    paces = options.get(PACE) or {}
    steps = []
    for step in request.steps:
        run_s, at_once = _pace(paces, step.dag_id)
        counts = Counts.from_json(step.counts) if step.counts else Counts()
        left = (
            0
            if step.state in STEP_FINAL
            else len(step.intervals) - counts.succeeded - counts.failed
        )
        steps.append(StepPace(step.dag_id, tuple(step.upstream), max(0, left),
                              granted(step.executor_state) or at_once, run_s))  # fmt: skip
    return report_estimates(entries, steps, now)
