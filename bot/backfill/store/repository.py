"""The store's async API for services: backfill requests, their steps, and the audit log.

Every function takes an `AsyncSession` and works inside the caller's transaction: it flushes but
never commits, so a service can put a transition, its audit row and whatever else it owes (an
outbox row) in one `async with sessions.begin() as session:` block and have all or nothing.

State changes are conditional UPDATEs (`... WHERE id = :id AND state IN (:expected)`) checked by
the database, so a double click or a replayed action changes nothing and raises
`InvalidTransition` carrying the state the row is actually in.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Any, cast

from sqlalchemy import CursorResult, Executable, delete, func, literal, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from bot.backfill.rules.states import (
    OPEN,
    REQUEST_TRANSITIONS,
    STEP_ACTIVE,
    STEP_FINAL,
    STEP_TRANSITIONS,
    RequestState,
    StepState,
)
from bot.backfill.store.models import BackfillRequest, BackfillStep
from bot.core.after_commit import log_after_commit
from bot.core.audit import add_audit
from bot.core.tables import UTCDateTime, new_id, utcnow

logger = logging.getLogger(__name__)


class StoreError(Exception):
    """Base class of the store's own errors."""


class RequestNotFound(StoreError, LookupError):
    """No backfill request has this id."""

    def __init__(self, request_id: str) -> None:
        super().__init__(f"backfill request {request_id} not found")
        self.request_id = request_id


class StepNotFound(StoreError, LookupError):
    """No backfill step has this id."""

    def __init__(self, step_id: str) -> None:
        super().__init__(f"backfill step {step_id} not found")
        self.step_id = step_id


class InvalidTransition(StoreError):
    """The row is not in any of the expected states; nothing was changed.

    `current` is the state it is in, so a replayed click can say "already approved".
    """

    def __init__(
        self, kind: str, row_id: str, *, current: str, expected: Collection[str], to: str
    ) -> None:
        wanted = ", ".join(sorted(expected))
        super().__init__(f"{kind} {row_id} is {current}, not {wanted}: cannot move to {to}")
        self.kind = kind
        self.row_id = row_id
        self.current = current
        self.expected = frozenset(expected)
        self.to = to


async def _affected(session: AsyncSession, stmt: Executable) -> int:
    """Run an UPDATE/DELETE in the session's transaction; the number of rows it matched."""
    result = cast("CursorResult[Any]", await session.execute(stmt))
    return result.rowcount


def _check_moves(
    machine: Mapping[str, frozenset[str]], kind: str, expected: Collection[str], to: str
) -> None:
    """Reject, before touching the database, a move the state machine does not allow (a bug)."""
    if isinstance(expected, str) or not expected:
        raise ValueError(f"expected must be a non-empty set of {kind} states, got {expected!r}")
    illegal = sorted(state for state in expected if to not in machine.get(state, frozenset()))
    if illegal:
        raise ValueError(f"{kind} cannot move from {', '.join(illegal)} to {to}")


def _day(value: Any, *, end: bool) -> date:
    """A plan bound as a calendar day: dates as given; a datetime `end` is exclusive."""
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, date):
        return value
    elif isinstance(value, str):
        try:
            return date.fromisoformat(value)
        except ValueError:
            moment = datetime.fromisoformat(value)
    else:
        raise ValueError(f"plan start/end must be ISO dates or datetimes, got {value!r}")
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    # [start, end) covers the days up to the instant before `end`.
    return (moment - timedelta(microseconds=1)).date() if end else moment.date()


def _required(mapping: Mapping[str, Any], key: str, where: str) -> Any:
    try:
        return mapping[key]
    except KeyError:
        raise ValueError(f"{where} has no {key!r}") from None


def _intervals(raw: Any, where: str) -> list[dict[str, str]]:
    if not isinstance(raw, list):
        raise ValueError(f"{where} intervals must be a list of {{start, end}}")
    out: list[dict[str, str]] = []
    for item in raw:
        start, end = _required(item, "start", where), _required(item, "end", where)
        if not isinstance(start, str) or not isinstance(end, str):
            raise ValueError(f"{where} interval bounds must be ISO strings, got {item!r}")
        out.append({"start": start, "end": end})
    return out


