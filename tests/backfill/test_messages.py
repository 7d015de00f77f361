"""Messages of /backfill (templates/backfill/, templates/slack/): golden Block Kit JSON for
every layout (see tests/support/golden.py), escaping, opaque ids, and any names within Slack's
limits.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.backfill.messages.backfill import (
    help_message,
    plan_modal,
    plan_preview,
    request_status,
    status_list,
)
from bot.backfill.messages.options_form import options_modal, read_form
from bot.backfill.rules.capacity import Held
from bot.backfill.rules.options import RunOptions
from bot.backfill.rules.states import REQUEST_TRANSITIONS, RequestState, StepState
from bot.backfill.rules.status import Hold, Queued, ReportEstimate, RequestStatus, StepStatus
from bot.core.model import DagRef, DateRange, Interval
from bot.lineage.rules.planner import LineageLoading, Plan, PlanStep
from bot.ownership.messages import denied
from bot.ownership.rules import Denial, DenialKind
from bot.slack.messages.common import acknowledgement, action_result, refusal
from bot.slack.messages.limits import check_message, check_view
from bot.slack.messages.render import (
    channel_mention,
    clip,
    code,
    escape_mrkdwn,
    join_clipped,
    sentence,
    user_mention,
)
from bot.slack.rules.ids import ActionId, BlockId, ViewCallbackId
from tests.support.golden import Case, assert_golden, elements, mrkdwn_texts

RANGE = DateRange(date(2021, 6, 4), date(2021, 6, 6))
REQUEST = "5f0c1e0a9d2b4c7e8f1a2b3c4d5e6f70"
ROOT = DagRef("example", "example.etl_orders")


def days(first: int, count: int, hours: int = 24) -> tuple[Interval, ...]:
    start = datetime(2021, 6, first, tzinfo=UTC)
    step = timedelta(hours=hours)
    return tuple(Interval(start + i * step, start + (i + 1) * step) for i in range(count))


def make_plan(
    downstream: int,
    *,
    root: DagRef = ROOT,
    only: bool = False,
    excluded: tuple[DagRef, ...] = (),
    name: Callable[[int], str] = lambda i: f"example.dag_{i:03d}",
) -> Plan:
    """The root and `downstream` DAGs with daily, hourly and weekly runs and fan-in."""
    steps = [PlanStep(root, days(4, 3), (), "daily", ("team-orders",))]
    for i in range(1, downstream + 1):
        dag = DagRef("example", name(i))
        upstream = tuple(steps[j].dag for j in {i - 1, i // 2} if j >= 0)
        intervals, schedule = [
            (days(4, 3), "daily"),
            (days(4, 72, hours=1), "hourly"),
            (days(1, 1, hours=24 * 7), "weekly"),
        ][i % 3]
        owners = [(), ("team-analytics",), ("team-analytics", "team-finance")][i % 3]
        steps.append(PlanStep(dag, intervals, upstream, schedule, owners))
    return Plan(root, RANGE, tuple(steps), excluded, only)


STEPS_OF: Mapping[str, str] = {
    RequestState.PREVIEWED: StepState.PENDING,
    RequestState.APPROVED: StepState.PENDING,
    RequestState.SCHEDULED: StepState.PENDING,
    RequestState.REFUSED: StepState.PENDING,
    RequestState.RUNNING: StepState.RUNNING,
    RequestState.PAUSED: StepState.RUNNING,
    RequestState.SUCCEEDED: StepState.SUCCEEDED,
    RequestState.FAILED: StepState.FAILED,
    RequestState.CANCELLED: StepState.CANCELLED,
}


def make_status(state: str, downstream: int = 3, *, at: int = 1) -> RequestStatus:
    """A request in `state`; running or failed at step index `at`, done before, pending after."""
    plan = make_plan(downstream)
    step_state = STEPS_OF[state]

    def state_of(index: int) -> str:
        if step_state not in (StepState.RUNNING, StepState.FAILED) or index == at:
            return step_state
        return StepState.SUCCEEDED if index < at else StepState.PENDING

    return RequestStatus(
        request_id=REQUEST,
        root_dag=ROOT.dag_id,
        range_text=str(RANGE),
        state=state,
        requester="U0REQUESTER",
        approvers=() if state in ("previewed", "refused") else ("U0APPROVER",),
        steps=tuple(
            StepStatus(s.dag.dag_id, state_of(i), len(s.intervals))
            for i, s in enumerate(plan.steps)
        ),
        cancellable=RequestState.CANCELLED in REQUEST_TRANSITIONS.get(state, frozenset()),
        hold=HOLDS.get(state),
    )


AT = datetime(2021, 6, 7, 14, 2, tzinfo=UTC)
HOLDS: Mapping[str, Hold] = {
    RequestState.PAUSED: Hold("U0PAUSER", AT),
    RequestState.SCHEDULED: Hold(None, None, "--at", datetime(2021, 6, 7, 20, 0, tzinfo=UTC)),
}
OPTIONS: dict[str, Any] = {
    **RunOptions(
        rerun="failed",
        backwards=True,
        conf={"full_refresh": True, "note": "<b>&"},
        max_active=2,
        reason="orders feed was late <again> & *twice*",
        stop_on_failure=True,
    ).to_json(),
    "counts": {"missing": 3, "failed": 5, "all": 12, "known": True},
    "unhonoured": ["airflow 2 keeps a cleared run's conf"],
}


WEIRD = make_plan(
    2, root=DagRef("données <prod>", "etl_<orders>&co"), name=lambda i: f"rapport_ü_{i}&<b>"
)


# Weekly KPIs read at 08:00 UTC daily, written by example.dag_002; DAGs run 20 min, 2 at once.
REPORTS = {
    "deadlines": [{
        "report": "Weekly KPIs", "team": "reporting", "dags": ["example.dag_002"],
        "deadline": {"days": list(range(7)), "at": "08:00", "timezone": "UTC"},
    }],
    "pace": {d: {"run_s": 1200, "at_once": 2}
             for d in ("example.etl_orders", "example.dag_001", "example.dag_002")},
}  # fmt: skip


def preview(plan: Plan, **options: Any) -> dict[str, Any]:
    return plan_preview(
        plan, request_id=REQUEST, requester="U0REQUESTER", **{"dry_run": False, **options}
    )


PREVIEW, MODAL = "backfill/plan_preview.json.j2", "backfill/plan_modal.json.j2"
OPTIONS_MODAL = "backfill/options_modal.json.j2"
STATUS, NOTICE = "backfill/request_status.json.j2", "slack/notice.json.j2"
LIST = "backfill/status_list.json.j2"
NOT_ALLOWED = Denial(DenialKind.NOT_ALLOWED, "example.etl_orders", ("orders", "finance"))

CASES: dict[str, Case] = {
    "plan_preview_short": Case(PREVIEW, lambda: preview(make_plan(3))),
    "plan_preview_long": Case(PREVIEW, lambda: preview(make_plan(59))),
    "plan_preview_dry_run": Case(PREVIEW, lambda: preview(make_plan(3), dry_run=True)),
    "plan_preview_dry_run_long": Case(PREVIEW, lambda: preview(make_plan(59), dry_run=True)),
    "plan_preview_only": Case(PREVIEW, lambda: preview(make_plan(0, only=True))),
    "plan_preview_excluded": Case(
        PREVIEW,
        lambda: preview(
            make_plan(2, excluded=(DagRef("example", "example.email_report"), DagRef("b", "x.y")))
        ),
    ),
    "plan_preview_escaping": Case(PREVIEW, lambda: preview(WEIRD)),
    "plan_preview_index": Case(
        PREVIEW,
        lambda: preview(
            replace(make_plan(3), lineage_as_of=datetime(2021, 6, 7, 9, 30, tzinfo=UTC))
        ),
    ),
    "plan_preview_index_loading": Case(
        PREVIEW,
        lambda: preview(
            replace(make_plan(3), lineage_loading=LineageLoading(4200, 100_000, 3, False))
        ),
    ),
    "plan_preview_options": Case(PREVIEW, lambda: preview(make_plan(3), options=OPTIONS)),
    "plan_preview_options_no_history": Case(
        PREVIEW,
        lambda: preview(
            make_plan(1),
            options={**OPTIONS, "counts": {"missing": 4, "failed": 4, "all": 4, "known": False}},
        ),
    ),
    "request_status_paused_failure": Case(
        STATUS,
        lambda: request_status(
            replace(
                make_status("paused"),
                hold=Hold("failure", AT, "stopped at a failed run of example.dag_001"),
                options=RunOptions.from_json(OPTIONS).described(),
                reason="orders feed was late",
            )
        ),
    ),
    "plan_preview_reports": Case(
        PREVIEW,
        lambda: preview(
            make_plan(2),
            options={**OPTIONS, "priority": "high", **REPORTS},
            now=datetime(2021, 6, 7, 5, 0, tzinfo=UTC),
        ),
    ),
    "plan_preview_asset_consumers": Case(
        PREVIEW,
        lambda: preview(
            make_plan(2),
            options={
                **OPTIONS,
                "asset_consumers": [
                    {"dag": "example.etl_orders", "asset": "orders", "consumer": "example.audit"},
                    {"dag": "example.etl_orders", "asset": "orders", "consumer": "example.kpi"},
                    {"dag": "example.dag_001", "asset": "s3://lake/<b>&", "consumer": "x"},
                ],
            },
        ),
    ),
    "plan_preview_asset_consumers_included": Case(
        PREVIEW,
        lambda: preview(
            make_plan(2),
            options={
                **OPTIONS,
                "with_asset_consumers": True,
                "asset_triggered": ["example.audit", "<b>&"],
                "asset_consumers": [],
            },
        ),
    ),
    "request_status_queued": Case(
        STATUS,
        lambda: request_status(
            replace(
                make_status("approved"),
                state="running",
                queued=Queued(
                    2,
                    3,
                    (Held("team", "orders", 8, 8), Held("pool", "finance.*", 4, 4)),
                    idle=True,
                    steps=3,
                ),
                estimates=(
                    ReportEstimate(
                        "Weekly KPIs",
                        "reporting",
                        datetime(2021, 6, 7, 8, 0, tzinfo=UTC),
                        None,
                        timedelta(hours=1, minutes=40),
                    ),
                ),
            )
        ),
    ),
    "request_status_running_estimate": Case(
        STATUS,
        lambda: request_status(
            replace(
                make_status("running"),
                queued=Queued(1, 1, (Held("total", "", 32, 32),), idle=False, steps=1),
                estimates=(
                    ReportEstimate(
                        "Weekly KPIs",
                        "reporting",
                        datetime(2021, 6, 7, 8, 0, tzinfo=UTC),
                        datetime(2021, 6, 7, 8, 40, tzinfo=UTC),
                        timedelta(hours=1),
                    ),
                ),
            )
        ),
    ),
    "request_status_paused_window": Case(
        STATUS,
        lambda: request_status(
            replace(
                make_status("paused"),
                hold=Hold("window", AT, "", datetime(2021, 6, 7, 18, 0, tzinfo=UTC)),
            )
        ),
    ),
    "options_modal_from_alert": Case(
        OPTIONS_MODAL,
        lambda: options_modal(
            make_plan(3),
            metadata={"incident": "i1", "channel": "C1"},
            options=None,
            start_at=None,
            default_rerun="all",
            submit="Preview backfill",
        ),
    ),
    "options_modal_prefilled": Case(
        OPTIONS_MODAL,
        lambda: options_modal(
            WEIRD,
            metadata={"request": REQUEST, "channel": "C1"},
            options={**OPTIONS, "now": False},
            start_at=datetime(2021, 6, 7, 20, 0, tzinfo=UTC),
            default_rerun="all",
            submit="Update plan",
        ),
    ),
    "options_modal_300": Case(
        OPTIONS_MODAL,
        lambda: options_modal(
            make_plan(299),
            metadata={"request": REQUEST},
            options=OPTIONS,
            start_at=None,
            default_rerun="failed",
            submit="Update plan",
        ),
    ),
    "plan_modal_short": Case(MODAL, lambda: plan_modal(make_plan(3), request_id=REQUEST)),
    "plan_modal_300": Case(MODAL, lambda: plan_modal(make_plan(299), request_id=REQUEST)),
    "plan_modal_escaping": Case(MODAL, lambda: plan_modal(WEIRD, request_id=REQUEST)),
    **{
        f"request_status_{state}": Case(STATUS, lambda s=state: request_status(make_status(s)))
        for state in RequestState
    },
    "request_status_long": Case(STATUS, lambda: request_status(make_status("running", 59, at=30))),
    "status_list_empty": Case(LIST, lambda: status_list([])),
    "status_list": Case(LIST, lambda: status_list([make_status(s) for s in RequestState])),
    "status_list_long": Case(
        LIST,
        lambda: status_list(
            [replace(make_status("succeeded"), request_id=f"{i:032x}") for i in range(25)]
        ),
    ),
    "refusal": Case(NOTICE, lambda: refusal("Unknown DAG etl_ordrs in namespace example.")),
    "refusal_hint": Case(
        NOTICE,
        lambda: refusal(
            "Unknown DAG <etl_ordrs> & co.",
            hint=sentence(
                "Did you mean {}? Ask {}.",
                code("example.etl_orders"),
                user_mention("U0OWNER"),
            ),
        ),
    ),
    "refusal_not_allowed_to_cancel": Case(
        NOTICE, lambda: refusal(denied(NOT_ALLOWED, action="cancel"))
    ),
    "help": Case("backfill/help.json.j2", lambda: help_message()),
    "action_result": Case(
        NOTICE,
        lambda: action_result(sentence("Already approved by {}.", user_mention("U0APPROVER"))),
    ),
    "acknowledgement": Case(
        NOTICE,
        lambda: acknowledgement("Planning example.etl_orders 2021-06-04..2021-06-06 …"),
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert_golden(name, CASES[name], monkeypatch)


@pytest.mark.parametrize(
    ("dags", "max_rows", "shown"),
    # 44: what 50 blocks leave beside header, summary, "more", lineage, a blocked note, actions
    [(60, 12, 12), (60, 1, 1), (12, 12, 12), (60, 100, 44)],
)
def test_long_plan_shows_max_rows_then_counts_the_rest(
    dags: int, max_rows: int, shown: int
) -> None:
    plan = make_plan(dags - 1)
    payload = preview(plan, max_rows=max_rows)
    body = json.dumps(payload)
    visible = [s.dag.dag_id for s in plan.steps if f"`{s.dag.dag_id}`" in body]
    assert visible == [s.dag.dag_id for s in plan.steps[:shown]]
    more = [t for t in mrkdwn_texts(payload) if t.startswith("… and")]
    hidden = dags - shown
    assert more == ([f"… and {hidden} more DAGs"] if hidden else [])
    show_plan = [e for e in elements(payload) if e["action_id"] == ActionId.SHOW_PLAN]
    assert [e["value"] for e in show_plan] == ([REQUEST] if hidden else [])


def test_approve_and_cancel_carry_only_the_request_id() -> None:
    payload = preview(make_plan(59))
    buttons = {e["action_id"]: e for e in elements(payload)}
    assert set(buttons) == {ActionId.APPROVE, ActionId.REVIEW, ActionId.CANCEL, ActionId.SHOW_PLAN}
    assert all(e["value"] == REQUEST for e in buttons.values())
    approve, cancel = buttons[ActionId.APPROVE], buttons[ActionId.CANCEL]
    assert (approve["style"], cancel["style"]) == ("primary", "danger")
    confirm = approve["confirm"]
    assert confirm["title"]["text"] == "Start this backfill?"
    assert (confirm["confirm"]["text"], confirm["deny"]["text"]) == ("Start backfill", "Not yet")
    runs = make_plan(59).run_count
    assert confirm["text"]["text"] == (
        f"60 DAGs, {runs} runs, starting with `example.etl_orders` over 2021-06-04..2021-06-06."
    )
    actions = [b for b in payload["blocks"] if b["type"] == "actions"]
    assert [b["block_id"] for b in actions] == [BlockId.PLAN_ACTIONS]


def test_dry_run_says_so_and_offers_no_approve_or_cancel() -> None:
    short, long = preview(make_plan(3), dry_run=True), preview(make_plan(59), dry_run=True)
    assert [e["action_id"] for e in elements(short)] == []
    # A dry run stores no request, so no button could reload one; the count still shows.
    assert [e["action_id"] for e in elements(long)] == []
    assert "… and 48 more DAGs" in mrkdwn_texts(long)
    for payload in (short, long):
        assert ":test_tube: Dry run: nothing will be started" in mrkdwn_texts(payload)


def test_every_action_id_comes_from_the_enum() -> None:
    for name, case in CASES.items():
        payload = case.build()
        if payload.get("type") == "modal":
            assert payload["callback_id"] in set(ViewCallbackId), name
            for block in payload["blocks"]:
                if block["type"] == "input":
                    assert block["element"]["action_id"] == ActionId.OPTION, name
            continue
        for element in elements(payload):
            assert element["action_id"] in set(ActionId), name


def test_modal_lists_all_300_steps_within_100_blocks() -> None:
    plan = make_plan(299)
    view = plan_modal(plan, request_id=REQUEST)
    body = json.dumps(view)
    assert all(f"`{s.dag.dag_id}`" in body for s in plan.steps)
    assert len(view["blocks"]) <= 100
    assert view["private_metadata"] == REQUEST
    assert (view["title"]["text"], view["close"]["text"]) == ("Backfill plan", "Close")


def test_modal_too_big_even_packed_ends_with_and_n_more() -> None:
    plan = make_plan(1999, name=lambda i: f"{i:04d}_" + "&" * 140)
    view = plan_modal(plan, request_id=REQUEST)
    check_view(view)
    shown = sum(text.count("\n*") + 1 for text in mrkdwn_texts(view)[1:-1])
    more = mrkdwn_texts(view)[-1]
    assert more == f"… and {2000 - shown} more DAGs"
    assert 0 < shown < 2000


def test_values_are_escaped_for_mrkdwn_and_kept_raw_in_plain_text() -> None:
    payload = preview(WEIRD)
    texts = "\n".join([payload["text"], *mrkdwn_texts(payload)])
    assert "`etl_&lt;orders&gt;&amp;co`" in texts
    assert "données &lt;prod&gt;" in texts
    assert "rapport_ü_1&amp;&lt;b&gt;" in texts
    for raw in ("<orders>", "<b>", "<prod>"):
        assert raw not in texts
    assert "<@U0REQUESTER>" in texts  # our own mention survives
    assert payload["blocks"][0]["text"]["text"].startswith("Backfill plan: etl_<orders>&co")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Approved by <@U0ABC> & <@W0DEF>", "Approved by &lt;@U0ABC&gt; &amp; &lt;@W0DEF&gt;"),
        ("see <#C0ABC> or <!subteam^S0ABC>", "see &lt;#C0ABC&gt; or &lt;!subteam^S0ABC&gt;"),
        (
            "<http://evil.example|click> <!channel>",
            "&lt;http://evil.example|click&gt; &lt;!channel&gt;",
        ),
        ("<@U0ABC|name> a<b", "&lt;@U0ABC|name&gt; a&lt;b"),
    ],
)
def test_a_plain_sentence_is_shown_as_written(text: str, expected: str) -> None:
    """A service's sentence carries DAG ids and what people typed: nothing in it is live."""
    for payload in (
        action_result(text),
        refusal(text, hint=text),
        acknowledgement(text),
    ):
        assert payload["blocks"][0]["text"]["text"].endswith(expected)
        assert payload["text"].endswith(expected)


