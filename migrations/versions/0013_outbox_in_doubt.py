"""Outbox rows that may already be in Slack: `in_doubt` is set while a row is being sent and
kept after an attempt that got no answer (or an edge's), so the sender looks for the message in
Slack before posting it again.

Revision ID: 0013
Revises: 0012
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add `in_doubt`, false for every row so far (a row an older sender held when it stopped
    is posted again, as it was before this revision)."""
    op.add_column(
        "outbox",
        sa.Column("in_doubt", sa.Boolean(), nullable=False, server_default=sa.false()),
    )


def downgrade() -> None:
    with op.batch_alter_table("outbox") as batch:
        batch.drop_column("in_doubt")
