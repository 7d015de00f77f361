"""What a backfill owes the other teams whose DAGs it reruns: one notice in each team's channel
when it is approved, one more when it ends. Written as outbox rows in the caller's transaction.

"Other" means not the teams owning its root (they asked for it, or got the alert it came from)
and not a team whose channel is where the backfill reports anyway."""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from bot.backfill.messages import notices as team_messages
from bot.backfill.rules.status import ReportEstimate
from bot.backfill.store.models import BackfillRequest
from bot.config import BotConfig
from bot.core.metrics import Metrics
from bot.core.model import DagRef
from bot.core.tables import utcnow
from bot.hub.rules.routing import HubEvent, HubKind
from bot.hub.service.hub import Hub
from bot.lineage.rules.planner import plan_from_json
from bot.ownership.rules import owners
from bot.slack.store import outbox

EndHook = Callable[[AsyncSession, BackfillRequest], Coroutine[Any, Any, None]]


class TeamNotices:
    def __init__(self, config: BotConfig, *, metrics: Metrics, hub: Hub) -> None:
        self.config = config
        self.metrics = metrics
        self.hub = hub  # sinks beyond Slack and subscribed channels

    def reruns(self, request: BackfillRequest) -> list[tuple[str, team_messages.TeamRerun]]:
        """(team channel, what it reruns of that team's DAGs), one per team to tell."""
        home = request.status_channel or request.channel or ""
        root = DagRef(request.root_namespace, request.root_dag)
        asking = set(owners(self.config, root))
        by_team: dict[str, list[tuple[str, int]]] = {}
        for step in plan_from_json(request.plan).steps:
            for name in owners(self.config, step.dag, step.owners):
                by_team.setdefault(name, []).append((step.dag.dag_id, len(step.intervals)))
        found: list[tuple[str, team_messages.TeamRerun]] = []
        told: set[str] = set()
        for name, dags in by_team.items():
            team = self.config.team(name)
            if team is None or not team.channel or name in asking:
                continue
            if team.channel == home or team.channel in told:
                continue
            told.add(team.channel)
            found.append(
                (
                    team.channel,
                    team_messages.TeamRerun(
                        request_id=request.id,
                        root_dag=request.root_dag,
                        range_text=f"{request.start_date.isoformat()}..{request.end_date.isoformat()}",
                        dags=dags,
                        channel=home,
                        thread_ts=request.thread_ts or request.status_message_ts,
                        reason=str((request.options or {}).get("reason") or ""),
                    ),
                )
            )
        return found

    async def approved(self, session: AsyncSession, request: BackfillRequest) -> None:
        approver = request.approvers[-1] if request.approvers else request.requester
        told = self.reruns(request)
        for channel, rerun in told:
            payload = team_messages.rerun_approved(rerun, approver=approver)
            await outbox.enqueue(session, channel=channel, payload=payload, request_id=request.id)
            self.metrics.notice_owed(session, "team_notice")
        await self._hub(session, request, "backfill.approved", [c for c, _ in told])

    async def reports_started(
        self,
        session: AsyncSession,
        request: BackfillRequest,
        estimates: Sequence[ReportEstimate],
    ) -> None:
        """Once, when the backfill starts: each team owning a report downstream hears when its
        reports read correct data again (not in the channel the backfill reports in: its
        status message says it there)."""
        home = request.status_channel or request.channel or ""
        by_channel: dict[str, list[ReportEstimate]] = {}
        for estimate in estimates:
            team = self.config.team(estimate.team) if estimate.team else None
            if team is None or not team.channel or team.channel == home:
                continue
            by_channel.setdefault(team.channel, []).append(estimate)
        for channel, theirs in by_channel.items():
            rerun = team_messages.TeamRerun(
                request_id=request.id,
                root_dag=request.root_dag,
                range_text=f"{request.start_date.isoformat()}..{request.end_date.isoformat()}",
                dags=[],
                channel=home,
                thread_ts=request.thread_ts or request.status_message_ts,
                reason=str((request.options or {}).get("reason") or ""),
            )
            payload = team_messages.reports_started(rerun, theirs)
            await outbox.enqueue(session, channel=channel, payload=payload, request_id=request.id)
            self.metrics.notice_owed(session, "team_notice")

    async def ended(self, session: AsyncSession, request: BackfillRequest) -> None:
        """Once, when the request reached a final state after it was approved."""
        if not request.approvers:
            return  # withdrawn before approval: nobody was told it would run
        told = self.reruns(request)
        for channel, rerun in told:
            payload = team_messages.rerun_ended(rerun, state=request.state)
            await outbox.enqueue(session, channel=channel, payload=payload, request_id=request.id)
            self.metrics.notice_owed(session, "team_notice")
        await self._hub(session, request, "backfill.ended", [c for c, _ in told])

    async def _hub(
        self, session: AsyncSession, request: BackfillRequest, kind: HubKind, told: list[str]
    ) -> None:
        """The backfill as a hub event: to its teams' sinks and the channels subscribed to a
        DAG it reruns, less those told already (its own channel, the teams')."""
        steps = plan_from_json(request.plan).steps
        runs = {step.dag: len(step.intervals) for step in steps}
        root = DagRef(request.root_namespace, request.root_dag)
        named = list(owners(self.config, root))
        for step in steps:
            named += owners(self.config, step.dag, step.owners)
        home = request.status_channel or request.channel or ""
        approver = request.approvers[-1] if request.approvers else request.requester
        range_text = f"{request.start_date.isoformat()}..{request.end_date.isoformat()}"
        event = HubEvent(
            kind=kind,
            dag=root,
            at=request.finished_at or utcnow() if kind == "backfill.ended" else utcnow(),
            intervals=range_text,
            owners=owners(self.config, root, named),
            dags=tuple(runs),
            # for `--downstream` subscriptions: what is upstream of the backfill's DAGs
            upstream=self.hub.upstream_of(root),
            backfill_request_id=request.id,
            state=str(request.state) if kind == "backfill.ended" else None,
            actor=approver,
        )

        def payload_for(dags: Sequence[DagRef]) -> dict[str, Any]:
            rerun = team_messages.TeamRerun(
                request_id=request.id,
                root_dag=request.root_dag,
                range_text=range_text,
                dags=[(d.dag_id, runs.get(d, 0)) for d in dags],
                channel=home,
                thread_ts=request.thread_ts or request.status_message_ts,
                reason=str((request.options or {}).get("reason") or ""),
            )
            if kind == "backfill.ended":
                return team_messages.rerun_ended(rerun, state=request.state)
            return team_messages.rerun_approved(rerun, approver=approver)

        await self.hub.backfill(session, event, reached=[home, *told], payload_for=payload_for)
