"""The Review plan modal: the plan in short and a backfill's options as Block Kit inputs
(templates/backfill/options_modal.json.j2), and the reading of its submission back into
options, with one clear answer per bad value, keyed by the input it belongs to (Slack shows
each under its input: `response_action: errors`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from bot.backfill.messages.backfill import plan_summary, step_lines
from bot.backfill.rules.options import ASSET_CONSUMERS
from bot.core.run_options import (
    CONF_CHARS,
    MAX_ACTIVE,
    REASON_CHARS,
    RERUN_CHOICES,
    OptionError,
    RunOptions,
    parse_conf,
    parse_max_active,
    parse_reason,
    parse_rerun,
)
from bot.lineage.rules.planner import Plan
from bot.slack.messages.limits import SECTION_TEXT, VIEW_BLOCKS
from bot.slack.messages.render import pack, plural, render
from bot.slack.rules.ids import ActionId, OptionBlock

RERUN_LABELS: Mapping[str, str] = {
    "missing": "Missing: intervals with no run",
    "failed": "Failed and missing",
    "all": "All: every interval",
}
FLAG_LABELS = (
    ("backwards", "Newest interval first (--backwards)"),
    ("stop_on_failure", "Pause at the first failed run (--stop-on-failure)"),
    ("now", "Run now, even outside its off-peak window (--now)"),
    ("with_asset_consumers", "Include the DAGs its assets trigger (--with-asset-consumers)"),
)
_ASSET_FLAG = "with_asset_consumers"
"""Offered only when the preview found DAGs scheduled on the plan's assets (or they are in)."""
_INPUTS = 6
"""Blocks the modal spends on its options (the divider and the inputs)."""


@dataclass(frozen=True)
class Choices:
    """What someone chose in the modal (or typed after `/backfill`)."""

    options: RunOptions
    at: str | None = None
    now: bool = False


def options_modal(
    plan: Plan,
    *,
    metadata: Mapping[str, str],
    options: Mapping[str, Any] | None,
    start_at: datetime | None,
    default_rerun: str,
    submit: str,
) -> dict[str, Any]:
    """The modal, prefilled with `options` (a request's stored options; None: the defaults).
    `metadata` names what a submission acts on ({"request": id} or {"incident": id})."""
    chosen = RunOptions.from_json(options, default_rerun=default_rerun)  # type: ignore[arg-type]
    stored = dict(options or {})
    counts = stored.get("counts")
    hint = (
        "Missing and failed follow Airflow's reprocess behaviour; a run in flight is never redone."
    )
    if isinstance(counts, dict) and counts.get("known"):
        hint = (
            f"From the run history: missing {plural(int(counts['missing']), 'run')} · failed "
            f"{plural(int(counts['failed']), 'run')} · all {plural(int(counts['all']), 'run')}."
        )
    flags = [name for name, _ in FLAG_LABELS if getattr(chosen, name, False)]
    offered = [
        (name, label) for name, label in FLAG_LABELS
        if name != _ASSET_FLAG or chosen.with_asset_consumers or stored.get(ASSET_CONSUMERS)
    ]  # fmt: skip
    if stored.get("now"):
        flags.append("now")
    lines = step_lines(plan)
    room = VIEW_BLOCKS - 3 - _INPUTS
    sections, hidden = pack(lines, limit=SECTION_TEXT, sections=room)
    view = {
        **plan_summary(plan),
        "metadata": json.dumps(dict(metadata), separators=(",", ":")),
        "submit": submit,
        "sections": sections,
        "more": plural(hidden, "more DAG") if hidden else "",
        "rerun": chosen.chosen_rerun,
        "rerun_choices": RERUN_CHOICES,
        "rerun_labels": RERUN_LABELS,
        "hint_rerun": hint,
        "flag_labels": offered,
        "flags": flags,
        "max_active": chosen.max_active or "",
        "max_active_limit": MAX_ACTIVE,
        "conf": json.dumps(dict(chosen.conf), indent=1) if chosen.conf else "",
        "conf_limit": CONF_CHARS,
        "reason": chosen.reason,
        "reason_limit": REASON_CHARS,
        "at": start_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC") if start_at else "",
        "hint_at": "Approve now, start then (e.g. 2021-06-07 20:00, with a zone or in the "
        "bot's); empty: on approval.",
    }
    return render("backfill/options_modal.json.j2", view)


def _value(values: Mapping[str, Any], block: OptionBlock) -> Mapping[str, Any]:
    """One input's state; {} for anything not shaped as Slack sends it."""
    inputs = values.get(block) if isinstance(values, Mapping) else None
    found = inputs.get(ActionId.OPTION) if isinstance(inputs, Mapping) else None
    return found if isinstance(found, Mapping) else {}


def _text(values: Mapping[str, Any], block: OptionBlock) -> str:
    raw = _value(values, block).get("value")
    return raw.strip() if isinstance(raw, str) else ""


def read_form(values: Mapping[str, Any]) -> tuple[Choices | None, dict[str, str]]:
    """The choices of a submitted modal (`view.state.values`), or the errors to show, one per
    input, keyed by block id."""
    errors: dict[str, str] = {}

    def checked(block: OptionBlock, parse: Any, text: str) -> Any:
        try:
            return parse(text)
        except OptionError as exc:
            errors[block] = str(exc).replace("--rerun", "This").replace("--max-active", "This")
            return None

    selected = _value(values, OptionBlock.RERUN).get("selected_option") or {}
    rerun_text = selected.get("value") if isinstance(selected, Mapping) else None
    rerun = checked(
        OptionBlock.RERUN, parse_rerun, rerun_text if isinstance(rerun_text, str) else ""
    )
    picked = _value(values, OptionBlock.FLAGS).get("selected_options")
    flags = (
        {o.get("value") for o in picked if isinstance(o, Mapping)}
        if isinstance(picked, list)
        else set()
    )
    max_text = _text(values, OptionBlock.MAX_ACTIVE)
    max_active = checked(OptionBlock.MAX_ACTIVE, parse_max_active, max_text) if max_text else None
    conf_text = _text(values, OptionBlock.CONF)
    conf = checked(OptionBlock.CONF, parse_conf, conf_text) if conf_text else None
    reason_text = _text(values, OptionBlock.REASON)
    reason = checked(OptionBlock.REASON, parse_reason, reason_text) if reason_text else ""
    at = _text(values, OptionBlock.AT) or None
    if at and "now" in flags:
        errors[OptionBlock.AT] = "Leave this empty to run now, or untick “Run now”."
    if errors:
        return None, errors
    options = RunOptions(
        rerun=rerun,
        backwards="backwards" in flags,
        conf=conf,
        max_active=max_active,
        reason=reason or "",
        stop_on_failure="stop_on_failure" in flags,
        with_asset_consumers=_ASSET_FLAG in flags,
    )
    return Choices(options, at, "now" in flags), {}
