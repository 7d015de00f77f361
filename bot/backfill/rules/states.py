"""The life of a backfill request and of its steps: every state, the moves between them, and
the groupings the rest of the bot asks about. The one place these are written."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum


class RequestState(StrEnum):
    """The life of a backfill request."""

    PREVIEWED = "previewed"
    APPROVED = "approved"
    SCHEDULED = "scheduled"
    """Approved, waiting for its start time or its off-peak window to open."""
    RUNNING = "running"
    PAUSED = "paused"
    """Started: what runs finishes, nothing new starts until it is resumed."""
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    REFUSED = "refused"


class StepState(StrEnum):
    """The life of one step (one DAG) of a backfill."""

    PENDING = "pending"
    SUBMITTED = "submitted"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    SKIPPED = "skipped"
    CANCELLED = "cancelled"


REQUEST_TRANSITIONS: Mapping[str, frozenset[str]] = {
    RequestState.PREVIEWED: frozenset(
        {RequestState.APPROVED, RequestState.REFUSED, RequestState.CANCELLED}
    ),
    RequestState.APPROVED: frozenset(
        {RequestState.RUNNING, RequestState.SCHEDULED, RequestState.CANCELLED, RequestState.FAILED}
    ),
    RequestState.SCHEDULED: frozenset({RequestState.RUNNING, RequestState.CANCELLED}),
    RequestState.RUNNING: frozenset(
        {RequestState.SUCCEEDED, RequestState.FAILED, RequestState.CANCELLED, RequestState.PAUSED}
    ),
    # What was running when it paused may still end it.
    RequestState.PAUSED: frozenset(
        {RequestState.RUNNING, RequestState.CANCELLED, RequestState.SUCCEEDED, RequestState.FAILED}
    ),
}
"""Allowed request moves: state → the states it may move to. States not listed are final."""

STEP_TRANSITIONS: Mapping[str, frozenset[str]] = {
    StepState.PENDING: frozenset({StepState.SUBMITTED, StepState.SKIPPED, StepState.CANCELLED}),
    StepState.SUBMITTED: frozenset(
        {StepState.RUNNING, StepState.FAILED, StepState.CANCELLED, StepState.SUCCEEDED}
    ),
    StepState.RUNNING: frozenset({StepState.SUCCEEDED, StepState.FAILED, StepState.CANCELLED}),
}
"""Allowed step moves: state → the states it may move to. States not listed are final."""


OPEN: frozenset[str] = frozenset(REQUEST_TRANSITIONS)
"""States a request may still leave: previewed, approved, scheduled, running, paused. An open
request can be cancelled, and blocks another backfill of the same DAG intervals once approved."""
ACTIVE: frozenset[str] = frozenset(
    {RequestState.APPROVED, RequestState.SCHEDULED, RequestState.RUNNING, RequestState.PAUSED}
)
"""Approved and not finished: its work is (or is about to be) under way; a paused or scheduled
backfill still holds its DAG intervals."""
FINAL: frozenset[str] = frozenset(RequestState) - OPEN
"""Ended for good: succeeded, failed, cancelled, refused."""
FOLLOWED: frozenset[str] = frozenset({RequestState.RUNNING, RequestState.PAUSED})
"""Whose steps the runner polls each pass (a cancelled request too, until its started work
has wound down; a paused one, while what it started finishes)."""
PAUSABLE: frozenset[str] = frozenset({RequestState.RUNNING})
"""States `/backfill pause` and the Pause button act on."""

STEP_ACTIVE: frozenset[str] = frozenset({StepState.SUBMITTED, StepState.RUNNING})
"""A step whose work the executor has taken on and not finished."""
STEP_FINAL: frozenset[str] = frozenset(StepState) - STEP_TRANSITIONS.keys()
"""A step that will not change again: succeeded, failed, skipped, cancelled."""
STEP_BROKEN: frozenset[str] = frozenset({StepState.FAILED, StepState.SKIPPED, StepState.CANCELLED})
"""A step that did not succeed: what depends on it is skipped, and Retry reruns it."""
