"""What happens next in a running backfill, as pure functions of its steps' states.

A step starts only when every upstream step of the plan has succeeded; a step whose upstream
failed, was skipped or cancelled is skipped (its input did not change as intended, so rerunning
it would recompute from wrong data); independent branches run side by side up to a limit.
How often a running backfill reports in Slack is decided here too (`report_gap`, `report_due`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from bot.backfill.rules.states import STEP_ACTIVE, STEP_BROKEN, STEP_FINAL, RequestState, StepState
from bot.core.model import Interval

# Run states of Airflow (2 and 3) and of the local executor, as the four counts users see.
RUN_BUCKETS: Mapping[str, str] = {
    "queued": "queued",
    "scheduled": "queued",
    "none": "queued",
    "running": "running",
    "restarting": "running",
    "up_for_retry": "running",
    "success": "succeeded",
    "succeeded": "succeeded",
    "failed": "failed",
    "upstream_failed": "failed",
}
BUCKETS = ("queued", "running", "succeeded", "failed")


@dataclass(frozen=True)
class StepView:
    """The part of a stored step the scheduling rules look at."""

    id: str
    dag_id: str
    state: str
    upstream: tuple[str, ...] = ()


@dataclass(frozen=True)
class Moves:
    start: tuple[str, ...] = ()
    skip: tuple[tuple[str, str], ...] = ()
    """(step id, why) for steps that will never run."""


def next_moves(
    steps: Sequence[StepView],
    *,
    cancelled: bool,
    max_parallel: int,
    paused: bool = False,
    first: Callable[[str], Any] | None = None,
) -> Moves:
    """Which pending steps to start and which to skip; `steps` are in plan (topological) order.
    A paused request starts nothing (what depends on a failure is still skipped). Ready steps
    start in plan order, or by `first` (a sort key of step ids: those on the way to the most
    urgent report)."""
    state = {s.dag_id: s.state for s in steps}
    skip: list[tuple[str, str]] = []
    ready: list[str] = []
    for step in steps:
        if step.state != StepState.PENDING:
            continue
        if cancelled:
            skip.append((step.id, "the backfill was cancelled before this DAG started"))
            state[step.dag_id] = StepState.SKIPPED
            continue
        known = [u for u in step.upstream if u in state]
        broken = [u for u in known if state[u] in STEP_BROKEN]
        if broken:
            skip.append((step.id, f"upstream {', '.join(broken)} did not succeed"))
            state[step.dag_id] = StepState.SKIPPED
        elif all(state[u] == StepState.SUCCEEDED for u in known):
            ready.append(step.id)
    room = max(0, max_parallel - sum(1 for s in steps if s.state in STEP_ACTIVE))
    if paused:
        room = 0
    if first is not None:
        ready.sort(key=first)  # stable: plan order among equals
    return Moves(start=tuple(ready[:room]), skip=tuple(skip))


def outcome(states: Iterable[str], *, cancelled: bool) -> str | None:
    """The request's final state once every step is final, else None."""
    seen = list(states)
    if any(s not in STEP_FINAL for s in seen):
        return None
    if cancelled:
        return RequestState.CANCELLED
    return (
        RequestState.SUCCEEDED
        if all(s == StepState.SUCCEEDED for s in seen)
        else (RequestState.FAILED)
    )


def contiguous(intervals: Sequence[Interval]) -> list[list[Interval]]:
    """Intervals grouped into runs without gaps: one Airflow backfill covers one such group."""
    groups: list[list[Interval]] = []
    for interval in sorted(intervals):
        if groups and groups[-1][-1].end >= interval.start:
            groups[-1].append(interval)
        else:
            groups.append([interval])
    return groups


@dataclass(frozen=True)
class Counts:
    queued: int = 0
    running: int = 0
    succeeded: int = 0
    failed: int = 0

    @classmethod
    def of(cls, run_states: Iterable[str], *, expected: int = 0) -> Counts:
        """Counts of run states; runs not created yet (fewer than `expected`) count as queued."""
        tally = dict.fromkeys(BUCKETS, 0)
        for raw in run_states:
            tally[RUN_BUCKETS.get(raw, "queued")] += 1
        tally["queued"] += max(0, expected - sum(tally.values()))
        return cls(tally["queued"], tally["running"], tally["succeeded"], tally["failed"])

    @classmethod
    def from_json(cls, data: Mapping[str, object] | None) -> Counts:
        data = data or {}
        values = [data.get(name, 0) for name in BUCKETS]
        return cls(*(v if isinstance(v, int) else 0 for v in values))

    def to_json(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in BUCKETS}

    @property
    def total(self) -> int:
        return self.queued + self.running + self.succeeded + self.failed

    @property
    def finished(self) -> bool:
        return self.total > 0 and self.queued == 0 and self.running == 0


def duration_text(span: timedelta | None) -> str:
    """`1h 02m`, `3m 05s`, `12s`: the precision a reader of a summary cares about."""
    if span is None:
        return "—"
    seconds = max(0, int(span.total_seconds()))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m"
    if minutes:
        return f"{minutes}m {secs:02d}s"
    return f"{secs}s"


# --- how often a running backfill reports ----------------------------------------------------

MAX_REPORT_GAP = timedelta(minutes=30)
"""However old a backfill, its channel hears from it at least this often while it changes."""
AGE_SHARE = 8
"""A report waits at least 1/AGE_SHARE of the backfill's age since the last one."""


def report_gap(age: timedelta, base_s: float) -> timedelta:
    """The least time between two progress reports (a status edit, a batch of thread lines) of a
    backfill that has been running for `age`; `base_s` is execution.progress_update_s.

    max(base, min(age / 8, 30 min)). A reader judges progress against how long the backfill has
    run: a change in the first minute is news, one more DAG after five hours is not. Spacing
    reports by a share of the age makes them geometric (each ~14% later than the one before),
    so their number grows with the logarithm of the duration: a 6-hour backfill makes ~55
    reports (<= 2 Slack calls each), a one-minute one is edited every base to 7.5 s (base 5 s).
    1/8 keeps a short backfill lively; a larger share would quiet the first minutes for little
    saving later. The cap keeps a day-long backfill visibly alive (2 reports an hour).
    """
    base = timedelta(seconds=base_s)
    return max(base, min(age / AGE_SHARE, MAX_REPORT_GAP))


def report_due(
    *,
    now: datetime,
    started: datetime | None,
    last: datetime | None,
    base_s: float,
    urgent: bool = False,
) -> bool:
    """Whether a backfill that started at `started` and last reported at `last` may report now.

    The first report waits `base_s` after the start: the status message says it is approved
    already, and a DAG that finishes by then is told once ("succeeded"), not twice ("started",
    then "succeeded"). An urgent one (a DAG failed: someone may want to act on it) waits only
    `base_s`, never less, so a burst of failures is still one report per base. The final
    state is always reported; the caller does not ask.
    """
    if last is None:
        return started is None or now - started >= timedelta(seconds=base_s)
    since = now - last
    if urgent:
        return since >= timedelta(seconds=base_s)
    return since >= report_gap(now - (started or last), base_s)
