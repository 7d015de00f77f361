"""Clicks are durable before the ack: a click that decides something (Approve, Cancel, Retry,
the alert's buttons) is recorded, then acknowledged, then decided and answered, then marked
handled. A bot killed between the ack and the decision finds the click on its next start and
runs it again through bolt, as Slack delivered it; the services' decisions are idempotent (a
second Approve answers "already approved"), so a click decided just before a kill is answered
again at worst, never lost."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from slack_bolt.async_app import AsyncApp, AsyncBoltContext
from slack_bolt.request.async_request import AsyncBoltRequest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.core.tables import utcnow
from bot.core.worker import Worker
from bot.slack.store import clicks as store

__all__ = ["CLICK_ATTEMPTS", "ClickInbox"]

logger = logging.getLogger(__name__)

GRACE_S = 30.0  # longer than a click's own decision takes (planning from the index: < 1 s)
LEASE_S = 60.0
CLICK_ATTEMPTS = 3
REPLAYED = "replayed_click"
CLICK_ID = "click_id"


class ClickInbox:
    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        durable: frozenset[str],
        *,
        grace_s: float = GRACE_S,
        every_s: float = 10.0,
    ) -> None:
        """`durable`: the action ids whose clicks are recorded (the ones that decide)."""
        self.sessions = sessions
        self.durable = durable
        self.grace_s = grace_s
        self.every_s = every_s
        self._bolt: AsyncApp | None = None
        self._worker = Worker("click-replay", self.replay_due, every_s=every_s)

    async def middleware(
        self,
        body: dict[str, Any],
        context: AsyncBoltContext,
        next: Callable[[], Awaitable[None]],
    ) -> None:
        """Bolt middleware: record a deciding click before its listener acknowledges it."""
        action_id = _action_id(body)
        if action_id in self.durable and not context.get(REPLAYED):
            async with self.sessions.begin() as session:
                user = str((body.get("user") or {}).get("id") or "")
                context[CLICK_ID] = await store.record(
                    session, action_id=action_id, user=user, payload=body, grace_s=self.grace_s
                )
        await next()

    async def handled(self, context: AsyncBoltContext) -> None:
        """The click of this request was decided and answered (nothing to do for a click that
        was not recorded)."""
        click_id = context.get(CLICK_ID)
        if isinstance(click_id, int):
            async with self.sessions.begin() as session:
                await store.mark_handled(session, click_id)

    async def run_forever(self, bolt: AsyncApp) -> None:
        self._bolt = bolt
        await self._worker.run_forever()

    def stop(self) -> None:
        self._worker.stop()

    async def replay_due(self, bolt: AsyncApp | None = None) -> int:
        """Run again, through bolt, each click whose grace passed unhandled; how many."""
        app = bolt or self._bolt
        if app is None:
            return 0
        async with self.sessions() as session:
            found = await store.due(session, now=utcnow())
        replayed = 0
        for click in found:
            async with self.sessions.begin() as session:
                taken = await store.claim(session, click, lease_s=LEASE_S, attempts=CLICK_ATTEMPTS)
            if not taken:
                if click.attempts + 1 > CLICK_ATTEMPTS:
                    logger.error(
                        "gave up on click %s (%s by %s): its replay failed %d times",
                        click.id, click.action_id, click.user, CLICK_ATTEMPTS,
                    )  # fmt: skip
                continue
            logger.warning(
                "replaying click %s (%s by %s), acknowledged before the bot stopped",
                click.id, click.action_id, click.user,
            )  # fmt: skip
            # "socket_mode": the click came signed once; bolt checks no signature again.
            request = AsyncBoltRequest(
                body=click.payload,
                mode="socket_mode",
                context={CLICK_ID: click.id, REPLAYED: True},
            )
            await app.async_dispatch(request)
            replayed += 1
        return replayed


def _action_id(body: dict[str, Any]) -> str:
    if body.get("type") != "block_actions":
        return ""
    actions = body.get("actions")
    if not isinstance(actions, list) or not actions or not isinstance(actions[0], dict):
        return ""
    return str(actions[0].get("action_id") or "")
