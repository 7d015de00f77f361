"""Messages of `/backfill`: the plan preview and its modal, the status message a backfill's
progress thread hangs off, the list of recent requests, the help, and why someone may not act
on a request. Layout in templates/backfill/."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from bot.backfill.messages.options_lines import estimates_line, options_view, when_text
from bot.backfill.rules.estimate import for_plan
from bot.backfill.rules.options import (
    with_option_notes,
)
from bot.backfill.rules.states import RequestState, StepState
from bot.backfill.rules.status import RequestStatus, StepStatus
from bot.core.model import Interval
from bot.lineage.rules.planner import Plan, PlanStep
from bot.slack.messages.limits import MESSAGE_BLOCKS, SECTION_TEXT, VIEW_BLOCKS
from bot.slack.messages.render import (
    LIST,
    NAME,
    clip,
    describe_intervals,
    join_clipped,
    macros,
    pack,
    plural,
    render,
)

STATUS_ROWS = 20  # requests in /backfill status
_LISTED_RUNS = 3  # a step lists this many intervals, then summarises them
_HELD = 3  # limits named on the queue line (the bot's, the team's, a pool: all there usually are)

REQUEST_LOOK: Mapping[str, tuple[str, str]] = {
    RequestState.PREVIEWED: (":memo:", "Waiting for approval"),
    RequestState.APPROVED: (":white_check_mark:", "Approved"),
    RequestState.SCHEDULED: (":calendar:", "Scheduled"),
    RequestState.RUNNING: (":arrows_counterclockwise:", "Running"),
    RequestState.PAUSED: (":double_vertical_bar:", "Paused"),
    RequestState.SUCCEEDED: (":large_green_circle:", "Succeeded"),
    RequestState.FAILED: (":red_circle:", "Failed"),
    RequestState.CANCELLED: (":no_entry_sign:", "Cancelled"),
    RequestState.REFUSED: (":no_entry:", "Refused"),
}
QUEUED_LOOK = (":hourglass_flowing_sand:", "Queued")
"""A running request none of whose DAGs has started: it waits for the budget."""
IN_ALERT: Mapping[str, str] = {
    RequestState.PREVIEWED: "waiting for approval (see the thread)",
    RequestState.APPROVED: "approved",
    RequestState.SCHEDULED: "scheduled (it starts by itself; see the thread)",
    RequestState.RUNNING: "running (progress in the thread)",
    RequestState.PAUSED: "paused (see the thread)",
    RequestState.SUCCEEDED: "succeeded",
    RequestState.FAILED: "failed (Retry is in the thread)",
    RequestState.CANCELLED: "cancelled",
}
"""How an alert names the state of the backfill started from it."""
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
# Blocks of the preview and the status message around their step rows; rows fill the rest
# (one more for each optional line: whose approval is awaited, which backfill a plan retries).
_PREVIEW_FRAME, _STATUS_FRAME = 6, 5


def _runs_progress(step: StepStatus) -> str:
    """`3 runs` before anything ran, then `3 runs: 1 queued · 1 running · 1 succeeded`."""
    text = plural(step.runs, "run")
    if step.counts is None or step.counts.total == 0:
        return text
    parts = [f"{n} {name}" for name, n in step.counts.to_json().items() if n]
    return f"{text}: {' · '.join(parts)}"


# --- view-model helpers -------------------------------------------------------------------


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


def plan_summary(plan: Plan) -> Mapping[str, Any]:
    """The plan's headline values for the preview and the modals."""
    return {
        "root": clip(plan.root.dag_id, 100),
        "range": str(plan.date_range),
        "dags": plural(len(plan.steps), "DAG"),
        "runs": plural(plan.run_count, "run"),
        "only": plan.only,
        "excluded": join_clipped([d.dag_id for d in plan.excluded], LIST),
    }


def _request_look(state: str) -> tuple[str, str]:
    return REQUEST_LOOK.get(state, (":grey_question:", clip(state, 40)))


