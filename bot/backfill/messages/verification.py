"""What a backfill's verification and the restatement ledger say: the thread reply when a
backfill's reruns are verified, the one notice to each team owning a report it restated, and
the answer to `/backfill history` (templates/backfill/verified.json.j2, restated_notice.json.j2,
history.json.j2)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from bot.backfill.messages.notices import thread_url
from bot.backfill.rules.restated import ReportRestated, Verification
from bot.quality.messages import amount, rewrite_line
from bot.quality.rules.verify import Verdict, Why
from bot.slack.messages.render import (
    NAME,
    Mrkdwn,
    channel_mention,
    clip,
    clip_mrkdwn,
    code,
    link,
    pack,
    plural,
    render,
    sentence,
    user_mention,
)

__all__ = ["Restated", "history", "restated_notice", "verified"]

_WRONG = 10  # reruns that still look wrong named in one reply
_REPORTS = 10  # reports named in one notice
_DAYS = 8  # separate day ranges named before "and N more"
_SECTION = 2900
_REQUESTS = 10  # backfills one history answer shows
_LINE = 1400  # characters of one line, escaped
_NAMED = 8  # DAGs named in one line before "and N more"


def day_ranges(days: Sequence[date]) -> str:
    """`2021-06-04 to 2021-06-06, 2021-06-09`: consecutive days as one range."""
    runs: list[tuple[date, date]] = []
    for day in sorted(set(days)):
        if runs and day - runs[-1][1] == timedelta(days=1):
            runs[-1] = (runs[-1][0], day)
        else:
            runs.append((day, day))
    shown = [a.isoformat() if a == b else f"{a.isoformat()} to {b.isoformat()}" for a, b in runs]
    more = len(shown) - _DAYS
    return ", ".join(shown[:_DAYS]) + (f" and {more} more" if more > 0 else "")


def _minutes(seconds: int) -> str:
    return plural(max(1, round(seconds / 60)), "minute")


def _clipped(lines: Sequence[str]) -> list[str]:
    """Each line short enough for a section of its own (names from outside run long)."""
    return [clip_mrkdwn(line, _LINE) for line in lines]


def _names(dags: Sequence[str]) -> Mrkdwn:
    shown = ", ".join(code(d, NAME) for d in dags[:_NAMED])
    more = len(dags) - _NAMED
    return Mrkdwn(shown + (f" and {more} more" if more > 0 else ""))


def _verdict(summary: Verification) -> Mrkdwn:
    """The verification in one sentence, for those who read the report, not the thread."""
    parts = []
    if summary.right:
        parts.append(sentence("{} verified", plural(summary.right, "rerun")))
    if summary.wrong:
        parts.append(sentence("{} still look wrong", plural(len(summary.wrong), "rerun")))
    if summary.unknown_runs:
        parts.append(sentence("{} could not be verified", plural(summary.unknown_runs, "rerun")))
    return Mrkdwn("; ".join(parts) + ".") if parts else sentence("Nothing to verify.")


def _report_line(report: ReportRestated) -> Mrkdwn:
    line = sentence("*{}*: {}", clip(report.report, NAME), day_ranges(report.dates))
    if report.wrong:
        line = sentence("{} (still looks wrong: {})", line, day_ranges(report.wrong))
    return line


def verified(
    request_id: str,
    root_dag: str,
    summary: Verification,
    reports: Sequence[ReportRestated],
    *,
    within_s: int,
) -> dict[str, Any]:
    """The backfill thread's reply once its reruns' statistics are in (or waited for)."""
    lines: list[str] = []
    if summary.wrong:
        head = sentence(
            ":warning: Verified {} of {}; {} still look{} wrong:",
            summary.right, plural(summary.runs, "rerun"), plural(len(summary.wrong), "run"),
            "s" if len(summary.wrong) == 1 else "",
        )  # fmt: skip
        for rewrites in summary.wrong[:_WRONG]:
            lines += [f"• {rewrite_line(r)}" for r in rewrites[:3]]
        if len(summary.wrong) > _WRONG:
            lines.append(f"• and {len(summary.wrong) - _WRONG} more")
    elif summary.right:
        head = sentence(
            ":white_check_mark: Verified: {} wrote rows in the usual range.",
            plural(summary.right, "run"),
        )
    else:
        head = sentence(":grey_question: Could not verify this backfill's reruns.")
    for why, dags in summary.unknown.items():
        count = len(dags)
        names = _names(dags)
        if why == Why.NOT_ARRIVED:
            said = sentence(
                "Could not verify reruns of {} DAG{}: no statistics arrived within {} ({}).",
                count, "" if count == 1 else "s", _minutes(within_s), names,
            )  # fmt: skip
        else:
            said = sentence(
                "Could not verify reruns of {} DAG{}: no statistics from that producer ({}).",
                count, "" if count == 1 else "s", names,
            )  # fmt: skip
        lines.append(f":grey_question: {said}")
    if reports:
        shown = "; ".join(_report_line(r) for r in reports[:_REPORTS])
        more = f" and {len(reports) - _REPORTS} more" if len(reports) > _REPORTS else ""
        lines.append(f":memo: Reports restated: {shown}{more}")
    sections, _ = pack(_clipped(lines), limit=_SECTION, sections=4)
    where = sentence(
        "What it rewrote, before and after: {}", code(f"/backfill history {root_dag}", 300)
    )
    return render(
        "backfill/verified.json.j2",
        {"head": head, "sections": [Mrkdwn(s) for s in sections], "where": where,
         "request_label": request_id[:8]},
    )  # fmt: skip


def restated_notice(
    request_id: str,
    root_dag: str,
    reports: Sequence[ReportRestated],
    *,
    channel: str,
    thread_ts: str | None,
    reason: str,
    summary: Verification,
) -> dict[str, Any]:
    """To a team owning reports downstream, once per backfill: the dates of each report the
    backfill rewrote, and whether the rewrite was verified."""
    head = sentence(
        ":memo: Backfill {} of {} restated data your report{} read{}:",
        code(request_id[:8]), code(root_dag, NAME), "s" if len(reports) != 1 else "",
        "" if len(reports) != 1 else "s",
    )  # fmt: skip
    lines = [f"• {_report_line(r)}" for r in reports[:_REPORTS]]
    if len(reports) > _REPORTS:
        lines.append(f"• and {len(reports) - _REPORTS} more")
    lines.append(_verdict(summary))
    if reason:
        lines.append(sentence("Why: _{}_", clip(reason, 300)))
    sections, _ = pack(_clipped(lines), limit=_SECTION, sections=3)
    where = sentence(
        "Details in {}{} · {}",
        channel_mention(channel) if channel else "the backfill's channel",
        sentence(" ({})", link(thread_url(channel, thread_ts), "thread")) if thread_ts else "",
        code(f"/backfill history {root_dag}", 300),
    )
    return render(
        "backfill/restated_notice.json.j2",
        {"head": head, "sections": [Mrkdwn(s) for s in sections], "where": Mrkdwn(where)},
    )


@dataclass(frozen=True)
class Restated:
    """One ledger row, as history shows it."""

    request_id: str
    dag_id: str
    day: date
    dataset: str | None
    before: int | None
    after: int | None
    unit: str
    verdict: str
    why: str | None
    at: datetime
    reason: str | None
    incident_id: str | None
    approved_by: str | None
    dag_namespace: str = ""


_MARK = {Verdict.RIGHT.value: ":white_check_mark:", Verdict.WRONG.value: ":warning:"}


def _change(row: Restated) -> str:
    if row.dataset is None:
        return "no statistics"
    if row.after is None:
        return "no statistics arrived"
    after = amount(row.after, row.unit)
    if row.before is None:
        return after
    return f"{amount(row.before, row.unit)} → {after}"


def history(subject: str, rows: Sequence[Restated], *, more: bool) -> dict[str, Any]:
    """`/backfill history SUBJECT`: each backfill that restated it, newest first, with what
    it rewrote."""
    by_request: dict[str, list[Restated]] = {}
    for row in rows:
        by_request.setdefault(row.request_id, []).append(row)
    if not by_request:
        head = sentence("No backfill has restated {} yet.", code(subject, NAME))
        return render("backfill/history.json.j2", {"head": head, "sections": [], "more": False})
    head = sentence(
        "Backfills that restated {}, newest first ({}):",
        code(subject, NAME), plural(len(by_request), "backfill"),
    )  # fmt: skip
    lines: list[str] = []
    for request_id, found in list(by_request.items())[:_REQUESTS]:
        first = found[0]
        why = first.reason or (f"incident {first.incident_id[:8]}" if first.incident_id else "")
        approved = (
            sentence(", approved by {}", user_mention(first.approved_by))
            if first.approved_by
            else ""
        )
        because = sentence(" · why: _{}_", clip(why, 200)) if why else ""
        when = first.at.strftime("%Y-%m-%d %H:%M UTC")
        label = code(request_id[:8])
        lines.append(sentence("*{}* · backfill {}{}{}", when, label, approved, because))
        for row in found[:12]:
            mark = _MARK.get(row.verdict, ":grey_question:")
            dataset = sentence(" {}", code(row.dataset, NAME)) if row.dataset else ""
            line = sentence(
                "{} {} {}{}: {}", Mrkdwn(mark), code(row.dag_id, NAME), row.day.isoformat(),
                dataset, _change(row),
            )  # fmt: skip
            lines.append(line)
        if len(found) > 12:
            lines.append(f"… and {len(found) - 12} more")
    sections, _ = pack(_clipped(lines), limit=_SECTION, sections=8)
    return render(
        "backfill/history.json.j2",
        {"head": head, "sections": [Mrkdwn(s) for s in sections],
         "more": more or len(by_request) > _REQUESTS},
    )  # fmt: skip