def test_a_composed_sentence_keeps_only_the_mentions_the_bot_built() -> None:
    dag = "etl`<!channel> <@U0EVIL>`x"
    said = sentence(
        "Backfill {} of {} was approved by {} in {} & {}.",
        "<!here>",
        code(dag),
        user_mention("U0APPROVER"),
        channel_mention("C0ORDERS"),
        user_mention("U0X> <!channel"),
    )
    assert said == (
        "Backfill &lt;!here&gt; of `etlˋ&lt;!channel&gt; &lt;@U0EVIL&gt;ˋx` was approved by "
        "<@U0APPROVER> in <#C0ORDERS> &amp; &lt;@U0X&gt; &lt;!channel&gt;."
    )
    assert action_result(said)["text"] == f":information_source: {said}"
    long = sentence("{} " * 400, *[user_mention("U0APPROVER")] * 400)
    text = refusal(long)["text"]
    assert text.endswith("…")
    assert text[:-1].rstrip().endswith("<@U0APPROVER>")  # cut between mentions, not in one
    assert len(text) <= 3000


def test_refusal_escapes_and_shows_the_hint() -> None:
    payload = refusal("DAG <x> & y is unknown", hint="Try <z>")
    assert payload["text"] == ":no_entry: DAG &lt;x&gt; &amp; y is unknown"
    assert mrkdwn_texts(payload) == [payload["text"], ":bulb: Try &lt;z&gt;"]
    assert len(refusal("no")["blocks"]) == 1


