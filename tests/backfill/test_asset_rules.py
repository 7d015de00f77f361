"""bot/backfill/rules/assets.py: which consumer steps `--with-asset-consumers` adds to a plan,
after which producers, rerunning which intervals."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

from bot.backfill.rules.assets import ASSET_SCHEDULE, with_consumers, without_consumers
from bot.core.model import DagRef, DateRange, Interval
from bot.lineage.rules.planner import Plan, PlanStep, plan_from_json

NS = "airflow"


def day(n: int) -> Interval:
    start = datetime(2021, 6, n, tzinfo=UTC)
    return Interval(start, start + timedelta(days=1))


def step(dag_id: str, days: tuple[int, ...], upstream: tuple[str, ...] = ()) -> PlanStep:
    return PlanStep(
        DagRef(NS, dag_id), tuple(day(d) for d in days), tuple(DagRef(NS, u) for u in upstream),
        "@daily",
    )  # fmt: skip


PLAN = Plan(
    root=DagRef(NS, "a"),
    date_range=DateRange(date(2021, 6, 4), date(2021, 6, 6)),
    steps=(step("a", (4, 5)), step("b", (5, 6), ("a",)), step("c", (4, 5, 6), ("b",))),
)


def found(*pairs: tuple[str, str]) -> list[dict[str, str]]:
    return [{"dag": d, "asset": f"x://{d}", "consumer": c} for d, c in pairs]


def test_a_consumer_follows_all_its_producers_with_every_interval_they_rerun() -> None:
    plan, added = with_consumers(
        PLAN, found(("a", "audit"), ("b", "audit"), ("a", "audit")), {"audit": ("finance",)}
    )
    assert added == ("audit",)
    assert [s.dag.dag_id for s in plan.steps] == ["a", "b", "c", "audit"]
    audit = plan.steps[-1]
    assert audit.upstream == (DagRef(NS, "a"), DagRef(NS, "b"))
    assert audit.intervals == (day(4), day(5), day(6))
    assert (audit.schedule, audit.owners) == (ASSET_SCHEDULE, ("finance",))
    # Stored and read back as any plan is.
    assert plan_from_json(plan.to_json()).steps == plan.steps


def test_dags_already_in_the_plan_or_unknown_producers_add_nothing() -> None:
    plan, added = with_consumers(PLAN, found(("a", "c"), ("zzz", "audit"), ("b", "")))
    assert added == ()
    assert plan is PLAN


def test_several_consumers_in_the_order_found_and_dropped_again() -> None:
    plan, added = with_consumers(PLAN, found(("c", "kpis"), ("a", "audit")))
    assert added == ("kpis", "audit")
    assert plan.steps[-2].intervals == (day(4), day(5), day(6))
    assert plan.steps[-1].intervals == (day(4), day(5))
    assert without_consumers(plan, added).steps == PLAN.steps
