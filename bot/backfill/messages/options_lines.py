"""What a preview and a status message say of a request's options: the options in words, how
many runs each `--rerun` choice means, what the executor cannot honour, when it runs, the
reports' estimates, and the DAGs its assets trigger (raw text: the templates escape it)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from bot.backfill.rules.options import ASSET_CONSUMERS, RERUN_CHOICES, RerunCounts, RunOptions
from bot.backfill.rules.progress import duration_text
from bot.backfill.rules.status import ReportEstimate
from bot.core.windows import Window
from bot.slack.messages.limits import SECTION_TEXT
from bot.slack.messages.render import LIST, NAME, clip, join_clipped, plural

ESTIMATES = 5  # reports estimated (or assets listed) in one line before "and N more"


def when_text(moment: datetime | None) -> str:
    """A moment as the messages show it (UTC, to the minute); empty for none."""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC") if moment else ""


def estimates_line(estimates: Sequence[ReportEstimate], *, started: bool) -> str:
    """The reports downstream and when each is correct again: by when once the backfill runs,
    how long after its start before (raw text: the template escapes it)."""
    parts = []
    for estimate in estimates[:ESTIMATES]:
        name = clip(estimate.report, NAME)
        read = f"read at {when_text(estimate.read_at)}" if estimate.read_at else ""
        if estimate.ready is None:
            parts.append(f"{name} ({read or 'no ready_by'}): no run-time history to estimate from")
        elif started:
            late = " — late" if estimate.late else ""
            parts.append(f"{name} correct by about {when_text(estimate.ready)} ({read}{late})")
        else:
            takes = duration_text(estimate.takes)
            parts.append(f"{name} correct about {takes} after it starts ({read})")
    more = len(estimates) - ESTIMATES
    line = " · ".join(parts) + (f" · and {plural(more, 'more report')}" if more > 0 else "")
    return clip(line, SECTION_TEXT // 2) if parts else ""


def _runs_when(options: Mapping[str, Any], start_at: datetime | None) -> str:
    """When it runs: at its `--at`, within its off-peak window, or at once despite one."""
    parts = []
    if start_at is not None:
        parts.append(f"Starts at {when_text(start_at)} once approved.")
    window = Window.from_json(options.get("window"))
    if window is not None:
        parts.append(
            f"Runs only within its off-peak window ({window.described()}): outside it, it "
            "waits, and a running backfill pauses at its next run boundary."
        )
    elif options.get("now"):
        parts.append("`--now`: runs at once, regardless of its off-peak window.")
    return " ".join(parts)


def options_view(
    options: Mapping[str, Any] | None, start_at: datetime | None = None, *, dags: int = 1
) -> dict[str, Any] | None:
    """The preview's options lines: the options in words (with the reason), how many runs
    each `--rerun` choice means, what the executor cannot honour, and when it runs."""
    if not options:
        return None
    chosen = RunOptions.from_json(options)
    counts = RerunCounts.from_json(options.get("counts"))
    choices = ""
    if counts is not None and counts.known:
        picked = chosen.chosen_rerun
        parts = [
            f"{'*' if c == picked else ''}--rerun {c}: {plural(counts.of(c), 'run')}"
            f"{'*' if c == picked else ''}"
            for c in RERUN_CHOICES
        ]
        choices = "From the run history: " + " · ".join(parts)
    elif counts is not None:
        choices = "No run history to choose from: every interval runs again."
    unhonoured = [str(u) for u in options.get("unhonoured") or () if isinstance(u, str)]
    if chosen.chosen_rerun != "all" and dags > 1:
        unhonoured.append(
            f"--rerun {chosen.rerun} holds for every DAG of the plan: a downstream DAG whose "
            "run succeeded on the data being repaired is left alone (--rerun all reruns it)"
        )
    return {
        "described": join_clipped(list(chosen.described()), SECTION_TEXT // 4, sep=" · "),
        "reason": clip(chosen.reason, 300),
        "choices": choices,
        "unhonoured": clip(" ".join(f"{u[0].upper()}{u[1:]}." for u in unhonoured), 900),
        "when": clip(_runs_when(options, start_at), 600),
        "reports": "",  # the reports' estimates, when the caller gives the time
        "consumers": _consumers_text(options.get(ASSET_CONSUMERS), options.get("asset_triggered")),
    }


def _consumers_text(found: object, included: object = None) -> str:
    """The DAGs outside the plan that each rerun interval triggers through Airflow assets, or
    those the plan includes (raw text: the template escapes it)."""
    if isinstance(included, list) and included:
        return clip(
            f"{join_clipped([str(d) for d in included], LIST)} run once per interval here, "
            "after the DAGs whose assets they are scheduled on; Airflow also starts runs of "
            "them as the reruns update those assets (apache/airflow#33272).",
            SECTION_TEXT // 2,
        )
    if not isinstance(found, list):
        return ""
    by_asset: dict[tuple[str, str], list[str]] = {}
    for entry in found:
        if isinstance(entry, Mapping):
            key = (str(entry.get("dag", "")), str(entry.get("asset", "")))
            by_asset.setdefault(key, []).append(str(entry.get("consumer", "")))
    if not by_asset:
        return ""
    parts = [
        f"{clip(dag, NAME)} updates asset {clip(asset, NAME)}, which schedules "
        f"{join_clipped(consumers, LIST)}"
        for (dag, asset), consumers in list(by_asset.items())[:ESTIMATES]
    ]
    more = len(by_asset) - ESTIMATES
    listed = "; ".join(parts) + (f"; and {plural(more, 'more asset')}" if more > 0 else "")
    return clip(
        f"Airflow triggers DAGs outside this plan once for every interval it reruns "
        f"(apache/airflow#33272): {listed}. Add --with-asset-consumers (or tick it in Review "
        "plan) to rerun them in this plan, once per interval, or pause them while this runs.",
        SECTION_TEXT // 2,
    )
