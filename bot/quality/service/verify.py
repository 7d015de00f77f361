"""What a backfill's reruns wrote, judged (`bot/quality/rules/verify.py`): per rerun interval
and dataset, the count before the backfill and since, and whether it looks right. The
backfill capability asks; the quality tables stay this capability's."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession

from bot.config import BotConfig
from bot.core.model import DagRef, Interval
from bot.quality.rules.checks import usual_values
from bot.quality.rules.verify import Judged, Rerun, Rewrite, Verdict, Why, Written, judge
from bot.quality.store import observations as store
from bot.quality.store.models import Observation

__all__ = ["Rerun", "Rewrite", "Rewrites"]


class Rewrites:
    def __init__(self, config: BotConfig) -> None:
        self.config = config

    async def judge(
        self,
        session: AsyncSession,
        reruns: Sequence[Rerun],
        since: datetime,
        *,
        final: bool,
    ) -> list[Rewrite] | None:
        """Each rerun's datasets as rewritten since `since` (the backfill's start). None while
        a DAG that sends statistics has not sent them for one of its reruns (unless `final`:
        then that rerun is unknown, its statistics did not arrive)."""
        by_dag: dict[DagRef, list[Interval]] = {}
        for rerun in reruns:
            by_dag.setdefault(rerun.dag, []).append(rerun.interval)
        found: list[Rewrite] = []
        for dag, intervals in by_dag.items():
            ref = (dag.namespace, dag.dag_id)
            seen = await store.of_intervals(session, ref, [i.start for i in intervals])
            if not seen and not await store.sends_statistics(session, ref):
                found += [_unknown(dag, i, Why.NO_STATISTICS) for i in intervals]
                continue
            for interval in intervals:
                mine = [o for o in seen if o.interval_start == interval.start]
                judged = await self._interval(session, dag, interval, mine, since, final=final)
                if judged is None:
                    return None
                found += judged
        return found

    async def _interval(
        self,
        session: AsyncSession,
        dag: DagRef,
        interval: Interval,
        seen: Sequence[Observation],
        since: datetime,
        *,
        final: bool,
    ) -> list[Rewrite] | None:
        by_dataset: dict[str, list[Observation]] = {}
        for row in seen:
            by_dataset.setdefault(row.dataset_key, []).append(row)
        if not any(_after(rows, since) for rows in by_dataset.values()) and not final:
            return None
        if not by_dataset:
            return [_unknown(dag, interval, Why.NOT_ARRIVED)]
        found = []
        for rows in by_dataset.values():
            after = _after(rows, since)
            before = next((r for r in reversed(rows) if not _since(r, since)), None)
            if after is None and not final:
                return None
            first = after or before
            assert first is not None
            unit = "rows" if first.rows is not None else "bytes"
            written = Written(
                first.namespace,
                first.name,
                before=_count(before, unit),
                before_usual=None if before is None else bool(before.usual),
                after=_count(after, unit),
                unit=unit,
            )
            judged = await self._judged(session, written, first.interval_key)
            found.append(
                Rewrite(
                    dag, interval, written.namespace, written.name, written.before,
                    written.after, unit, judged.verdict, judged.why, judged.usual,
                )
            )  # fmt: skip
        return found

    async def _judged(self, session: AsyncSession, written: Written, interval_key: str) -> Judged:
        rule = self.config.quality.rule_for(written.namespace, written.name)
        history = await store.history(
            session, written.namespace, written.name,
            interval_key=interval_key, intervals=2 * rule.history,
        )  # fmt: skip
        measured = [
            (rows if written.unit == "rows" else size, usual) for rows, size, usual in history
        ]
        return judge(written, usual_values(measured, rule), rule)


def _since(row: Observation, since: datetime) -> bool:
    return row.seen_at is not None and row.seen_at >= since


def _after(rows: Sequence[Observation], since: datetime) -> Observation | None:
    return next((r for r in reversed(rows) if _since(r, since)), None)


def _count(row: Observation | None, unit: str) -> int | None:
    if row is None:
        return None
    return row.rows if unit == "rows" else row.size


def _unknown(dag: DagRef, interval: Interval, why: Why) -> Rewrite:
    return Rewrite(dag, interval, None, None, None, None, "rows", Verdict.UNKNOWN, why, None)
