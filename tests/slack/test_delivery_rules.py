"""What a failed Slack call means for its outbox row (`bot.slack.rules.delivery.judge`): only
Slack's own final words end a message; an edge's answer, a reset or a timeout is tried again
until it lands, and marks the row as possibly posted already."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest

from bot.slack.rules.delivery import (
    GIVE_UP_AFTER,
    UNWORDED_ATTEMPTS,
    Attempt,
    VerdictKind,
    backoff_s,
    judge,
)

YOUNG = timedelta(seconds=5)


@pytest.mark.parametrize(
    "error",
    ["channel_not_found", "is_archived", "invalid_blocks", "msg_too_long", "not_in_channel"],
)
def test_slacks_final_errors_end_the_message(error: str) -> None:
    verdict = judge(Attempt(200, error=error), attempts=0, age=YOUNG)
    assert verdict.kind == VerdictKind.FAILED
    assert verdict.error.startswith(error)


@pytest.mark.parametrize(
    "attempt",
    [
        Attempt(503, detail="HTTP 503"),  # the edge's HTML page: no Slack error code
        Attempt(502, detail="HTTP 502"),
        Attempt(500, error="internal_error"),
        Attempt(200, error="fatal_error"),
        Attempt(None, detail="ServerDisconnectedError: Server disconnected"),
        Attempt(None, detail="TimeoutError: "),
        Attempt(200, error=""),  # a body that is not Slack's
    ],
)
def test_anything_else_is_tried_again_and_may_have_posted(attempt: Attempt) -> None:
    verdict = judge(attempt, attempts=30, age=timedelta(hours=3))
    assert verdict.kind == VerdictKind.RETRY
    assert verdict.in_doubt
    assert 0 < verdict.delay_s <= 60


def test_a_rate_limit_waits_what_slack_says_and_posted_nothing() -> None:
    verdict = judge(Attempt(429, error="ratelimited", retry_after_s=7), attempts=3, age=YOUNG)
    assert (verdict.kind, verdict.delay_s, verdict.in_doubt) == (VerdictKind.RETRY, 7, False)
    assert not verdict.counted  # Slack pacing us: no step up the backoff


def test_a_worded_error_of_the_set_up_is_tried_a_few_times_then_given_up() -> None:
    tried = [
        judge(Attempt(200, error="invalid_auth"), attempts=n, age=YOUNG).kind
        for n in range(UNWORDED_ATTEMPTS)
    ]
    assert tried == [VerdictKind.RETRY] * (UNWORDED_ATTEMPTS - 1) + [VerdictKind.FAILED]
    assert not judge(Attempt(200, error="invalid_auth"), attempts=0, age=YOUNG).in_doubt


def test_after_a_day_of_failures_a_message_is_given_up_loudly() -> None:
    verdict = judge(Attempt(503, detail="HTTP 503"), attempts=900, age=GIVE_UP_AFTER)
    assert verdict.kind == VerdictKind.FAILED
    assert "HTTP 503" in verdict.error
    assert "still failing after" in verdict.error


def test_backoff_grows_with_jitter_and_is_capped() -> None:
    rng = random.Random(7)
    first = [backoff_s(0, rng) for _ in range(50)]
    late = [backoff_s(20, rng) for _ in range(50)]
    assert all(0.25 <= d <= 0.5 for d in first)
    assert all(30 <= d <= 60 for d in late)
    assert len(set(late)) > 1  # jittered: replicas retrying together spread out
