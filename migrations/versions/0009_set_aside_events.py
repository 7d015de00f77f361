"""Run events the watcher could not handle are set aside, not dropped: how many tries failed,
why the last one did, and when the row was set aside (retried with `backfill-bot events retry`).

Revision ID: 0009
Revises: 0008
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("run_events") as batch:
        batch.add_column(sa.Column("attempts", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("failure", sa.String(500), nullable=True))
        batch.add_column(sa.Column("set_aside_at", sa.DateTime(timezone=True), nullable=True))
        batch.create_index("ix_run_events_set_aside_at", ["set_aside_at"])


def downgrade() -> None:
    with op.batch_alter_table("run_events") as batch:
        batch.drop_index("ix_run_events_set_aside_at")
        batch.drop_column("set_aside_at")
        batch.drop_column("failure")
        batch.drop_column("attempts")
