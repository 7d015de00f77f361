"""Messages of a running backfill: the status message rows (with run counts) and the thread
replies posted when DAGs start, finish or are skipped, ending with a summary with durations.

Replies gather everything one runner pass saw into one message, so a 50-DAG backfill posts a
few dozen replies, not hundreds; the status message is edited, never reposted.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from bot.domain.progress import Counts, duration_text
from bot.messages._render import NAME, clip, macros, pack, plural, render
from bot.messages.backfill import REQUEST_LOOK, STEP_LOOK, RequestStatus, StepStatus, request_status
from bot.slack_limits import MESSAGE_BLOCKS, SECTION_TEXT
from bot.store.models import BackfillRequest, RequestState, StepState

OPEN_STATES = {RequestState.PREVIEWED, RequestState.APPROVED, RequestState.RUNNING}
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


Event = Started | Finished | Skipped | Summary


def span(start: datetime | None, end: datetime | None) -> timedelta | None:
    return end - start if start and end else None


def status_of(request: BackfillRequest) -> RequestStatus:
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
                step.message or "",
            )
            for step in request.steps
        ),
        cancellable=request.state in OPEN_STATES,
    )


def status_payload(request: BackfillRequest) -> dict[str, Any]:
    """The status message as it should look now (sent with chat.update to its stored ts)."""
    return request_status(status_of(request))


def digest(payload: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def _macros() -> Any:
    return macros("backfill/progress_macros.json.j2")


def _clip(text: str | None, limit: int = NAME) -> str | None:
    return clip(text, limit) if text else text


def _event_lines(event: Event, request: BackfillRequest) -> list[str]:
    macros = _macros()
    if isinstance(event, Started):
        started = {
            "dag_id": _clip(event.dag_id),
            "runs": plural(event.runs, "run"),
            "url": event.url,
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
            "url": event.url,
        }
        return [str(macros.finished(view))]
    if isinstance(event, Skipped):
        return [
            str(macros.skipped({"dag_id": _clip(dag), "why": _clip(why, 300)}))
            for dag, why in event.steps
        ]
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


def thread_reply(request: BackfillRequest, events: Sequence[Event]) -> dict[str, Any]:
    """One reply in the backfill's thread with everything a runner pass saw, in order."""
    lines = [line for event in events for line in _event_lines(event, request)]
    sections, hidden = pack(lines, limit=SECTION_TEXT, sections=MESSAGE_BLOCKS - 1)
    fallback = clip(lines[0] if lines else "Backfill progress", 300)
    view = {
        "sections": sections,
        "more": plural(hidden, "more line") if hidden else "",
        "fallback": fallback,
    }
    return render("backfill/progress.json.j2", view)
