"""The data-quality checks of one COMPLETE run event, in the watcher's transaction: what it
wrote is judged against the dataset's history and previous schema (`bot/quality/rules/checks.py`)
and then becomes part of that history, exactly once with the event's claim."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from bot.config import BotConfig
from bot.config.quality import DatasetRule
from bot.core.model import DagRef
from bot.events.rules.data_facts import DataFacts, OutputFacts
from bot.quality.rules.checks import (
    Finding,
    assertion_findings,
    column_finding,
    lifecycle_finding,
    silent_finding,
    usual_values,
    volume_finding,
)
from bot.quality.store import observations as store
from bot.quality.store.models import dataset_key

__all__ = ["Checked", "QualityChecks", "Read", "Readers", "RunData"]

logger = logging.getLogger(__name__)

Readers = Callable[[str, str], Awaitable["frozenset[DagRef] | None"]]
"""The DAGs reading a dataset (None: not known yet, the lineage index is loading)."""
Read = dict[tuple[str, str], "frozenset[DagRef] | None"]
READERS = 20  # column readers a finding names
UNAFFECTED = 200  # DAGs a finding says need no rerun
_COLUMNS = 2_000  # columns followed through column lineage at most


@dataclass(frozen=True)
class RunData:
    """The run event being checked."""

    run_id: str
    event_time: datetime
    dag: DagRef
    interval_key: str
    interval_start: datetime | None
    data: dict[str, Any] | None
    job: str = ""
    """The job whose run event it is (a task's, or the DAG's own)."""


@dataclass(frozen=True)
class Checked:
    findings: tuple[Finding, ...]
    facts: DataFacts


class QualityChecks:
    def __init__(self, config: BotConfig, readers: Readers | None = None) -> None:
        """`readers`: from the lineage index (without one, every dataset counts as read)."""
        self.config = config
        self.readers = readers

    def has_data(self, run: RunData) -> bool:
        return self.config.quality.enabled and bool(run.data)

    async def check(
        self,
        session: AsyncSession,
        run: RunData,
        *,
        record: bool,
        read: Read | None = None,
    ) -> Checked:
        """What is wrong with the data `run` wrote and checked; with `record`, what it wrote
        joins each dataset's history (the caller's transaction claims the event). `read`
        keeps the DAGs reading each dropped or changed dataset, from a first look without
        `record`: the lineage index is asked outside the caller's write transaction."""
        read = {} if read is None else read
        facts = DataFacts.from_json(run.data)
        if record:
            for reason in facts.ignored:
                logger.warning(
                    "run event %s of %s: statistics ignored: %s", run.run_id, run.dag.dag_id,
                    reason, extra={"dag_id": run.dag.dag_id, "run_id": run.run_id},
                )  # fmt: skip
        if not self.config.quality.enabled:
            return Checked((), facts)
        found: list[Finding] = []
        for output in facts.outputs:
            rule = self.config.quality.rule_for(output.namespace, output.name)
            if rule.checks:
                found += await self._output(session, run, output, rule, record=record, read=read)
        checked = [
            a for a in facts.assertions if self.config.quality.rule_for(a.namespace, a.name).checks
        ]
        found += assertion_findings(checked)
        return Checked(tuple(found), facts)

    async def _readers(self, output: OutputFacts, read: Read) -> frozenset[DagRef] | None:
        """The DAGs reading `output`'s dataset, asked of the lineage index once per event."""
        key = (output.namespace, output.name)
        if key not in read:
            read[key] = await self.readers(*key) if self.readers is not None else None
        return read[key]

    async def _output(
        self,
        session: AsyncSession,
        run: RunData,
        output: OutputFacts,
        rule: DatasetRule,
        *,
        record: bool,
        read: Read,
    ) -> list[Finding]:
        found: list[Finding | None] = []
        if output.has_statistics:
            unit = "rows" if output.rows is not None else "bytes"
            history = await store.history(
                session, output.namespace, output.name,
                interval_key=run.interval_key, intervals=2 * rule.history,
            )  # fmt: skip
            measured = [(rows if unit == "rows" else size, usual) for rows, size, usual in history]
            values = usual_values(measured, rule)
            volume = _guarded(lambda: volume_finding(output, values, rule, unit=unit), output)
            found.append(volume)
            if record:
                store.observe(
                    session, output, interval_key=run.interval_key,
                    interval_start=run.interval_start, event_time=run.event_time,
                    run_id=run.run_id, dag=(run.dag.namespace, run.dag.dag_id),
                    usual=volume is None, job=run.job or None,
                )  # fmt: skip
        elif run.job and not rule.allow_empty:
            recent = await store.latest_writers(
                session, output.namespace, output.name,
                interval_key=run.interval_key, intervals=rule.history,
            )  # fmt: skip
            found.append(_guarded(lambda: silent_finding(output, recent, run.job, rule), output))
        if output.fields is not None:
            schema = await store.schema(session, output.namespace, output.name)
            previous = store.previous_fields(schema)
            columns = _guarded(lambda: column_finding(output, previous), output)
            if columns is not None:
                readers = await self._readers(output, read)
                columns = await _column_impact(session, columns, readers, run.dag)
            found.append(columns)
            if record:
                await store.keep_schema(session, output, run.event_time, schema)
        if record:
            await store.keep_columns(session, output, (run.dag.namespace, run.dag.dag_id))
        if output.lifecycle is not None:
            readers = await self._readers(output, read)
            # not known yet (the index is loading): a DROP of a dataset is worth telling
            others = readers is None or bool(readers - {run.dag})
            found.append(lifecycle_finding(output, read_by_others=others))
        return [f for f in found if f is not None]


