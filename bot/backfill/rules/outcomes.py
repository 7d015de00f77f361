"""What the backfill services answer the person who acted, as typed outcomes: facts, no words.
`bot.backfill.messages.answers` says each in words; the Slack handler picks the reply.

Every outcome says whether it changed anything (`changed`) and which request it made or
touched, if one (`request_id`): a caller that chains services (an alert's Approve backfill)
reads them, and so do the tests.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar, Literal

from bot.backfill.rules.status import RequestStatus
from bot.lineage.rules.planner import Plan
from bot.ownership.rules import Denial


@dataclass(frozen=True)
class _Unchanged:
    """An outcome that recorded nothing and touched no request."""

    changed: ClassVar[bool] = False

    @property
    def request_id(self) -> str | None:
        return None


@dataclass(frozen=True)
class NotFound(_Unchanged):
    """The id names no backfill the asker may reach from where they asked (the same answer
    whether none has it or it lives elsewhere, so it reveals nothing)."""

    given: str
    prefix: bool = False
    """The id was typed, and a short one is read as a prefix."""


@dataclass(frozen=True)
class Ambiguous(_Unchanged):
    """More than one backfill the asker may reach has an id starting with `given`."""

    given: str


@dataclass(frozen=True)
class Unchanged:
    """The click changed nothing: the request is past the state the click expects."""

    request_id: str
    state: str
    by: str | None = None
    """Who approved it last, for an approved request."""
    changed: ClassVar[bool] = False


@dataclass(frozen=True)
class Denied:
    """The person may not approve (or cancel, pause, resume) this backfill; the denial names
    who may."""

    denial: Denial
    verb: Literal["approve", "cancel", "pause", "resume", "change"]
    request_id: str | None = None
    """The request they acted on (None: refused before any was made)."""
    changed: ClassVar[bool] = False


@dataclass(frozen=True)
class Busy:
    """Another backfill already reruns some of the same DAG intervals."""

    dag_id: str
    blocking: str
    """The request that holds them."""
    state: str
    request_id: str | None = None
    """The request that must wait (None: refused before any was made)."""
    changed: ClassVar[bool] = False


@dataclass(frozen=True)
class Unplannable(_Unchanged):
    """No plan can be made: Marquez is unreachable or answered badly, or planning failed."""

    why: Literal["marquez_unavailable", "marquez_error", "planning", "options"]
    detail: str


@dataclass(frozen=True)
class Blocked:
    """The plan cannot run as it is: its preview says why."""

    request_id: str
    changed: ClassVar[bool] = False


@dataclass(frozen=True)
class DryRun(_Unchanged):
    """`--dry-run`: the plan, shown to the asker only; nothing recorded."""

    plan: Plan
    requester: str
    options: Mapping[str, Any] = field(default_factory=dict)
    """The options as a request would store them (bot/backfill/service/planned.py)."""


@dataclass(frozen=True)
class Previewed:
    """The plan was posted for approval."""

    request_id: str
    changed: ClassVar[bool] = True


@dataclass(frozen=True)
class Approved:
    """The backfill is approved and handed to the executor."""

    request_id: str
    changed: ClassVar[bool] = True


@dataclass(frozen=True)
class ApprovalRecorded:
    """One approval of several (`approve: all_owners`) is recorded; `waiting` still must."""

    request_id: str
    waiting: tuple[str, ...]
    changed: ClassVar[bool] = True


@dataclass(frozen=True)
class AlreadyApproved:
    """This person approved already; `waiting` still must."""

    request_id: str
    waiting: tuple[str, ...]
    changed: ClassVar[bool] = False


@dataclass(frozen=True)
class StartedFromAlert:
    """**Approve backfill** in an alert: approved at once and started in the alert's thread."""

    request_id: str
    dags: int
    runs: int
    changed: ClassVar[bool] = True


@dataclass(frozen=True)
class SecondPersonAsked:
    """**Approve backfill** by someone who may not approve alone: the plan is in the alert's
    thread for someone else to approve."""

    request_id: str
    denial: Denial
    changed: ClassVar[bool] = True


@dataclass(frozen=True)
class Cancelled:
    request_id: str
    changed: ClassVar[bool] = True


@dataclass(frozen=True)
class Paused:
    request_id: str
    changed: ClassVar[bool] = True


@dataclass(frozen=True)
class Resumed:
    request_id: str
    changed: ClassVar[bool] = True


@dataclass(frozen=True)
class NotPausable:
    """Pause or Resume changed nothing: the request is not running (or not paused)."""

    request_id: str
    state: str
    verb: Literal["pause", "resume"]
    by: str | None = None
    """Who paused it (a paused request asked to pause again)."""
    until: datetime | None = None
    """When a scheduled or window-paused request starts or resumes by itself."""
    changed: ClassVar[bool] = False


@dataclass(frozen=True)
class ToReview(_Unchanged):
    """Review plan: what the modal shows of a previewed request."""

    plan: Plan
    options: Mapping[str, Any]
    start_at: datetime | None
    of: str
    """The request's id."""


@dataclass(frozen=True)
class OptionsChanged:
    """Review plan was submitted: the preview shows the new options (approvals start over)."""

    request_id: str
    described: tuple[str, ...]
    approvals_cleared: bool = False
    changed: ClassVar[bool] = True


@dataclass(frozen=True)
class StatusShown(_Unchanged):
    """`/backfill status ID`: one request's status."""

    status: RequestStatus


@dataclass(frozen=True)
class StatusListed(_Unchanged):
    """`/backfill status`: the requests the asker may see from there, newest first."""

    statuses: tuple[RequestStatus, ...]


@dataclass(frozen=True)
class RetryRefused(_Unchanged):
    """Retry changed nothing: the backfill did not fail, every DAG of it succeeded, it is gone,
    or a retry of it is already open (`other`)."""

    why: Literal["not_failed", "all_succeeded", "gone", "open"]
    of: str
    state: str = ""
    other: str = ""
    other_state: str = ""


@dataclass(frozen=True)
class RetryPosted:
    """A retry plan of what did not succeed, posted for approval in the backfill's thread."""

    request_id: str
    of: str
    changed: ClassVar[bool] = True


Lookup = NotFound | Ambiguous
"""Why an id reached nothing (see `bot.backfill.service.lookup`)."""
Outcome = (
    NotFound
    | Ambiguous
    | Unchanged
    | Denied
    | Busy
    | Unplannable
    | Blocked
    | DryRun
    | Previewed
    | Approved
    | ApprovalRecorded
    | AlreadyApproved
    | StartedFromAlert
    | SecondPersonAsked
    | Cancelled
    | Paused
    | Resumed
    | ToReview
    | OptionsChanged
    | NotPausable
    | StatusShown
    | StatusListed
    | RetryRefused
    | RetryPosted
)
