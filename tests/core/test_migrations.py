"""Alembic migrations on SQLite and PostgreSQL: the schema they build, round trips, and agreement
with the models."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any, TypeVar

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Connection, insert, inspect, select, text
from sqlalchemy.exc import IntegrityError

from bot.backfill.store.models import BackfillRequest, BackfillStep
from bot.core.db import async_url, downgrade, make_engine, sync_url, upgrade
from bot.lineage.rules.impact import ImpactSnapshot, ImpactStatus
from bot.schema import Base

T = TypeVar("T")

TABLES = {
    "backfill_requests",
    "backfill_steps",
    "backfill_budget",
    "audit_log",
    "outbox",
    "slack_clicks",
    "run_events",
    "watch_cursors",
    "incidents",
    "incident_downstream",
    "sla_misses",
    "lineage_state",
    "lineage_jobs",
    "lineage_datasets",
    "lineage_io",
    "lineage_runs",
    "sink_deliveries",
    "sink_health",
    "subscriptions",
    "quality_observations",
    "quality_schemas",
    "quality_columns",
    "restatements",
    "restated_reports",
}
INDEXES = {
    "backfill_requests": {
        "ix_backfill_requests_state_created_at",
        "ix_backfill_requests_requester_created_at",
        "ix_backfill_requests_created_at",
    },
    "audit_log": {"ix_audit_log_request_id_at", "ix_audit_log_at"},
    "outbox": {"ix_outbox_state_next_attempt_at", "ix_outbox_request_id"},
    "run_events": {"ix_run_events_dag_run_id", "ix_run_events_event_time"},
    "lineage_jobs": {"ix_lineage_jobs_seq"},
    "lineage_runs": {"ix_lineage_runs_seq"},
    "incident_downstream": {"ix_incident_downstream_dag"},
    "quality_observations": {
        "ix_quality_observations_dataset",
        "ix_quality_observations_run",
        "ix_quality_observations_dag",
    },
    "restatements": {
        "ix_restatements_dag",
        "ix_restatements_dataset",
        "ix_restatements_name",
        "ix_restatements_request",
        "ix_restatements_restated_at",
    },
}


async def on_connection(url: str, work: Callable[[Connection], T]) -> T:
    """Run sync inspection code on a connection of the app's own async engine."""
    engine = make_engine(url)
    try:
        async with engine.connect() as conn:
            return await conn.run_sync(work)
    finally:
        await engine.dispose()


def user_tables(conn: Connection) -> set[str]:
    return set(inspect(conn).get_table_names()) - {"alembic_version"}


def schema_diff(conn: Connection) -> list[Any]:
    return list(compare_metadata(MigrationContext.configure(conn), Base.metadata))


async def test_upgrade_creates_tables_indexes_and_constraints(database_url: str) -> None:
    upgrade(database_url)

    def describe(conn: Connection) -> dict[str, Any]:
        inspector = inspect(conn)
        return {
            "tables": user_tables(conn),
            "version": conn.scalar(text("SELECT version_num FROM alembic_version")),
            "indexes": {t: {ix["name"] for ix in inspector.get_indexes(t)} for t in INDEXES},
            "checks": {
                t: {ck["name"] for ck in inspector.get_check_constraints(t)}
                for t in ("backfill_requests", "backfill_steps", "outbox", "incidents")
            },
            "uniques": {uq["name"] for uq in inspector.get_unique_constraints("backfill_steps")},
            "fks": {
                t: {
                    (fk["name"], fk["options"].get("ondelete"))
                    for fk in inspector.get_foreign_keys(t)
                }
                for t in ("backfill_steps", "audit_log", "outbox")
            },
        }

    schema = await on_connection(database_url, describe)

    assert schema["tables"] == TABLES
    assert schema["version"] == "0020"
    for table, names in INDEXES.items():
        assert names <= schema["indexes"][table]
    assert schema["checks"] == {
        "backfill_requests": {"ck_backfill_requests_state"},
        "backfill_steps": {"ck_backfill_steps_state"},
        "outbox": {"ck_outbox_state", "ck_outbox_role", "ck_outbox_method"},
        "incidents": {"ck_incidents_state", "ck_incidents_kind"},
    }
    assert schema["uniques"] == {"uq_backfill_steps_request_id_position"}
    assert schema["fks"] == {
        "backfill_steps": {("fk_backfill_steps_request_id_backfill_requests", "CASCADE")},
        "audit_log": {("fk_audit_log_request_id_backfill_requests", "SET NULL")},
        "outbox": {
            ("fk_outbox_request_id_backfill_requests", "SET NULL"),
            ("fk_outbox_incident_id_incidents", "SET NULL"),
        },
    }


async def test_downgrade_to_base_removes_the_tables(database_url: str) -> None:
    upgrade(database_url)
    downgrade(database_url)

    assert await on_connection(database_url, user_tables) == set()


async def test_round_trip_leaves_a_schema_that_matches_the_models(database_url: str) -> None:
    # On an empty database the comparison must see the missing tables, or it proves nothing.
    missing = await on_connection(database_url, schema_diff)
    assert {diff[1].name for diff in missing if diff[0] == "add_table"} == TABLES

    upgrade(database_url)
    assert await on_connection(database_url, schema_diff) == []
    downgrade(database_url)
    upgrade(database_url)
    assert await on_connection(database_url, schema_diff) == []


