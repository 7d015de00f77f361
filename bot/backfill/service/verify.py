"""Verified repairs: when a backfill ends, what its reruns wrote is checked against each
dataset's history and what the reruns replaced (`bot/quality/service/verify.py`), kept in the
restatement ledger, said in the backfill's thread, and told once to each team owning a report
downstream, with the dates of that report it restated.

The end owes the verification as a row (`verify_due_at`, in the runner's transaction): the
reruns' statistics come as their run events do, often after the runner saw the runs end, so
it is done as soon as every rerun of a DAG that sends statistics has sent them, and at the
latest `quality.verify_within_s` after the end, with what arrived. A restart loses nothing."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import date, datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.backfill.messages import verification as words
from bot.backfill.rules.estimate import REPORTS
from bot.backfill.rules.restated import ReportRestated, restated_reports, verification
from bot.backfill.rules.states import StepState
from bot.backfill.store import ledger, repository
from bot.backfill.store.models import BackfillRequest, Restatement
from bot.config import BotConfig
from bot.config.base import matcher
from bot.core.after_commit import wake_on_commit
from bot.core.metrics import Metrics
from bot.core.model import DagRef, Interval
from bot.core.tables import utcnow
from bot.core.worker import Worker
from bot.quality.rules.keys import dataset_key
from bot.quality.rules.verify import Rerun, Rewrite
from bot.quality.service.verify import Rewrites
from bot.slack.store import outbox
from bot.slack.store.models import OutboxRole

__all__ = ["HISTORY_ROWS", "RepairVerifier", "restated_since"]

logger = logging.getLogger(__name__)

VERIFY_EVERY_S = 5.0  # how often owed verifications are looked at (a new one wakes it)
_BATCH = 20
HISTORY_ROWS = 200  # ledger rows one `/backfill history` answer reads
_SCAN = 5_000  # recent ledger rows a report's datasets are looked for among


class RepairVerifier:
    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        config: BotConfig,
        *,
        metrics: Metrics,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.sessions = sessions
        self.config = config
        self.metrics = metrics
        self.clock = clock
        self.rewrites = Rewrites(config)
        self.worker = Worker("verify-repairs", self.check, every_s=VERIFY_EVERY_S)
        wake_on_commit(sessions, ledger.OWED, self.worker.wake)

    async def run_forever(self) -> None:
        await self.worker.run_forever()

    def stop(self) -> None:
        self.worker.stop()

    async def owe(self, session: AsyncSession, request: BackfillRequest) -> None:
        """At a backfill's end (the runner's transaction): owe its verification, if it was
        approved and reran anything."""
        if not request.approvers or not _reruns(request):
            return
        due = self.clock() + timedelta(seconds=self.config.quality.verify_within_s)
        await ledger.owe(session, request.id, due)

    async def check(self) -> int:
        """One pass: each owed verification whose statistics are in, or that is due."""
        async with self.sessions() as session:
            owed = await ledger.owing(session, limit=_BATCH)
        done = 0
        for request_id in owed:
            try:
                done += await self.verify(request_id)
            except Exception:  # one request's odd data never stops the others'
                logger.exception("cannot verify backfill %s; trying again", request_id)
        return done

    async def verify(self, request_id: str) -> int:
        async with self.sessions.begin() as session:
            due = await ledger.claim(session, request_id)
            if due is None:
                return 0  # done by another process
            request = await repository.get_request(session, request_id)
            now = self.clock()
            reruns = _reruns(request)
            since = request.started_at or request.created_at
            found = await self.rewrites.judge(session, reruns, since, final=now >= due)
            if found is None:
                return 0  # statistics still to come
            readers = _report_readers(request)
            rows = [_row(request, r, now, readers.get(r.dag.dag_id, ())) for r in found]
            ledger.record(session, rows)
            await ledger.done(session, request_id, now)
            await self._tell(session, request, found)
        logger.info("verified backfill %s: %d dataset intervals", request_id, len(found))
        return 1

    async def _tell(
        self, session: AsyncSession, request: BackfillRequest, found: Sequence[Rewrite]
    ) -> None:
        summary = verification(found)
        by_dag: dict[str, list[Interval]] = {}
        for rerun in _reruns(request):
            by_dag.setdefault(rerun.dag.dag_id, []).append(rerun.interval)
        wrong = [(r.dag.dag_id, r.interval.start) for run in summary.wrong for r in run]
        entries = (request.options or {}).get(REPORTS) or []
        reports = restated_reports(entries, by_dag, wrong)
        home = request.status_channel or request.channel or ""
        if home:
            payload = words.verified(
                request.id, request.root_dag, summary, reports,
                within_s=self.config.quality.verify_within_s,
            )  # fmt: skip
            await outbox.enqueue(
                session, channel=home, payload=payload, role=OutboxRole.THREAD,
                request_id=request.id,
            )  # fmt: skip
        reason = str((request.options or {}).get("reason") or "")
        for channel, theirs in self._report_channels(reports, home).items():
            notice = words.restated_notice(
                request.id, request.root_dag, theirs, channel=home,
                thread_ts=request.thread_ts or request.status_message_ts, reason=reason,
                summary=summary,
            )  # fmt: skip
            await outbox.enqueue(session, channel=channel, payload=notice, request_id=request.id)
            self.metrics.notice_owed(session, "team_notice")

    def _report_channels(
        self, reports: Sequence[ReportRestated], home: str
    ) -> dict[str, list[ReportRestated]]:
        """Each report team's channel with its reports (not the backfill's own channel: the
        verification there names them)."""
        found: dict[str, list[ReportRestated]] = {}
        for report in reports:
            team = self.config.team(report.team) if report.team else None
            if team is None or not team.channel or team.channel == home:
                continue
            found.setdefault(team.channel, []).append(report)
        return found

    async def history(self, subject: str) -> dict[str, Any]:
        """`/backfill history SUBJECT` (a DAG id, a dataset `NAME` or `NAMESPACE::NAME`, or a
        BOT_CONFIG report's name): the ledger's answer."""
        report = next((r for r in self.config.reports if r.name.lower() == subject.lower()), None)
        async with self.sessions() as session:
            if report is not None:
                # the rewrites of the DAGs writing what it read when they ran, and of any
                # dataset it reads
                test = matcher(report.datasets)
                scanned = await ledger.entries(session, limit=_SCAN)
                rows = [r for r in scanned if _reads(report.name, test, r)][: HISTORY_ROWS + 1]
            else:
                keys = [dataset_key(*subject.split("::", 1))] if "::" in subject else []
                rows = await ledger.entries(
                    session, dag_ids=[subject], dataset_keys=keys, names=[subject],
                    limit=HISTORY_ROWS + 1,
                )  # fmt: skip
        more = len(rows) > HISTORY_ROWS
        shown = [_restated(r) for r in rows[:HISTORY_ROWS]]
        return words.history(report.name if report is not None else subject, shown, more=more)


async def restated_since(
    session: AsyncSession, since: datetime, *, limit: int = _SCAN
) -> list[words.Restated]:
    """The ledger's rows written since `since`, newest first (for the App Home tab)."""
    rows = await ledger.entries(session, since=since, limit=limit)
    return [_restated(r) for r in rows]


def _reruns(request: BackfillRequest) -> list[Rerun]:
    """What the backfill reran: every interval of each step that succeeded."""
    found = []
    for step in request.steps:
        if step.state != StepState.SUCCEEDED:
            continue
        dag = DagRef(step.namespace, step.dag_id)
        for interval in step.intervals:
            start = datetime.fromisoformat(interval["start"])
            end = datetime.fromisoformat(interval["end"])
            found.append(Rerun(dag, Interval(start, end)))
    return found


def _reads(report: str, test: Callable[[str, str], bool], row: Restatement) -> bool:
    if report in (row.reports or ()):
        return True
    return row.namespace is not None and row.name is not None and test(row.namespace, row.name)


def _report_readers(request: BackfillRequest) -> dict[str, tuple[str, ...]]:
    """Each DAG of the backfill → the reports downstream reading what it writes (a report whose
    writers are not known reads what every DAG of it writes)."""
    every = [step.dag_id for step in request.steps]
    found: dict[str, list[str]] = {}
    for entry in (request.options or {}).get(REPORTS) or []:
        named = entry.get("dags") if isinstance(entry, dict) else None
        for dag in named if isinstance(named, list) and named else every:
            found.setdefault(str(dag), []).append(str(entry.get("report") or "?"))
    return {dag: tuple(reports) for dag, reports in found.items()}


def _row(
    request: BackfillRequest, rewrite: Rewrite, now: datetime, reports: Sequence[str]
) -> Restatement:
    approver = request.approvers[-1] if request.approvers else None
    reason = str((request.options or {}).get("reason") or "")[:300] or None
    return Restatement(
        request_id=request.id,
        dag_namespace=rewrite.dag.namespace,
        dag_id=rewrite.dag.dag_id,
        interval_start=rewrite.interval.start,
        interval_end=rewrite.interval.end,
        dataset_key=rewrite.dataset_key,
        namespace=rewrite.namespace,
        name=rewrite.name,
        rows_before=rewrite.before,
        rows_after=rewrite.after,
        unit=rewrite.unit,
        verdict=rewrite.verdict.value,
        why=rewrite.why.value if rewrite.why is not None else None,
        usual=rewrite.usual,
        incident_id=request.incident_id,
        reports=list(reports),
        reason=reason,
        requested_by=request.requester,
        approved_by=approver,
        restated_at=now,
    )


def _restated(row: Restatement) -> words.Restated:
    return words.Restated(
        request_id=row.request_id,
        dag_id=row.dag_id,
        dag_namespace=row.dag_namespace,
        day=_day(row.interval_start),
        dataset=row.name,
        before=row.rows_before,
        after=row.rows_after,
        unit=row.unit,
        verdict=row.verdict,
        why=row.why,
        at=row.restated_at,
        reason=row.reason,
        incident_id=row.incident_id,
        approved_by=row.approved_by,
    )


def _day(moment: datetime) -> date:
    return moment.date()
