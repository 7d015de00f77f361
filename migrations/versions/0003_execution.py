"""Execution: executor state per step, why a step ended as it did, and when the status message
was last refreshed.

Revision ID: 0003
Revises: 0002
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add the execution columns (all nullable: existing rows stay valid)."""
    op.add_column("backfill_steps", sa.Column("message", sa.String(length=1000), nullable=True))
    op.add_column("backfill_steps", sa.Column("executor_state", sa.JSON(), nullable=True))
    op.add_column("backfill_requests", sa.Column("started_at", sa.DateTime(timezone=True)))
    op.add_column("backfill_requests", sa.Column("finished_at", sa.DateTime(timezone=True)))
    op.add_column("backfill_requests", sa.Column("progress_digest", sa.String(length=64)))
    op.add_column("backfill_requests", sa.Column("progress_posted_at", sa.DateTime(timezone=True)))


def downgrade() -> None:
    """Drop the execution columns."""
    with op.batch_alter_table("backfill_requests") as batch:
        batch.drop_column("progress_posted_at")
        batch.drop_column("progress_digest")
        batch.drop_column("finished_at")
        batch.drop_column("started_at")
    with op.batch_alter_table("backfill_steps") as batch:
        batch.drop_column("executor_state")
        batch.drop_column("message")
