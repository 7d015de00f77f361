"""An incident's alert and the replies in its thread (templates/incidents/incident_alert.json.j2 and
incident_reply.json.j2): golden files for every state of the impact and of the incident, and
escaping: nothing from outside can mention anyone, link anywhere or end a code span."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.incidents.messages import alerts as watch
from bot.incidents.rules.proposal import Proposal
from bot.lineage.rules.impact import DagImpact, ImpactSnapshot, ImpactStatus, ReportImpact
from bot.quality.messages import finding_line
from bot.quality.rules.checks import Finding, FindingKind
from bot.slack.messages.render import channel_mention, sentence, user_mention
from bot.slack.rules.ids import ActionId
from tests.support.golden import Case, assert_golden, check, elements, mrkdwn_texts

ALERT, REPLY = "incidents/incident_alert.json.j2", "incidents/incident_reply.json.j2"
INCIDENT = "0a1b2c3d4e5f60718293a4b5c6d7e8f9"
REQUEST = "5f0c1e0a9d2b4c7e8f1a2b3c4d5e6f70"
OUTAGE = watch.outage_words(
    [(datetime(2021, 6, d, tzinfo=UTC), datetime(2021, 6, d + 1, tzinfo=UTC)) for d in (4, 5, 6)]
)
DAY = watch.interval_words(datetime(2021, 6, 4, tzinfo=UTC), datetime(2021, 6, 5, tzinfo=UTC))

KNOWN = ImpactSnapshot(
    ImpactStatus.KNOWN,
    root_owners=("orders",),
    downstream=(
        DagImpact("food_delivery", "example.etl_delivery_7_days", ("logistics",)),
        DagImpact("food_delivery", "example.email_report"),
    ),
    datasets=("food_delivery.public.orders", "food_delivery.public.delivery_7_days"),
    reports=(
        ReportImpact("Weekly KPIs", "food_delivery.public.orders", "analytics"),
        ReportImpact("Ops board", "food_delivery.public.delivery_7_days"),
    ),
    teams=("orders", "analytics", "logistics"),
)
OPEN = watch.AlertView(
    incident_id=INCIDENT,
    namespace="food_delivery",
    dag_id="example.etl_orders",
    interval=DAY,
    open=True,
    failures=2,
    error="java.io.IOException: disk full",
    error_job="example.etl_orders.load",
    impact=KNOWN,
    mentions=("<!subteam^S0ANALYTIC>", "<@U0LOGISTIC>"),
    grouped=3,
    grouped_dags=("example.etl_delivery_7_days", "example.email_report"),
    backfill=REQUEST,
    snoozed_until=None,
    snoozed_by=None,
    marquez_url="http://marquez.example.com:3000/lineage/job/food_delivery/example.etl_orders",
)
SNOOZED = datetime(2021, 6, 5, 13, 0, tzinfo=UTC)
WEIRD = "etl_`<!channel>`_<@U123>&*bold*"
ESCAPING = replace(
    OPEN,
    namespace="ns <!here> & *x*",
    dag_id=WEIRD,
    error="``` <!channel> <@U123> & <http://evil.example|click> *bold* ```",
    error_job="task_`<!everyone>`",
    impact=replace(
        KNOWN,
        root_owners=("<!channel>", "a&b"),
        downstream=(DagImpact("ns", "down_`<@U123>`"),),
        reports=(ReportImpact("*KPI* <!channel>", "d", "<@U9>"),),
    ),
    mentions=("<!subteam^S0ANALYTIC>", "<!channel>", "<@U123|fake>"),
    grouped_dags=("g_<!here>",),
    backfill="id`<!channel>",
    snoozed_by="U0ALICE<!channel>",
    snoozed_until=SNOOZED,
)
MANY = replace(
    OPEN,
    impact=replace(
        KNOWN,
        downstream=tuple(DagImpact("ns", f"example.dag_{i:03d}") for i in range(30)),
        reports=tuple(ReportImpact(f"Report {i}", "d", "analytics") for i in range(12)),
    ),
    grouped=200,
    grouped_dags=tuple(f"example.dag_{i:03d}" for i in range(50)),
)

PROPOSED = replace(
    OPEN,
    backfill=None,
    failed_at=datetime(2021, 6, 7, 1, 2, tzinfo=UTC),
    try_number=2,
    airflow_url="http://airflow.example.com/dags/example.etl_orders/runs/scheduled__2021-06-06",
    log_url="http://airflow.example.com/dags/example.etl_orders/runs/scheduled__2021-06-06/tasks/load?try_number=2",
    acknowledged_by="U0ALICE0001",
    proposal=Proposal(dags=3, runs=9, estimate=timedelta(minutes=25)),
)
RECOVERED = replace(
    PROPOSED,
    open=False,
    recovered=True,
    proposal=Proposal(dags=2, runs=6, estimate=None, planned=False),
)

FINDINGS = (
    Finding(FindingKind.ZERO_ROWS, "food_delivery", "orders", 0, 41_050),
    Finding(
        FindingKind.ASSERTION, "food_delivery", "orders", assertion="not_null", column="customer_id"
    ),
    Finding(
        FindingKind.COLUMNS,
        "food_delivery",
        "orders",
        lost=(("discount", "double"),),
        readers=(("example.etl_orders_7_days", "orders_7_days.discount_total"),),
        reader_dags=3,
        others=2,
        table_level=("example.email_report",),
    ),
    Finding(FindingKind.FEW_ROWS, "food_delivery", "orders_7_days", 1_200, 287_000),
)
DATA = replace(
    PROPOSED,
    error=None,
    error_job=None,
    try_number=None,
    log_url=None,
    acknowledged_by=None,
    data=True,
    problems=tuple((finding_line(f, DAY), i == 3) for i, f in enumerate(FINDINGS)),
)

CASES: dict[str, Case] = {
    "incident_alert_data": Case(ALERT, lambda: watch.alert(DATA)),
    "incident_alert_data_resolved": Case(
        ALERT,
        lambda: watch.alert(
            replace(DATA, open=False, problems=tuple((p, True) for p, _ in DATA.problems))
        ),
    ),
    "incident_reply_bad_data_again": Case(REPLY, watch.bad_data_again),
    "incident_reply_data_resolved": Case(
        REPLY, lambda: watch.data_resolved("example.etl_orders", DAY, REQUEST)
    ),
    "incident_alert_open": Case(ALERT, lambda: watch.alert(OPEN)),
    "incident_alert_proposed": Case(ALERT, lambda: watch.alert(PROPOSED)),
    "incident_alert_recovered": Case(ALERT, lambda: watch.alert(RECOVERED)),
    "incident_alert_pending": Case(
        ALERT,
        lambda: watch.alert(
            replace(OPEN, impact=ImpactSnapshot.pending(), mentions=(), grouped=0, backfill=None)
        ),
    ),
    "incident_alert_unavailable": Case(
        ALERT,
        lambda: watch.alert(
            replace(
                OPEN,
                impact=ImpactSnapshot.unavailable("Marquez is unreachable"),
                mentions=(),
                error=None,
                failures=1,
            )
        ),
    ),
    "incident_alert_snoozed": Case(
        ALERT,
        lambda: watch.alert(replace(OPEN, snoozed_until=SNOOZED, snoozed_by="U0ALICE0001")),
    ),
    "incident_alert_resolved_snoozed": Case(
        ALERT,
        lambda: watch.alert(
            replace(OPEN, open=False, snoozed_until=SNOOZED, snoozed_by="U0ALICE0001")
        ),
    ),
    "incident_alert_many": Case(ALERT, lambda: watch.alert(MANY)),
    "incident_alert_outage": Case(
        ALERT, lambda: watch.alert(replace(OPEN, interval=OUTAGE, failures=3))
    ),
    "incident_alert_escaping": Case(ALERT, lambda: watch.alert(ESCAPING)),
    "incident_reply_text": Case(
        REPLY,
        lambda: watch.reply(
            sentence(
                "Seen by {} & {} {}.",
                user_mention("U0ALICE0001"),
                "<!channel>",
                channel_mention("C0ORDERS"),
            )
        ),
    ),
    "incident_reply_impact_known": Case(
        REPLY, lambda: watch.impact_known(2, ["<!subteam^S0ANALYTIC>", "<@U0LOGISTIC>"])
    ),
    "incident_reply_failed_again": Case(REPLY, watch.failed_again),
    "incident_reply_grouped": Case(
        REPLY, lambda: watch.grouped(30, [f"example.dag_{i % 25:03d}" for i in range(30)])
    ),
    "incident_reply_resolved": Case(REPLY, lambda: watch.resolved("example.etl_orders", DAY, None)),
    "incident_reply_resolved_by_backfill": Case(
        REPLY, lambda: watch.resolved("example.etl_orders", DAY, REQUEST)
    ),
    "incident_reply_snoozed": Case(REPLY, lambda: watch.snoozed("U0ALICE0001", 24)),
    "incident_reply_backfill_asked": Case(
        REPLY, lambda: watch.backfill_asked("U0ALICE0001", REQUEST)
    ),
    "incident_reply_escaping": Case(REPLY, lambda: watch.grouped(2, [WEIRD, "b&<!here>"])),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert_golden(name, CASES[name], monkeypatch)


def shown(payload: dict[str, object]) -> str:
    return "\n".join([str(payload["text"]), *mrkdwn_texts(payload)])


def test_the_alert_reads_the_typed_impact() -> None:
    text = shown(watch.alert(OPEN))
    assert "Owned by orders · failed 2 times" in text
    assert "*Downstream:* example.etl_delivery_7_days, example.email_report" in text
    assert "*Reports:* Weekly KPIs (analytics), Ops board (no team)" in text
    assert "*Datasets rewritten by a backfill:* 2" in text
    assert "Affects <!subteam^S0ANALYTIC> <@U0LOGISTIC>" in text
    assert "Error in `example.etl_orders.load`:\n```java.io.IOException: disk full```" in text
    nobody = shown(watch.alert(replace(OPEN, impact=ImpactSnapshot(ImpactStatus.KNOWN))))
    assert "Owned by no team" in nobody
    assert "*Downstream:* nothing downstream\n*Reports:* none" in nobody


@pytest.mark.parametrize(
    ("impact", "expected"),
    [
        (ImpactSnapshot.pending(), "*Downstream:* being worked out…"),
        (ImpactSnapshot.unavailable("no such DAG"), "*Downstream:* unknown (no such DAG)"),
    ],
)
def test_pending_and_unavailable_impacts_say_so(impact: ImpactSnapshot, expected: str) -> None:
    assert expected in shown(watch.alert(replace(OPEN, impact=impact)))


def test_outside_values_in_the_alert_are_inert() -> None:
    text = shown(watch.alert(ESCAPING))
    for raw in ("<!channel>", "<!here>", "<!everyone>", "<@U123>", "<@U9>", "<http", "<@U123|"):
        assert raw not in text, raw
    assert "`etl_ˋ&lt;!channel&gt;ˋ_&lt;@U123&gt;&amp;*bold*`" in text
    # the error's own ``` cannot close the block it is shown in
    assert "```ˋˋˋ &lt;!channel&gt; &lt;@U123&gt; &amp; &lt;http://evil.example|click&gt;" in text
    assert "Error in `task_ˋ&lt;!everyone&gt;ˋ`" in text
    assert "Affects <!subteam^S0ANALYTIC> &lt;!channel&gt; &lt;@U123|fake&gt;" in text
    assert "Backfill `idˋ&lt;!channel&gt;` requested" in text


def test_buttons_carry_only_the_incident_id_and_go_with_the_open_incident() -> None:
    buttons = {e["action_id"]: e for e in elements(watch.alert(OPEN))}
    # a backfill is under way: no second one is offered
    assert set(buttons) == {
        ActionId.INCIDENT_ACK,
        ActionId.INCIDENT_SNOOZE_1H,
        ActionId.INCIDENT_SNOOZE_24H,
        ActionId.INCIDENT_MARQUEZ,
    }
    assert {b.get("value") for b in buttons.values()} == {INCIDENT, None}
    resolved = [e["action_id"] for e in elements(watch.alert(replace(OPEN, open=False)))]
    assert resolved == [ActionId.INCIDENT_MARQUEZ]


def test_an_alert_proposes_its_backfill_with_a_confirm_dialog_and_links_to_airflow() -> None:
    payload = watch.alert(PROPOSED)
    buttons = {e["action_id"]: e for e in elements(payload)}
    assert list(buttons) == [
        ActionId.INCIDENT_APPROVE,
        ActionId.INCIDENT_REVIEW,
        ActionId.INCIDENT_SNOOZE_1H,  # acknowledged already: no Acknowledge
        ActionId.INCIDENT_SNOOZE_24H,
        ActionId.INCIDENT_AIRFLOW,
        ActionId.INCIDENT_LOG,
        ActionId.INCIDENT_MARQUEZ,
    ]
    confirm = buttons[ActionId.INCIDENT_APPROVE]["confirm"]
    assert "Rerun `example.etl_orders` and 2 DAGs downstream" in confirm["text"]["text"]
    assert buttons[ActionId.INCIDENT_LOG]["url"] == PROPOSED.log_url
    text = json.dumps(payload, ensure_ascii=False)
    assert "3 DAGs · 9 runs · about 25m 00s, from run history" in text
    assert "Last failed 2021-06-07 01:02 UTC · try 2" in text
    assert "<@U0ALICE0001> is on it" in text
    snoozed = watch.alert(replace(PROPOSED, snoozed_until=SNOOZED))
    assert ActionId.INCIDENT_UNSNOOZE in {e["action_id"] for e in elements(snoozed)}


def test_a_root_that_recovered_on_its_own_offers_backfill_downstream() -> None:
    payload = watch.alert(RECOVERED)
    ids = [e["action_id"] for e in elements(payload)]
    assert ids[:2] == [ActionId.INCIDENT_DOWNSTREAM, ActionId.INCIDENT_REVIEW]
    assert "now resolved on its own" in payload["text"]
    assert "no run history to estimate the time from" in json.dumps(payload, ensure_ascii=False)
    done = watch.alert(replace(RECOVERED, backfill=REQUEST, backfill_state="succeeded"))
    assert ActionId.INCIDENT_DOWNSTREAM not in {e["action_id"] for e in elements(done)}
    assert "succeeded" in json.dumps(done, ensure_ascii=False)


def test_a_link_slack_cannot_carry_is_left_out_not_the_alert() -> None:
    long = replace(PROPOSED, marquez_url="http://m/" + "x" * 3100)
    ids = {e["action_id"] for e in elements(watch.alert(long))}
    assert ActionId.INCIDENT_MARQUEZ not in ids
    assert ActionId.INCIDENT_APPROVE in ids


def test_replies_say_what_happened() -> None:
    assert shown(watch.impact_known(1, ["<@U0BOB>"])).endswith(
        "Impact worked out: 1 downstream DAG. Affects <@U0BOB>"
    )
    assert watch.failed_again()["text"] == "It failed again after it had resolved."
    grouped = watch.grouped(30, [f"example.dag_{i % 25:03d}" for i in range(30)])["text"]
    assert grouped.startswith("30 failure(s) downstream joined this incident: `example.dag_000`")
    assert grouped.endswith("`example.dag_019` and 5 more")
    assert watch.resolved("a.b", "2021-06-04", None)["text"] == (
        "Resolved: `a.b` succeeded for 2021-06-04."
    )
    assert watch.resolved("a.b", "2021-06-04", REQUEST)["text"] == (
        f"Resolved: `a.b` succeeded for 2021-06-04 (backfill {REQUEST})."
    )
    assert (
        watch.snoozed("U0ALICE0001", 1)["text"] == "<@U0ALICE0001> snoozed this incident for 1 h."
    )
    assert watch.backfill_asked("U0ALICE0001", REQUEST)["text"] == (
        f"<@U0ALICE0001> asked for backfill `{REQUEST}`; its plan is in this thread."
    )


def test_replies_keep_only_the_bots_mentions_live() -> None:
    assert watch.impact_known(0, ["<!channel>", "<@U0BOB>"])["text"].endswith(
        "Affects &lt;!channel&gt; <@U0BOB>"
    )
    assert watch.snoozed("<!channel>", 1)["text"].startswith("&lt;@&lt;!channel&gt;&gt;")
    assert watch.resolved("<@U1>`x", "<!here>", "<!channel>")["text"] == (
        "Resolved: `&lt;@U1&gt;ˋx` succeeded for &lt;!here&gt; (backfill &lt;!channel&gt;)."
    )
    assert "<!here>" not in watch.grouped(1, ["<!here>"])["text"]


def test_many_mentions_and_names_stay_within_one_section() -> None:
    mentions = [f"<@U{i:08d}>" for i in range(500)]
    text = watch.impact_known(500, mentions)["text"]
    assert text.endswith("more")
    assert len(text) <= 3000
    names = [f"{'&' * 200}_{i}" for i in range(40)]
    assert len(watch.grouped(40, names)["blocks"][0]["text"]["text"]) <= 3000


names = st.text(alphabet="<>&ab_.é😀 *`@!", min_size=1, max_size=300)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=names,
    many=st.lists(names, max_size=60),
    error=st.text(max_size=3000),
    status=st.sampled_from(list(ImpactStatus)),
)
def test_any_names_stay_within_slack_limits(
    name: str, many: list[str], error: str, status: ImpactStatus
) -> None:
    impact = ImpactSnapshot(
        status,
        root_owners=tuple(many),
        downstream=tuple(DagImpact(name, n, (name,)) for n in many),
        datasets=tuple(many),
        reports=tuple(ReportImpact(n, name, n) for n in many),
        error=error or None,
    )
    view = replace(
        ESCAPING, dag_id=name, namespace=name, error=error, error_job=name, impact=impact,
        mentions=tuple(many), grouped_dags=tuple(many), backfill=name, snoozed_by=name,
    )  # fmt: skip
    for payload in (
        watch.alert(view),
        watch.alert(replace(view, open=False)),
        watch.reply(f"Note: {error or name}"),  # the bot never replies with nothing
        watch.impact_known(len(many), many),
        watch.grouped(len(many), many),
        watch.resolved(name, name, name),
        watch.snoozed(name, 1),
        watch.backfill_asked(name, name),
    ):
        check(payload)
        assert all(len(text) <= 3000 for text in mrkdwn_texts(payload))
