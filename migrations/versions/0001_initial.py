"""Initial schema: backfill requests, their steps, and the audit log.

Revision ID: 0001
Revises:
Create Date: 2026-11-22 05:51:21.135822+00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

REQUEST_STATES = "'previewed', 'approved', 'running', 'succeeded', 'failed', 'cancelled', 'refused'"
STEP_STATES = "'pending', 'submitted', 'running', 'succeeded', 'failed', 'skipped', 'cancelled'"


def upgrade() -> None:
    """Create the three tables with their constraints and indexes."""
    op.create_table(
        "backfill_requests",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("requester", sa.String(length=64), nullable=False),
        sa.Column("channel", sa.String(length=64), nullable=True),
        sa.Column("root_dag", sa.String(length=250), nullable=False),
        sa.Column("root_namespace", sa.String(length=1024), nullable=False),
        sa.Column("start_date", sa.Date(), nullable=False),
        sa.Column("end_date", sa.Date(), nullable=False),
        sa.Column("options", sa.JSON(), nullable=False),
        sa.Column("plan", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("approvers", sa.JSON(), nullable=False),
        sa.Column("status_message_ts", sa.String(length=32), nullable=True),
        sa.Column("status_channel", sa.String(length=64), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.CheckConstraint(f"state IN ({REQUEST_STATES})", name=op.f("ck_backfill_requests_state")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_backfill_requests")),
    )
    op.create_index(
        op.f("ix_backfill_requests_state_created_at"),
        "backfill_requests",
        ["state", "created_at"],
    )
    op.create_index(
        op.f("ix_backfill_requests_requester_created_at"),
        "backfill_requests",
        ["requester", "created_at"],
    )
    op.create_index(op.f("ix_backfill_requests_created_at"), "backfill_requests", ["created_at"])

    op.create_table(
        "backfill_steps",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("request_id", sa.String(length=32), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("dag_id", sa.String(length=250), nullable=False),
        sa.Column("namespace", sa.String(length=1024), nullable=False),
        sa.Column("intervals", sa.JSON(), nullable=False),
        sa.Column("upstream", sa.JSON(), nullable=False),
        sa.Column("executor", sa.String(length=32), nullable=True),
        sa.Column("executor_handle", sa.String(length=512), nullable=True),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("counts", sa.JSON(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(f"state IN ({STEP_STATES})", name=op.f("ck_backfill_steps_state")),
        sa.ForeignKeyConstraint(
            ["request_id"],
            ["backfill_requests.id"],
            name=op.f("fk_backfill_steps_request_id_backfill_requests"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_backfill_steps")),
        # Also serves "steps of a request": request_id leads the index behind it.
        sa.UniqueConstraint(
            "request_id", "position", name=op.f("uq_backfill_steps_request_id_position")
        ),
    )

    op.create_table(
        "audit_log",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("actor", sa.String(length=64), nullable=False),
        sa.Column("action", sa.String(length=64), nullable=False),
        sa.Column("request_id", sa.String(length=32), nullable=True),
        sa.Column("detail", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["request_id"],
            ["backfill_requests.id"],
            name=op.f("fk_audit_log_request_id_backfill_requests"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_log")),
    )
    op.create_index(op.f("ix_audit_log_request_id_at"), "audit_log", ["request_id", "at"])
    op.create_index(op.f("ix_audit_log_at"), "audit_log", ["at"])


def downgrade() -> None:
    """Drop the three tables (their indexes go with them)."""
    op.drop_table("audit_log")
    op.drop_table("backfill_steps")
    op.drop_table("backfill_requests")
