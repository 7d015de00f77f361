"""The data-quality checks of one COMPLETE run event, in the watcher's transaction: what it
wrote is judged against the dataset's history and previous schema (`bot/quality/rules/checks.py`)
and then becomes part of that history, exactly once with the event's claim."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
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
    volume_finding,
)
from bot.quality.store import observations as store

__all__ = ["Checked", "QualityChecks", "Readers", "RunData"]

logger = logging.getLogger(__name__)

Readers = Callable[[str, str, DagRef], Awaitable["bool | None"]]
"""Whether a DAG other than the writer reads a dataset (None: not known yet)."""


@dataclass(frozen=True)
class RunData:
    """The run event being checked."""

    run_id: str
    event_time: datetime
    dag: DagRef
    interval_key: str
    interval_start: datetime | None
    data: dict[str, Any] | None


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
        read: dict[tuple[str, str], bool | None] | None = None,
    ) -> Checked:
        """What is wrong with the data `run` wrote and checked; with `record`, what it wrote
        joins each dataset's history (the caller's transaction claims the event). `read`
        keeps whether other DAGs read each dropped dataset, from a first look without
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

    async def _output(
        self,
        session: AsyncSession,
        run: RunData,
        output: OutputFacts,
        rule: DatasetRule,
        *,
        record: bool,
        read: dict[tuple[str, str], bool | None],
    ) -> list[Finding]:
        found: list[Finding | None] = []
        if output.has_statistics:
            unit = "rows" if output.rows is not None else "bytes"
            history = await store.history(
                session, output.namespace, output.name,
                interval_key=run.interval_key, intervals=rule.history,
            )  # fmt: skip
            measured = (rows if unit == "rows" else size for rows, size in history)
            values = [v for v in measured if v is not None]
            volume = _guarded(lambda: volume_finding(output, values, rule, unit=unit), output)
            found.append(volume)
            if record:
                store.observe(
                    session, output, interval_key=run.interval_key,
                    interval_start=run.interval_start, event_time=run.event_time,
                    run_id=run.run_id, dag=(run.dag.namespace, run.dag.dag_id),
                    usual=volume is None,
                )  # fmt: skip
        if output.fields is not None:
            schema = await store.schema(session, output.namespace, output.name)
            previous = store.previous_fields(schema)
            found.append(_guarded(lambda: column_finding(output, previous), output))
            if record:
                await store.keep_schema(session, output, run.event_time, schema)
        if output.lifecycle is not None:
            key = (output.namespace, output.name)
            if key not in read:
                read[key] = await self.readers(*key, run.dag) if self.readers is not None else True
            # not known yet (the index is loading): a DROP of a dataset is worth telling
            found.append(lifecycle_finding(output, read_by_others=read[key] is not False))
        return [f for f in found if f is not None]


def _guarded(check: Callable[[], Finding | None], output: OutputFacts) -> Finding | None:
    """One dataset's odd history or schema costs its own check, never the pass."""
    try:
        return check()
    except Exception:
        logger.exception("checking %s/%s failed", output.namespace, output.name)
        return None
