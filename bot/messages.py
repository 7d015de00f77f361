"""Every Slack message and modal of the bot, as data ready for chat.postMessage / views.open.

Three pure steps per message (STYLE.md point 3): domain object → view model (counting and
truncation, here) → Jinja2 Block Kit template (layout and mrkdwn escaping, templates/backfill/ and
templates/common/) → Slack's limits (bot.slack_limits). Sending is the caller's business; messages
return `{"text", "blocks"}` whichever way they are posted (ephemeral or not), modals a `view`.

Truncation budgets below are measured in *escaped* characters, so a name full of `&` cannot push
a block over Slack's limits after the template escapes it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC
from typing import Any

from bot.domain.model import Interval
from bot.domain.planner import Plan, PlanStep
from bot.domain.progress import Counts
from bot.render import describe_intervals, environment
from bot.slack_ids import ActionId, BlockId, ViewCallbackId
from bot.slack_limits import (
    MESSAGE_BLOCKS,
    SECTION_TEXT,
    VIEW_BLOCKS,
    check_message,
    check_view,
)
from bot.store.models import RequestState, StepState

_ESCAPES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
# What a caller's sentence may keep unescaped: user, channel and user-group mentions, no links.
_MENTION = re.compile(r"<(?:@[UW][A-Z0-9]+|#C[A-Z0-9]+|!subteam\^[A-Z0-9]+)>")

NAME = 150  # a DAG id or namespace in a line
LIST = 300  # upstream DAGs, owners, excluded DAGs
SENTENCE = 2900  # a caller's sentence, one section with room for the icon
STATUS_ROWS = 20  # requests in /backfill status
_LISTED_RUNS = 3  # a step lists this many intervals, then summarises them

REQUEST_LOOK: Mapping[str, tuple[str, str]] = {
    RequestState.PREVIEWED: (":memo:", "Waiting for approval"),
    RequestState.APPROVED: (":white_check_mark:", "Approved"),
    RequestState.RUNNING: (":arrows_counterclockwise:", "Running"),
    RequestState.SUCCEEDED: (":large_green_circle:", "Succeeded"),
    RequestState.FAILED: (":red_circle:", "Failed"),
    RequestState.CANCELLED: (":no_entry_sign:", "Cancelled"),
    RequestState.REFUSED: (":no_entry:", "Refused"),
}
STEP_LOOK: Mapping[str, tuple[str, str]] = {
    StepState.PENDING: (":white_circle:", "pending"),
    StepState.SUBMITTED: (":hourglass:", "submitted"),
    StepState.RUNNING: (":arrows_counterclockwise:", "running"),
    StepState.SUCCEEDED: (":large_green_circle:", "succeeded"),
    StepState.FAILED: (":red_circle:", "failed"),
    StepState.SKIPPED: (":fast_forward:", "skipped"),
    StepState.CANCELLED: (":no_entry_sign:", "cancelled"),
}
# A truncated status shows the steps someone must look at first: failures, work under way, then
# what comes next; finished steps are only counted.
_STEP_URGENCY: Mapping[str, int] = {
    StepState.FAILED: 0,
    StepState.RUNNING: 1,
    StepState.SUBMITTED: 2,
    StepState.PENDING: 3,
}
_DONE_URGENCY = 4
# Blocks of the preview and the status message around their step rows; rows fill the rest.
_PREVIEW_FRAME, _STATUS_FRAME = 6, 5


def escape_mrkdwn(text: str) -> str:
    """Escape `&`, `<`, `>` so Slack shows the text as typed (no mentions, links or entities)."""
    return "".join(_ESCAPES.get(char, char) for char in text)


def escape_keeping_mentions(text: str) -> str:
    """Escape a sentence written by the bot, keeping its `<@U…>`, `<#C…>`, `<!subteam^S…>`."""
    parts: list[str] = []
    last = 0
    for match in _MENTION.finditer(text):
        parts += [escape_mrkdwn(text[last : match.start()]), match.group()]
        last = match.end()
    return "".join([*parts, escape_mrkdwn(text[last:])])


_env = environment()
_env.filters["mrkdwn"] = escape_mrkdwn
_env.filters["mrkdwn_mentions"] = escape_keeping_mentions


@dataclass(frozen=True)
class StepStatus:
    dag_id: str
    state: str
    runs: int
    counts: Counts | None = None
    note: str = ""


def _runs_progress(step: StepStatus) -> str:
    """`3 runs` before anything ran, then `3 runs: 1 queued · 1 running · 1 succeeded`."""
    text = plural(step.runs, "run")
    if step.counts is None or step.counts.total == 0:
        return text
    parts = [f"{n} {name}" for name, n in step.counts.to_json().items() if n]
    return f"{text}: {' · '.join(parts)}"


@dataclass(frozen=True)
class RequestStatus:
    """What the channel status message shows of one backfill request."""

    request_id: str
    root_dag: str
    range_text: str
    state: str
    requester: str
    approvers: tuple[str, ...]
    steps: tuple[StepStatus, ...]
    cancellable: bool


# --- view-model helpers -------------------------------------------------------------------


def clip(text: str, limit: int) -> str:
    """`text`, cut with "…" so that it is at most `limit` characters once escaped."""
    if len(escape_mrkdwn(text)) <= limit:
        return text
    kept: list[str] = []
    size = 1  # the ellipsis
    for char in text:
        size += len(_ESCAPES.get(char, char))
        if size > limit:
            break
        kept.append(char)
    return "".join(kept) + "…"


def join_clipped(names: Sequence[str], limit: int, *, sep: str = ", ") -> str:
    """`a, b, c`, or `a, b and 5 more` when the whole list is too long once escaped."""
    full = sep.join(names)
    if len(escape_mrkdwn(full)) <= limit:
        return full
    budget = limit - len(" and 99999 more")
    shown: list[str] = []
    for name in names:
        if len(escape_mrkdwn(sep.join([*shown, name]))) > budget:
            break
        shown.append(name)
    if not shown:
        shown = [clip(names[0], budget)]
    return f"{sep.join(shown)} and {len(names) - len(shown)} more"


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _runs_text(intervals: Sequence[Interval]) -> str:
    described = describe_intervals(tuple(intervals), limit=_LISTED_RUNS)
    # Past the limit describe_intervals says "N runs over …" itself.
    if not intervals or len(intervals) > _LISTED_RUNS:
        return described
    return f"{plural(len(intervals), 'run')}: {described}"


def _step_row(
    position: int, step: PlanStep, notes: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    note = (notes or {}).get(step.dag.dag_id)
    return {
        "note": clip(note.text, 300) if note else "",
        "blocking": bool(note and note.blocking),
        "position": position,
        "dag_id": clip(step.dag.dag_id, NAME),
        "namespace": clip(step.dag.namespace, NAME),
        "runs": clip(_runs_text(step.intervals), NAME),
        "after": join_clipped([u.dag_id for u in step.upstream], LIST),
        "owners": join_clipped(step.owners, LIST) or "none recorded",
    }


def _plan_summary(plan: Plan) -> dict[str, Any]:
    return {
        "root": clip(plan.root.dag_id, 100),
        "range": str(plan.date_range),
        "dags": plural(len(plan.steps), "DAG"),
        "runs": plural(plan.run_count, "run"),
        "only": plan.only,
        "excluded": join_clipped([d.dag_id for d in plan.excluded], LIST),
    }


def pack(lines: Sequence[str], *, limit: int, sections: int) -> tuple[list[str], int]:
    """Join lines into at most `sections` texts of at most `limit` characters each.

    Returns the texts and how many lines did not fit.
    """
    packed: list[str] = []
    current: list[str] = []
    size = 0
    for index, line in enumerate(lines):
        extra = len(line) + (1 if current else 0)
        if current and size + extra > limit:
            packed.append("\n".join(current))
            if len(packed) == sections:
                return packed, len(lines) - index
            current, size, extra = [], 0, len(line)
        current.append(line)
        size += extra
    if current:
        packed.append("\n".join(current))
    return packed, 0


def _request_look(state: str) -> tuple[str, str]:
    return REQUEST_LOOK.get(state, (":grey_question:", clip(state, 40)))


def _step_look(state: str) -> tuple[str, str]:
    return STEP_LOOK.get(state, (":grey_question:", clip(state, 40)))


def _mentions(user_ids: Sequence[str], limit: int = 10) -> dict[str, Any]:
    return {"users": [clip(u, 40) for u in user_ids[:limit]], "more": len(user_ids[limit:])}


def _status_view(status: RequestStatus, *, max_rows: int) -> dict[str, Any]:
    emoji, label = _request_look(status.state)
    ranked = sorted(
        range(len(status.steps)),
        key=lambda i: (_STEP_URGENCY.get(status.steps[i].state, _DONE_URGENCY), i),
    )
    rows = []
    for index in sorted(ranked[:max_rows]):
        step = status.steps[index]
        step_emoji, step_label = _step_look(step.state)
        rows.append(
            {
                "position": index + 1,
                "emoji": step_emoji,
                "dag_id": clip(step.dag_id, NAME),
                "state": step_label,
                "runs": _runs_progress(step),
                "note": clip(step.note, 300),
            }
        )
    counts: dict[str, int] = {}
    for step in status.steps:
        label_of = _step_look(step.state)[1]
        counts[label_of] = counts.get(label_of, 0) + 1
    hidden = len(status.steps) - len(rows)
    return {
        "request_id": status.request_id,  # the Cancel button's value: never cut
        "request_label": clip(status.request_id, 64),
        "root": clip(status.root_dag, NAME),
        "range": clip(status.range_text, 60),
        "emoji": emoji,
        "state": label,
        "requester": clip(status.requester, 40),
        "approvers": _mentions(status.approvers),
        "dags": plural(len(status.steps), "DAG"),
        "counts": join_clipped([f"{n} {name}" for name, n in counts.items()], LIST, sep=" · "),
        "done": counts.get(STEP_LOOK[StepState.SUCCEEDED][1], 0),
        "rows": rows,
        "more": plural(hidden, "more DAG") if hidden else "",
        "cancellable": status.cancellable,
    }


def _render(template: str, view: Mapping[str, Any]) -> dict[str, Any]:
    text = (
        environment()
        .get_template(template)
        .render(**view, ActionId=ActionId, BlockId=BlockId, ViewCallbackId=ViewCallbackId)
    )
    payload = json.loads(text)
    if not isinstance(payload, dict):
        raise TypeError(f"{template} must render a JSON object")
    return payload


def _message(template: str, view: Mapping[str, Any]) -> dict[str, Any]:
    payload = _render(template, view)
    check_message(payload)
    return payload


def _step_line(row: Mapping[str, Any]) -> str:
    """One plan step as the template writes it, for packing by rendered length."""
    macros = environment().get_template("backfill/macros.json.j2").module
    return str(macros.step_line(row))  # type: ignore[attr-defined]


# --- messages -----------------------------------------------------------------------------


def plan_preview(
    plan: Plan, *, request_id: str, requester: str, dry_run: bool, max_rows: int = 12
) -> dict[str, Any]:
    """The plan posted after `/backfill`: steps up to `max_rows`, then Approve and Cancel."""
    max_rows = min(max_rows, MESSAGE_BLOCKS - _PREVIEW_FRAME)
    notes = {n.dag_id: n for n in plan.notes}
    rows = [_step_row(i, s, notes) for i, s in enumerate(plan.steps[:max_rows], start=1)]
    hidden = len(plan.steps) - len(rows)
    view = {
        **_plan_summary(plan),
        "request_id": request_id,
        "requester": clip(requester, 40),
        "rows": rows,
        "more": plural(hidden, "more DAG") if hidden else "",
        "dry_run": dry_run,
        "blocked": plan.blocked,
        "blockers": join_clipped([n.dag_id for n in plan.notes if n.blocking], LIST),
        "lineage_as_of": (
            plan.lineage_as_of.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
            if plan.lineage_as_of
            else ""
        ),
    }
    return _message("backfill/plan_preview.json.j2", view)


def plan_modal(plan: Plan, *, request_id: str) -> dict[str, Any]:
    """The full plan in a modal: every step, several per section, within 100 blocks."""
    notes = {n.dag_id: n for n in plan.notes}
    lines = [_step_line(_step_row(i, s, notes)) for i, s in enumerate(plan.steps, start=1)]
    # One block for the summary and one for "… and N more" leave the rest for steps.
    sections, hidden = pack(lines, limit=SECTION_TEXT, sections=VIEW_BLOCKS - 2)
    view = {
        **_plan_summary(plan),
        "request_id": request_id,
        "sections": sections,
        "more": plural(hidden, "more DAG") if hidden else "",
    }
    payload = _render("backfill/plan_modal.json.j2", view)
    check_view(payload)
    return payload


def request_status(status: RequestStatus, *, max_rows: int = 12) -> dict[str, Any]:
    """The channel message that is the parent of a backfill's progress thread."""
    view = _status_view(status, max_rows=min(max_rows, MESSAGE_BLOCKS - _STATUS_FRAME))
    return _message("backfill/request_status.json.j2", view)


