"""What a backfill's verification says (pure): which reruns look right, which still look
wrong, which could not be verified, and which dates of each report downstream it restated."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from bot.core.model import Interval
from bot.quality.rules.verify import Rewrite, RunVerdict, Verdict, Why, run_verdict

__all__ = ["ReportRestated", "Verification", "restated_reports", "verification"]

RunKey = tuple[str, datetime]
"""(DAG id, interval start)."""


@dataclass(frozen=True)
class Verification:
    right: int
    """Reruns whose every dataset with statistics looks right."""
    wrong: tuple[tuple[Rewrite, ...], ...]
    """Per rerun that still looks wrong, its wrong datasets (oldest interval first)."""
    unknown: Mapping[Why, tuple[str, ...]]
    """Why reruns could not be verified → the DAGs (each once) they were of."""
    unknown_runs: int

    @property
    def runs(self) -> int:
        return self.right + len(self.wrong) + self.unknown_runs


def verification(rewrites: Sequence[Rewrite]) -> Verification:
    by_run: dict[RunKey, list[Rewrite]] = {}
    for rewrite in rewrites:
        by_run.setdefault((rewrite.dag.dag_id, rewrite.interval.start), []).append(rewrite)
    right = 0
    wrong: list[tuple[Rewrite, ...]] = []
    unknown: dict[Why, list[str]] = {}
    unknown_runs = 0
    for key in sorted(by_run, key=lambda k: (k[1], k[0])):
        found = by_run[key]
        verdict: RunVerdict = run_verdict((r.verdict, r.why) for r in found)
        if verdict.verdict == Verdict.RIGHT:
            right += 1
        elif verdict.verdict == Verdict.WRONG:
            wrong.append(tuple(r for r in found if r.verdict == Verdict.WRONG))
        else:
            unknown_runs += 1
            dags = unknown.setdefault(verdict.why or Why.NO_STATISTICS, [])
            if key[0] not in dags:
                dags.append(key[0])
    return Verification(
        right, tuple(wrong), {why: tuple(dags) for why, dags in unknown.items()}, unknown_runs
    )


@dataclass(frozen=True)
class ReportRestated:
    """A report downstream of a backfill: the dates of it the backfill rewrote."""

    report: str
    team: str | None
    dates: tuple[date, ...]
    wrong: tuple[date, ...] = ()
    """Of those, the dates whose rerun still looks wrong."""
    writers: tuple[str, ...] = ()
    """The backfill's DAGs that write what it reads."""


def restated_reports(
    entries: Iterable[Mapping[str, object]],
    reruns: Mapping[str, Sequence[Interval]],
    wrong: Iterable[RunKey] = (),
) -> list[ReportRestated]:
    """Each report (`reports` entries of the request: report, team, dags writing what it
    reads) with the dates of its data the reruns rewrote: the days its writers' rerun
    intervals cover (every rerun DAG's when its writers are not known)."""
    still = set(wrong)
    found = []
    for entry in entries:
        named = entry.get("dags")
        writers = [str(d) for d in named] if isinstance(named, list) and named else list(reruns)
        days: set[date] = set()
        bad: set[date] = set()
        for dag in writers:
            for interval in reruns.get(dag, ()):
                covered = _days(interval)
                days.update(covered)
                if (dag, interval.start) in still:
                    bad.update(covered)
        if days:
            team = entry.get("team")
            found.append(
                ReportRestated(
                    str(entry.get("report") or "?"),
                    str(team) if team else None,
                    tuple(sorted(days)),
                    tuple(sorted(bad)),
                    tuple(writers),
                )
            )
    return found


_LONGEST = 366  # days one interval is said to cover at most


def _days(interval: Interval) -> list[date]:
    """The days an interval covers ([start, end); a point in time: its day)."""
    first = interval.start.date()
    last = (
        (interval.end - timedelta(microseconds=1)).date()
        if interval.end > interval.start
        else first
    )
    count = min((last - first).days, _LONGEST - 1)
    return [first + timedelta(days=n) for n in range(count + 1)]
