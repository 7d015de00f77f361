"""One Jinja2 environment for every message the bot renders; view models keep logic out of
templates. Slack Block Kit templates join this module with the Slack surface."""

from __future__ import annotations

from datetime import UTC, datetime, time
from functools import cache
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from bot import resource_dir
from bot.core.model import Interval
from bot.domain.planner import Plan
from bot.services.planning import Impact

TEMPLATES = resource_dir("bot.templates")  # the repository's templates/, as installed


@cache
def environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        undefined=StrictUndefined,
        autoescape=False,  # text templates; Block Kit templates escape through |tojson
        extensions=["jinja2.ext.do"],  # templates gather Block Kit elements into lists
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    return env


def _moment(value: datetime) -> str:
    value = value.astimezone(UTC)
    if value.time() == time.min:
        return value.date().isoformat()
    return value.strftime("%Y-%m-%d %H:%M")


def describe_interval(interval: Interval) -> str:
    return f"{_moment(interval.start)} → {_moment(interval.end)}"


def describe_intervals(intervals: tuple[Interval, ...], *, limit: int = 3) -> str:
    """Short human text: every interval when few, else the span and the count."""
    if not intervals:
        return "nothing to rerun"
    if len(intervals) <= limit:
        return ", ".join(describe_interval(i) for i in intervals)
    span = Interval(intervals[0].start, intervals[-1].end)
    return f"{len(intervals)} runs over {describe_interval(span)}"


def plan_view(plan: Plan) -> dict[str, Any]:
    rows = [
        {
            "position": index,
            "dag_id": step.dag.dag_id,
            "namespace": step.dag.namespace,
            "runs": len(step.intervals),
            "intervals": describe_intervals(step.intervals),
            "after": ", ".join(u.dag_id for u in step.upstream) or "-",
            "owners": ", ".join(step.owners) or "-",
            "schedule": step.schedule,
        }
        for index, step in enumerate(plan.steps, start=1)
    ]
    widths = {
        key: max([len(str(r[key])) for r in rows] + [len(key)])
        for key in ("dag_id", "namespace", "runs", "intervals")
    }
    return {
        "root": plan.root.dag_id,
        "namespace": plan.root.namespace,
        "range": str(plan.date_range),
        "dag_count": len(plan.steps),
        "run_count": plan.run_count,
        "only": plan.only,
        "excluded": [d.dag_id for d in plan.excluded],
        "rows": rows,
        "w": widths,
    }


def impact_view(impact: Impact) -> dict[str, Any]:
    def owners(dag: Any) -> str:
        return ", ".join(impact.owners.get(dag, ())) or "unknown"

    return {
        "root": impact.root.dag_id,
        "namespace": impact.root.namespace,
        "root_owners": owners(impact.root),
        "downstream": [
            {"dag_id": d.dag_id, "namespace": d.namespace, "owners": owners(d)}
            for d in impact.downstream
        ],
        "datasets": [str(d) for d in impact.datasets],
        "reports": [
            {
                "name": hit.report.name,
                "url": hit.report.url or "",
                "team": hit.report.team or "no team",
                "dataset": str(hit.dataset),
            }
            for hit in impact.reports
        ],
        "teams": list(impact.teams),
    }


def render_plan_text(plan: Plan) -> str:
    return environment().get_template("cli/plan.txt.j2").render(plan_view(plan))


def render_impact_text(impact: Impact) -> str:
    return environment().get_template("cli/impact.txt.j2").render(impact_view(impact))