def test_clip_and_join_count_escaped_characters() -> None:
    assert clip("a&b", 5) == "a…"
    assert clip("abc", 3) == "abc"
    joined = join_clipped([f"dag_{i}&" for i in range(100)], 100)
    assert len(escape_mrkdwn(joined)) <= 100
    assert joined.endswith(f"and {100 - joined.count(',') - 1} more")


def test_status_buttons_follow_the_state() -> None:
    def buttons(status: RequestStatus) -> list[tuple[str, str]]:
        return [(e["action_id"], e["value"]) for e in elements(request_status(status))]

    running = buttons(make_status("running"))
    assert running == [(ActionId.PAUSE, REQUEST), (ActionId.CANCEL, REQUEST)]
    assert buttons(make_status("paused")) == [
        (ActionId.RESUME, REQUEST),
        (ActionId.CANCEL, REQUEST),
    ]
    # The bot resumes a backfill its window paused: nobody can resume it early from here.
    window = replace(make_status("paused"), hold=Hold("window", AT, "", AT))
    assert buttons(window) == [(ActionId.CANCEL, REQUEST)]
    assert buttons(make_status("scheduled")) == [(ActionId.CANCEL, REQUEST)]
    assert not buttons(make_status("succeeded"))


def test_long_status_shows_the_failure_and_what_comes_next() -> None:
    payload = request_status(make_status("failed", 59, at=30))
    rows = [t for t in mrkdwn_texts(payload) if t.startswith(":")][1:]
    assert rows[0].startswith(":red_circle: *31.*")
    assert rows[-1].startswith(":white_circle: *42.*")
    assert "60 DAGs: 30 succeeded · 1 failed · 29 pending" in mrkdwn_texts(payload)
    assert "… and 48 more DAGs" in mrkdwn_texts(payload)


