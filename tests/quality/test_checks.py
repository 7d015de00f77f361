"""The data-quality rules (pure): what a COMPLETE run's facets say, when its data is wrong,
and when a later run puts it right."""

from __future__ import annotations

import math
from typing import Any

import pytest

from bot.config.quality import DatasetRule, Quality
from bot.events.rules.data_facts import Assertion, DataFacts, OutputFacts, data_facts
from bot.quality.rules.checks import (
    Finding,
    FindingKind,
    assertion_findings,
    clears,
    column_finding,
    lifecycle_finding,
    silent_finding,
    usual_values,
    volume_finding,
)

RULE = DatasetRule(pattern="*")
USUAL = [41_000, 40_000, 42_000, 41_500, 40_500]


def out(rows: int | None = None, **rest: Any) -> OutputFacts:
    return OutputFacts("ns", "orders", rows=rows, **rest)


@pytest.mark.parametrize(
    ("rows", "history", "rule", "kind"),
    [
        (0, USUAL, RULE, FindingKind.ZERO_ROWS),
        (0, [], RULE, FindingKind.ZERO_ROWS),  # 0 rows is wrong without any history
        (0, USUAL, DatasetRule(pattern="*", allow_empty=True), None),
        (20_000, USUAL, RULE, FindingKind.FEW_ROWS),  # below half the median (41,000)
        (21_000, USUAL, RULE, None),
        (210_000, USUAL, RULE, FindingKind.MANY_ROWS),  # over 5x
        (210_000, USUAL, DatasetRule(pattern="*", max_factor=0), None),
        (10, USUAL[:4], RULE, None),  # fewer than min_runs earlier intervals: no judgement
        (10, USUAL[:2], DatasetRule(pattern="*", min_runs=2), FindingKind.FEW_ROWS),
        (10, [0, 0, 0, 0, 0], RULE, None),  # a dataset that is usually empty
    ],
)
def test_volume(rows: int, history: list[int], rule: DatasetRule, kind: FindingKind | None) -> None:
    found = volume_finding(out(rows), history, rule)
    assert (found.kind if found else None) == kind
    if found is not None:
        assert found.value == rows


def test_one_odd_interval_does_not_move_what_is_usual() -> None:
    history = [41_000, 40_000, 42_000, 41_500, 9_000_000]  # one day of a replay
    assert volume_finding(out(40_000), history, RULE) is None
    found = volume_finding(out(10_000), history, RULE)
    assert found is not None
    assert found.usual == 41_500


def test_bytes_stand_in_for_rows_when_a_producer_sends_only_a_size() -> None:
    found = volume_finding(out(size=1_000), [50_000] * 5, RULE, unit="bytes")
    assert found is not None
    assert (found.kind, found.unit) == (FindingKind.FEW_ROWS, "bytes")


def test_lost_and_retyped_columns() -> None:
    before = (("id", "bigint"), ("discount", "double"), ("amount", "int"))
    now = out(fields=(("id", "bigint"), ("amount", "string"), ("new", "int")))
    found = column_finding(now, before)
    assert found is not None
    assert found.lost == (("discount", "double"),)
    assert found.changed == (("amount", "int", "string"),)
    assert column_finding(now, None) is None  # nothing to compare with
    assert column_finding(out(fields=before), before) is None
    assert column_finding(out(fields=(("id", None),)), (("id", "bigint"),)) is None  # untyped


def test_a_drop_matters_only_when_others_read_the_dataset() -> None:
    dropped = out(lifecycle="DROP")
    assert lifecycle_finding(dropped, read_by_others=False) is None
    found = lifecycle_finding(dropped, read_by_others=True)
    assert found is not None
    assert found.lifecycle == "DROP"
    assert lifecycle_finding(out(lifecycle="OVERWRITE"), read_by_others=True) is None


def test_failed_assertions_once_each() -> None:
    a = Assertion("ns", "orders", "not_null", False, "customer_id")
    ok = Assertion("ns", "orders", "unique", True, "order_id")
    assert [f.column for f in assertion_findings([a, a, ok])] == ["customer_id"]


def test_what_a_later_run_puts_right() -> None:
    zero = Finding(FindingKind.ZERO_ROWS, "ns", "orders", 0, 41_000)
    assert clears(zero, [out(41_000)], [], [])
    assert not clears(zero, [out(41_000)], [], [zero])  # found wrong again
    assert not clears(zero, [OutputFacts("ns", "other", rows=5)], [], [])  # says nothing of it
    assert not clears(zero, [out(fields=(("id", "int"),))], [], [])  # no count: not verified
    lost = Finding(FindingKind.COLUMNS, "ns", "orders", lost=(("discount", "double"),))
    assert clears(lost, [out(fields=(("discount", "double"),))], [], [])
    assert not clears(lost, [out(fields=(("id", "int"),))], [], [])
    test = Finding(FindingKind.ASSERTION, "ns", "orders", assertion="not_null", column="c")
    assert clears(test, [], [Assertion("ns", "orders", "not_null", True, "c")], [])
    assert not clears(test, [], [Assertion("ns", "orders", "not_null", True, "d")], [])
    drop = Finding(FindingKind.LIFECYCLE, "ns", "orders", lifecycle="DROP")
    assert clears(drop, [out(5, lifecycle="OVERWRITE")], [], [])
    assert not clears(drop, [out(0)], [], [])