async def create_request(
    session: AsyncSession,
    *,
    plan: Mapping[str, Any],
    requester: str,
    channel: str | None = None,
    options: Mapping[str, Any] | None = None,
    start_at: datetime | None = None,
) -> BackfillRequest:
    """Record a previewed request and its steps (in plan order) plus a `request.created` audit row.

    `plan` is the planner's JSON: `{"dag_id", "namespace"?, "start", "end", "steps": [{"dag_id",
    "namespace", "intervals": [{"start", "end"}], "upstream": [...]}, ...]}`; it is stored as is.
    `start`/`end` may be ISO dates (inclusive days) or datetimes (a half-open window); the request
    keeps the calendar days they cover. `options` (only/exclude/dry_run and the run options of
    bot/backfill/service/planned.py) is stored as given, and audited; `start_at` is `--at`.
    Raises ValueError for a plan of the wrong shape.
    """
    root_dag = _required(plan, "dag_id", "plan")
    raw_steps = _required(plan, "steps", "plan")
    if not isinstance(raw_steps, list):
        raise ValueError("plan steps must be a list")
    start_date = _day(_required(plan, "start", "plan"), end=False)
    end_date = _day(_required(plan, "end", "plan"), end=True)
    if end_date < start_date:
        raise ValueError(f"plan ends ({end_date}) before it starts ({start_date})")
    root_namespace = plan.get("namespace") or next(
        (s.get("namespace") for s in raw_steps if s.get("dag_id") == root_dag), None
    )
    if not root_namespace:
        raise ValueError(f"plan names no namespace for its root DAG {root_dag!r}")

    now = utcnow()
    request = BackfillRequest(
        id=new_id(),
        requester=requester,
        channel=channel,
        root_dag=root_dag,
        root_namespace=root_namespace,
        start_date=start_date,
        end_date=end_date,
        options=dict(options or {}),
        start_at=start_at,
        plan=dict(plan),
        state=RequestState.PREVIEWED.value,
        approvers=[],
        created_at=now,
        updated_at=now,
        version=1,
    )
    request.steps.extend(_new_steps(raw_steps, now))
    session.add(request)
    # The audit row has no relationship to order it after the request: flush the request first.
    await session.flush()
    detail = {"root_dag": root_dag, "start": start_date.isoformat(), "end": end_date.isoformat()}
    await add_audit(
        session,
        actor=requester,
        action="request.created",
        request_id=request.id,
        detail={**detail, "steps": len(raw_steps), "options": _chosen(options or {}, start_at)},
        at=now,
    )
    log_after_commit(
        session, logger, "backfill %s of %s previewed for %s (%d steps)",
        request.id, root_dag, requester, len(raw_steps),
        request_id=request.id, dag_id=root_dag, state=RequestState.PREVIEWED.value, actor=requester,
    )  # fmt: skip
    return request


def _chosen(options: Mapping[str, Any], start_at: datetime | None) -> dict[str, Any]:
    """What the requester chose, for the audit (not what the bot looked up for the preview)."""
    chosen = {k: v for k, v in options.items() if k not in ("counts", "unhonoured")}
    if start_at is not None:
        chosen["at"] = start_at.isoformat()
    return chosen


async def link_retry(
    session: AsyncSession,
    request_id: str,
    *,
    retry_of: str,
    thread_ts: str | None,
    incident_id: str | None,
) -> None:
    """Record that a new request retries `retry_of`, lives in the thread `thread_ts` and
    belongs to the incident `incident_id` (as the request it retries did)."""
    stmt = (
        update(BackfillRequest)
        .where(BackfillRequest.id == request_id)
        .values(retry_of=retry_of, thread_ts=thread_ts, incident_id=incident_id)
        .execution_options(synchronize_session=False)
    )
    if await _affected(session, stmt) == 0:
        raise RequestNotFound(request_id)