def _step_look(state: str) -> tuple[str, str]:
    return STEP_LOOK.get(state, (":grey_question:", clip(state, 40)))


def _mentions(user_ids: Sequence[str], limit: int = 10) -> dict[str, Any]:
    return {"users": [clip(u, 40) for u in user_ids[:limit]], "more": len(user_ids[limit:])}


def _awaiting(teams: Sequence[str], limit: int = 8) -> dict[str, Any]:
    """Teams still to approve, for the "Waiting for approval from …" line (a long list is cut
    and counted: the line must stay one short context element)."""
    return {"teams": [clip(t, 80) for t in teams[:limit]], "more": len(teams[limit:])}


def _hold_view(status: RequestStatus) -> dict[str, Any] | None:
    """The paused (or scheduled) line's parts: who, when, why, until when, what is left."""
    hold = status.hold
    if hold is None:
        return None
    dags, runs = status.still_to_run
    return {
        "scheduled": status.state == RequestState.SCHEDULED,
        "by": clip(hold.by or "", 40),
        "person": bool(hold.by) and hold.by not in ("failure", "window"),
        "at": when_text(hold.at),
        "reason": clip(hold.reason, 300),
        "until": when_text(hold.until),
        "left": f"{plural(dags, 'DAG')}, {plural(runs, 'run')}",
    }


def ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _queue_view(status: RequestStatus) -> dict[str, Any] | None:
    """The queue line's parts: its place, how many of its DAGs wait, and for what."""
    queued = status.queued
    if queued is None:
        return None
    held = [
        {"kind": h.kind, "name": clip(h.name, NAME), "used": h.used, "cap": h.cap}
        for h in queued.held[:_HELD]
    ]
    return {
        "position": ordinal(queued.position),
        "of": queued.of,
        "idle": queued.idle,
        "dags": plural(queued.steps, "DAG"),
        "held": held,
    }


def _status_view(status: RequestStatus, *, max_rows: int) -> dict[str, Any]:
    emoji, label = _request_look(status.state)
    if status.queued is not None and status.queued.idle:
        emoji, label = QUEUED_LOOK
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
        "pausable": status.state == RequestState.RUNNING,
        "resumable": status.state == RequestState.PAUSED
        and (status.hold is None or status.hold.by != "window"),
        "hold": _hold_view(status),
        "queue": _queue_view(status),
        "reports": estimates_line(
            status.estimates,
            started=any(s.state not in (StepState.PENDING,) for s in status.steps)
            and not (status.queued is not None and status.queued.idle),
        ),
        "options": join_clipped(list(status.options), SECTION_TEXT // 4, sep=" · "),
        "reason": clip(status.reason, 300),
        # What did not succeed can be run again (bot/backfill/service/retry.py).
        "retryable": status.state == RequestState.FAILED,
        "awaiting": _awaiting(status.awaiting),
    }


def step_lines(plan: Plan) -> list[str]:
    """Every step of the plan as the modals list them (mrkdwn, escaped)."""
    notes = {n.dag_id: n for n in plan.notes}
    return [_step_line(_step_row(i, s, notes)) for i, s in enumerate(plan.steps, start=1)]


def _step_line(row: Mapping[str, Any]) -> str:
    """One plan step as the template writes it, for packing by rendered length."""
    return str(macros("backfill/macros.json.j2").step_line(row))


# --- messages -----------------------------------------------------------------------------


