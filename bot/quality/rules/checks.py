"""When a COMPLETE run's data is wrong, and when a later run of that interval has put it right
(pure: history, schemas and rules are arguments).

- **Volume**: an output wrote 0 rows (unless its rule allows empty), or fewer rows than
  `min_fraction` (more than `max_factor`) times the median of the latest run of each of its
  last `history` intervals; never judged from fewer than `min_runs` of them. The median keeps
  one odd interval from moving "usual"; only runs that were not wrong themselves count. Bytes
  stand in for rows when a producer sends only a size.
- **Assertions**: a data-quality assertion that did not hold (dbt tests, Great Expectations).
- **Columns**: the output lost a column, or a column changed type, against its previous schema.
- **Lifecycle**: a run DROPped or TRUNCATEd a dataset other DAGs read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from statistics import median
from typing import Any

from bot.config.quality import DatasetRule
from bot.events.rules.data_facts import Assertion, OutputFacts

__all__ = [
    "BROKEN_LIFECYCLE",
    "Finding",
    "FindingKind",
    "assertion_findings",
    "clears",
    "column_finding",
    "lifecycle_finding",
    "silent_finding",
    "usual_values",
    "volume_finding",
]

BROKEN_LIFECYCLE = frozenset({"DROP", "TRUNCATE"})
Fields = tuple[tuple[str, str | None], ...]


class FindingKind(StrEnum):
    ZERO_ROWS = "zero_rows"
    NO_STATISTICS = "no_statistics"
    """A job that always sent a dataset's row count sent none (the Spark integration sends
    none for a write of 0 rows and 0 bytes)."""
    FEW_ROWS = "few_rows"
    MANY_ROWS = "many_rows"
    ASSERTION = "assertion"
    COLUMNS = "columns"
    LIFECYCLE = "lifecycle"


VOLUME = frozenset(
    {FindingKind.ZERO_ROWS, FindingKind.FEW_ROWS, FindingKind.MANY_ROWS, FindingKind.NO_STATISTICS}
)


@dataclass(frozen=True)
class Finding:
    """One thing wrong with one dataset a run wrote or checked."""

    kind: FindingKind
    namespace: str
    name: str
    value: int | None = None
    """Rows (or bytes, `unit`) the run wrote."""
    usual: int | None = None
    """The median of earlier intervals, when there were enough of them."""
    unit: str = "rows"
    assertion: str | None = None
    column: str | None = None
    lost: Fields = ()
    """Columns the schema lost, with the type they had."""
    changed: tuple[tuple[str, str | None, str | None], ...] = ()
    """(column, type before, type now)."""
    lifecycle: str | None = None
    readers: tuple[tuple[str, str], ...] = ()
    """Column impact of lost or retyped columns: (DAG id, `dataset.column` it computes from
    them), transitively through column lineage, the first `READERS`."""
    reader_dags: int = 0
    """How many DAGs read the changed columns, transitively."""
    others: int = 0
    """DAGs whose column lineage reads the dataset, but not the changed columns."""
    table_level: tuple[str, ...] = ()
    """DAGs that read the dataset and send no column lineage: affected as far as anyone knows."""
    unaffected: tuple[str, ...] = ()
    """DAGs whose column lineage reads the dataset but none of the changed columns (the first
    `READERS`): a backfill of the change need not rerun them."""

    @property
    def key(self) -> tuple[str, ...]:
        """What a later finding of the same problem shares: its dataset and what it is about
        (a volume finding is one problem whether too few or none)."""
        group = "volume" if self.kind in VOLUME else self.kind.value
        return (group, self.namespace, self.name, self.assertion or "", self.column or "")

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind.value,
            "namespace": self.namespace,
            "name": self.name,
            "value": self.value,
            "usual": self.usual,
            "unit": self.unit,
            "assertion": self.assertion,
            "column": self.column,
            "lost": [list(c) for c in self.lost],
            "changed": [list(c) for c in self.changed],
            "lifecycle": self.lifecycle,
            "readers": [list(r) for r in self.readers],
            "reader_dags": self.reader_dags,
            "others": self.others,
            "table_level": list(self.table_level),
            "unaffected": list(self.unaffected),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Finding:
        return cls(
            kind=FindingKind(data["kind"]),
            namespace=data["namespace"],
            name=data["name"],
            value=data.get("value"),
            usual=data.get("usual"),
            unit=data.get("unit") or "rows",
            assertion=data.get("assertion"),
            column=data.get("column"),
            lost=tuple((c[0], c[1]) for c in data.get("lost") or ()),
            changed=tuple((c[0], c[1], c[2]) for c in data.get("changed") or ()),
            lifecycle=data.get("lifecycle"),
            readers=tuple((r[0], r[1]) for r in data.get("readers") or ()),
            reader_dags=int(data.get("reader_dags") or 0),
            others=int(data.get("others") or 0),
            table_level=tuple(data.get("table_level") or ()),
            unaffected=tuple(data.get("unaffected") or ()),
        )


LEVEL_SPREAD = 2.0
"""Runs whose counts lie within this factor of each other hold one level."""


def usual_values(history: Sequence[tuple[int | None, bool]], rule: DatasetRule) -> list[int]:
    """What a run is judged against, from the latest run of each earlier interval (value, found
    usual), newest first: the values of the last `history` usual ones — unless the last
    `min_runs` intervals all were found unusual yet agree with each other, which makes them the
    new usual. A table that really grew, or a usual formed on bad early runs (nothing is
    judged before `min_runs`), is accepted after `min_runs` intervals instead of being wrong
    for good."""
    measured = [(value, usual) for value, usual in history if value is not None]
    recent = [value for value, _ in measured[: rule.min_runs]]
    if (
        len(recent) == rule.min_runs
        and not any(usual for _, usual in measured[: rule.min_runs])
        and min(recent) > 0
        and max(recent) <= LEVEL_SPREAD * min(recent)
    ):
        return recent
    return [value for value, usual in measured if usual][: rule.history]


def volume_finding(
    output: OutputFacts, history: Sequence[int], rule: DatasetRule, *, unit: str = "rows"
) -> Finding | None:
    """Whether what `output` wrote (its rows; its bytes when `unit` is "bytes") is unusual
    against `history`, the same measure of the latest run of each earlier interval."""
    value = output.rows if unit == "rows" else output.size
    if value is None:
        return None
    usual = round(median(history)) if len(history) >= rule.min_runs else None
    found = Finding(FindingKind.ZERO_ROWS, output.namespace, output.name, value, usual, unit)
    if value == 0:
        return None if rule.allow_empty else found
    if usual is None or usual == 0:
        return None
    if value < rule.min_fraction * usual:
        return _kind(found, FindingKind.FEW_ROWS)
    if rule.max_factor and value > rule.max_factor * usual:
        return _kind(found, FindingKind.MANY_ROWS)
    return None


def silent_finding(
    output: OutputFacts,
    recent: Sequence[tuple[str | None, int | None, bool]],
    job: str,
    rule: DatasetRule,
) -> Finding | None:
    """Whether `job` writing `output` without a row count is suspect: the latest run of each of
    the dataset's last `min_runs` intervals was `job`'s and counted rows (`recent`: job, rows,
    found usual; newest first). The Spark integration leaves `outputStatistics` out of a write
    of 0 rows and 0 bytes, so such a run shows no count rather than 0. Another job naming the
    dataset without counting (an Airflow task around the Spark job) is not suspect."""
    if output.has_statistics or output.odd_statistics or rule.allow_empty:
        return None
    if len(recent) < rule.min_runs:
        return None
    latest = recent[: rule.min_runs]
    if any(writer != job or rows is None for writer, rows, _ in latest):
        return None
    counted = [rows for _, rows, usual in recent if usual and rows is not None][: rule.history]
    usual = round(median(counted)) if len(counted) >= rule.min_runs else None
    return Finding(FindingKind.NO_STATISTICS, output.namespace, output.name, None, usual)


def _kind(finding: Finding, kind: FindingKind) -> Finding:
    return replace(finding, kind=kind)


def assertion_findings(assertions: Sequence[Assertion]) -> list[Finding]:
    """Each assertion that did not hold, once."""
    found = {
        (a.namespace, a.name, a.assertion, a.column): Finding(
            FindingKind.ASSERTION, a.namespace, a.name, assertion=a.assertion, column=a.column
        )
        for a in assertions
        if not a.success
    }
    return list(found.values())


def column_finding(output: OutputFacts, previous: Fields | None) -> Finding | None:
    """Columns `output`'s schema lost, or whose type changed, against its previous schema
    (none without both; a type the producer did not say is no change)."""
    if previous is None or output.fields is None:
        return None
    now = dict(output.fields)
    lost = tuple((name, kind) for name, kind in previous if name not in now)
    changed = tuple(
        (name, kind, now[name])
        for name, kind in previous
        if name in now and kind and now[name] and kind.lower() != (now[name] or "").lower()
    )
    if not lost and not changed:
        return None
    return Finding(FindingKind.COLUMNS, output.namespace, output.name, lost=lost, changed=changed)


def lifecycle_finding(output: OutputFacts, *, read_by_others: bool) -> Finding | None:
    if output.lifecycle not in BROKEN_LIFECYCLE or not read_by_others:
        return None
    return Finding(FindingKind.LIFECYCLE, output.namespace, output.name, lifecycle=output.lifecycle)


def clears(
    finding: Finding,
    outputs: Sequence[OutputFacts],
    assertions: Sequence[Assertion],
    now_found: Sequence[Finding],
) -> bool:
    """Whether a later run of the same DAG and interval — what it wrote (`outputs`), checked
    (`assertions`) and was found wrong with (`now_found`) — shows `finding` put right. A run
    that says nothing of the finding's dataset clears nothing: it is not verified."""
    if any(f.key == finding.key for f in now_found):
        return False
    if finding.kind == FindingKind.ASSERTION:
        return any(
            a.success
            and (a.namespace, a.name, a.assertion, a.column)
            == (finding.namespace, finding.name, finding.assertion, finding.column)
            for a in assertions
        )
    output = next(
        (o for o in outputs if (o.namespace, o.name) == (finding.namespace, finding.name)), None
    )
    if output is None:
        return False
    if finding.kind in VOLUME:
        return (output.rows if finding.unit == "rows" else output.size) is not None
    if finding.kind == FindingKind.COLUMNS:
        if output.fields is None:
            return False
        now = dict(output.fields)
        back = all(name in now for name, _ in finding.lost)
        types = all(
            name in now and (not before or (now[name] or "").lower() == before.lower())
            for name, before, _ in finding.changed
        )
        return back and types
    # a lifecycle finding: written again, without dropping or emptying it
    return output.lifecycle not in BROKEN_LIFECYCLE and output.rows != 0