async def open_retry(session: AsyncSession, request_id: str) -> BackfillRequest | None:
    """A retry of `request_id` that is still previewed, approved or running (the oldest)."""
    return await session.scalar(
        select(BackfillRequest)
        .where(
            BackfillRequest.retry_of == request_id,
            BackfillRequest.state.in_(OPEN),
        )
        .order_by(BackfillRequest.created_at, BackfillRequest.id)
        .limit(1)
        .execution_options(populate_existing=True)
    )


async def ids_starting(session: AsyncSession, prefix: str, *, limit: int = 2) -> list[str]:
    """Ids of requests that start with `prefix` (hex only: the caller checked it)."""
    return list(
        await session.scalars(
            select(BackfillRequest.id)
            .where(BackfillRequest.id.startswith(prefix, autoescape=True))
            .order_by(BackfillRequest.id)
            .limit(limit)
        )
    )


async def get_request(session: AsyncSession, request_id: str) -> BackfillRequest:
    """The request as the database has it now, with its steps ordered by position.

    Raises RequestNotFound.
    """
    stmt = (
        select(BackfillRequest)
        .where(BackfillRequest.id == request_id)
        .execution_options(populate_existing=True)
    )
    request = await session.scalar(stmt)
    if request is None:
        raise RequestNotFound(request_id)
    return request


async def request_state(session: AsyncSession, request_id: str | None) -> str | None:
    """A request's state (None for no request or one that is gone)."""
    if request_id is None:
        return None
    return await session.scalar(
        select(BackfillRequest.state).where(BackfillRequest.id == request_id)
    )


async def in_states(
    session: AsyncSession, states: Collection[str], *, limit: int
) -> list[BackfillRequest]:
    """Requests in one of `states`, newest first."""
    return list(
        await session.scalars(
            select(BackfillRequest)
            .where(BackfillRequest.state.in_(states))
            .order_by(BackfillRequest.created_at.desc())
            .limit(limit)
        )
    )


async def list_requests(
    session: AsyncSession,
    *,
    state: str | Collection[str] | None = None,
    requester: str | None = None,
    limit: int = 50,
) -> list[BackfillRequest]:
    """Requests, newest first, optionally only in `state` (one or several) or by `requester`."""
    stmt = select(BackfillRequest).execution_options(populate_existing=True)
    if state is not None:
        states = [state] if isinstance(state, str) else sorted(state)
        stmt = stmt.where(BackfillRequest.state.in_(states))
    if requester is not None:
        stmt = stmt.where(BackfillRequest.requester == requester)
    stmt = stmt.order_by(BackfillRequest.created_at.desc(), BackfillRequest.id).limit(limit)
    return list((await session.scalars(stmt)).all())


def _new_steps(raw_steps: Sequence[Any], now: datetime) -> list[BackfillStep]:
    """A plan's steps as pending rows, in plan order (ValueError for a step of the wrong
    shape)."""
    steps = []
    for position, raw in enumerate(raw_steps):
        where = f"plan step {position}"
        steps.append(
            BackfillStep(
                id=new_id(),
                position=position,
                dag_id=_required(raw, "dag_id", where),
                namespace=_required(raw, "namespace", where),
                intervals=_intervals(_required(raw, "intervals", where), where),
                upstream=list(raw.get("upstream", [])),
                state=StepState.PENDING.value,
                counts={},
                created_at=now,
                updated_at=now,
            )
        )
    return steps


