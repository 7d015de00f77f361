"""SLA notices, the App Home tab and the ops channel's notices (templates/sla/sla_notice,
home/home and slack/ops_notice .json.j2): golden files, the sentences the e2e tests look for, and
escaping."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, date, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.backfill.messages import notices as teams
from bot.backfill.rules.status import ReportEstimate
from bot.core.model import Interval
from bot.events import messages as ops
from bot.home import messages as home
from bot.home.messages import HomeBackfill, HomeIncident, HomeRestated, HomeSlaMiss
from bot.sla import messages as sla
from bot.sla.rules import Miss
from tests.support.golden import Case, assert_golden, check, mrkdwn_texts

SLA, HOME, NOTICE = "sla/sla_notice.json.j2", "home/home.json.j2", "slack/ops_notice.json.j2"
TEAM = "backfill/team_notice.json.j2"
DAY = Interval(datetime(2021, 6, 8, tzinfo=UTC), datetime(2021, 6, 9, tzinfo=UTC))
DUE = datetime(2021, 6, 9, 2, tzinfo=UTC)
MISSING = Miss(DAY, DUE, "missing", "the SLA is 2h 00m after the interval ends")
LATE = Miss(DAY, DUE, "late", "runs usually finish within 1h 10m")
TOO_LONG = Miss(
    Interval(datetime(2021, 6, 8, 6, tzinfo=UTC), datetime(2021, 6, 8, 7, tzinfo=UTC)),
    DUE,
    "too_long",
    "running for 3h 00m, longer than 2h 00m",
)
WEIRD = "etl_`<!channel>`_<@U123>&*bold*"
REQUEST = "5f0c1e0a9d2b4c7e8f1a2b3c4d5e6f70"
T0 = datetime(2021, 6, 8, 9, 30, tzinfo=UTC)
LINKS = sla.NoticeLinks(
    miss_id="42",
    airflow_url="http://airflow.example.com/dags/example.etl_orders",
    marquez_url="http://marquez.example.com/lineage/job/food_delivery/example.etl_orders",
)
RERUN = teams.TeamRerun(
    request_id=REQUEST,
    root_dag="example.etl_orders",
    range_text="2021-06-04..2021-06-06",
    dags=[("example.etl_delivery_7_days", 1), ("example.delivery_times", 3)],
    channel="C0ORDERS",
    thread_ts="1622764800.000100",
)


def a_home(rows: int) -> dict[str, object]:
    return home.home_view(
        ["orders", "analytics"],
        [
            HomeIncident(
                f"example.dag_{i:03d}", "2021-06-04", i % 3, REQUEST if i % 2 else None, i == 1
            )
            for i in range(rows)
        ],
        [
            HomeBackfill(REQUEST, "example.etl_orders", date(2021, 6, 4), date(2021, 6, 6), s, 3)
            for s in ("approved", "running")
        ],
        [HomeSlaMiss("example.etl_orders", "too_long", "2021-06-07", DUE)],
        [
            HomeRestated(
                REQUEST,
                ("example.etl_orders", "example.etl_orders_7_days"),
                (date(2021, 6, 4), date(2021, 6, 5), date(2021, 6, 7)),
                2,
                1,
                0,
                DUE,
            ),
            HomeRestated(REQUEST, ("example.kpis",), (date(2021, 5, 31),), 0, 0, 1, DUE),
        ],
    )


def weird_home() -> dict[str, object]:
    return home.home_view(
        ["<!channel> & co"],
        [HomeIncident(WEIRD, "<!here>", 1, "id`x")],
        [HomeBackfill("id`<@U1>", WEIRD, date(2021, 6, 4), date(2021, 6, 4), "<!here>", 1)],
        [HomeSlaMiss(WEIRD, "late", "2021-06-07", DUE)],
    )


def held_home() -> dict[str, object]:
    """Backfills paused by a person, by a failed run and by their window, and one scheduled."""
    start, end = date(2021, 6, 4), date(2021, 6, 6)
    until = datetime(2021, 6, 7, 18, 0, tzinfo=UTC)
    chosen = ("reruns failed and missing runs", "newest interval first")
    return home.home_view(
        ["orders"],
        [],
        [
            HomeBackfill(REQUEST, "a.paused", start, end, "paused", 3, "U0BOB", None, chosen),
            HomeBackfill(REQUEST, "b.failed", start, end, "paused", 2, "failure"),
            HomeBackfill(REQUEST, "c.window", start, end, "paused", 2, "window", until),
            HomeBackfill(
                REQUEST, "d.later", start, end, "scheduled", 1, None, until, (), "late <feed>"
            ),
        ],
        [],
    )


CASES: dict[str, Case] = {
    "sla_notice_missing": Case(SLA, lambda: sla.late_notice("example.etl_orders", MISSING)),
    "sla_notice_late": Case(SLA, lambda: sla.late_notice("example.etl_orders_7_days", LATE)),
    "sla_notice_too_long": Case(SLA, lambda: sla.late_notice("example.etl_orders", TOO_LONG)),
    "sla_notice_late_cause": Case(
        SLA,
        lambda: sla.late_notice("example.etl_orders_7_days", LATE, cause="example.etl_orders"),
    ),
    "sla_notice_reports": Case(
        SLA,
        lambda: sla.reports_late(["Weekly KPIs", "Ops board"], "example.etl_orders", MISSING),
    ),
    "sla_notice_reports_many": Case(
        SLA,
        lambda: sla.reports_late([f"Report {i}" for i in range(25)], "example.etl_orders", LATE),
    ),
    "sla_notice_escaping": Case(
        SLA, lambda: sla.reports_late(["*KPI* <!channel> & co"], WEIRD, MISSING)
    ),
    "sla_notice_buttons": Case(
        SLA, lambda: sla.late_notice("example.etl_orders", LATE, links=LINKS)
    ),
    "team_notice_approved": Case(TEAM, lambda: teams.rerun_approved(RERUN, approver="U0BOB")),
    "team_notice_ended": Case(TEAM, lambda: teams.rerun_ended(RERUN, state="failed")),
    "team_notice_with_reason": Case(
        TEAM,
        lambda: teams.rerun_approved(
            replace(RERUN, reason="orders feed was late <!channel> & *bold*"), approver="U0BOB"
        ),
    ),
    "team_notice_escaping": Case(
        TEAM,
        lambda: teams.rerun_approved(
            teams.TeamRerun(REQUEST, WEIRD, "2021-06-04", [(WEIRD, 2)] * 20, "C0ORDERS"),
            approver="U0BOB",
        ),
    ),
    "report_notice": Case(
        "backfill/report_notice.json.j2",
        lambda: teams.reports_started(
            replace(RERUN, dags=[]),
            [
                ReportEstimate("Weekly KPIs", "reporting", T0, T0 - timedelta(minutes=20), None),
                ReportEstimate(
                    "Orders <!channel> & *bold*", "reporting", T0, T0 + timedelta(minutes=40), None
                ),
                ReportEstimate("Finance export", "reporting", T0, None, None),
            ],
        ),
    ),
    "home": Case(HOME, lambda: a_home(3)),
    "home_long": Case(HOME, lambda: a_home(20)),
    "home_empty": Case(HOME, lambda: home.home_view([], [], [], [])),
    "home_escaping": Case(HOME, weird_home),
    "home_held": Case(HOME, held_home),
    "ops_unreachable": Case(
        NOTICE,
        lambda: ops.unreachable(
            "Marquez at http://127.0.0.1:5000 is unreachable: <Connection refused> & more", T0
        ),
    ),
    "ops_recovered": Case(
        NOTICE,
        lambda: ops.recovered(
            (T0 + timedelta(minutes=9), T0 + timedelta(minutes=12)),
            T0,
            T0 - timedelta(minutes=5),
            75,
        ),
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert_golden(name, CASES[name], monkeypatch)


def test_sla_notices_say_what_is_late_and_until_when() -> None:
    assert sla.late_notice("example.etl_orders", MISSING)["text"] == (
        ":hourglass: `example.etl_orders` has no run yet for 2021-06-08 (due 2021-06-09 02:00 "
        "UTC): the SLA is 2h 00m after the interval ends."
    )
    assert sla.reports_late(["Weekly KPIs", "Ops"], "example.etl_orders", LATE)["text"] == (
        ":hourglass: *Weekly KPIs*, *Ops* will be late: `example.etl_orders` upstream of it "
        "has not succeeded yet for 2021-06-08."
    )
    too_long = sla.late_notice("a", TOO_LONG)["text"]
    assert "`a` is running too long for 2021-06-08 06:00 → 2021-06-08 07:00" in too_long
    many = sla.reports_late([f"R{i}" for i in range(25)], "a", LATE)["text"]
    assert "*R19* and 5 more will be late" in many


def test_sla_notices_escape_what_comes_from_outside() -> None:
    text = "\n".join(mrkdwn_texts(sla.reports_late(["<!channel>"], WEIRD, MISSING)))
    assert "*&lt;!channel&gt;* will be late: `etl_ˋ&lt;!channel&gt;ˋ_&lt;@U123&gt;&amp;*bold*`" in (
        text
    )
    assert "<!channel>" not in text
    assert "<@U123>" not in text


def test_home_lists_the_newest_rows_and_counts_them_all() -> None:
    view = a_home(20)
    texts = mrkdwn_texts(view)
    assert "Your teams: orders, analytics" in texts
    assert "*Open incidents (20)*" in texts
    incidents = [t for t in texts if t.startswith(":rotating_light:")]
    assert len(incidents) == home.ROWS
    assert incidents[1] == (
        f":rotating_light: `example.dag_001` wrote bad data for 2021-06-04 · 1 downstream joined · "
        f"backfill `{REQUEST}`"
    )
    assert incidents[2].startswith(":rotating_light: `example.dag_002` failed for 2021-06-04")
    assert (
        f":arrows_counterclockwise: `example.etl_orders` 2021-06-04..2021-06-06 · running · "
        f"3 DAGs · `{REQUEST}`"
    ) in texts
    assert (
        ":hourglass: `example.etl_orders` too long for 2021-06-07 (due 2021-06-09 02:00 UTC)"
        in (texts)
    )


def test_an_empty_home_says_so() -> None:
    texts = mrkdwn_texts(home.home_view([], [], [], []))
    assert texts[0] == "You are in no team of BOT_CONFIG, so nothing is filtered for you yet."
    assert {"No open incidents.", "No backfill is under way.", "No SLA misses."} <= set(texts)


def test_home_escapes_what_comes_from_outside() -> None:
    text = "\n".join(mrkdwn_texts(weird_home()))
    for raw in ("<!channel>", "<!here>", "<@U123>", "<@U1>"):
        assert raw not in text, raw
    assert "Your teams: &lt;!channel&gt; &amp; co" in text


def test_ops_notices_escape_the_error() -> None:
    payload = ops.unreachable("<!channel> down & out", T0)
    assert payload["text"].startswith(":warning: Marquez unreachable: The watcher cannot read")
    assert mrkdwn_texts(payload)[1:] == [
        "Error: &lt;!channel&gt; down &amp; out",
        "Resumes from events at 2021-06-08 09:30:00 UTC",
    ]


@pytest.mark.parametrize(
    ("new", "words"), [(0, "0 new run events"), (1, "1 new run event"), (75, "75 new run events")]
)
def test_recovered_counts_the_events_read(new: int, words: str) -> None:
    text = ops.recovered((T0 + timedelta(hours=3, minutes=5),) * 2, T0, T0, new)["text"]
    assert "after 3 h 5 min unreachable. No events were missed" in text
    assert f"({words} so far)." in text


names = st.text(alphabet="<>&ab_.é😀 *`@!", min_size=1, max_size=300)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=names, many=st.lists(names, max_size=40), reason=st.text(max_size=3000))
def test_any_names_stay_within_slack_limits(name: str, many: list[str], reason: str) -> None:
    miss = Miss(DAY, DUE, "late", reason)
    for payload in (
        sla.late_notice(name, miss),
        sla.reports_late(many or [name], name, miss),
        home.home_view(
            many,
            [HomeIncident(n, name, 1, name) for n in many],
            [HomeBackfill(name, n, date(2021, 6, 4), date(2021, 6, 4), name, 2) for n in many],
            [HomeSlaMiss(n, name, name, DUE) for n in many],
        ),
        ops.unreachable(reason or name, T0),
    ):
        check(payload)
        assert all(len(text) <= 3000 for text in mrkdwn_texts(payload))


def test_an_sla_notice_can_be_acknowledged_and_links_to_the_dag() -> None:
    notice = sla.late_notice("example.etl_orders", LATE, links=LINKS)
    actions = next(b for b in notice["blocks"] if b["type"] == "actions")["elements"]
    assert [e["action_id"] for e in actions] == [
        "sla.acknowledge",
        "sla.open_airflow",
        "sla.open_marquez",
    ]
    assert actions[0]["value"] == "42"
    done = sla.acknowledged(notice, "U0BOB")
    ids = [e["action_id"] for b in done["blocks"] if b["type"] == "actions" for e in b["elements"]]
    assert ids == ["sla.open_airflow", "sla.open_marquez"]
    assert "<@U0BOB> is on it" in "\n".join(mrkdwn_texts(done))
    again = sla.acknowledged(done, "U0CAROL")
    said = "\n".join(mrkdwn_texts(again))
    assert "<@U0CAROL> is on it" in said
    assert "U0BOB" not in said


def test_team_notices_say_what_is_rerun_and_where_to_follow_it() -> None:
    approved = teams.rerun_approved(RERUN, approver="U0BOB")
    assert approved["text"] == (
        ":repeat: Backfill `5f0c1e0a` of `example.etl_orders` 2021-06-04..2021-06-06, approved by "
        "<@U0BOB>, reruns your DAGs: `example.etl_delivery_7_days` (1 run), "
        "`example.delivery_times` (3 runs)."
    )
    where = mrkdwn_texts(approved)[-1]
    assert "<#C0ORDERS>" in where
    assert "https://slack.com/archives/C0ORDERS/p1622764800000100" in where
    ended = teams.rerun_ended(RERUN, state="succeeded")["text"]
    assert ended.startswith(":large_green_circle: Backfill `5f0c1e0a` of `example.etl_orders`")
    assert "*succeeded*" in ended
    weird = "\n".join(
        mrkdwn_texts(
            teams.rerun_approved(
                teams.TeamRerun(REQUEST, WEIRD, "d", [(WEIRD, 1)], "C0ORDERS"), approver="U0BOB"
            )
        )
    )
    assert "<!channel>" not in weird
    assert "<@U123>" not in weird
