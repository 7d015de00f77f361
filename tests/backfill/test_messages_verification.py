"""A backfill's verification, the report owners' restatement notice and `/backfill history`
(templates/backfill/verified, restated_notice and history .json.j2), and the rules they say:
golden files and the sentences people read."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest

from bot.backfill.messages import verification as words
from bot.backfill.rules.restated import ReportRestated, restated_reports, verification
from bot.config.quality import DatasetRule
from bot.core.model import DagRef, Interval
from bot.quality.rules.verify import Rewrite, Verdict, Why, Written, judge, run_verdict
from tests.support.golden import Case, assert_golden, mrkdwn_texts

REQUEST = "5f0c1e0a9d2b4c7e8f1a2b3c4d5e6f70"
ORDERS = DagRef("food_delivery", "example.etl_orders")
WEEKLY = DagRef("food_delivery", "example.etl_orders_7_days")
KPIS = DagRef("food_delivery", "reporting.weekly_kpis")
AT = datetime(2021, 6, 8, 9, 30, tzinfo=UTC)
RULE = DatasetRule(pattern="*")
USUAL = [40_800, 41_300, 40_950, 41_200, 41_050, 40_700, 41_400]


def day(d: int) -> Interval:
    start = datetime(2021, 6, d, tzinfo=UTC)
    return Interval(start, start + timedelta(days=1))


def week(d: int) -> Interval:
    start = datetime(2021, 5, d, tzinfo=UTC)
    return Interval(start, start + timedelta(days=7))


def rewrite(
    dag: DagRef, interval: Interval, verdict: Verdict, why: Why | None = None, **more: object
) -> Rewrite:
    fields: dict[str, object] = {
        "namespace": "food_delivery", "name": "public.orders", "before": 0, "after": 41_100,
        "unit": "rows", "usual": 41_050, **more,
    }  # fmt: skip
    return Rewrite(dag, interval, verdict=verdict, why=why, **fields)  # type: ignore[arg-type]


MIXED = [
    rewrite(ORDERS, day(4), Verdict.RIGHT),
    rewrite(ORDERS, day(5), Verdict.WRONG, Why.ZERO_ROWS, after=0),
    rewrite(ORDERS, day(6), Verdict.WRONG, Why.UNCHANGED, before=12, after=12),
    rewrite(WEEKLY, week(31), Verdict.UNKNOWN, Why.NOT_ARRIVED, name=None, after=None),
    rewrite(KPIS, week(31), Verdict.UNKNOWN, Why.NO_STATISTICS, name=None, after=None),
]
RIGHT = [rewrite(ORDERS, day(d), Verdict.RIGHT) for d in (4, 5, 6)]
REPORTS = [
    ReportRestated("Weekly KPIs", "analytics", (date(2021, 5, 31), date(2021, 6, 1))),
    ReportRestated(
        "Orders daily", "orders", (date(2021, 6, 4), date(2021, 6, 5)), (date(2021, 6, 5),)
    ),
]
LEDGER = [
    words.Restated(REQUEST, "example.etl_orders", date(2021, 6, 5), "public.orders", 0, 41_100,
                   "rows", "right", None, AT, "orders feed was empty", None, "U0ORDERS01"),
    words.Restated(REQUEST, "reporting.weekly_kpis", date(2021, 5, 31), None, None, None,
                   "rows", "unknown", "no_statistics", AT, None, "incident1", "U0ORDERS01"),
    words.Restated("aa" * 16, "example.etl_orders", date(2021, 6, 6), "public.orders", 12, 12,
                   "rows", "wrong", "unchanged", AT - timedelta(days=1), None, None, None),
]  # fmt: skip

VERIFIED, NOTICE, HISTORY = (
    "backfill/verified.json.j2",
    "backfill/restated_notice.json.j2",
    "backfill/history.json.j2",
)
CASES: dict[str, Case] = {
    "backfill_verified": Case(
        VERIFIED,
        lambda: words.verified(
            REQUEST, ORDERS.dag_id, verification(RIGHT), REPORTS[:1], within_s=1800
        ),
    ),
    "backfill_verified_mixed": Case(
        VERIFIED,
        lambda: words.verified(REQUEST, ORDERS.dag_id, verification(MIXED), REPORTS, within_s=1800),
    ),
    "backfill_restated_notice": Case(
        NOTICE,
        lambda: words.restated_notice(
            REQUEST,
            ORDERS.dag_id,
            REPORTS,
            channel="C0ORDERS01",
            thread_ts="1622764800.000100",
            reason="orders feed was empty",
            summary=verification(MIXED),
        ),
    ),
    "backfill_history": Case(
        HISTORY, lambda: words.history("example.etl_orders", LEDGER, more=False)
    ),
    "backfill_history_none": Case(HISTORY, lambda: words.history("Weekly KPIs", [], more=False)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert_golden(name, CASES[name], monkeypatch)


def test_the_verification_says_what_is_right_wrong_and_unknown() -> None:
    assert (
        words.verified(REQUEST, ORDERS.dag_id, verification(RIGHT), [], within_s=60)["text"]
        == ":white_check_mark: Verified: 3 runs wrote rows in the usual range."
    )
    said = "\n".join(mrkdwn_texts(CASES["backfill_verified_mixed"].build()))
    assert "Verified 1 of 5 reruns; 2 runs still look wrong:" in said
    assert (
        "`example.etl_orders` 2021-06-05: `public.orders` wrote 0 rows; it usually writes about "
        "41,000 rows" in said
    )
    assert "wrote 12 rows again, as the run it replaced did" in said
    assert "no statistics arrived within 30 minutes (`example.etl_orders_7_days`)" in said
    assert "no statistics from that producer (`reporting.weekly_kpis`)" in said
    assert "*Orders daily*: 2021-06-04 to 2021-06-05 (still looks wrong: 2021-06-05)" in said
    assert "`/backfill history example.etl_orders`" in said


def test_the_report_notice_lists_each_reports_dates_and_the_verdict() -> None:
    said = "\n".join(mrkdwn_texts(CASES["backfill_restated_notice"].build()))
    assert "restated data your reports read" in said
    assert "*Weekly KPIs*: 2021-05-31 to 2021-06-01" in said
    assert "1 rerun verified; 2 reruns still look wrong; 2 reruns could not be verified." in said
    assert "Why: _orders feed was empty_" in said


def test_history_lists_each_backfill_newest_first_with_before_and_after() -> None:
    said = "\n".join(mrkdwn_texts(CASES["backfill_history"].build()))
    assert said.index("5f0c1e0a") < said.index("aaaaaaaa")
    assert "`example.etl_orders` 2021-06-05 `public.orders`: 0 rows → 41,100 rows" in said
    assert ":warning: `example.etl_orders` 2021-06-06 `public.orders`: 12 rows → 12 rows" in said
    assert "`reporting.weekly_kpis` 2021-05-31: no statistics" in said
    assert "why: _orders feed was empty_" in said
    assert words.history("x", [], more=False)["text"] == "No backfill has restated `x` yet."


@pytest.mark.parametrize(
    ("written", "verdict", "why"),
    [
        (Written("ns", "t", 0, False, 41_000), Verdict.RIGHT, None),
        (Written("ns", "t", 41_000, True, 0), Verdict.WRONG, Why.ZERO_ROWS),
        (Written("ns", "t", 0, False, 900), Verdict.WRONG, Why.FEW_ROWS),
        (Written("ns", "t", 0, False, 900_000), Verdict.WRONG, Why.MANY_ROWS),
        (Written("ns", "t", None, None, 41_000), Verdict.RIGHT, None),
        (Written("ns", "t", 0, False, None), Verdict.UNKNOWN, Why.NOT_ARRIVED),
    ],
)
def test_a_rerun_is_judged_against_the_history(
    written: Written, verdict: Verdict, why: Why | None
) -> None:
    judged = judge(written, USUAL, RULE)
    assert (judged.verdict, judged.why) == (verdict, why)
    if verdict != Verdict.UNKNOWN:
        assert judged.usual == 41_050


def test_writing_what_a_wrong_run_wrote_is_no_repair_even_without_history() -> None:
    judged = judge(Written("ns", "t", 12, False, 12), [], RULE)
    assert (judged.verdict, judged.why, judged.usual) == (Verdict.WRONG, Why.UNCHANGED, None)
    assert judge(Written("ns", "t", 12, True, 12), [], RULE).verdict == Verdict.RIGHT
    # an empty table allowed to be empty is right at 0 rows, unless it was wrong before at 0
    empty = DatasetRule(pattern="*", allow_empty=True)
    assert judge(Written("ns", "t", 5, True, 0), USUAL, empty).verdict == Verdict.RIGHT


def test_a_rerun_is_wrong_if_one_dataset_is_and_unknown_only_if_none_is_known() -> None:
    assert run_verdict([(Verdict.RIGHT, None), (Verdict.WRONG, Why.FEW_ROWS)]).why == Why.FEW_ROWS
    assert run_verdict([(Verdict.RIGHT, None), (Verdict.UNKNOWN, Why.NOT_ARRIVED)]).verdict == (
        Verdict.RIGHT
    )
    assert run_verdict([(Verdict.UNKNOWN, Why.NOT_ARRIVED)]).why == Why.NOT_ARRIVED
    assert run_verdict([]).verdict == Verdict.UNKNOWN


def test_a_reports_dates_are_the_days_its_writers_reruns_cover() -> None:
    reruns = {ORDERS.dag_id: [day(4), day(5)], KPIS.dag_id: [week(31)]}
    entries = [
        {"report": "Weekly KPIs", "team": "analytics", "dags": [KPIS.dag_id]},
        {"report": "Everything", "team": None, "dags": []},  # writers not known: every DAG
        {"report": "Elsewhere", "team": "x", "dags": ["not.in.the.backfill"]},
    ]
    weekly, everything = restated_reports(entries, reruns, wrong=[(ORDERS.dag_id, day(5).start)])
    assert weekly.dates == tuple(date(2021, 5, 31) + timedelta(days=n) for n in range(7))
    assert weekly.wrong == ()
    assert everything.dates[0] == date(2021, 5, 31)
    assert everything.wrong == (date(2021, 6, 5),)
    assert words.day_ranges(list(everything.dates)) == "2021-05-31 to 2021-06-06"
