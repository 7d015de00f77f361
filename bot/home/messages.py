"""The App Home tab: the viewing user's teams, their open incidents, running backfills,
recent SLA misses and the data backfills restated lately (templates/home/home.json.j2). The
service loads the rows; this module cuts them to what a Home view holds."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, TypeVar

from bot.backfill.messages.verification import day_ranges
from bot.slack.messages.render import LIST, NAME, clip, plural, render

ROWS = 15  # per section; Slack allows 100 blocks in a Home view

_Row = TypeVar("_Row")


@dataclass(frozen=True)
class HomeIncident:
    dag_id: str
    day: str
    """The failed interval's day, `YYYY-MM-DD`."""
    grouped: int
    backfill: str | None
    data: bool = False
    """A data incident: the run completed with bad data."""


@dataclass(frozen=True)
class HomeBackfill:
    request_id: str
    root_dag: str
    start: date
    end: date
    state: str
    dags: int
    held_by: str | None = None
    """Who paused it (a user id, `failure` or `window`); None if it is not paused."""
    until: datetime | None = None
    """When it starts (scheduled) or resumes (window) by itself."""
    options: tuple[str, ...] = ()
    reason: str = ""


@dataclass(frozen=True)
class HomeRestated:
    """A backfill that restated data of the user's teams: which days, and how it verified."""

    request_id: str
    dags: tuple[str, ...]
    days: tuple[date, ...]
    right: int
    wrong: int
    unknown: int
    at: datetime


@dataclass(frozen=True)
class HomeSlaMiss:
    dag_id: str
    kind: str
    day: str
    due: datetime


def _section(items: Sequence[_Row], row: Callable[[_Row], dict[str, Any]]) -> dict[str, Any]:
    return {"total": len(items), "rows": [row(item) for item in items[:ROWS]]}


def _incident(i: HomeIncident) -> dict[str, Any]:
    return {
        "dag_id": clip(i.dag_id, NAME),
        "day": clip(i.day, 40),
        "grouped": i.grouped,
        "backfill": clip(i.backfill, 64) if i.backfill else "",
        "data": i.data,
    }


def _backfill(b: HomeBackfill) -> dict[str, Any]:
    return {
        "root_dag": clip(b.root_dag, NAME),
        "range": f"{b.start.isoformat()}..{b.end.isoformat()}",
        "state": clip(b.state, 40),
        "dags": plural(b.dags, "DAG"),
        "request_id": clip(b.request_id, 64),
        "held_by": clip(b.held_by or "", 40),
        "person": bool(b.held_by) and b.held_by not in ("failure", "window"),
        "until": f"{b.until:%Y-%m-%d %H:%M} UTC" if b.until else "",
        "options": clip(" · ".join(b.options), 300),
        "reason": clip(b.reason, 200),
    }


def _restated(r: HomeRestated) -> dict[str, Any]:
    verdicts = []
    if r.right:
        verdicts.append(f"{r.right} verified")
    if r.wrong:
        verdicts.append(f"{r.wrong} still look{'s' if r.wrong == 1 else ''} wrong")
    if r.unknown:
        verdicts.append(f"{r.unknown} not verifiable")
    more = len(r.dags) - 3
    return {
        "dags": clip(", ".join(r.dags[:3]) + (f" and {more} more" if more > 0 else ""), LIST),
        "days": clip(day_ranges(r.days), 300),
        "verdicts": " · ".join(verdicts),
        "wrong": r.wrong > 0,
        "request_id": clip(r.request_id[:8], 64),
        "at": f"{r.at:%Y-%m-%d %H:%M} UTC",
    }


def _miss(m: HomeSlaMiss) -> dict[str, Any]:
    return {
        "dag_id": clip(m.dag_id, NAME),
        "what": clip(m.kind.replace("_", " "), 40),
        "day": clip(m.day, 40),
        "due": f"{m.due:%Y-%m-%d %H:%M} UTC",
    }


def home_view(
    teams: Sequence[str],
    incidents: Sequence[HomeIncident],
    backfills: Sequence[HomeBackfill],
    misses: Sequence[HomeSlaMiss],
    restated: Sequence[HomeRestated] = (),
) -> dict[str, Any]:
    """The Home view for views.publish; each sequence newest first, as the service loaded it."""
    view = {
        "teams": clip(", ".join(teams), LIST),
        "incidents": _section(incidents, _incident),
        "backfills": _section(backfills, _backfill),
        "misses": _section(misses, _miss),
        "restated": _section(restated, _restated),
    }
    return render("home/home.json.j2", view)
