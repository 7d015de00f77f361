"""What `GET /metrics` serves, in Prometheus' text format (prometheus-client).

One registry per bot (not the library's global one), so two bots in one process (tests, the
demo) count apart. Counters are incremented where things happen, by this process; gauges that
describe the database (outbox depth, backfills by state, the poll cursor, rows set aside) are
read from it when scraped, so every process of one database reports the same figure.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal, get_args

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge
from prometheus_client.exposition import generate_latest
from sqlalchemy.ext.asyncio import AsyncSession

from bot.core.after_commit import after_commit
from bot.core.http import ApiError
from bot.core.model import RUN_EVENT_TYPES
from bot.core.tables import utcnow

__all__ = ["CONTENT_TYPE", "CursorFigures", "Figures", "Metrics", "NoticeKind", "PostedKind"]

CONTENT_TYPE = CONTENT_TYPE_LATEST
NoticeKind = Literal["incident_alert", "sla_notice", "ops_notice", "team_notice"]
# What an outbox row says about itself (its role and parent). SLA and ops notices are both
# parentless plain messages, so they share one kind.
PostedKind = Literal["incident_alert", "incident_reply", "backfill", "team_notice", "notice"]

_SYSTEMS = ("airflow", "marquez")  # the API clients whose errors are counted
ERROR_KINDS = (
    "unavailable",
    "rate_limited",
    "auth",
    "not_found",
    "conflict",
    "request_error",
    "bad_response",
)
_LABEL = re.compile(r"[A-Za-z0-9_.]{1,64}")
_MAX_LABELS = 50


class _Labels:
    """Label values that come from outside (Slack's error codes): only plain words, and only
    so many distinct ones, so a misbehaving server cannot grow the exposition without end."""

    def __init__(self, limit: int = _MAX_LABELS) -> None:
        self._seen: set[str] = set()
        self._limit = limit

    def __call__(self, value: str) -> str:
        if value in self._seen:
            return value
        if not _LABEL.fullmatch(value) or len(self._seen) >= self._limit:
            return "other"
        self._seen.add(value)
        return value


@dataclass(frozen=True)
class CursorFigures:
    """One feed the watcher polls: where its cursor is, whether the last poll reached it."""

    name: str
    position: datetime
    reachable: bool


@dataclass(frozen=True)
class Figures:
    """What the database says when /metrics is scraped (bot/health/figures.py reads it): every
    process of one database reports the same, whichever did the work."""

    set_aside: int
    outbox_pending: int
    outbox_oldest_pending: datetime | None
    """When the oldest message still to send was written (None: nothing pending)."""
    requests: dict[str, int]
    """Backfill requests by state (states without any are absent)."""
    request_states: tuple[str, ...]
    """Every state a request can be in: each gets its gauge, 0 when none is."""
    steps: dict[str, int]
    step_states: tuple[str, ...]
    cursors: list[CursorFigures]
    newest_event: datetime | None
    """The newest eventTime stored from any source (pushed events are often ahead of the poll)."""
    sink_pending: dict[str, int]
    """Deliveries owed to each sink beyond Slack (sinks with none are absent)."""
    failing_sinks: set[str]
    index_jobs: tuple[int, int | None, bool] = (0, None, False)
    """The lineage index's full reconcile: jobs read, of Marquez's total, and whether one ever
    completed."""


class Metrics:
    def __init__(self, *, sink_names: Sequence[str] = ()) -> None:
        """`sink_names`: BOT_CONFIG's sinks, whose gauges exist from the start."""
        r = self.registry = CollectorRegistry()
        self.run_event_failures = Counter(
            "backfill_bot_run_event_failures",
            "Failed tries at handling a stored run event (an exception in the watcher).",
            registry=r,
        )
        self.run_events_set_aside = Gauge(
            "backfill_bot_run_events_set_aside",
            "Run events set aside after failing every try; `backfill-bot events retry` "
            "handles them again.",
            registry=r,
        )
        self.events_ingested = Counter(
            "backfill_bot_events_ingested",
            "New OpenLineage run events stored, by source (receiver: pushed to POST "
            "/api/v1/lineage; marquez: polled from Marquez) and eventType. The same event "
            "from both sources is stored, and counted, once.",
            ["source", "event_type"],
            registry=r,
        )
        self.notices = Counter(
            "backfill_bot_notices",
            "Alerts and notices owed (written to the outbox) to Slack, counted when the "
            "transaction that writes them commits, by kind: incident_alert, sla_notice, "
            "ops_notice, team_notice. backfill_bot_notices_posted_total counts what Slack "
            "accepted.",
            ["kind"],
            registry=r,
        )
        self.notices_posted = Counter(
            "backfill_bot_notices_posted",
            "Messages Slack accepted from the outbox as new posts (chat.postMessage), counted "
            "once the sender records them; edits of a posted message (chat.update, and later "
            "rows of an edit key) are not counted, and thread replies sent as one post count "
            "once. By kind: incident_alert, incident_reply (in an alert's thread), backfill (a "
            "backfill's preview, status message or thread reply), team_notice, notice (SLA and "
            "ops notices, which the outbox does not tell apart, and the DM telling a requester "
            "the bot could not post).",
            ["kind"],
            registry=r,
        )
        self.slack_calls = Counter(
            "backfill_bot_slack_api_calls",
            "Slack Web API requests, by method and status: ok, Slack's error code, http_429 "
            "(rate limited), http_<status> without a Slack answer, network_error.",
            ["method", "status"],
            registry=r,
        )
        self.outbox_pending = Gauge(
            "backfill_bot_outbox_pending", "Slack messages in the outbox not sent yet.", registry=r
        )
        self.outbox_oldest_pending_age = Gauge(
            "backfill_bot_outbox_oldest_pending_age_seconds",
            "Age of the oldest Slack message not sent yet (0 when none is pending).",
            registry=r,
        )
        self.outbox_failed = Counter(
            "backfill_bot_outbox_failed",
            "Slack messages the sender gave up on (Slack refused one for good, or it kept "
            "failing for a day); each is also told in watch.ops_channel.",
            registry=r,
        )
        self.outbox_adopted = Counter(
            "backfill_bot_outbox_adopted",
            "Slack messages found already posted (by an attempt whose answer was lost, or a "
            "sender that stopped before recording it) and adopted instead of posted again.",
            registry=r,
        )
        self.polls = Counter(
            "backfill_bot_marquez_polls",
            "Polls of Marquez's event feed by outcome (ok, failed); polls skipped while "
            "backing off are not counted.",
            ["outcome"],
            registry=r,
        )
        self.poll_lag = Gauge(
            "backfill_bot_poll_lag_seconds",
            "How far the watcher's cursor (the newest eventTime it has read) is behind now; "
            "grows while no events happen as well as while the poll falls behind.",
            ["feed"],
            registry=r,
        )
        self.poll_behind = Gauge(
            "backfill_bot_poll_behind_newest_event_seconds",
            "How far the watcher's cursor is behind the newest event the bot has stored from "
            "any source (0 when it has read up to it).",
            ["feed"],
            registry=r,
        )
        self.marquez_reachable = Gauge(
            "backfill_bot_marquez_reachable",
            "1 if the last poll of the feed reached Marquez, else 0.",
            ["feed"],
            registry=r,
        )
        self.backfills = Gauge(
            "backfill_bot_backfills", "Backfill requests by state.", ["state"], registry=r
        )
        self.backfill_steps = Gauge(
            "backfill_bot_backfill_steps", "Backfill steps (DAGs) by state.", ["state"], registry=r
        )
        self.request_errors = Counter(
            "backfill_bot_request_errors",
            "Failed requests to Airflow and Marquez, by system and kind: unavailable "
            "(unreachable, timeout, 5xx), rate_limited, auth, not_found, conflict, "
            "request_error (another 4xx), bad_response.",
            ["system", "kind"],
            registry=r,
        )
        self.sink_deliveries = Counter(
            "backfill_bot_sink_deliveries",
            "Attempts to deliver to sinks beyond Slack, by sink and outcome: delivered, retry "
            "(the sink failed; tried again with backoff), refused (a 4xx: not sent again).",
            ["sink", "outcome"],
            registry=r,
        )
        self.sink_pending = Gauge(
            "backfill_bot_sink_pending", "Deliveries owed to each sink.", ["sink"], registry=r
        )
        self.sink_failing = Gauge(
            "backfill_bot_sink_failing",
            "1 while a sink is failing (told in the ops channel), else 0.",
            ["sink"],
            registry=r,
        )
        self.background_failures = Counter(
            "backfill_bot_background_failures",
            "Failures of the work `serve` runs beside its requests (the lineage reconcile, the "
            "senders, the runner…), by task; each is logged and retried with backoff.",
            ["task"],
            registry=r,
        )
        self.lineage_index_jobs = Gauge(
            "backfill_bot_lineage_index_jobs",
            "The lineage index's full reconcile: Marquez jobs read so far (`read`) of the "
            "total Marquez reported (`total`).",
            ["of"],
            registry=r,
        )
        self.lineage_index_complete = Gauge(
            "backfill_bot_lineage_index_complete",
            "1 once the lineage index holds a full reconcile with Marquez, else 0 (plans "
            "fetch their DAG's downstream from Marquez meanwhile).",
            registry=r,
        )
        self._tasks = _Labels()
        self.sink_names = tuple(sink_names)
        self._slack_methods = _Labels()
        self._slack_statuses = _Labels()
        # Series that exist from the start: a rate over them works before the first event.
        for source in ("receiver", "marquez"):
            for event_type in sorted(RUN_EVENT_TYPES):
                self.events_ingested.labels(source, event_type)
        for kind in get_args(NoticeKind):
            self.notices.labels(kind)
        for posted in get_args(PostedKind):
            self.notices_posted.labels(posted)
        for outcome in ("ok", "failed"):
            self.polls.labels(outcome)
        for system in _SYSTEMS:
            for error_kind in ERROR_KINDS:
                self.request_errors.labels(system, error_kind)

    # --- counted where things happen -----------------------------------------------------

    def event_ingested(self, source: str, event_type: str, count: int = 1) -> None:
        self.events_ingested.labels(source, event_type).inc(count)

    def notice_owed(self, session: AsyncSession, kind: NoticeKind) -> None:
        """Count a notice once the transaction that owes it commits."""
        after_commit(session, self.notices.labels(kind).inc)

    def notice_posted(self, session: AsyncSession, kind: PostedKind) -> None:
        """Count a message Slack accepted as a new post, once the transaction that records it
        as sent commits: a post whose record is rolled back is posted again when its lease
        ends, and is counted then, so each owed message is counted once."""
        after_commit(session, self.notices_posted.labels(kind).inc)

    def background_failed(self, task: str) -> None:
        self.background_failures.labels(self._tasks(task)).inc()

    def slack_call(self, method: str, status: str) -> None:
        self.slack_calls.labels(self._slack_methods(method), self._slack_statuses(status)).inc()

    def request_failed(self, error: BaseException) -> None:
        """Count an Airflow or Marquez client error (or one raised from it); anything else
        (a Spark job's failure, a bug) is not a request error and is not counted."""
        seen: set[int] = set()
        current: BaseException | None = error
        while current is not None and id(current) not in seen:
            seen.add(id(current))
            if isinstance(current, ApiError) and current.system in _SYSTEMS:
                kind = "rate_limited" if getattr(current, "status", None) == 429 else current.kind
                self.request_errors.labels(current.system, kind).inc()
                return
            current = current.__cause__ or current.__context__

    # --- read when scraped ---------------------------------------------------------------

    def refresh(self, found: Figures, *, now: datetime | None = None) -> None:
        """Set the gauges that describe the database, from what was read when scraped."""
        now = now or utcnow()
        self.run_events_set_aside.set(found.set_aside)
        self.outbox_pending.set(found.outbox_pending)
        oldest = found.outbox_oldest_pending
        self.outbox_oldest_pending_age.set(_seconds(now - oldest) if oldest else 0.0)
        for state in found.request_states:
            self.backfills.labels(state).set(found.requests.get(state, 0))
        for step_state in found.step_states:
            self.backfill_steps.labels(step_state).set(found.steps.get(step_state, 0))
        # BOT_CONFIG's sinks, and any still owed rows after being removed from it
        for sink in sorted({*self.sink_names, *found.sink_pending, *found.failing_sinks}):
            self.sink_pending.labels(sink).set(found.sink_pending.get(sink, 0))
            self.sink_failing.labels(sink).set(1 if sink in found.failing_sinks else 0)
        read, total, complete = found.index_jobs
        self.lineage_index_jobs.labels("read").set(read)
        self.lineage_index_jobs.labels("total").set(total if total is not None else 0)
        self.lineage_index_complete.set(1 if complete else 0)
        newest = min(found.newest_event, now) if found.newest_event else None
        for cursor in found.cursors:
            self.poll_lag.labels(cursor.name).set(_seconds(now - cursor.position))
            behind = _seconds(newest - cursor.position) if newest else 0.0
            self.poll_behind.labels(cursor.name).set(behind)
            self.marquez_reachable.labels(cursor.name).set(1 if cursor.reachable else 0)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


def _seconds(delta: timedelta) -> float:
    return max(0.0, delta.total_seconds())
