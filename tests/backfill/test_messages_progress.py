"""Progress replies of a running backfill (templates/backfill/progress.json.j2): golden files,
escaping of what Airflow and Marquez say, long replies cut with "and N more", lines rendered when
seen and packed later; the status message of a stored request (a failed row says why, Retry),
and the "waiting for approval from" line of the status and the preview."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta

import pytest

from bot.backfill.messages import progress
from bot.backfill.messages.backfill import plan_preview, request_status
from bot.backfill.rules.progress import Counts
from bot.backfill.store.models import BackfillRequest, BackfillStep
from bot.core.model import DagRef, DateRange, Interval
from bot.lineage.rules.planner import Plan, PlanStep
from bot.slack.rules.ids import ActionId
from tests.support.golden import Case, assert_golden, check, elements, mrkdwn_texts

T0 = datetime(2021, 6, 7, 9, 0, tzinfo=UTC)
TEMPLATE = "backfill/progress.json.j2"


def request(dags: list[str], states: list[str], state: str = "running") -> BackfillRequest:
    return BackfillRequest(
        id="5f0c1e0a9d2b4c7e8f1a2b3c4d5e6f70",
        requester="U0REQUESTER",
        root_dag=dags[0],
        root_namespace="example",
        start_date=date(2021, 6, 4),
        end_date=date(2021, 6, 6),
        plan={},
        state=state,
        approvers=["U0APPROVER"],
        started_at=T0,
        finished_at=T0 + timedelta(minutes=42, seconds=5),
        steps=[
            BackfillStep(
                position=i,
                dag_id=dag,
                namespace="example",
                intervals=[{}] * 3,
                state=step_state,
                counts={"succeeded": 3 if step_state == "succeeded" else 1, "failed": 0},
                started_at=T0 + timedelta(minutes=i),
                finished_at=T0 + timedelta(minutes=10 * (i + 1)),
            )
            for i, (dag, step_state) in enumerate(zip(dags, states, strict=True))
        ],
    )


DAGS = ["example.etl_orders", "example.etl_delivery", "example.email_report"]
URL = "http://airflow.example.com/dags/example.etl_orders/grid?dag_run_id=a&b=<c>"


def a_pass() -> dict[str, object]:
    return progress.thread_reply(
        request(DAGS, ["succeeded", "failed", "skipped"]),
        [
            progress.Started("example.etl_orders", 3, URL),
            progress.Finished(
                "example.etl_orders",
                "succeeded",
                Counts(succeeded=3),
                timedelta(minutes=9),
                url=URL,
            ),
            progress.Finished(
                "example.etl_delivery",
                "failed",
                Counts(succeeded=1, failed=1, queued=1),
                timedelta(seconds=75),
                message="Task failed: OutOfMemoryError",
            ),
            progress.Skipped((("example.email_report", "an upstream DAG failed"),)),
        ],
    )


def summary(state: str, dags: int) -> dict[str, object]:
    names = [f"example.dag_{i:03d}" for i in range(dags)]
    done = request(names, ["succeeded"] * (dags - 1) + ["failed"], state=state)
    return progress.thread_reply(done, [progress.Summary(state)])


WEIRD = "etl_`<!channel>`&*bold*"


def escaping() -> dict[str, object]:
    return progress.thread_reply(
        request([WEIRD], ["failed"]),
        [
            progress.Started(WEIRD, 1),
            progress.Finished(
                WEIRD, "failed", Counts(failed=1), None, message="see <@U123> & <!here> `x`"
            ),
            progress.Skipped(((WEIRD, "<!channel> said *no*"),)),
        ],
    )


def failed_request() -> BackfillRequest:
    """A failed backfill as stored: one DAG failed with the backend's message, one without."""
    failed = request(DAGS, ["succeeded", "failed", "failed"], state="failed")
    failed.steps[1].message = "Task extract failed: OutOfMemoryError " + "x" * 400
    failed.steps[2].message = None
    failed.steps[2].counts = {"succeeded": 1, "failed": 2}
    return failed


def previewed() -> BackfillRequest:
    """Approved by one team (U0APPROVER), still waiting for others; nothing ran yet."""
    waiting = request(DAGS, ["pending"] * 3, state="previewed")
    waiting.started_at = waiting.finished_at = None
    for step in waiting.steps:
        step.counts, step.started_at, step.finished_at = {}, None, None
    return waiting


