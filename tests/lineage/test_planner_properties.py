"""Property tests over random lineage: each affected DAG planned exactly once, after all its
upstream DAGs, and nothing that is not downstream of the root."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.core.model import DagRef, DateRange, merge_intervals
from bot.lineage.rules.graph import build_lineage
from bot.lineage.rules.planner import PlanError, make_plan, plan_from_json
from bot.lineage.rules.schedule import PeriodicSchedule, Schedule
from standins.seeds.synthetic import JobSpec, lineage_nodes

NS = "synthetic"


@st.composite
def random_pipelines(draw: st.DrawFn) -> tuple[list[JobSpec], dict[int, set[int]], int]:
    """DAGs 0..n-1 with 1-3 tasks each; a task of DAG j may read outputs of DAGs i < j.

    Returns the jobs, the ground-truth DAG dependencies (reader -> the DAGs it reads) and a
    root index. Tasks inside one DAG may also hand data to each other.
    """
    n = draw(st.integers(min_value=1, max_value=14))
    reads_from: dict[int, set[int]] = {j: set() for j in range(n)}
    jobs: list[JobSpec] = []
    for j in range(n):
        task_count = draw(st.integers(min_value=1, max_value=3))
        for t in range(task_count):
            sources = draw(st.sets(st.integers(min_value=0, max_value=max(j - 1, 0)), max_size=3))
            sources = {s for s in sources if s < j}
            reads_from[j] |= sources
            reads = tuple(f"d{s}.out0" for s in sorted(sources))
            if t > 0:
                reads += (f"d{j}.out{t - 1}",)  # intra-DAG hand-over, must not become an edge
            if task_count == 1:
                jobs.append(JobSpec(f"dag{j}", reads, (f"d{j}.out{t}",)))
            else:
                jobs.append(JobSpec(f"dag{j}.t{t}", reads, (f"d{j}.out{t}",), parent=f"dag{j}"))
    root = draw(st.integers(min_value=0, max_value=n - 1))
    return jobs, reads_from, root


def _descendants(reads_from: dict[int, set[int]], root: int) -> set[int]:
    found = {root}
    changed = True
    while changed:
        changed = False
        for reader, sources in reads_from.items():
            if reader not in found and sources & found:
                found.add(reader)
                changed = True
    return found


def _schedules(n: int, periods: list[int]) -> dict[DagRef, Schedule]:
    anchor = datetime(2021, 6, 6, tzinfo=UTC)
    return {
        DagRef(NS, f"dag{j}"): PeriodicSchedule(
            anchor,
            timedelta(days=periods[j % len(periods)]),
            timedelta(days=periods[j % len(periods)]),
        )
        for j in range(n)
    }


@settings(max_examples=200, deadline=None)
@given(
    pipeline=random_pipelines(),
    periods=st.lists(st.sampled_from([1, 7]), min_size=1, max_size=4),
    start_offset=st.integers(min_value=0, max_value=20),
    days=st.integers(min_value=1, max_value=10),
)
def test_every_descendant_once_after_its_upstreams(
    pipeline: tuple[list[JobSpec], dict[int, set[int]], int],
    periods: list[int],
    start_offset: int,
    days: int,
) -> None:
    jobs, reads_from, root_index = pipeline
    lineage = build_lineage(lineage_nodes(jobs))
    root = DagRef(NS, f"dag{root_index}")
    start = date(2021, 5, 24) + timedelta(days=start_offset)
    date_range = DateRange(start, start + timedelta(days=days - 1))
    plan = make_plan(lineage.dags, root, date_range, _schedules(len(reads_from), periods))

    planned = [step.dag.dag_id for step in plan.steps]
    expected = {f"dag{j}" for j in _descendants(reads_from, root_index)}
    assert planned[0] == root.dag_id
    assert len(planned) == len(set(planned)), "a DAG is planned twice"
    assert set(planned) == expected, "plan differs from the downstream closure"
    position = {name: i for i, name in enumerate(planned)}
    for reader, sources in reads_from.items():
        for source in sources:
            if f"dag{reader}" in position and f"dag{source}" in position:
                assert position[f"dag{source}"] < position[f"dag{reader}"]
    for step in plan.steps:
        direct = {f"dag{s}" for s in reads_from[int(step.dag.dag_id[3:])]} & set(planned)
        assert {u.dag_id for u in step.upstream} == (direct if step.dag != root else set())


@settings(max_examples=100, deadline=None)
@given(pipeline=random_pipelines(), periods=st.lists(st.sampled_from([1, 7]), min_size=1))
def test_downstream_intervals_cover_what_upstream_rewrote(
    pipeline: tuple[list[JobSpec], dict[int, set[int]], int], periods: list[int]
) -> None:
    jobs, reads_from, root_index = pipeline
    lineage = build_lineage(lineage_nodes(jobs))
    root = DagRef(NS, f"dag{root_index}")
    plan = make_plan(
        lineage.dags,
        root,
        DateRange(date(2021, 6, 4), date(2021, 6, 6)),
        _schedules(len(reads_from), periods),
    )
    by_dag = {step.dag: step for step in plan.steps}
    for step in plan.steps:
        assert step.intervals, f"{step.dag} has nothing to rerun"
        assert list(step.intervals) == sorted(set(step.intervals))
        rewritten = [i for u in step.upstream for i in by_dag[u].intervals]
        for changed in rewritten:
            # every rewritten upstream moment is re-read by one of this DAG's reruns
            covering = merge_intervals([m for m in step.intervals if m.overlaps(changed)])
            assert any(c.start <= changed.start and changed.end <= c.end for c in covering)
        for mine in step.intervals if rewritten else ():
            # and no rerun reads nothing that changed
            assert any(mine.overlaps(changed) for changed in rewritten)


@settings(max_examples=50, deadline=None)
@given(pipeline=random_pipelines(), periods=st.lists(st.sampled_from([1, 7]), min_size=1))
def test_plans_survive_their_json_form(
    pipeline: tuple[list[JobSpec], dict[int, set[int]], int], periods: list[int]
) -> None:
    jobs, reads_from, root_index = pipeline
    lineage = build_lineage(lineage_nodes(jobs))
    plan = make_plan(
        lineage.dags,
        DagRef(NS, f"dag{root_index}"),
        DateRange(date(2021, 6, 4), date(2021, 6, 6)),
        _schedules(len(reads_from), periods),
    )
    assert plan_from_json(plan.to_json()) == plan


def test_a_dag_id_longer_than_airflows_limit_is_refused_with_the_fix() -> None:
    long = "reporting_" + "x" * 250  # a Marquez job name Airflow could not have as a DAG id
    jobs = [JobSpec("dag0", (), ("d0.out0",)), JobSpec(long, ("d0.out0",), ("dl.out0",))]
    lineage = build_lineage(lineage_nodes(jobs))
    schedules = {
        DagRef(NS, name): PeriodicSchedule(
            datetime(2021, 6, 6, tzinfo=UTC), timedelta(days=1), timedelta(days=1)
        )
        for name in ("dag0", long)
    }
    day = DateRange(date(2021, 6, 4), date(2021, 6, 4))
    with pytest.raises(PlanError, match=r"limit of 250 .* Exclude it with --exclude"):
        make_plan(lineage.dags, DagRef(NS, "dag0"), day, schedules)
    plan = make_plan(lineage.dags, DagRef(NS, "dag0"), day, schedules, exclude=[DagRef(NS, long)])
    assert [step.dag.dag_id for step in plan.steps] == ["dag0"]
