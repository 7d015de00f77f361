"""Review plan on a preview: the plan and its options in a modal (`review`), and a submission
changing the options of the request before anyone approves it (`revise`). The requester, or
whoever may approve it, may change them; the preview is redrawn with the new options (and the
runs each `--rerun` choice means, read again), approvals already given start over, and the
change is audited with what was chosen."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Literal, Protocol

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.backfill.messages.backfill import plan_preview
from bot.backfill.messages.options_form import Choices
from bot.backfill.rules.assets import without_consumers
from bot.backfill.rules.options import RunOptions
from bot.backfill.rules.outcomes import (
    Denied,
    Lookup,
    OptionsChanged,
    ToReview,
    Unchanged,
    Unplannable,
)
from bot.backfill.rules.states import RequestState
from bot.backfill.service.lookup import RequestLookup
from bot.backfill.service.planned import PlanChecks
from bot.backfill.store import repository
from bot.backfill.store.models import BackfillRequest
from bot.core.tables import utcnow
from bot.core.windows import WindowError
from bot.lineage.rules.planner import Plan, plan_from_json
from bot.slack.rules.commands import PlanCommand
from bot.slack.rules.ids import OptionBlock
from bot.slack.store import outbox
from bot.slack.store.models import OutboxRole


class Requests(Protocol):
    """What revising shares with the other backfill use cases (`BackfillService`)."""

    sessions: async_sessionmaker[AsyncSession]
    lookup: RequestLookup

    async def check_clicker(
        self, request: BackfillRequest, user: str, *, verb: Literal["change"]
    ) -> Denied | None: ...

    async def awaiting(self, plan: Plan, approvers: Sequence[str]) -> tuple[str, ...]: ...


class PlanRevisions:
    def __init__(self, backfills: Requests, checks: PlanChecks) -> None:
        self.backfills = backfills
        self.checks = checks
        self.sessions = backfills.sessions

    def errors(self, choices: Choices) -> dict[str, str]:
        """What the modal must say under `Start at` before anything is decided (a past or
        unreadable time), keyed by the input's block id."""
        try:
            self.checks.start_at(PlanCommand("", "", at=choices.at), utcnow())
        except WindowError as exc:
            return {OptionBlock.AT: str(exc).replace("--at ", "")}
        return {}

    async def review(
        self, request_id: str, *, user: str, channel: str | None = None
    ) -> ToReview | Unchanged | Lookup:
        """**Review plan** on a preview: its plan and options, for the modal."""
        request = await self.backfills.lookup.find(
            request_id, user=user, channel=channel, action="review.refused"
        )
        if not isinstance(request, BackfillRequest):
            return request
        if request.state != RequestState.PREVIEWED:
            return Unchanged(request.id, request.state)
        plan = plan_from_json(request.plan)
        return ToReview(plan, dict(request.options or {}), request.start_at, request.id)

    async def revise(
        self, request_id: str, *, user: str, channel: str | None, choices: Choices
    ) -> OptionsChanged | Unchanged | Denied | Lookup | Unplannable:
        """Change a previewed request's options to `choices`."""
        request = await self.backfills.lookup.find(
            request_id, user=user, channel=channel, action="options.refused"
        )
        if not isinstance(request, BackfillRequest):
            return request
        if request.state != RequestState.PREVIEWED:
            return Unchanged(request.id, request.state)
        if user != request.requester:
            refused = await self.backfills.check_clicker(request, user, verb="change")
            if refused is not None:
                return refused
        stored = dict(request.options or {})
        before = RunOptions.from_json(stored)
        # The modal does not show the priority: it stays as asked.
        choices = replace(choices, options=replace(choices.options, priority=before.priority))
        command = PlanCommand(
            request.root_dag,
            "",
            bool(stored.get("only")),
            tuple(stored.get("exclude") or ()),
            request.root_namespace,
            options=choices.options,
            at=choices.at,
            now=choices.now,
        )
        try:
            start_at = self.checks.start_at(command, utcnow())
        except WindowError as exc:
            return Unplannable("options", str(exc))
        plan, replanned = await self._plan(request, choices.options)
        options = await self.checks.options(command, plan)
        async with self.sessions.begin() as session:
            changed = await repository.change_options(
                session, request.id, options=options, start_at=start_at, actor=user,
                plan=plan.to_json() if replanned else None,
            )  # fmt: skip
            if changed is None:
                fresh = await repository.get_request(session, request.id)
                return Unchanged(fresh.id, fresh.state)
            await self._redraw(session, changed, plan)
        chosen = RunOptions.from_json(options)
        return OptionsChanged(request.id, chosen.described(), bool(request.approvers))

    async def _plan(self, request: BackfillRequest, chosen: RunOptions) -> tuple[Plan, bool]:
        """The request's plan under the chosen options, and whether it changed: ticking or
        unticking the asset consumers adds or drops their steps."""
        plan = plan_from_json(request.plan)
        before = RunOptions.from_json(request.options)
        if chosen.with_asset_consumers == before.with_asset_consumers:
            return plan, False
        plan = without_consumers(plan, before.asset_triggered)
        if chosen.with_asset_consumers:
            plan = await self.checks.with_consumers(plan)
        return plan, True

    async def _redraw(self, session: AsyncSession, request: BackfillRequest, plan: Plan) -> None:
        awaiting = await self.backfills.awaiting(plan, request.approvers)
        preview = plan_preview(
            plan,
            request_id=request.id,
            requester=request.requester,
            dry_run=False,
            awaiting=awaiting,
            options=request.options,
            start_at=request.start_at,
            now=utcnow(),
            retry_of=request.retry_of or "",
        )
        await outbox.enqueue(
            session,
            channel=request.status_channel or request.channel or "",
            payload=preview,
            method="chat.update",
            role=OutboxRole.STATUS_UPDATE,
            request_id=request.id,
        )
