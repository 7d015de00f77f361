"""From where a backfill request may be seen or clicked (pure): its buttons only where it lives,
its id typed also where the bot told a team about it, and in a DM by its requester and
approvers."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from bot.slack.rules.ids import is_direct_message


class BackfillRequest(Protocol):
    """What visibility reads of a request (the stored row has it all)."""

    @property
    def channel(self) -> str | None: ...

    @property
    def status_channel(self) -> str | None: ...

    @property
    def requester(self) -> str: ...

    @property
    def approvers(self) -> Sequence[str]: ...


def lives_in(request: BackfillRequest, channel: str) -> bool:
    """Whether the request's messages (preview, status, progress thread) are in `channel`: the
    channel it was asked in, or the one its status message went to (an alert's thread is in the
    alert's channel). Its buttons can only be clicked there."""
    return bool(channel) and channel in (request.channel, request.status_channel)


def may_see(request: BackfillRequest, *, user: str, channel: str, told: Iterable[str] = ()) -> bool:
    """Whether `/backfill status` (or cancel) typed in `channel` may name the request: where it
    lives or where the bot told a team about it (`told`), and, in a DM, to its requester and
    approvers. Anywhere else it is answered as if it did not exist."""
    if lives_in(request, channel) or (channel and channel in told):
        return True
    return is_direct_message(channel) and (
        user == request.requester or user in (request.approvers or ())
    )