def test_empty_status_list() -> None:
    payload = status_list([])
    assert payload["text"] == "No backfills yet."
    assert mrkdwn_texts(payload) == ["No backfills yet."]


# --- any names, any sizes -------------------------------------------------------------------

names = st.text(alphabet="<>&ab_.é😀 *`", min_size=1, max_size=300)


@st.composite
def plans(draw: st.DrawFn) -> Plan:
    count = draw(st.integers(min_value=1, max_value=40))
    dags = [DagRef(draw(names), draw(names)) for _ in range(count)]
    steps = [
        PlanStep(
            dag,
            days(4, draw(st.integers(min_value=0, max_value=5))),
            tuple(draw(st.lists(st.sampled_from(dags[:i] or dags), max_size=30))),
            "daily",
            tuple(draw(st.lists(names, max_size=8))),
        )
        for i, dag in enumerate(dags)
    ]
    excluded = tuple(draw(st.lists(st.sampled_from(dags), max_size=20)))
    return Plan(dags[0], RANGE, tuple(steps), excluded, draw(st.booleans()))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=plans(), who=names, dry_run=st.booleans(), states=st.lists(names, max_size=40))
def test_any_names_stay_within_slack_limits(
    plan: Plan, who: str, dry_run: bool, states: list[str]
) -> None:
    check_message(plan_preview(plan, request_id=who, requester=who, dry_run=dry_run))
    check_view(plan_modal(plan, request_id=who))
    status = RequestStatus(
        who, plan.root.dag_id, who, who, who, (who,) * 15,
        tuple(StepStatus(s.dag.dag_id, x, 3) for s, x in zip(plan.steps, states, strict=False)),
        True,
    )  # fmt: skip
    check_message(request_status(status))
    check_message(status_list([status] * 30))
    check_message(refusal(who * 20, hint=who * 20))
    check_message(help_message(who))


