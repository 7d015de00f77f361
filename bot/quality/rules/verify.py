"""Whether a backfill's rerun of an interval put its data right (pure: what the runs wrote,
the dataset's history and its rule are arguments).

A rerun is judged as any run is (`volume_finding`: 0 rows, far fewer or far more than the
dataset's usual), and against what it replaced: writing exactly the count of a run that was
found wrong is no repair. A run with no statistics for its datasets cannot be verified; the
verdict says so rather than calling it right.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from statistics import median

from bot.config.quality import DatasetRule
from bot.core.model import DagRef, Interval
from bot.events.rules.data_facts import OutputFacts
from bot.quality.rules.checks import volume_finding
from bot.quality.rules.keys import dataset_key

__all__ = [
    "Judged", "Rerun", "Rewrite", "RunVerdict", "Verdict", "Why", "Written", "judge", "run_verdict",
]  # fmt: skip


class Verdict(StrEnum):
    RIGHT = "right"
    WRONG = "wrong"
    UNKNOWN = "unknown"


class Why(StrEnum):
    ZERO_ROWS = "zero_rows"
    FEW_ROWS = "few_rows"
    MANY_ROWS = "many_rows"
    UNCHANGED = "unchanged"
    """It wrote what the wrong run it replaced wrote."""
    NO_STATISTICS = "no_statistics"
    """The DAG's producer never sent statistics: nothing to verify with."""
    NOT_ARRIVED = "not_arrived"
    """The DAG sends statistics, but none came for this rerun in time."""


@dataclass(frozen=True)
class Written:
    """One dataset of one interval: the latest count before the backfill and since it."""

    namespace: str
    name: str
    before: int | None
    before_usual: bool | None
    after: int | None
    unit: str = "rows"


@dataclass(frozen=True)
class Judged:
    verdict: Verdict
    why: Why | None
    usual: int | None


def judge(written: Written, history: Sequence[int], rule: DatasetRule) -> Judged:
    """`history`: the dataset's usual counts of other intervals (`usual_values`)."""
    if written.after is None:
        return Judged(Verdict.UNKNOWN, Why.NOT_ARRIVED, None)
    counted = (
        OutputFacts(written.namespace, written.name, rows=written.after)
        if written.unit == "rows"
        else OutputFacts(written.namespace, written.name, size=written.after)
    )
    finding = volume_finding(counted, history, rule, unit=written.unit)
    usual = finding.usual if finding is not None else _median(history, rule)
    if finding is not None:
        return Judged(Verdict.WRONG, Why(finding.kind.value), usual)
    if written.before_usual is False and written.before == written.after:
        return Judged(Verdict.WRONG, Why.UNCHANGED, usual)
    return Judged(Verdict.RIGHT, None, usual)


def _median(history: Sequence[int], rule: DatasetRule) -> int | None:
    return round(median(history)) if len(history) >= rule.min_runs else None


@dataclass(frozen=True)
class RunVerdict:
    verdict: Verdict
    why: Why | None


def run_verdict(verdicts: Iterable[tuple[Verdict, Why | None]]) -> RunVerdict:
    """One rerun from its datasets': wrong if one is, right if every known one is, else
    unknown (with why)."""
    seen = list(verdicts)
    wrong = [why for verdict, why in seen if verdict == Verdict.WRONG]
    if wrong:
        return RunVerdict(Verdict.WRONG, wrong[0])
    if any(verdict == Verdict.RIGHT for verdict, _ in seen):
        return RunVerdict(Verdict.RIGHT, None)
    why = next((w for _, w in seen if w is not None), Why.NO_STATISTICS)
    return RunVerdict(Verdict.UNKNOWN, why)


@dataclass(frozen=True)
class Rerun:
    dag: DagRef
    interval: Interval


@dataclass(frozen=True)
class Rewrite:
    """One dataset of one rerun interval (`name` None: the DAG sent no statistics for it)."""

    dag: DagRef
    interval: Interval
    namespace: str | None
    name: str | None
    before: int | None
    after: int | None
    unit: str
    verdict: Verdict
    why: Why | None
    usual: int | None

    @property
    def dataset_key(self) -> str | None:
        if self.namespace is None or self.name is None:
            return None
        return dataset_key(self.namespace, self.name)
