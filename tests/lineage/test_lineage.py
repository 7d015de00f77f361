from __future__ import annotations

from datetime import date

import pytest

from bot.core.model import DagRef, DatasetRef, DateRange
from bot.lineage.rules.graph import (
    LineageCycleError,
    affected_dags,
    build_lineage,
    facet_owners,
    settled_jobs,
)
from bot.lineage.rules.planner import PlanError, make_plan, resolve_exclusions
from standins.seeds.synthetic import JobSpec, lineage_nodes

NS = "synthetic"


def dag(name: str) -> DagRef:
    return DagRef(NS, name)


FOOD = [
    JobSpec("etl_menus", (), ("menus",)),
    JobSpec("etl_orders", (), ("orders",)),
    JobSpec("etl_customers", (), ("customers",)),
    JobSpec("etl_orders_7_days", ("menus", "orders"), ("orders_7_days",)),
    JobSpec(
        "etl_delivery_7_days.extract",
        ("orders_7_days", "customers"),
        ("staging",),
        "etl_delivery_7_days",
    ),
    JobSpec("etl_delivery_7_days.load", ("staging",), ("delivery_7_days",), "etl_delivery_7_days"),
    JobSpec("email_discounts", ("delivery_7_days", "customers"), ()),
]


def test_downstream_follows_out_edges_only_and_collapses_tasks() -> None:
    lineage = build_lineage(lineage_nodes(FOOD))
    affected = affected_dags(lineage.dags, dag("etl_orders"))
    assert affected.order == (
        dag("etl_orders"),
        dag("etl_orders_7_days"),
        dag("etl_delivery_7_days"),
        dag("email_discounts"),
    )
    # siblings sharing an input (etl_menus) and upstream sources never appear
    assert dag("etl_menus") not in affected.order
    assert affected.upstream[dag("etl_delivery_7_days")] == (dag("etl_orders_7_days"),)
    assert not lineage.dags.has_edge(dag("etl_delivery_7_days"), dag("etl_delivery_7_days"))


def test_outputs_by_dag_include_task_outputs() -> None:
    lineage = build_lineage(lineage_nodes(FOOD))
    assert lineage.outputs[dag("etl_delivery_7_days")] == {
        DatasetRef(NS, "staging"),
        DatasetRef(NS, "delivery_7_days"),
    }


def test_diamond_lists_the_join_once_after_both_branches() -> None:
    jobs = [
        JobSpec("a", (), ("a",)),
        JobSpec("b", ("a",), ("b",)),
        JobSpec("c", ("a",), ("c",)),
        JobSpec("d", ("b", "c"), ("d",)),
    ]
    affected = affected_dags(build_lineage(lineage_nodes(jobs)).dags, dag("a"))
    assert [d.dag_id for d in affected.order] == ["a", "b", "c", "d"]
    assert affected.upstream[dag("d")] == (dag("b"), dag("c"))


def test_exclusion_prunes_what_is_downstream_only_through_it() -> None:
    jobs = [
        JobSpec("a", (), ("a",)),
        JobSpec("b", ("a",), ("b",)),
        JobSpec("c", ("a",), ("c",)),
        JobSpec("only_via_b", ("b",), ()),
        JobSpec("via_both", ("b", "c"), ()),
    ]
    graph = build_lineage(lineage_nodes(jobs)).dags
    affected = affected_dags(graph, dag("a"), exclude=[dag("b")])
    assert [d.dag_id for d in affected.order] == ["a", "c", "via_both"]
    assert affected.upstream[dag("via_both")] == (dag("c"),)
    assert affected_dags(graph, dag("a"), only=True).order == (dag("a"),)


def test_cycle_between_dags_is_a_clear_error() -> None:
    jobs = [
        JobSpec("a.first", (), ("x",), "a"),
        JobSpec("b", ("x",), ("y",)),
        JobSpec("a.second", ("y",), ("z",), "a"),
    ]
    with pytest.raises(LineageCycleError) as error:
        affected_dags(build_lineage(lineage_nodes(jobs)).dags, dag("b"))
    message = str(error.value)
    assert "cycle between DAGs" in message
    assert "a → b → a" in message or "b → a → b" in message


def test_job_reading_and_writing_one_table_is_not_a_cycle() -> None:
    jobs = [JobSpec("merge", ("t",), ("t",)), JobSpec("report", ("t",), ())]
    affected = affected_dags(build_lineage(lineage_nodes(jobs)).dags, dag("merge"))
    assert [d.dag_id for d in affected.order] == ["merge", "report"]


def test_unknown_root_plans_only_itself() -> None:
    affected = affected_dags(build_lineage([]).dags, dag("never_ran"))
    assert affected.order == (dag("never_ran"),)


def test_ownership_facets_by_dag() -> None:
    jobs = [
        {
            "namespace": NS,
            "name": "d.t",
            "parentJobName": "d",
            "facets": {"ownership": {"owners": [{"name": "team:orders"}, {"name": "alice"}]}},
        },
        {"namespace": NS, "name": "e", "facets": {"ownership": {"owners": "garbage"}}},
        {"namespace": NS, "name": "f", "facets": {}},
    ]
    assert facet_owners(jobs) == {dag("d"): ("orders", "alice")}


def test_settled_jobs_are_those_inside_the_depth_horizon() -> None:
    chain = [JobSpec(f"j{i}", (f"d{i - 1}",) if i else (), (f"d{i}",)) for i in range(5)]
    nodes = lineage_nodes(chain)
    assert settled_jobs(nodes, "job:synthetic:j0", 2) == {"job:synthetic:j0", "job:synthetic:j1"}
    assert settled_jobs(nodes, "job:synthetic:j2", 1) == {"job:synthetic:j2"}
    assert settled_jobs(nodes, "job:synthetic:missing", 20) == set()


def test_excluding_a_dag_breaks_a_cycle() -> None:
    jobs = [
        JobSpec("root", (), ("r",)),
        JobSpec("a.first", ("r",), ("x",), "a"),
        JobSpec("b", ("x",), ("y",)),
        JobSpec("a.second", ("y",), ("z",), "a"),
    ]
    graph = build_lineage(lineage_nodes(jobs)).dags
    root = dag("root")
    with pytest.raises(LineageCycleError):
        make_plan(graph, root, DateRange(date(2021, 6, 4), date(2021, 6, 4)), {})
    excluded = resolve_exclusions(graph, root, ["b"])
    plan = make_plan(
        graph, root, DateRange(date(2021, 6, 4), date(2021, 6, 4)), {}, exclude=excluded
    )
    assert [s.dag.dag_id for s in plan.steps] == ["root", "a"]
    with pytest.raises(PlanError, match="root DAG cannot be excluded"):
        resolve_exclusions(graph, root, ["root"])
    with pytest.raises(PlanError, match="not downstream of root"):
        resolve_exclusions(graph, root, ["nope"])
