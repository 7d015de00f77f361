"""Messages of a running backfill: the status message rows (with run counts) and the thread
replies saying which DAGs started, finished or were skipped, ending with a summary with durations.

Lines are rendered when the runner sees what they tell (`event_lines`) and kept with the request
until it reports; `reply` then packs whatever gathered into one thread reply. So a long backfill
posts a reply per report, not per event (bot/backfill/rules/progress.py `report_due` says when); the
status message is edited, never reposted.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from bot.backfill.messages.backfill import REQUEST_LOOK, STEP_LOOK, request_status
from bot.backfill.rules.estimate import for_request
from bot.backfill.rules.options import RunOptions
from bot.backfill.rules.progress import Counts, duration_text
from bot.backfill.rules.states import OPEN, RequestState, StepState
from bot.backfill.rules.status import Hold, Queued, RequestStatus, StepStatus
from bot.backfill.rules.status import StoredRequest as BackfillRequest
from bot.backfill.rules.status import StoredStep as BackfillStep
from bot.slack.messages.limits import MESSAGE_BLOCKS, MESSAGE_TEXT, SECTION_TEXT
from bot.slack.messages.render import (
    NAME,
    clip,
    clip_mrkdwn,
    escape_code,
    link,
    macros,
    pack,
    plural,
    render,
)

_SUMMARY_ROWS = 60


@dataclass(frozen=True)
class Started:
    dag_id: str
    runs: int
    url: str | None = None


@dataclass(frozen=True)
class Finished:
    dag_id: str
    state: str
    counts: Counts
    took: timedelta | None
    message: str | None = None
    url: str | None = None


@dataclass(frozen=True)
class Skipped:
    steps: tuple[tuple[str, str], ...]
    """(dag id, why) pairs."""


@dataclass(frozen=True)
class Summary:
    state: str


@dataclass(frozen=True)
class Paused:
    by: str
    """A Slack user id, or `failure` / `window` when the bot paused it."""
    reason: str = ""
    until: datetime | None = None


@dataclass(frozen=True)
class Resumed:
    by: str
    """A Slack user id, `window` (its window opened) or `schedule` (its start time came)."""


@dataclass(frozen=True)
class Scheduled:
    until: datetime
    why: str
    """`--at`, or `off-peak window`."""


Event = Started | Finished | Skipped | Summary | Paused | Resumed | Scheduled


def span(start: datetime | None, end: datetime | None) -> timedelta | None:
    return end - start if start and end else None


def _note(step: BackfillStep) -> str:
    """What the status row says beside a step: the backend's message. A failed row always says
    why, so whoever decides on a retry need not dig through the thread."""
    if step.message or step.state != StepState.FAILED:
        return step.message or ""
    counts = Counts.from_json(step.counts)
    if counts.failed:
        return f"{counts.failed} of {plural(counts.total, 'run')} failed"
    return "the executor gave no reason"


def status_of(
    request: BackfillRequest,
    *,
    awaiting: tuple[str, ...] = (),
    queued: Queued | None = None,
    now: datetime | None = None,
) -> RequestStatus:
    """The status message's view of a stored request; `awaiting` names the teams whose approval
    is still needed (the approval service knows them)."""
    return RequestStatus(
        request_id=request.id,
        root_dag=request.root_dag,
        range_text=f"{request.start_date.isoformat()}..{request.end_date.isoformat()}",
        state=request.state,
        requester=request.requester,
        approvers=tuple(request.approvers),
        steps=tuple(
            StepStatus(
                step.dag_id,
                step.state,
                len(step.intervals),
                Counts.from_json(step.counts) if step.counts else None,
                _note(step),
            )
            for step in request.steps
        ),
        cancellable=request.state in OPEN,
        awaiting=awaiting,
        options=RunOptions.from_json(request.options).described() if request.options else (),
        reason=str((request.options or {}).get("reason") or ""),
        hold=_hold(request),
        queued=queued if request.state == RequestState.RUNNING else None,
        estimates=tuple(for_request(request, now))
        if now is not None and request.state in OPEN
        else (),
    )


def _hold(request: BackfillRequest) -> Hold | None:
    if request.state == RequestState.PAUSED:
        return Hold(request.paused_by, request.paused_at, request.pause_reason or "",
                    request.resume_at)  # fmt: skip
    if request.state == RequestState.SCHEDULED:
        return Hold(None, None, request.pause_reason or "", request.resume_at)
    return None


def status_payload(
    request: BackfillRequest, *, queued: Queued | None = None, now: datetime | None = None
) -> dict[str, Any]:
    """The status message as it should look now (sent with chat.update to its stored ts);
    `now` dates the reports' estimates."""
    return request_status(status_of(request, queued=queued, now=now))


