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
from bot.backfill.rules.restated import (
    ReportRestated,
    Verification,
    restated_reports,
    verification,
)
from bot.backfill.rules.states import StepState
from bot.backfill.store import ledger, repository
from bot.backfill.store.models import BackfillRequest, Restatement
from bot.config import BotConfig
from bot.core.after_commit import wake_on_commit
from bot.core.metrics import Metrics
from bot.core.model import DagRef, Interval
from bot.core.tables import utcnow
from bot.core.worker import Worker
from bot.quality.rules.keys import dataset_key, name_key
from bot.quality.rules.verify import Rerun, Rewrite
from bot.quality.service.verify import Rewrites
from bot.slack.store import outbox
from bot.slack.store.models import OutboxRole

__all__ = ["HISTORY_ROWS", "RepairVerifier", "Summary", "restated_since"]

Summary = ledger.Summary

logger = logging.getLogger(__name__)

VERIFY_EVERY_S = 5.0  # how often owed verifications are looked at (a new one wakes it)
WAIT_LOOK_S = 10.0  # a verification still waiting for counts is looked at again this often
_BATCH = 20
HISTORY_ROWS = 200  # ledger rows one `/backfill history` answer reads
_REQUESTS = 10  # backfills `/backfill history REPORT` shows
_SCAN = 20_000  # ledger rows of those backfills read to find the report's writers' ones
_SUMMARIES = 2_000  # (backfill, DAG, verdict) groups the App Home tab reads


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
        self._next_look: dict[str, datetime] = {}
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
        now = self.clock()
        owing = {request_id for request_id, _ in owed}
        for gone in [r for r in self._next_look if r not in owing]:
            del self._next_look[gone]  # verified elsewhere
        done = 0
        for request_id, due in owed:
            if now < due and now < self._next_look.get(request_id, now):
                continue  # looked a moment ago and its counts were not all in
            try:
                done += await self.verify(request_id)
            except Exception:  # one request's odd data never stops the others'
                logger.exception("cannot verify backfill %s; trying again", request_id)
        return done

    async def verify(self, request_id: str) -> int:
        """Judge what the request's reruns wrote (outside any lock: it reads), then, under the
        request's lock and only if still owed, keep it in the ledger and owe what it says."""
        async with self.sessions() as session:
            due = await ledger.due(session, request_id)
            if due is None:
                return 0
            request = await repository.get_request(session, request_id)
            now = self.clock()
            since = request.started_at or request.created_at
            found = await self.rewrites.judge(session, _reruns(request), since, final=now >= due)
        if found is None:  # statistics still to come: look again in a while, not every pass
            self._next_look[request_id] = now + timedelta(seconds=WAIT_LOOK_S)
            return 0
        self._next_look.pop(request_id, None)
        summary = verification(found)
        reports = self._reports(request, summary)
        async with self.sessions.begin() as session:
            if await ledger.claim(session, request_id) is None:
                return 0  # done by another process meanwhile
            rows = [_row(request, r, now) for r in found]
            await ledger.record(session, rows, [_report_row(request, r, now) for r in reports])
            await ledger.done(session, request_id, now)
            await self._tell(session, request, summary, reports)
        logger.info("verified backfill %s: %d dataset intervals", request_id, len(found))
        return 1

    def _reports(self, request: BackfillRequest, summary: Verification) -> list[ReportRestated]:
        by_dag: dict[str, list[Interval]] = {}
        for rerun in _reruns(request):
            by_dag.setdefault(rerun.dag.dag_id, []).append(rerun.interval)
        wrong = [(r.dag.dag_id, r.interval.start) for run in summary.wrong for r in run]
        entries = (request.options or {}).get(REPORTS) or []
        return restated_reports(entries, by_dag, wrong)

    async def _tell(
        self,
        session: AsyncSession,
        request: BackfillRequest,
        summary: Verification,
        reports: Sequence[ReportRestated],
    ) -> None:
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
                requests = await ledger.report_requests(session, report.name, limit=_REQUESTS)
                rows = await ledger.entries(session, request_ids=requests, limit=HISTORY_ROWS + 1)
            else:
                keys = [dataset_key(*subject.split("::", 1))] if "::" in subject else []
                rows = await ledger.entries(
                    session, dag_ids=[subject], dataset_keys=keys,
                    name_keys=[name_key(subject)], limit=HISTORY_ROWS + 1,
                )  # fmt: skip
        more = len(rows) > HISTORY_ROWS
        shown = [_restated(r) for r in rows[:HISTORY_ROWS]]
        return words.history(report.name if report is not None else subject, shown, more=more)


async def restated_since(
    session: AsyncSession, since: datetime, *, limit: int = _SUMMARIES
) -> list[ledger.Summary]:
    """What backfills verified since `since` restated, per backfill, DAG and verdict, newest
    backfill first (the App Home tab)."""
    return await ledger.summaries(session, since, limit=limit)


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


def _row(request: BackfillRequest, rewrite: Rewrite, now: datetime) -> dict[str, Any]:
    approver = request.approvers[-1] if request.approvers else None
    reason = str((request.options or {}).get("reason") or "")[:300] or None
    return {
        "request_id": request.id,
        "dag_namespace": rewrite.dag.namespace,
        "dag_id": rewrite.dag.dag_id,
        "interval_start": rewrite.interval.start,
        "interval_end": rewrite.interval.end,
        "dataset_key": rewrite.dataset_key,
        "namespace": rewrite.namespace,
        "name": rewrite.name,
        "name_key": name_key(rewrite.name) if rewrite.name is not None else None,
        "rows_before": rewrite.before,
        "rows_after": rewrite.after,
        "unit": rewrite.unit,
        "verdict": rewrite.verdict.value,
        "why": rewrite.why.value if rewrite.why is not None else None,
        "usual": rewrite.usual,
        "incident_id": request.incident_id,
        "reason": reason,
        "requested_by": request.requester,
        "approved_by": approver,
        "restated_at": now,
    }


def _report_row(request: BackfillRequest, report: ReportRestated, now: datetime) -> dict[str, Any]:
    return {
        "request_id": request.id,
        "report": report.report[:250],
        "days": [d.isoformat() for d in report.dates],
        "wrong_days": [d.isoformat() for d in report.wrong],
        "dags": list(report.writers),
        "restated_at": now,
    }


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