async def _column_impact(
    session: AsyncSession, finding: Finding, readers: frozenset[DagRef] | None, writer: DagRef
) -> Finding:
    """`finding` (lost or retyped columns) with the DAGs that read those columns, transitively
    through the column lineage runs sent, and those that read the dataset without sending any
    (table level)."""
    start = [
        (dataset_key(finding.namespace, finding.name), name)
        for name in [c for c, _ in finding.lost] + [c for c, _, _ in finding.changed]
    ]
    sources = set(start)
    seen = set(start)
    frontier = list(start)
    dags: dict[DagRef, list[str]] = {}
    direct: set[DagRef] = set()
    while frontier and len(seen) < _COLUMNS:
        found = await store.column_readers(session, frontier)
        frontier = []
        for source, (namespace, name, column), (dag_ns, dag_id) in found:
            dag = DagRef(dag_ns, dag_id)
            dags.setdefault(dag, []).append(f"{name}.{column}")
            if source in sources:
                direct.add(dag)
            key = (dataset_key(namespace, name), column)
            if key not in seen:
                seen.add(key)
                frontier.append(key)
    with_lineage = {
        DagRef(*d) for d in await store.dags_with_column_lineage(
            session, finding.namespace, finding.name
        )
    }  # fmt: skip
    table_level = sorted(d.dag_id for d in (readers or frozenset()) - with_lineage - {writer})
    listed = [(d.dag_id, c) for d in sorted(dags, key=lambda d: d.dag_id) for c in dags[d]]
    others = with_lineage - direct - {writer}
    return replace(
        finding,
        readers=tuple(listed[:READERS]),
        reader_dags=len(dags),
        others=len(others),
        table_level=tuple(table_level[:READERS]),
        unaffected=tuple(sorted(d.dag_id for d in others - set(dags))[:UNAFFECTED]),
    )


def _guarded(check: Callable[[], Finding | None], output: OutputFacts) -> Finding | None:
    """One dataset's odd history or schema costs its own check, never the pass."""
    try:
        return check()
    except Exception:
        logger.exception("checking %s/%s failed", output.namespace, output.name)
        return None