async def change_options(
    session: AsyncSession,
    request_id: str,
    *,
    options: Mapping[str, Any],
    start_at: datetime | None,
    actor: str,
    plan: Mapping[str, Any] | None = None,
) -> BackfillRequest | None:
    """Replace a previewed request's options (and `--at`, and its plan and steps when an option
    changes what it reruns), clear the approvals given so far (they were for the old options)
    and audit `request.options_changed`; None when it is no longer previewed."""
    now = utcnow()
    replanned = {"plan": dict(plan)} if plan is not None else {}
    stmt = (
        update(BackfillRequest)
        .where(
            BackfillRequest.id == request_id,
            BackfillRequest.state == RequestState.PREVIEWED.value,
        )
        .values(
            options=dict(options),
            start_at=start_at,
            approvers=[],
            **replanned,
            version=BackfillRequest.version + 1,
            updated_at=now,
        )
        .execution_options(synchronize_session=False)
    )
    if await _affected(session, stmt) == 0:
        return None
    if plan is not None:  # still previewed: no step has started
        await session.execute(delete(BackfillStep).where(BackfillStep.request_id == request_id))
        for step in _new_steps(plan["steps"], now):
            step.request_id = request_id
            session.add(step)
        await session.flush()
    request = await get_request(session, request_id)
    await add_audit(
        session,
        actor=actor,
        action="request.options_changed",
        request_id=request_id,
        detail={"options": _chosen(options, start_at), "version": request.version},
        at=now,
    )
    return request


async def add_approval(session: AsyncSession, request_id: str, *, actor: str) -> BackfillRequest:
    """Record one approval of a previewed request that needs several (it stays previewed) and
    audit `request.approval_recorded`. Raises InvalidTransition when it is no longer previewed."""
    now = utcnow()
    stmt = (
        update(BackfillRequest)
        .where(
            BackfillRequest.id == request_id,
            BackfillRequest.state == RequestState.PREVIEWED.value,
        )
        .values(version=BackfillRequest.version + 1, updated_at=now)
        .execution_options(synchronize_session=False)
    )
    if await _affected(session, stmt) == 0:
        current = await session.scalar(
            select(BackfillRequest.state).where(BackfillRequest.id == request_id)
        )
        if current is None:
            raise RequestNotFound(request_id)
        raise InvalidTransition(
            "request",
            request_id,
            current=current,
            expected={RequestState.PREVIEWED.value},
            to=RequestState.PREVIEWED.value,
        )
    request = await get_request(session, request_id)
    if actor not in request.approvers:
        request.approvers = [*request.approvers, actor]  # the UPDATE above holds the row
    await add_audit(
        session,
        actor=actor,
        action="request.approval_recorded",
        request_id=request_id,
        detail={"version": request.version},
        at=now,
    )
    return request


async def transition_request(
    session: AsyncSession,
    request_id: str,
    *,
    expected: Collection[str],
    to: str,
    actor: str,
    detail: Mapping[str, Any] | None = None,
) -> BackfillRequest:
    """Move a request from one of `expected` to `to`, bump its version, and audit `request.<to>`.

    One conditional UPDATE decides, so of two racing transitions exactly one wins. Moving to
    `approved` also adds `actor` to the approvers. Raises ValueError if the state machine does not
    allow every `expected → to` (before touching the database), RequestNotFound, or
    InvalidTransition (carrying the current state) when the request is in none of `expected`.
    """
    _check_moves(REQUEST_TRANSITIONS, "request", expected, to)
    now = utcnow()
    stmt = (
        update(BackfillRequest)
        .where(BackfillRequest.id == request_id, BackfillRequest.state.in_(sorted(expected)))
        .values(state=to, version=BackfillRequest.version + 1, updated_at=now)
        .execution_options(synchronize_session=False)
    )
    if await _affected(session, stmt) == 0:
        current = await session.scalar(
            select(BackfillRequest.state).where(BackfillRequest.id == request_id)
        )
        if current is None:
            raise RequestNotFound(request_id)
        raise InvalidTransition("request", request_id, current=current, expected=expected, to=to)

    request = await get_request(session, request_id)
    if to == RequestState.APPROVED and actor not in request.approvers:
        # Safe read-modify-write: the UPDATE above holds the row (PostgreSQL) or the database
        # (SQLite) until the caller's transaction ends.
        request.approvers = [*request.approvers, actor]
    await add_audit(
        session,
        actor=actor,
        action=f"request.{to}",
        request_id=request_id,
        detail={"expected": sorted(expected), "version": request.version, **(detail or {})},
        at=now,
    )
    log_after_commit(
        session, logger, "backfill %s of %s is now %s (by %s)",
        request_id, request.root_dag, to, actor,
        request_id=request_id, dag_id=request.root_dag, state=to, actor=actor,
    )  # fmt: skip
    return request


