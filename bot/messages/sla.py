"""SLA notices: a DAG whose run is missing, late or running too long, posted to the teams that
own it, and the reports that will be late because of it, posted to the teams that own those.
Each is its own message (templates/watch/sla_notice.json.j2), not a reply in a thread."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bot.domain.sla import Miss
from bot.messages._render import NAME, clip, render
from bot.messages.watch import interval_words

_REPORTS = 20  # reports named in one notice before "and N more"
_REPORT_NAME = 100  # each of them, so that 20 fit one section
_REASON = 1000

WHAT: dict[str, str] = {
    "missing": "has no run yet",
    "late": "has not succeeded yet",
    "too_long": "is running too long",
}


def _view(dag_id: str, miss: Miss, cause: str | None) -> dict[str, Any]:
    return {
        "cause": clip(cause, NAME) if cause else "",
        "dag_id": clip(dag_id, NAME),
        "what": WHAT[miss.kind],
        "interval": clip(interval_words(miss.interval.start, miss.interval.end), NAME),
        "due": miss.due.strftime("%Y-%m-%d %H:%M UTC"),
        "reason": clip(miss.reason, _REASON),
        "reports": [],
        "more": 0,
    }


def late_notice(dag_id: str, miss: Miss, *, cause: str | None = None) -> dict[str, Any]:
    """To the DAG's owners and the rule's teams: the run is missing, late or running too long
    (`cause`: the DAG whose open incident explains it, itself or one upstream)."""
    return render("watch/sla_notice.json.j2", _view(dag_id, miss, cause))


def reports_late(
    reports: Sequence[str], dag_id: str, miss: Miss, *, cause: str | None = None
) -> dict[str, Any]:
    """To a team whose `reports` read what the late DAG writes (or what is downstream of it)."""
    view = _view(dag_id, miss, cause)
    view["reports"] = [clip(name, _REPORT_NAME) for name in reports[:_REPORTS]]
    view["more"] = max(0, len(reports) - _REPORTS)
    return render("watch/sla_notice.json.j2", view)