def digest(payload: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def _macros() -> Any:
    return macros("backfill/progress_macros.json.j2")


def _clip(text: str | None, limit: int = NAME) -> str | None:
    return clip(text, limit) if text else text


def _lines_of(event: Event, request: BackfillRequest) -> list[str]:
    macros = _macros()
    if isinstance(event, Started):
        started = {
            "dag_id": _clip(event.dag_id),
            "runs": plural(event.runs, "run"),
            "link": link(event.url, "Airflow"),
        }
        return [str(macros.started(started))]
    if isinstance(event, Finished):
        emoji, label = STEP_LOOK[StepState(event.state)]
        view: dict[str, Any] = {
            "emoji": emoji,
            "state": label,
            "dag_id": _clip(event.dag_id),
            "took": duration_text(event.took),
            "counts": event.counts,
            "message": _clip(event.message, 500),
            "link": link(event.url, "Airflow"),
        }
        return [str(macros.finished(view))]
    if isinstance(event, Skipped):
        return [
            str(macros.skipped({"dag_id": _clip(dag), "why": _clip(why, 300)}))
            for dag, why in event.steps
        ]
    if isinstance(event, Paused):
        until = event.until.strftime("%Y-%m-%d %H:%M UTC") if event.until else ""
        view = {"by": event.by, "reason": _clip(event.reason, 300), "until": until}
        return [str(macros.paused(view))]
    if isinstance(event, Resumed):
        return [str(macros.resumed({"by": event.by}))]
    if isinstance(event, Scheduled):
        until = event.until.strftime("%Y-%m-%d %H:%M UTC")
        return [str(macros.scheduled({"until": until, "why": _clip(event.why, 100)}))]
    return _summary_lines(event, request)


def _summary_lines(event: Summary, request: BackfillRequest) -> list[str]:
    macros = _macros()
    emoji, label = REQUEST_LOOK[RequestState(event.state)]
    tally: dict[str, int] = {}
    runs = 0
    for step in request.steps:
        tally[step.state] = tally.get(step.state, 0) + 1
        runs += Counts.from_json(step.counts).succeeded
    parts = [f"{n} {state}" for state, n in tally.items()]
    head = {
        "emoji": emoji,
        "state": label.lower(),
        "took": duration_text(span(request.started_at, request.finished_at)),
        "tally": f"{plural(len(request.steps), 'DAG')} ({', '.join(parts)}), "
        f"{plural(runs, 'run')} succeeded",
    }
    lines = [str(macros.summary(head))]
    for step in request.steps[:_SUMMARY_ROWS]:
        step_emoji, step_label = STEP_LOOK[StepState(step.state)]
        row = {
            "emoji": step_emoji,
            "dag_id": _clip(step.dag_id),
            "state": step_label,
            "took": duration_text(span(step.started_at, step.finished_at)),
        }
        lines.append(str(macros.summary_row(row)))
    if len(request.steps) > _SUMMARY_ROWS:
        lines.append(f"… and {len(request.steps) - _SUMMARY_ROWS} more DAGs")
    return lines


def event_lines(request: BackfillRequest, events: Sequence[Event]) -> list[str]:
    """The thread lines telling `events`, in order, as they will appear in a reply. They are
    final text: kept with the request (`pending_lines`) until `reply` posts them."""
    return [line for event in events for line in _lines_of(event, request)]


_FAILED_MARK = f"{STEP_LOOK[StepState.FAILED][0]} `"
"""How a line about a failed DAG begins (progress_macros.finished with the failed emoji)."""


_STOPPED_MARK = ":double_vertical_bar: *Paused at a failed run*"
"""How the line saying `--stop-on-failure` paused a backfill begins (progress_macros.paused)."""


def tells_failure(lines: Sequence[str]) -> bool:
    """Whether any of these lines says a DAG failed (or a failed run paused the backfill):
    such news may be posted sooner."""
    return any(line.startswith((_FAILED_MARK, _STOPPED_MARK)) for line in lines)


def reply(lines: Sequence[str]) -> dict[str, Any]:
    """One reply in the backfill's thread carrying `lines`, packed into sections; what does not
    fit in one message is counted ("… and N more lines")."""
    sections, hidden = pack(lines, limit=SECTION_TEXT, sections=MESSAGE_BLOCKS - 1)
    # The lines are mrkdwn already (escaped when rendered): cut where no link breaks.
    fallback = clip_mrkdwn(lines[0], 300) if lines else "Backfill progress"
    view = {
        "sections": sections,
        "more": plural(hidden, "more line") if hidden else "",
        "fallback": fallback,
    }
    return render("backfill/progress.json.j2", view)


def thread_reply(request: BackfillRequest, events: Sequence[Event]) -> dict[str, Any]:
    """One reply telling `events` at once (`reply` of their `event_lines`)."""
    return reply(event_lines(request, events))


def run_by_hand(commands: Sequence[str]) -> list[dict[str, Any]]:
    """The thread replies of a backfill no executor runs (BOT_EXECUTOR=manual): the Airflow
    commands to run by hand, in order. Every command whole (a clipped one would run something
    else), so a plan too long for one message is told over as many replies as it needs."""
    intro = (
        "This bot runs no backfills itself (BOT_EXECUTOR=manual; set AIRFLOW_URL to run them "
        "on Airflow). "
        "Run these in order, each after the previous one finished:"
    )
    # escape_code: a backtick or `<@U…>` in a DAG id must neither end the code span nor ping
    lines = [f"{i}. `{escape_code(command)}`" for i, command in enumerate(commands, 1)]
    replies: list[list[str]] = [[intro]]
    size = len(intro)
    for line in lines:
        if size + 1 + len(line) > MESSAGE_TEXT:
            replies.append([])
            size = -1
        replies[-1].append(line)
        size += 1 + len(line)
    return [{"text": "\n".join(reply)} for reply in replies]