def plan_preview(
    plan: Plan,
    *,
    request_id: str,
    requester: str,
    dry_run: bool,
    max_rows: int = 12,
    awaiting: tuple[str, ...] = (),
    retry_of: str = "",
    options: Mapping[str, Any] | None = None,
    start_at: datetime | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """The plan posted after `/backfill`: steps up to `max_rows`, then Approve and Cancel;
    `awaiting` names the teams whose approval is still needed, `retry_of` the failed backfill
    this plan runs again, `options` what the request stores of its options (the options
    chosen, the runs each `--rerun` choice means, what the executor cannot honour, its off-peak
    window), `start_at` its `--at`; `now` dates the reports' next reading (their estimates)."""
    plan = with_option_notes(plan, options)
    chosen = options_view(options, start_at, dags=len(plan.steps))
    if chosen is not None and options and now is not None:
        chosen["reports"] = estimates_line(for_plan(plan, options, now), started=False)
    frame = _PREVIEW_FRAME + bool(awaiting) + bool(retry_of) + 4 * bool(chosen)
    max_rows = min(max_rows, MESSAGE_BLOCKS - frame)
    notes = {n.dag_id: n for n in plan.notes}
    rows = [_step_row(i, s, notes) for i, s in enumerate(plan.steps[:max_rows], start=1)]
    hidden = len(plan.steps) - len(rows)
    view = {
        **plan_summary(plan),
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
        "awaiting": _awaiting(awaiting),
        "retry_of": retry_of,  # a request id: never cut
        "loading": loading_line(plan),
        "chosen": chosen,
    }
    return render("backfill/plan_preview.json.j2", view)


def loading_line(plan: Plan) -> str:
    """What a plan made while the lineage index was loading came from ("" otherwise)."""
    loading = plan.lineage_loading
    if loading is None:
        return ""
    of = f" of {loading.jobs_total:,}" if loading.jobs_total is not None else ""
    text = (
        f"The bot's lineage index is still loading ({loading.jobs_read:,}{of} Marquez jobs "
        f"read), so this plan also asked Marquez what is downstream of {plan.root.dag_id} "
        f"just now ({plural(loading.fetched_dags, 'DAG')})."
    )
    if not loading.complete:
        text += (
            " Marquez's answer was cut at the bot's bound, so DAGs further downstream may be "
            "missing: ask again once the index has loaded."
        )
    return text


def plan_modal(plan: Plan, *, request_id: str) -> dict[str, Any]:
    """The full plan in a modal: every step, several per section, within 100 blocks."""
    lines = step_lines(plan)
    # One block for the summary and one for "… and N more" leave the rest for steps.
    sections, hidden = pack(lines, limit=SECTION_TEXT, sections=VIEW_BLOCKS - 2)
    view = {
        **plan_summary(plan),
        "request_id": request_id,
        "sections": sections,
        "more": plural(hidden, "more DAG") if hidden else "",
    }
    return render("backfill/plan_modal.json.j2", view)


def request_status(status: RequestStatus, *, max_rows: int = 12) -> dict[str, Any]:
    """The channel message that is the parent of a backfill's progress thread."""
    frame = _STATUS_FRAME + bool(status.awaiting) + bool(status.queued) + bool(status.estimates)
    view = _status_view(status, max_rows=min(max_rows, MESSAGE_BLOCKS - frame))
    return render("backfill/request_status.json.j2", view)


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
    return render("backfill/status_list.json.j2", view)


def help_message(command: str = "/backfill") -> dict[str, Any]:
    """Usage of every `/backfill` form, with examples."""
    return render("backfill/help.json.j2", {"command": clip(command, 40)})


def _id_shaped(value: str) -> bool:
    """Whether an id someone gave can be shown as typed: letters, digits, `-`, `_`, `.` only."""
    return 0 < len(value) <= 64 and all(c.isascii() and (c.isalnum() or c in "-_.") for c in value)


def unknown_backfill(given: str, *, prefix: bool = False) -> str:
    """The answer to an id that names no backfill the asker may see from where they asked: the
    same whether no backfill has it or one lives in another channel, so it reveals nothing. An
    id that is not id-shaped (a forged click) is not repeated."""
    if not _id_shaped(given):
        return "No backfill has the id you gave."
    if prefix:
        return f"No backfill id starts with {given}."
    return f"Backfill {given} does not exist."
