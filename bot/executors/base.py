"""The Executor protocol: how an approved backfill request is handed over to be run.

The hand-off happens after the approval is committed; an executor must be idempotent in
`start` (a restart re-hands requests whose hand-off was not recorded) and records what it does
through the store and the outbox, never by talking to Slack itself.
"""

from __future__ import annotations

from typing import Protocol

from bot.store.models import BackfillRequest


class Executor(Protocol):
    """Runs the steps of an approved request, in plan order."""

    @property
    def name(self) -> str: ...

    async def start(self, request: BackfillRequest) -> None:
        """Take over an approved request (state `approved`)."""

    async def cancel(self, request: BackfillRequest) -> None:
        """Stop what is still queued of a request the user cancelled."""