async def set_status_message(
    session: AsyncSession, request_id: str, *, channel: str, ts: str
) -> BackfillRequest:
    """Remember where the request's status message was posted, so later updates edit it.

    Raises RequestNotFound.
    """
    stmt = (
        update(BackfillRequest)
        .where(BackfillRequest.id == request_id)
        .values(
            status_channel=channel,
            status_message_ts=ts,
            version=BackfillRequest.version + 1,
            updated_at=utcnow(),
        )
        .execution_options(synchronize_session=False)
    )
    if await _affected(session, stmt) == 0:
        raise RequestNotFound(request_id)
    return await get_request(session, request_id)


async def transition_step(
    session: AsyncSession,
    step_id: str,
    *,
    expected: Collection[str],
    to: str,
    actor: str = "system",
    executor: str | None = None,
    executor_handle: str | None = None,
    counts: Mapping[str, Any] | None = None,
    detail: Mapping[str, Any] | None = None,
) -> BackfillStep:
    """Move a step from one of `expected` to `to` and audit `step.<to>` against its request.

    Sets `started_at` on the first move to submitted/running and `finished_at` on a final state;
    `executor`, `executor_handle` and `counts` are written when given. Raises ValueError for a move
    the state machine does not allow, StepNotFound, or InvalidTransition (with the current state).
    """
    _check_moves(STEP_TRANSITIONS, "step", expected, to)
    now = utcnow()
    values: dict[str, Any] = {"state": to, "updated_at": now}
    if to in STEP_ACTIVE:
        values["started_at"] = func.coalesce(
            BackfillStep.started_at, literal(now, type_=UTCDateTime())
        )
    if to in STEP_FINAL:
        values["finished_at"] = now
    given = {
        "executor": executor,
        "executor_handle": executor_handle,
        "counts": None if counts is None else dict(counts),
    }
    values.update({key: value for key, value in given.items() if value is not None})
    stmt = (
        update(BackfillStep)
        .where(BackfillStep.id == step_id, BackfillStep.state.in_(sorted(expected)))
        .values(values)
        .execution_options(synchronize_session=False)
    )
    if await _affected(session, stmt) == 0:
        current = await session.scalar(select(BackfillStep.state).where(BackfillStep.id == step_id))
        if current is None:
            raise StepNotFound(step_id)
        raise InvalidTransition("step", step_id, current=current, expected=expected, to=to)

    step = await session.scalar(
        select(BackfillStep)
        .where(BackfillStep.id == step_id)
        .execution_options(populate_existing=True)
    )
    assert step is not None  # the UPDATE above just matched it
    await add_audit(
        session,
        actor=actor,
        action=f"step.{to}",
        request_id=step.request_id,
        detail={
            "step_id": step_id,
            "dag_id": step.dag_id,
            "position": step.position,
            "expected": sorted(expected),
            **(detail or {}),
        },
        at=now,
    )
    log_after_commit(
        session, logger, "step %s (%s) of backfill %s is now %s",
        step_id, step.dag_id, step.request_id, to,
        request_id=step.request_id, step_id=step_id, dag_id=step.dag_id, state=to, actor=actor,
    )  # fmt: skip
    return step


async def delete_request(session: AsyncSession, request_id: str) -> bool:
    """Delete a request; the database deletes its steps and unlinks its audit rows.

    Returns False when there was no such request.
    """
    stmt = delete(BackfillRequest).where(BackfillRequest.id == request_id)
    return await _affected(session, stmt.execution_options(synchronize_session=False)) > 0
