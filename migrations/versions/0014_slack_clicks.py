"""Clicks recorded before their ack (`slack_clicks`): a bot killed after acknowledging a click
and before deciding it replays the click when it starts again.

Revision ID: 0014
Revises: 0013
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "slack_clicks",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("action_id", sa.String(length=255), nullable=False),
        sa.Column("user", sa.String(length=64), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("handled_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "state IN ('received', 'handled', 'failed')", name=op.f("ck_slack_clicks_state")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_slack_clicks")),
    )
    op.create_index(
        "ix_slack_clicks_state_next_attempt_at",
        "slack_clicks",
        ["state", "next_attempt_at"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_index("ix_slack_clicks_state_next_attempt_at", table_name="slack_clicks")
    op.drop_table("slack_clicks")