def _stats(**values: Any) -> dict[str, Any]:
    return {"namespace": "ns", "name": "orders", "outputFacets": {"outputStatistics": values}}


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (-5, "rowCount is negative"),
        ("41000", "rowCount is not a number"),
        (True, "rowCount is not a number"),
        (math.nan, "rowCount is not a finite number"),
        (10**16, "rowCount is not a plausible count"),
        (12.5, "rowCount is not a plausible count"),
    ],
)
def test_odd_statistics_are_left_out_with_a_reason(value: Any, reason: str) -> None:
    facts = data_facts([], [_stats(rowCount=value, size=2048)])
    [output] = facts.outputs
    assert (output.rows, output.size) == (None, 2048)
    [ignored] = facts.ignored
    assert reason in ignored
    assert "outputs[0]" in ignored


def test_facts_survive_the_store_and_malformed_facets_are_skipped() -> None:
    outputs = [
        {
            "namespace": "ns",
            "name": "orders",
            "facets": {
                "schema": {"fields": [{"name": "a", "type": "int"}, {"name": "s", "type": "struct",
                           "fields": [{"name": "x", "type": "string"}]}, {"type": "no name"}, 7]},
                "lifecycleStateChange": {"lifecycleStateChange": "truncate"},
                "columnLineage": {"fields": {"a": {"inputFields": [
                    {"namespace": "ns", "name": "raw", "field": "a"}, {"namespace": 1}]}}},
            },
            "outputFacets": {"outputStatistics": {"rowCount": 3, "size": 10, "fileCount": 1}},
        },
        "not a dataset",
        {"namespace": "", "name": "empty namespace"},
    ]  # fmt: skip
    inputs = [
        {
            "namespace": "ns",
            "name": "raw",
            "inputFacets": {"dataQualityAssertions": {"assertions": [
                {"assertion": "not_null", "success": False, "column": "a"},
                {"assertion": "odd", "success": "no"},
            ]}},
        }
    ]  # fmt: skip
    facts = data_facts(inputs, outputs)
    [output] = facts.outputs
    assert output.fields == (("a", "int"), ("s", "struct"), ("s.x", "string"))
    assert output.lifecycle == "TRUNCATE"
    assert output.columns == (("a", (("ns", "raw", "a"),)),)
    assert (output.rows, output.size, output.files) == (3, 10, 1)
    assert facts.assertions == (Assertion("ns", "raw", "not_null", False, "a"),)
    assert DataFacts.from_json(facts.to_json()) == facts
    assert not data_facts(None, {"not": "a list"})


def test_rules_apply_by_dataset_pattern() -> None:
    quality = Quality(datasets=(DatasetRule(pattern="raw::*", allow_empty=True),))
    assert quality.rule_for("raw", "x").allow_empty
    assert not quality.rule_for("warehouse", "x").allow_empty


def test_a_new_level_is_usual_once_min_runs_intervals_held_it() -> None:
    # newest first: a usual formed on bad early runs (10% of the real count, not judged before
    # min_runs), then five right runs each found "too many" against it
    early = [(4_100, True)] * 4
    right = [(41_000, False), (40_500, False), (41_200, False), (40_800, False), (41_100, False)]
    assert usual_values(right + early, RULE) == [41_000, 40_500, 41_200, 40_800, 41_100]
    assert volume_finding(out(41_000), usual_values(right + early, RULE), RULE) is None
    # four of them are not enough yet, and five that disagree are no level
    assert usual_values(right[:4] + early, RULE) == [4_100] * 4
    scattered = [(41_000, False), (900, False), (41_200, False), (40_800, False), (41_100, False)]
    assert usual_values(scattered + early, RULE) == [4_100] * 4
    # five empty days are an outage, never a usual
    assert usual_values([(0, False)] * 5 + early, RULE) == [4_100] * 4
    # runs without a count are skipped; only `history` usual ones count
    many = [(None, True)] + [(40_000 + i, True) for i in range(30)]
    assert len(usual_values(many, RULE)) == RULE.history


def test_a_job_that_always_counted_and_now_does_not_is_suspect() -> None:
    silent = OutputFacts("ns", "orders", fields=(("id", "bigint"),))
    spark = [("spark_job", 41_000 + i, True) for i in range(6)]
    found = silent_finding(silent, spark, "spark_job", RULE)
    assert found is not None
    assert (found.kind, found.usual) == (FindingKind.NO_STATISTICS, 41_002)
    # not another job naming the dataset without counting (an Airflow task around it)
    assert silent_finding(silent, spark, "airflow_task", RULE) is None
    # not before min_runs intervals, not when one of the latest did not count, not if empty is fine
    assert silent_finding(silent, spark[:4], "spark_job", RULE) is None
    assert silent_finding(silent, [("spark_job", None, True), *spark], "spark_job", RULE) is None
    allowed = DatasetRule(pattern="*", allow_empty=True)
    assert silent_finding(silent, spark, "spark_job", allowed) is None
    counted = OutputFacts("ns", "orders", rows=0)
    assert silent_finding(counted, spark, "spark_job", RULE) is None
