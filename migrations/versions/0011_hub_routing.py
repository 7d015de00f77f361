"""The hub's routing: subscriptions from Slack, sink notices held through quiet hours, and
when an outage was escalated.

Revision ID: 0011
Revises: 0010
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "subscriptions",
        sa.Column("id", sa.String(length=16), nullable=False),
        sa.Column("channel", sa.String(length=64), nullable=False),
        sa.Column("pattern", sa.String(length=255), nullable=False),
        sa.Column("events", sa.JSON(), nullable=False),
        sa.Column("downstream", sa.Boolean(), nullable=False),
        sa.Column("created_by", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("removed_by", sa.String(length=64), nullable=True),
        sa.Column("removed_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_subscriptions")),
    )
    op.create_index("ix_subscriptions_channel", "subscriptions", ["channel"])
    op.add_column("sink_deliveries", sa.Column("held_until", sa.DateTime(timezone=True)))
    op.add_column("incidents", sa.Column("escalated_at", sa.DateTime(timezone=True)))
    # None for the outages open before this revision: they never escalate (no storm of pages
    # for old outages when escalation is first configured).
    op.add_column("incidents", sa.Column("alerted_at", sa.DateTime(timezone=True)))


def downgrade() -> None:
    with op.batch_alter_table("incidents") as batch:
        batch.drop_column("alerted_at")
        batch.drop_column("escalated_at")
    with op.batch_alter_table("sink_deliveries") as batch:
        batch.drop_column("held_until")
    op.drop_index("ix_subscriptions_channel", table_name="subscriptions")
    op.drop_table("subscriptions")