def status_list(
    statuses: Sequence[RequestStatus], *, max_rows: int = STATUS_ROWS
) -> dict[str, Any]:
    """Recent requests for `/backfill status` without an id, newest first as given."""
    rows = [_status_view(s, max_rows=0) for s in statuses[: min(max_rows, MESSAGE_BLOCKS - 2)]]
    hidden = len(statuses) - len(rows)
    view = {
        "rows": rows,
        "total": len(statuses),
        "more": plural(hidden, "more request") if hidden else "",
    }
    return _message("backfill/status_list.json.j2", view)


def help_message(command: str = "/backfill") -> dict[str, Any]:
    """Usage of every `/backfill` form, with examples."""
    return _message("backfill/help.json.j2", {"command": clip(command, 40)})


def _notice(icon: str, text: str, hint: str | None = None) -> dict[str, Any]:
    view = {
        "icon": icon,
        "text": clip(text, SENTENCE),
        "hint": clip(hint, SENTENCE) if hint else "",
    }
    return _message("common/notice.json.j2", view)


def refusal(reason: str, *, hint: str | None = None) -> dict[str, Any]:
    """Why the bot will not do what was asked, and (in `hint`) how to fix it. Post ephemerally."""
    return _notice(":no_entry:", reason, hint)


def action_result(text: str) -> dict[str, Any]:
    """Why a click changed nothing ("Already approved by <@U…>"). Post ephemerally."""
    return _notice(":information_source:", text)


def acknowledgement(text: str) -> dict[str, Any]:
    """The immediate answer to a slash command, before the slow work."""
    return _notice(":hourglass_flowing_sand:", text)
