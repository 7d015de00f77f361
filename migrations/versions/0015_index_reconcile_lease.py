"""One full reconcile of the lineage index across replicas, and its progress where every
replica can read it: a lease on `lineage_state` (`reconcile_holder` until
`reconcile_lease_until`), how far the running or last reconcile got (`jobs_read` of
`jobs_total`), and its last failure.

Revision ID: 0015
Revises: 0014
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COLUMNS = (
    ("reconcile_holder", sa.String(128)),
    ("reconcile_lease_until", sa.DateTime(timezone=True)),
    ("reconcile_started_at", sa.DateTime(timezone=True)),
    ("reconcile_finished_at", sa.DateTime(timezone=True)),
    ("jobs_total", sa.Integer()),
    ("reconcile_error", sa.String(1000)),
    ("reconcile_failed_at", sa.DateTime(timezone=True)),
)


def upgrade() -> None:
    for name, kind in COLUMNS:
        op.add_column("lineage_state", sa.Column(name, kind, nullable=True))
    op.add_column(
        "lineage_state",
        sa.Column("jobs_read", sa.Integer(), nullable=False, server_default=sa.text("0")),
    )


def downgrade() -> None:
    with op.batch_alter_table("lineage_state") as batch:
        for name in ("jobs_read", *(name for name, _ in reversed(COLUMNS))):
            batch.drop_column(name)
