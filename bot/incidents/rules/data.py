"""What a COMPLETE run's data findings do to a data incident (pure).

A data incident is an outage like a failure's, over the DAG's intervals whose runs completed
with bad data: each interval holds its findings (`bot/quality/rules/checks.py`). A later run of
an interval that shows a finding put right clears it (`clears`); an interval is put right when
all its findings are, and the incident resolves when every interval is. A new finding in a
resolved incident reopens it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from bot.events.rules.data_facts import Assertion, OutputFacts
from bot.incidents.rules.lifecycle import FailedRun
from bot.quality.rules.checks import Finding, FindingKind, clears

__all__ = [
    "Problem", "cleared", "problems_from", "problems_json", "put_right", "unaffected_dags",
    "with_findings",
]  # fmt: skip


@dataclass(frozen=True)
class Problem:
    """One finding of one interval of a data incident."""

    key: str
    """The interval's key (`EventFacts.interval_key`)."""
    finding: Finding
    found_at: datetime
    cleared: bool = False


def problems_json(problems: Sequence[Problem]) -> list[dict[str, Any]]:
    return [
        {
            "key": p.key,
            "finding": p.finding.to_json(),
            "found_at": p.found_at.isoformat(),
            "cleared": p.cleared,
        }
        for p in problems
    ]


def problems_from(data: Any) -> tuple[Problem, ...]:
    if not isinstance(data, list):
        return ()
    return tuple(
        Problem(
            key=p["key"],
            finding=Finding.from_json(p["finding"]),
            found_at=datetime.fromisoformat(p["found_at"]),
            cleared=bool(p.get("cleared")),
        )
        for p in data
    )


def with_findings(
    problems: Sequence[Problem], key: str, findings: Sequence[Finding], *, at: datetime
) -> tuple[tuple[Problem, ...], bool]:
    """The problems once an interval's run was found wrong with `findings`, and whether any of
    them is new (not a repeat of an open problem: a new one counts and, in a resolved incident,
    reopens it)."""
    kept = list(problems)
    new = False
    for finding in findings:
        at_index = next(
            (i for i, p in enumerate(kept) if p.key == key and p.finding.key == finding.key), None
        )
        if at_index is None:
            kept.append(Problem(key, finding, at))
            new = True
        else:
            new = new or kept[at_index].cleared
            kept[at_index] = Problem(key, finding, at)
    return tuple(kept), new


def put_right(
    problems: Sequence[Problem],
    key: str,
    *,
    at: datetime,
    outputs: Sequence[OutputFacts],
    assertions: Sequence[Assertion],
    found: Sequence[Finding],
) -> tuple[Problem, ...]:
    """The problems once a run of interval `key` at `at` wrote `outputs`, checked `assertions`
    and was found wrong with `found`: each of that interval's open problems the run shows put
    right is cleared (a run older than the finding clears nothing)."""
    return tuple(
        replace(p, cleared=True)
        if p.key == key
        and not p.cleared
        and at > p.found_at
        and clears(p.finding, outputs, assertions, found)
        else p
        for p in problems
    )


def cleared(problems: Sequence[Problem], runs: Sequence[FailedRun]) -> tuple[FailedRun, ...]:
    """The outage's intervals, each put right (`succeeded`) when all its problems are."""
    open_keys = {p.key for p in problems if not p.cleared}
    return tuple(replace(r, succeeded=r.key not in open_keys) for r in runs)


def unaffected_dags(problems: Sequence[Problem], downstream: Iterable[str]) -> tuple[str, ...]:
    """The DAGs downstream that a backfill of these problems need not rerun: when every open
    problem is a lost or retyped column, those whose column lineage reads none of the changed
    columns (for each problem), among `downstream` (the DAGs the impact knows: a plan refuses
    to exclude a DAG that is not downstream). Otherwise none: 0 rows, a failed check or a drop
    is a change of the whole table."""
    open_ = [p for p in problems if not p.cleared]
    if not open_ or any(p.finding.kind != FindingKind.COLUMNS for p in open_):
        return ()
    common = set.intersection(*(set(p.finding.unaffected) for p in open_))
    known = set(downstream)
    return tuple(sorted(d for d in common if d in known))
