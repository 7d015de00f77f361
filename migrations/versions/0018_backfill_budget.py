"""The budget shared by every backfill: one row per step waiting for, or holding, runs at once.

Revision ID: 0018
Revises: 0017
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "backfill_budget",
        sa.Column("step_id", sa.String(length=32), nullable=False),
        sa.Column("request_id", sa.String(length=32), nullable=False),
        sa.Column("team", sa.String(length=64), nullable=True),
        sa.Column("pools", sa.JSON(), nullable=False),
        sa.Column("wanted", sa.Integer(), nullable=False),
        sa.Column("granted", sa.Integer(), nullable=False),
        sa.Column("level", sa.Integer(), nullable=False),
        sa.Column("deadlines", sa.JSON(), nullable=False),
        sa.Column("since", sa.DateTime(timezone=True), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("granted_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["step_id"], ["backfill_steps.id"],
            name=op.f("fk_backfill_budget_step_id_backfill_steps"), ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["request_id"], ["backfill_requests.id"],
            name=op.f("fk_backfill_budget_request_id_backfill_requests"), ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("step_id", name=op.f("pk_backfill_budget")),
    )  # fmt: skip
    op.create_index("ix_backfill_budget_request_id", "backfill_budget", ["request_id"])


def downgrade() -> None:
    op.drop_index("ix_backfill_budget_request_id", table_name="backfill_budget")
    op.drop_table("backfill_budget")