STATUS, PREVIEW = "backfill/request_status.json.j2", "backfill/plan_preview.json.j2"
DAY = Interval(T0, T0 + timedelta(days=1))
ROOT = DagRef("example", "example.etl_orders")
PLAN = Plan(
    ROOT,
    DateRange(date(2021, 6, 7), date(2021, 6, 7)),
    (
        PlanStep(ROOT, (DAY,), (), "daily", ("orders",)),
        PlanStep(DagRef("example", "example.kpis"), (DAY,), (ROOT,), "daily", ("analytics",)),
    ),
)
TEAMS = ("analytics", "logistics")


REQUEST_ID = "5f0c1e0a9d2b4c7e8f1a2b3c4d5e6f70"


def preview(
    *, awaiting: tuple[str, ...] = (), retry_of: str = "", dry_run: bool = False
) -> dict[str, object]:
    return plan_preview(
        PLAN,
        request_id=REQUEST_ID,
        requester="U0REQUESTER",
        dry_run=dry_run,
        awaiting=awaiting,
        retry_of=retry_of,
    )


CASES: dict[str, Case] = {
    "progress_pass": Case(TEMPLATE, a_pass),
    "progress_summary": Case(TEMPLATE, lambda: summary("failed", 3)),
    "progress_summary_long": Case(TEMPLATE, lambda: summary("succeeded", 70)),
    "progress_escaping": Case(TEMPLATE, escaping),
    "request_status_failed_reasons": Case(
        STATUS, lambda: progress.status_payload(failed_request())
    ),
    "request_status_awaiting": Case(
        STATUS,
        lambda: request_status(progress.status_of(previewed(), awaiting=TEAMS)),
    ),
    "plan_preview_awaiting": Case(PREVIEW, lambda: preview(awaiting=TEAMS)),
    "plan_preview_retry": Case(PREVIEW, lambda: preview(retry_of="0123456789abcdef" * 2)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert_golden(name, CASES[name], monkeypatch)


def test_what_airflow_says_is_escaped_and_cannot_end_a_code_span() -> None:
    text = "\n".join(mrkdwn_texts(escaping()))
    assert "`etl_ˋ&lt;!channel&gt;ˋ&amp;*bold*`" in text
    assert "see &lt;@U123&gt; &amp; &lt;!here&gt; `x`" in text
    for raw in ("<!channel>", "<@U123>", "<!here>"):
        assert raw not in text


def test_a_long_summary_names_60_dags_then_counts_the_rest() -> None:
    payload = summary("succeeded", 70)
    text = "\n".join(mrkdwn_texts(payload))
    assert "`example.dag_059`" in text
    assert "`example.dag_060`" not in text
    assert "… and 10 more DAGs" in text


def test_a_huge_pass_stays_within_slack_limits() -> None:
    names = [f"example.{'&' * 140}_{i}" for i in range(1200)]
    events = [progress.Started(name, 3) for name in names]
    payload = progress.thread_reply(request(names[:1], ["running"]), events)
    check(payload)
    assert mrkdwn_texts(payload)[-1].startswith("… and ")


# --- lines rendered when seen, packed into a reply later ------------------------------------


def test_lines_seen_in_several_passes_make_one_reply_in_order() -> None:
    running = request(DAGS, ["succeeded", "running", "pending"])
    first = progress.event_lines(running, [progress.Started("example.etl_orders", 3)])
    later = progress.event_lines(
        running,
        [
            progress.Finished("example.etl_orders", "succeeded", Counts(succeeded=3), None),
            progress.Started("example.etl_delivery", 3),
        ],
    )
    payload = progress.reply([*first, *later])
    text = "\n".join(mrkdwn_texts(payload))
    assert text.index("`example.etl_orders` started") < text.index("`example.etl_orders` succeeded")
    assert text.index("`example.etl_orders` succeeded") < text.index(
        "`example.etl_delivery` started"
    )
    assert len(payload["blocks"]) == 1  # one message, one section


def test_a_reply_of_a_pass_is_the_reply_of_its_lines() -> None:
    done = request(DAGS, ["succeeded", "failed", "skipped"], state="failed")
    events = [
        progress.Started("example.etl_orders", 3, URL),
        progress.Skipped((("example.email_report", "upstream failed"),)),
        progress.Summary("failed"),
    ]
    assert progress.reply(progress.event_lines(done, events)) == progress.thread_reply(done, events)


def test_only_a_line_about_a_failed_dag_tells_a_failure() -> None:
    running = request(DAGS, ["running", "pending", "pending"])

    def finished(state: str) -> list[str]:
        event = progress.Finished(WEIRD, state, Counts(failed=1), None, message="boom")
        return progress.event_lines(running, [event])

    assert progress.tells_failure(finished("failed"))
    for state in ("succeeded", "cancelled"):
        assert not progress.tells_failure(finished(state))
    quiet = progress.event_lines(
        running,
        [progress.Started(WEIRD, 1), progress.Skipped(((WEIRD, "a failed DAG upstream"),))],
    )
    assert not progress.tells_failure(quiet)
    assert progress.tells_failure([*quiet, *finished("failed")])


# --- the status message of a stored request -------------------------------------------------


def test_a_failed_row_says_why_and_the_status_offers_retry() -> None:
    payload = progress.status_payload(failed_request())
    rows = [t for t in mrkdwn_texts(payload) if re.match(r":red_circle: \*\d+\.\*", t)]
    assert len(rows) == 2
    assert "`example.etl_delivery` · failed" in rows[0]
    assert "_Task extract failed: OutOfMemoryError xxx" in rows[0]
    assert rows[0].endswith("…_")  # clipped
    assert rows[1].endswith("_2 of 3 runs failed_")  # no message: the counts say it
    assert [(e["action_id"], e["value"]) for e in elements(payload)] == [
        (ActionId.RETRY, REQUEST_ID),
        (ActionId.RETRY_TASKS, REQUEST_ID),
    ]


def test_retry_is_offered_only_once_failed() -> None:
    for state, steps in [
        ("running", ["succeeded", "running", "pending"]),
        ("succeeded", ["succeeded"] * 3),
        ("cancelled", ["succeeded", "cancelled", "skipped"]),
    ]:
        payload = progress.status_payload(request(DAGS, steps, state=state))
        offered = [e["action_id"] for e in elements(payload)]
        assert ActionId.RETRY not in offered, state
        assert ActionId.RETRY_TASKS not in offered, state


def test_awaited_teams_are_named_and_escaped() -> None:
    teams = ("<!channel>", "a&b", *(f"team{i}" for i in range(10)))
    for payload in (
        preview(awaiting=teams),
        request_status(progress.status_of(previewed(), awaiting=teams)),
    ):
        line = next(t for t in mrkdwn_texts(payload) if "Waiting for approval from" in t)
        assert "*&lt;!channel&gt;*, *a&amp;b*" in line
        assert line.endswith(" and 4 more")
    assert not any(
        "Waiting for approval" in t for t in mrkdwn_texts(preview(awaiting=teams, dry_run=True))
    )
    assert not any("Waiting for approval" in t for t in mrkdwn_texts(preview()))


def test_a_retry_preview_names_the_backfill_it_retries() -> None:
    text = "\n".join(mrkdwn_texts(preview(retry_of="0123456789abcdef" * 2)))
    assert "Retry of backfill `0123456789abcdef0123456789abcdef`" in text


def test_commands_to_run_by_hand_are_told_whole_over_as_many_replies_as_they_need() -> None:
    commands = [f"airflow backfill create --dag-id etl.{'x' * 240}_{i}" for i in range(400)]

    replies = progress.run_by_hand(commands)

    assert len(replies) > 1
    for reply in replies:
        check(reply)  # within Slack's limits
    lines = "\n".join(reply["text"] for reply in replies).splitlines()
    numbered = [line for line in lines if line[0].isdigit()]
    assert numbered == [f"{i}. `{command}`" for i, command in enumerate(commands, 1)]
    assert replies[0]["text"].startswith("This bot runs no backfills itself")
    assert progress.run_by_hand(commands[:2]) == [{"text": replies[0]["text"].split("\n3.")[0]}]
