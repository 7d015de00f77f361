"""Notices to the teams whose DAGs a backfill reruns: one when it is approved, one when it
ends (templates/backfill/team_notice.json.j2). Each is a message in the team's own channel."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from bot.backfill.messages.backfill import REQUEST_LOOK
from bot.backfill.messages.options_lines import estimates_line
from bot.backfill.rules.states import RequestState
from bot.backfill.rules.status import ReportEstimate
from bot.slack.messages.render import NAME, clip, link, plural, render

_ROWS = 15  # DAGs named in one notice before "and N more"


@dataclass(frozen=True)
class TeamRerun:
    request_id: str
    root_dag: str
    range_text: str
    dags: Sequence[tuple[str, int]]
    """(DAG id, runs) of this team's DAGs in the backfill."""
    channel: str
    """Where the backfill reports (its status message, or the alert's thread)."""
    thread_ts: str | None = None
    reason: str = ""
    """Why it was asked for (`--reason`): every team told reads it."""


def thread_url(channel: str, ts: str | None) -> str:
    """Slack's permalink shape for a message (slack.com redirects to the workspace)."""
    if not ts:
        return ""
    message = quote(ts.replace(".", ""), safe="")
    return f"https://slack.com/archives/{quote(channel, safe='')}/p{message}"


def _view(rerun: TeamRerun) -> dict[str, Any]:
    return {
        "request_label": rerun.request_id[:8],
        "root_dag": clip(rerun.root_dag, NAME),
        "range": clip(rerun.range_text, 60),
        "rows": [
            {"dag_id": clip(dag, NAME), "runs": plural(runs, "run")}
            for dag, runs in rerun.dags[:_ROWS]
        ],
        "more": max(0, len(rerun.dags) - _ROWS),
        "channel": rerun.channel,
        "thread": link(thread_url(rerun.channel, rerun.thread_ts), "thread"),
        "approver": "",
        "ended": False,
        "reason": clip(rerun.reason, 300),
    }


def rerun_approved(rerun: TeamRerun, *, approver: str) -> dict[str, Any]:
    return render("backfill/team_notice.json.j2", {**_view(rerun), "approver": clip(approver, 40)})


def reports_started(rerun: TeamRerun, estimates: Sequence[ReportEstimate]) -> dict[str, Any]:
    """To the team owning reports downstream of a backfill that has started: when each of
    its reports reads correct data again."""
    view = {**_view(rerun), "estimates": estimates_line(estimates, started=True),
            "reports": len(estimates)}  # fmt: skip
    return render("backfill/report_notice.json.j2", view)


def rerun_ended(rerun: TeamRerun, *, state: str) -> dict[str, Any]:
    emoji, label = REQUEST_LOOK[RequestState(state)]
    view = {**_view(rerun), "ended": True, "emoji": emoji, "outcome": label.lower()}
    return render("backfill/team_notice.json.j2", view)
