"""The watcher: run events seen, the Marquez poll cursor, incidents and their outbox rows,
SLA misses notified.

Revision ID: 0004
Revises: 0003
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create run_events, watch_cursors and incidents; outbox rows may belong to an incident."""
    op.create_table(
        "run_events",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("event_type", sa.String(length=16), nullable=False),
        sa.Column("event_time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("namespace", sa.String(length=1024), nullable=False),
        sa.Column("job_name", sa.String(length=1024), nullable=False),
        sa.Column("dag_namespace", sa.String(length=1024), nullable=False),
        sa.Column("dag_id", sa.String(length=1024), nullable=False),
        sa.Column("nominal_start", sa.DateTime(timezone=True), nullable=True),
        sa.Column("nominal_end", sa.DateTime(timezone=True), nullable=True),
        sa.Column("error_message", sa.String(length=2000), nullable=True),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("processed_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("source IN ('marquez', 'receiver')", name=op.f("ck_run_events_source")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_run_events")),
        sa.UniqueConstraint(
            "run_id",
            "event_type",
            "event_time",
            name=op.f("uq_run_events_run_id_event_type_event_time"),
        ),
    )
    op.create_index(
        "ix_run_events_processed_at_id", "run_events", ["processed_at", "id"], unique=False
    )
    op.create_index("ix_run_events_dag_id_nominal_start", "run_events", ["dag_id", "nominal_start"])
    op.create_index("ix_run_events_event_time", "run_events", ["event_time"])
    op.create_table(
        "watch_cursors",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("position", sa.DateTime(timezone=True), nullable=False),
        sa.Column("reachable", sa.Boolean(), nullable=False),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("last_error", sa.String(length=500), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_watch_cursors")),
    )
    op.create_table(
        "incidents",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("namespace", sa.String(length=1024), nullable=False),
        sa.Column("dag_id", sa.String(length=1024), nullable=False),
        sa.Column("interval_key", sa.String(length=64), nullable=False),
        sa.Column("interval_start", sa.DateTime(timezone=True), nullable=True),
        sa.Column("interval_end", sa.DateTime(timezone=True), nullable=True),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("root_id", sa.String(length=32), nullable=True),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("grouped", sa.Integer(), nullable=False),
        sa.Column("error_message", sa.String(length=2000), nullable=True),
        sa.Column("failed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("impact", sa.JSON(), nullable=False),
        sa.Column("channel", sa.String(length=64), nullable=True),
        sa.Column("alert_ts", sa.String(length=32), nullable=True),
        sa.Column("snoozed_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("backfill_request_id", sa.String(length=32), nullable=True),
        sa.Column("opened_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("resolved_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("state IN ('open', 'resolved')", name=op.f("ck_incidents_state")),
        sa.ForeignKeyConstraint(
            ["backfill_request_id"],
            ["backfill_requests.id"],
            name=op.f("fk_incidents_backfill_request_id_backfill_requests"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["root_id"],
            ["incidents.id"],
            name=op.f("fk_incidents_root_id_incidents"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_incidents")),
        sa.UniqueConstraint(
            "namespace",
            "dag_id",
            "interval_key",
            name=op.f("uq_incidents_namespace_dag_id_interval_key"),
        ),
    )
    op.create_index("ix_incidents_state_opened_at", "incidents", ["state", "opened_at"])
    op.create_table(
        "sla_misses",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("namespace", sa.String(length=1024), nullable=False),
        sa.Column("dag_id", sa.String(length=1024), nullable=False),
        sa.Column("interval_key", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("due", sa.DateTime(timezone=True), nullable=False),
        sa.Column("reason", sa.String(length=500), nullable=False),
        sa.Column("detected_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sla_misses")),
        sa.UniqueConstraint(
            "namespace",
            "dag_id",
            "interval_key",
            name=op.f("uq_sla_misses_namespace_dag_id_interval_key"),
        ),
    )
    op.create_index("ix_sla_misses_detected_at", "sla_misses", ["detected_at"])
    with op.batch_alter_table("outbox") as batch:
        batch.add_column(sa.Column("incident_id", sa.String(length=32), nullable=True))
        batch.create_foreign_key(
            "fk_outbox_incident_id_incidents",
            "incidents",
            ["incident_id"],
            ["id"],
            ondelete="SET NULL",
        )
        batch.create_index("ix_outbox_incident_id", ["incident_id"])


def downgrade() -> None:
    """Drop the watcher's tables and the outbox's link to incidents."""
    with op.batch_alter_table("outbox") as batch:
        batch.drop_index("ix_outbox_incident_id")
        batch.drop_constraint("fk_outbox_incident_id_incidents", type_="foreignkey")
        batch.drop_column("incident_id")
    op.drop_table("sla_misses")
    op.drop_table("incidents")
    op.drop_table("watch_cursors")
    op.drop_table("run_events")
