"""What the person who acted sees, for tests that call a service directly: the service's typed
outcome, said in its capability's words (as the Slack handler says it)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from bot.backfill.messages import answers as backfill_answers


@dataclass(frozen=True)
class Said:
    outcome: Any
    payload: dict[str, Any]
    """The ephemeral reply."""

    @property
    def changed(self) -> bool:
        return bool(self.outcome.changed)

    @property
    def request_id(self) -> str | None:
        return self.outcome.request_id  # type: ignore[no-any-return]


async def said(
    call: Awaitable[Any], answer: Callable[[Any], dict[str, Any]] = backfill_answers.answer
) -> Said:
    """Await a service call and say its outcome (a backfill's, unless `answer` is given)."""
    outcome = await call
    return Said(outcome, answer(outcome))
