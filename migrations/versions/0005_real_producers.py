"""Real OpenLineage producers and late events: the DAG run an event belongs to and its job
type; the DAG run an incident's failure came from; the late-event sweep's bucket counts.

Revision ID: 0005
Revises: 0004
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add nullable columns (existing rows stay valid) and an index on run_events.dag_run_id."""
    op.add_column("run_events", sa.Column("dag_run_id", sa.String(length=64), nullable=True))
    op.add_column("run_events", sa.Column("job_type", sa.String(length=32), nullable=True))
    op.create_index("ix_run_events_dag_run_id", "run_events", ["dag_run_id"])
    op.add_column("incidents", sa.Column("dag_run_id", sa.String(length=64), nullable=True))
    op.add_column("incidents", sa.Column("error_job", sa.String(length=1024), nullable=True))
    op.add_column("watch_cursors", sa.Column("late_counts", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("watch_cursors") as batch:
        batch.drop_column("late_counts")
    with op.batch_alter_table("incidents") as batch:
        batch.drop_column("error_job")
        batch.drop_column("dag_run_id")
    op.drop_index("ix_run_events_dag_run_id", table_name="run_events")
    with op.batch_alter_table("run_events") as batch:
        batch.drop_column("job_type")
        batch.drop_column("dag_run_id")