@pytest.mark.parametrize("kind", list(DenialKind))
def test_a_cancel_refusal_is_its_own_sentence(kind: DenialKind) -> None:
    text = denied(Denial(kind, "example.etl_orders", ("orders",)), action="cancel")
    assert "cancel" in text
    assert "cancelr" not in text
    assert "Approve" not in text
    assert "must approve" not in text


def test_approval_refusals_name_the_dag_and_who_may_approve() -> None:
    assert denied(NOT_ALLOWED, action="approve") == (
        "You may not approve backfills of example.etl_orders: only members of its owning teams "
        "(orders, finance) or the configured approvers may. Ask one of them to click Approve."
    )
    assert denied(NOT_ALLOWED, action="cancel").endswith(
        "only the requester, members of its owning teams (orders, finance) or the configured "
        "approvers may. Ask one of them to click Cancel."
    )
    second = Denial(DenialKind.SECOND_PERSON, "example.etl_orders")
    assert "second person" in denied(second, action="approve")
    nobody = Denial(DenialKind.NO_ONE, "example.etl_orders")
    assert denied(nobody, action="approve").startswith("No team owns example.etl_orders")


def test_the_review_form_reads_back_what_it_was_prefilled_with() -> None:
    view = options_modal(
        make_plan(2),
        metadata={"request": REQUEST},
        options=OPTIONS,
        start_at=None,
        default_rerun="all",
        submit="Update plan",
    )
    values: dict[str, Any] = {}
    for block in view["blocks"]:
        if block["type"] != "input":
            continue
        element = block["element"]
        state: dict[str, Any] = {"type": element["type"]}
        if element["type"] == "static_select":
            state["selected_option"] = element["initial_option"]
        elif element["type"] == "checkboxes":
            state["selected_options"] = element.get("initial_options", [])
        else:
            state["value"] = element.get("initial_value")
        values[block["block_id"]] = {element["action_id"]: state}
    choices, errors = read_form(values)
    assert errors == {}
    assert choices is not None
    assert choices.options == RunOptions.from_json(OPTIONS)
    assert (choices.at, choices.now) == (None, False)


