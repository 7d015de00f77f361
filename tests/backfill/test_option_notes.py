"""What the executor finds about a request's options (a conf the DAG's params refuse) joins the
plan's own notes: one note per DAG in the preview, and a refused conf blocks approval."""

from __future__ import annotations

from datetime import UTC, date, datetime

from bot.backfill.rules.options import OPTION_NOTES, conf_problems, with_option_notes
from bot.core.model import DagRef, DateRange, Interval
from bot.lineage.rules.planner import Plan, PlanNote, PlanStep

ROOT = DagRef("ns", "a")
DAY = Interval(datetime(2021, 6, 4, tzinfo=UTC), datetime(2021, 6, 5, tzinfo=UTC))
PLAN = Plan(
    ROOT,
    DateRange(date(2021, 6, 4), date(2021, 6, 4)),
    (
        PlanStep(ROOT, (DAY,), (), "daily", ()),
        PlanStep(DagRef("ns", "b"), (DAY,), (ROOT,), "daily", ()),
    ),
    notes=(PlanNote("a", "paused in Airflow: the bot will unpause it", False),),
)


def test_an_option_note_joins_the_dags_own_and_a_blocking_one_blocks() -> None:
    options = {OPTION_NOTES: [
        {"dag_id": "a", "text": "--conf gives `x` a string", "blocking": True},
        {"dag_id": "b", "text": "--conf sets y", "blocking": False},
    ]}  # fmt: skip
    checked = with_option_notes(PLAN, options)
    notes = {n.dag_id: n for n in checked.notes}
    assert notes["a"] == PlanNote(
        "a", "paused in Airflow: the bot will unpause it; --conf gives `x` a string", True
    )
    assert notes["b"] == PlanNote("b", "--conf sets y", False)
    assert checked.blocked
    assert not PLAN.blocked
    assert with_option_notes(PLAN, {}) is PLAN
    assert with_option_notes(PLAN, {OPTION_NOTES: ["junk", {"text": "no dag"}]}) is PLAN


def test_conf_problems_follow_the_params_schema_types() -> None:
    params = {"full_refresh": ("boolean",), "limit": ("integer",), "ratio": ("number",), "any": ()}
    assert conf_problems({"limit": 1, "ratio": 2, "any": [1]}, params) == ([], [])
    assert conf_problems({"limit": 1.5, "x": 1}, params) == (
        ["x"],
        [("limit", "integer", "number")],
    )
    assert conf_problems({"full_refresh": 1}, params) == (
        [],
        [("full_refresh", "boolean", "integer")],
    )
    # A DAG without params takes any conf.
    assert conf_problems({"x": 1}, {}) == ([], [])
