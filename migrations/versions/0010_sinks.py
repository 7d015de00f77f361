"""Sinks beyond Slack: what the bot owes each (sink_deliveries, sent in order per sink and
incident, one row per sink and event ever) and how each sink is faring (sink_health).

Revision ID: 0010
Revises: 0009
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "sink_deliveries",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("sink", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("event_key", sa.String(length=128), nullable=False),
        sa.Column("incident_id", sa.String(length=32), nullable=True),
        sa.Column("body", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("error", sa.String(length=500), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("sent_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "state IN ('pending', 'sent', 'failed')", name=op.f("ck_sink_deliveries_state")
        ),
        sa.ForeignKeyConstraint(
            ["incident_id"],
            ["incidents.id"],
            name=op.f("fk_sink_deliveries_incident_id_incidents"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sink_deliveries")),
        sa.UniqueConstraint("sink", "event_key", name=op.f("uq_sink_deliveries_sink_event_key")),
    )
    op.create_index(
        "ix_sink_deliveries_state_next_attempt_at",
        "sink_deliveries",
        ["state", "next_attempt_at"],
    )
    op.create_table(
        "sink_health",
        sa.Column("sink", sa.String(length=64), nullable=False),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("failing_since", sa.DateTime(timezone=True), nullable=True),
        sa.Column("reported", sa.Boolean(), nullable=False),
        sa.Column("last_error", sa.String(length=500), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("sink", name=op.f("pk_sink_health")),
    )


def downgrade() -> None:
    op.drop_table("sink_health")
    op.drop_index("ix_sink_deliveries_state_next_attempt_at", table_name="sink_deliveries")
    op.drop_table("sink_deliveries")