async def test_check_constraints_reject_an_unknown_state(database_url: str) -> None:
    upgrade(database_url)
    request = {
        "id": "r" * 32,
        "requester": "U1",
        "root_dag": "orders_daily",
        "root_namespace": "food_delivery",
        "start_date": date(2024, 3, 1),
        "end_date": date(2024, 3, 1),
        "plan": {},
    }
    step = {
        "request_id": "r" * 32,
        "position": 0,
        "dag_id": "orders_daily",
        "namespace": "food_delivery",
        "intervals": [],
    }
    engine = make_engine(database_url)
    try:
        with pytest.raises(IntegrityError, match="ck_backfill_requests_state"):
            async with engine.begin() as conn:
                await conn.execute(insert(BackfillRequest).values(**request, state="done"))
        async with engine.begin() as conn:
            await conn.execute(insert(BackfillRequest).values(**request))
        with pytest.raises(IntegrityError, match="ck_backfill_steps_state"):
            async with engine.begin() as conn:
                await conn.execute(insert(BackfillStep).values(**step, state="paused"))
        async with engine.connect() as conn:
            assert (await conn.execute(select(BackfillRequest.state))).scalars().all() == [
                "previewed"
            ]
            assert (await conn.execute(select(BackfillStep.id))).all() == []
    finally:
        await engine.dispose()


async def test_upgrade_creates_the_sqlite_folder(tmp_path: Path) -> None:
    database = tmp_path / "var" / "nested" / "bot.db"
    url = f"sqlite:///{database}"

    upgrade(url)

    assert database.is_file()
    assert await on_connection(url, user_tables) == TABLES


@pytest.mark.parametrize(
    ("given", "expected_async", "expected_sync"),
    [
        ("sqlite:///./var/b.db", "sqlite+aiosqlite:///./var/b.db", "sqlite:///./var/b.db"),
        ("sqlite+aiosqlite:////abs/b.db", "sqlite+aiosqlite:////abs/b.db", "sqlite:////abs/b.db"),
        ("postgres://u:p@h:5432/d", "postgresql+psycopg://u:p@h:5432/d", None),
        ("postgresql://u@h/d?sslmode=require", "postgresql+psycopg://u@h/d?sslmode=require", None),
        ("postgresql+psycopg://u@h/d", "postgresql+psycopg://u@h/d", None),
    ],
)
def test_database_urls_are_normalised(
    given: str, expected_async: str, expected_sync: str | None
) -> None:
    assert async_url(given) == expected_async
    assert sync_url(given) == (expected_sync or expected_async)


@pytest.mark.parametrize(
    "given", ["mysql://u:hunter2@h/d", "postgresql+asyncpg://u:hunter2@h/d", "just-a-path.db"]
)
def test_unsupported_database_urls_are_refused_without_leaking_secrets(given: str) -> None:
    for normalise in (async_url, sync_url):
        with pytest.raises(ValueError, match=r"DATABASE_URL.*sqlite:///.*postgresql://") as info:
            normalise(given)
        assert "hunter2" not in str(info.value)


LEGACY_IMPACT = {
    "root": "example.etl_orders",
    "namespace": "food_delivery",
    "root_owners": "orders, platform",
    "downstream": [
        {"dag_id": "example.etl_orders_7_days", "namespace": "food_delivery", "owners": "unknown"}
    ],
    "datasets": ["food_delivery.public.orders"],
    "reports": [
        {"name": "Weekly", "url": "", "team": "no team", "dataset": "food_delivery.public.x"}
    ],
    "teams": ["orders", "platform"],
}


async def test_0007_turns_stored_impact_text_views_into_typed_snapshots(database_url: str) -> None:
    upgrade(database_url, "0006")

    def add(conn: Connection) -> None:
        for incident_id, impact in (
            ("known", LEGACY_IMPACT),
            ("pending", {"pending": True, "downstream": [], "datasets": [], "reports": []}),
            ("grouped", {}),
        ):
            conn.execute(
                text(
                    "INSERT INTO incidents (id, namespace, dag_id, interval_key, state, failures,"
                    " grouped, impact, opened_at, updated_at) VALUES (:id, 'ns', :id, 'k',"
                    " 'open', 1, 0, :impact, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"
                ),
                {"id": incident_id, "impact": json.dumps(impact)},
            )
        conn.commit()

    def impacts(conn: Connection) -> dict[str, Any]:
        rows = conn.execute(text("SELECT id, impact FROM incidents"))
        return {i: json.loads(v) if isinstance(v, str) else v for i, v in rows}

    def below(conn: Connection) -> list[tuple[str, str, str]]:
        query = "SELECT incident_id, namespace, dag_id FROM incident_downstream"
        return sorted((i, n, d) for i, n, d in conn.execute(text(query)))

    await on_connection(database_url, add)
    upgrade(database_url)
    stored = await on_connection(database_url, impacts)
    # 0016: what the snapshots listed downstream became rows (the snapshots keep them too)
    assert await on_connection(database_url, below) == [
        ("known", "food_delivery", "example.etl_orders_7_days")
    ]

    known = ImpactSnapshot.from_json(stored["known"])
    assert known.status == ImpactStatus.KNOWN
    assert known.root_owners == ("orders", "platform")
    assert known.downstream[0].dag_id == "example.etl_orders_7_days"
    assert known.downstream[0].owners == ()
    assert known.reports[0].team is None
    assert known.reports[0].url is None
    assert ImpactSnapshot.from_json(stored["pending"]).is_pending
    assert stored["grouped"] == {}

    downgrade(database_url, "0006")
    back = (await on_connection(database_url, impacts))["known"]
    # what the older bot reads back (it never read the root's names from the record)
    assert back == {k: v for k, v in LEGACY_IMPACT.items() if k not in {"root", "namespace"}}
