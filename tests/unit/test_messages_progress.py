"""Progress replies of a running backfill (templates/backfill/progress.json.j2): golden files,
escaping of what Airflow and Marquez say, and long passes cut with "and N more"."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
from golden_support import Case, assert_golden, check, mrkdwn_texts

from bot.domain.progress import Counts
from bot.messages import progress
from bot.store.models import BackfillRequest, BackfillStep

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


CASES: dict[str, Case] = {
    "progress_pass": Case(TEMPLATE, a_pass),
    "progress_summary": Case(TEMPLATE, lambda: summary("failed", 3)),
    "progress_summary_long": Case(TEMPLATE, lambda: summary("succeeded", 70)),
    "progress_escaping": Case(TEMPLATE, escaping),
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
