"""The outbox: Slack messages the bot owes, written before they are sent.

Revision ID: 0002
Revises: 0001
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create the outbox table and its indexes."""
    op.create_table(
        "outbox",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("method", sa.String(length=32), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("channel", sa.String(length=64), nullable=False),
        sa.Column("user", sa.String(length=64), nullable=True),
        sa.Column("request_id", sa.String(length=32), nullable=True),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("posted_ts", sa.String(length=32), nullable=True),
        sa.Column("error", sa.String(length=500), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("state IN ('pending', 'sent', 'failed')", name=op.f("ck_outbox_state")),
        sa.CheckConstraint(
            "role IN ('plain', 'status', 'thread', 'status_update')", name=op.f("ck_outbox_role")
        ),
        sa.CheckConstraint(
            "method IN ('chat.postMessage', 'chat.update', 'chat.postEphemeral')",
            name=op.f("ck_outbox_method"),
        ),
        sa.ForeignKeyConstraint(
            ["request_id"],
            ["backfill_requests.id"],
            name=op.f("fk_outbox_request_id_backfill_requests"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_outbox")),
    )
    op.create_index(op.f("ix_outbox_state_next_attempt_at"), "outbox", ["state", "next_attempt_at"])
    op.create_index(op.f("ix_outbox_request_id"), "outbox", ["request_id"])


def downgrade() -> None:
    """Drop the outbox."""
    op.drop_table("outbox")
