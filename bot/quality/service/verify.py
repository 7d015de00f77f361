"""What a backfill's reruns wrote, judged (`bot/quality/rules/verify.py`): per rerun interval
and dataset, the count before the backfill and since, and whether it looks right. The
backfill capability asks; the quality tables stay this capability's.

Two passes: first what each DAG's reruns wrote (one query per DAG), enough to tell whether
every count is in; only then each dataset's history (one query per dataset, whatever the
number of intervals), so asking again while counts are still to come stays cheap."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession

from bot.config import BotConfig
from bot.core.model import DagRef, Interval
from bot.quality.rules.checks import usual_values
from bot.quality.rules.verify import Rerun, Rewrite, Verdict, Why, Written, judge
from bot.quality.store import observations as store
from bot.quality.store.observations import Kept

__all__ = ["Rerun", "Rewrite", "Rewrites"]

Seen = store.Written
_Pending = tuple[DagRef, Interval, Written, str]
"""A dataset interval to judge: its DAG, interval, counts and interval key."""


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
        pending: list[_Pending] = []
        for dag, intervals in by_dag.items():
            ref = (dag.namespace, dag.dag_id)
            seen = await store.of_intervals(session, ref, [i.start for i in intervals])
            if not seen and not await store.sends_statistics(session, ref):
                found += [_unknown(dag, i, Why.NO_STATISTICS) for i in intervals]
                continue
            by_start: dict[datetime | None, list[Seen]] = {}
            for row in seen:
                by_start.setdefault(row.interval_start, []).append(row)
            for interval in intervals:
                written = _written(by_start.get(interval.start, []), since, final=final)
                if written is None:
                    return None  # a count still to come
                if not written:
                    found.append(_unknown(dag, interval, Why.NOT_ARRIVED))
                pending += [(dag, interval, w, key) for w, key in written]
        return found + await self._judged(session, pending)

    async def _judged(self, session: AsyncSession, pending: Sequence[_Pending]) -> list[Rewrite]:
        """Each dataset interval against the dataset's other intervals, read once per dataset."""
        wanted: dict[tuple[str, str], set[str]] = {}
        for _, _, written, key in pending:
            wanted.setdefault((written.namespace, written.name), set()).add(key)
        kept: dict[tuple[str, str], list[Kept]] = {}
        for (namespace, name), keys in wanted.items():
            rule = self.config.quality.rule_for(namespace, name)
            kept[(namespace, name)] = await store.latest(
                session, namespace, name, intervals=2 * rule.history + len(keys)
            )
        found = []
        for dag, interval, written, key in pending:
            rule = self.config.quality.rule_for(written.namespace, written.name)
            others = [k for k in kept[(written.namespace, written.name)] if k.interval_key != key]
            measured = [
                (k.rows if written.unit == "rows" else k.size, k.usual)
                for k in others[: 2 * rule.history]
            ]
            judged = judge(written, usual_values(measured, rule), rule)
            found.append(
                Rewrite(
                    dag, interval, written.namespace, written.name, written.before,
                    written.after, written.unit, judged.verdict, judged.why, judged.usual,
                )
            )  # fmt: skip
        return found


def _written(
    seen: Sequence[Seen], since: datetime, *, final: bool
) -> list[tuple[Written, str]] | None:
    """One interval's datasets, before the backfill and since (with the interval key); None
    while one has no count since and the wait is not over."""
    by_dataset: dict[str, list[Seen]] = {}
    for row in seen:
        by_dataset.setdefault(row.dataset_key, []).append(row)
    found = []
    for rows in by_dataset.values():
        after = next((r for r in reversed(rows) if _since(r, since)), None)
        if after is None and not final:
            return None
        before = next((r for r in reversed(rows) if not _since(r, since)), None)
        first = after or before
        assert first is not None
        unit = "rows" if first.rows is not None else "bytes"
        written = Written(
            first.namespace,
            first.name,
            before=_count(before, unit),
            before_usual=None if before is None else before.usual,
            after=_count(after, unit),
            unit=unit,
        )
        found.append((written, first.interval_key))
    if not found and not final:
        return None
    return found


def _since(row: Seen, since: datetime) -> bool:
    return row.seen_at is not None and row.seen_at >= since


def _count(row: Seen | None, unit: str) -> int | None:
    if row is None:
        return None
    return row.rows if unit == "rows" else row.size


def _unknown(dag: DagRef, interval: Interval, why: Why) -> Rewrite:
    return Rewrite(dag, interval, None, None, None, None, "rows", Verdict.UNKNOWN, why, None)
