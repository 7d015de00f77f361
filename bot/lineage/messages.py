"""The CLI's text for `plan` and `impact` (templates/lineage/): view models, then the templates."""

from __future__ import annotations

from typing import Any

from bot.core.templates import environment
from bot.lineage.rules.impact import Impact
from bot.lineage.rules.planner import Plan
from bot.slack.messages.render import describe_intervals


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
    return environment().get_template("lineage/plan.txt.j2").render(plan_view(plan))


def render_impact_text(impact: Impact) -> str:
    return environment().get_template("lineage/impact.txt.j2").render(impact_view(impact))


def still_asking_text(dag: str) -> str:
    """The CLI's word on stderr when Marquez is slow to answer (a deep `/lineage` on a big
    deployment takes 10-15 s): the wait is never silent."""
    return f"backfill-bot: still asking Marquez about {dag} and what runs downstream of it …"
