"""What an attempt to deliver an outbox row to Slack means for that row: sent, tried again (and
whether Slack may have acted on it anyway), or given up. Pure: the sender hands in what it saw.

Only Slack's own, worded answers about the message or where it goes end a message. Everything
else is Slack's edge or the network having a bad day (a 5xx whatever its body, an HTML page, a
reset, a timeout) and is tried again until it lands: Slack's status page calls these incidents,
and they pass. A message is given up on only after `GIVE_UP_AFTER` of trying, and then loudly.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum

__all__ = [
    "CHANNEL_ERRORS",
    "FINAL_ERRORS",
    "GIVE_UP_AFTER",
    "TRANSIENT_ERRORS",
    "UNWORDED_ATTEMPTS",
    "Attempt",
    "Verdict",
    "VerdictKind",
    "backoff_s",
    "judge",
]

# The destination is gone or closed to the bot: nothing posted there will ever land.
CHANNEL_ERRORS = frozenset({"channel_not_found", "not_in_channel", "is_archived"})
# Errors Slack documents for chat.postMessage, chat.update and chat.postEphemeral
# (api.slack.com/methods/<method>#errors) that say the message itself, or where it is going,
# cannot be accepted: the same call would get the same answer.
FINAL_ERRORS = CHANNEL_ERRORS | frozenset(
    {
        "invalid_blocks", "invalid_blocks_format", "invalid_attachments", "msg_too_long",
        "no_text", "too_many_attachments", "attachment_payload_limit_exceeded",
        "invalid_metadata_format", "invalid_metadata_schema", "metadata_too_large",
        "metadata_must_be_sent_from_app", "invalid_arguments", "invalid_array_arg",
        "invalid_charset", "invalid_form_data", "invalid_post_type", "missing_post_type",
        "cannot_reply_to_message", "restricted_action", "restricted_action_read_only_channel",
        "restricted_action_thread_only_channel", "restricted_action_non_threadable_channel",
        "restricted_action_thread_locked", "messages_tab_disabled", "user_not_in_channel",
        "message_not_found", "cant_update_message", "edit_window_closed", "is_inactive",
        "team_access_not_granted", "ekm_access_denied", "duplicate_channel_not_found",
        "thread_not_found",
    }
)  # fmt: skip
# Slack's own words for "try again" (the same pages): not about this message at all.
TRANSIENT_ERRORS = frozenset(
    {
        "ratelimited", "internal_error", "fatal_error", "service_unavailable",
        "request_timeout", "team_added_to_org",
    }
)  # fmt: skip
# A worded error Slack documents as neither (a token revoked, a scope removed, a code new since
# this list): the bot's set-up, which a person fixes. Tried this many times, then given up with a
# notice, so that one such message cannot hold its channel for a day.
UNWORDED_ATTEMPTS = 8
GIVE_UP_AFTER = timedelta(hours=24)
BACKOFF_CAP_S = 60.0


class VerdictKind(StrEnum):
    RETRY = "retry"
    FAILED = "failed"


@dataclass(frozen=True)
class Attempt:
    """What one failed call looked like from the bot's side."""

    status: int | None  # the HTTP status; None when no answer came (a reset, a timeout)
    error: str = ""  # Slack's error code, when the body was Slack's JSON
    retry_after_s: float | None = None
    detail: str = ""  # how it failed, for the row's error column and the logs


@dataclass(frozen=True)
class Verdict:
    kind: VerdictKind
    error: str
    delay_s: float = 0.0
    counted: bool = True
    """Whether it counts as a failed attempt (a rate limit is Slack pacing us, not failing:
    it neither grows the backoff nor brings the give-up nearer)."""
    in_doubt: bool = False
    """Whether Slack may have acted on the call although the bot saw no success: no answer, or
    an answer from the edge rather than from Slack's API. A row in doubt is looked up before it
    is posted again."""


BACKOFF_BASE_S = 0.5


def backoff_s(attempts: int, rng: random.Random | None = None) -> float:
    """Exponential backoff with jitter: half to all of 0.5 s × 2^attempts, at most a minute.
    An edge's 5xx usually passes in a second or two; a real outage reaches the cap soon."""
    draw = (rng or random).random()
    return float(min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2.0**attempts) * (0.5 + draw / 2))


def judge(
    attempt: Attempt, *, attempts: int, age: timedelta, rng: random.Random | None = None
) -> Verdict:
    """The verdict on a row whose delivery just failed as `attempt` says, after `attempts`
    earlier failures, `age` after it was owed."""
    error = attempt.error
    if error in FINAL_ERRORS:
        return Verdict(VerdictKind.FAILED, attempt.detail or error)
    worded = bool(error) and attempt.status is not None and attempt.status < 500
    limited = attempt.status == 429 or error == "ratelimited"
    # Refused in words, or rate limited, Slack did nothing; an internal error may have posted.
    in_doubt = not limited and (not worded or error in TRANSIENT_ERRORS)
    detail = attempt.detail or error or f"HTTP {attempt.status}"
    if age >= GIVE_UP_AFTER:
        return Verdict(VerdictKind.FAILED, f"still failing after {GIVE_UP_AFTER}: {detail}")
    if limited:
        wait = attempt.retry_after_s if attempt.retry_after_s is not None else 1.0
        return Verdict(VerdictKind.RETRY, "ratelimited", delay_s=max(wait, 1.0), counted=False)
    if worded and error not in TRANSIENT_ERRORS and attempts + 1 >= UNWORDED_ATTEMPTS:
        return Verdict(VerdictKind.FAILED, f"{detail} (tried {attempts + 1} times)")
    return Verdict(VerdictKind.RETRY, detail, delay_s=backoff_s(attempts, rng), in_doubt=in_doubt)
