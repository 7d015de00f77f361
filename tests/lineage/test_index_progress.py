"""The words /readyz and doctor use for the lineage index (bot/lineage/service/progress.py),
from the state every replica reads: loading, current, behind."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from bot.config import IndexSettings
from bot.lineage.service.progress import describe
from bot.lineage.store.reconcile_state import Progress

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
PERIOD = IndexSettings().reconcile_interval_s
NEVER = Progress(None, None, None, None, None, None, 0, None, None, None)


def state(progress: Progress) -> dict[str, object]:
    return describe(progress, IndexSettings(), NOW)


def test_loading_says_how_many_jobs_of_how_many_are_read() -> None:
    running = replace(
        NEVER,
        holder="host:1",
        lease_until=NOW + timedelta(minutes=1),
        started_at=NOW - timedelta(minutes=3),
        jobs_read=4200,
        jobs_total=100_000,
    )
    found = state(running)
    assert found["state"] == "loading"
    assert found["jobs_read"] == 4200
    assert found["jobs_total"] == 100_000
    assert "reading Marquez's jobs (4,200 of 100,000 so far)" in str(found["summary"])
    assert "waiting to read" in str(state(NEVER)["summary"])


def test_a_long_full_reconcile_that_just_ended_is_current_not_behind() -> None:
    # Its data is dated from its start, 20 minutes ago (four periods): it ended a moment ago.
    started = NOW - timedelta(minutes=20)
    done = replace(
        NEVER,
        full_reconcile_at=started,
        reconciled_at=started,
        finished_at=NOW - timedelta(seconds=5),
        jobs_read=50_000,
        jobs_total=50_000,
    )
    assert state(done)["state"] == "current"


def test_behind_when_no_reconcile_ended_for_three_periods_or_the_last_failed() -> None:
    old = NOW - timedelta(seconds=3 * PERIOD + 1)
    quiet = replace(NEVER, full_reconcile_at=old, reconciled_at=old, finished_at=old)
    assert state(quiet)["state"] == "behind"
    running = replace(quiet, holder="host:2", lease_until=NOW + timedelta(minutes=1))
    assert state(running)["state"] == "current"  # one is under way
    fresh = NOW - timedelta(seconds=10)
    failed = replace(
        NEVER,
        full_reconcile_at=fresh,
        reconciled_at=fresh,
        finished_at=NOW,
        error="incremental reconcile: Marquez answered 503",
        failed_at=NOW,
    )
    found = state(failed)
    assert found["state"] == "behind"
    assert found["last_error"] == "incremental reconcile: Marquez answered 503"
    assert "the last reconcile failed (incremental reconcile: Marquez answered 503)" in str(
        found["summary"]
    )