def test_the_review_form_answers_each_bad_value_under_its_input() -> None:
    from bot.slack.rules.ids import OptionBlock

    def text(value: str) -> dict[str, Any]:
        return {ActionId.OPTION: {"type": "plain_text_input", "value": value}}

    values = {
        OptionBlock.RERUN: {ActionId.OPTION: {"selected_option": {"value": "sometimes"}}},
        OptionBlock.CONF: text("{not json"),
        OptionBlock.MAX_ACTIVE: text("0"),
        OptionBlock.REASON: text("bad\x07bell"),
        OptionBlock.AT: text("2021-06-07 20:00"),
        OptionBlock.FLAGS: {ActionId.OPTION: {"selected_options": [{"value": "now"}]}},
    }
    choices, errors = read_form(values)
    assert choices is None
    assert set(errors) == set(OptionBlock) - {OptionBlock.FLAGS}
    assert "missing, failed or all" in errors[OptionBlock.RERUN]
    assert "JSON object" in errors[OptionBlock.CONF]
    assert "from 1 to 64" in errors[OptionBlock.MAX_ACTIVE]
    assert "control characters" in errors[OptionBlock.REASON]
    assert "Run now" in errors[OptionBlock.AT]
    # Nothing given at all: the defaults.
    empty, none = read_form({OptionBlock.RERUN: values[OptionBlock.RERUN] | {}})
    assert empty is None
    assert set(none) == {OptionBlock.RERUN}


@pytest.mark.parametrize(
    "values",
    [
        {},
        {"backfill.option.rerun": "not a mapping"},
        {"backfill.option.rerun": {"backfill.option": ["nope"]}},
        {"backfill.option.flags": {"backfill.option": {"selected_options": "backwards"}}},
        [],
    ],
)
def test_a_review_form_shaped_unlike_slacks_is_answered_not_crashed(values: Any) -> None:
    from bot.slack.rules.ids import OptionBlock

    choices, errors = read_form(values)
    assert choices is None
    assert OptionBlock.RERUN in errors
