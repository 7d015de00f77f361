"""The alert story: a backfill lives in its alert's thread and can be retried; an alert records
who acknowledged or snoozed it and where the failed Airflow run is; the outbox can edit a reply
it posted earlier (one grouped reply edited in place); the runner coalesces thread lines.

Revision ID: 0008
Revises: 0007
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_REQUEST_COLUMNS = (
    sa.Column("incident_id", sa.String(32), nullable=True),
    sa.Column("thread_ts", sa.String(32), nullable=True),
    sa.Column("retry_of", sa.String(32), nullable=True),
    sa.Column("pending_lines", sa.JSON(), nullable=True),
)
_INCIDENT_COLUMNS = (
    sa.Column("try_number", sa.Integer(), nullable=True),
    sa.Column("airflow_run_id", sa.String(250), nullable=True),
    sa.Column("airflow_task_id", sa.String(250), nullable=True),
    sa.Column("acknowledged_by", sa.String(64), nullable=True),
    sa.Column("acknowledged_at", sa.DateTime(timezone=True), nullable=True),
    sa.Column("snoozed_by", sa.String(64), nullable=True),
    sa.Column("proposal", sa.JSON(), nullable=True),
)
_EVENT_COLUMNS = (
    sa.Column("airflow_run_id", sa.String(250), nullable=True),
    sa.Column("task_id", sa.String(250), nullable=True),
    sa.Column("try_number", sa.Integer(), nullable=True),
)


def upgrade() -> None:
    with op.batch_alter_table("backfill_requests") as batch:
        for column in _REQUEST_COLUMNS:
            batch.add_column(column)
        batch.create_index("ix_backfill_requests_incident_id", ["incident_id"])
    with op.batch_alter_table("incidents") as batch:
        for column in _INCIDENT_COLUMNS:
            batch.add_column(column)
    with op.batch_alter_table("run_events") as batch:
        for column in _EVENT_COLUMNS:
            batch.add_column(column)
    with op.batch_alter_table("outbox") as batch:
        batch.add_column(sa.Column("edit_key", sa.String(64), nullable=True))
    with op.batch_alter_table("sla_misses") as batch:
        batch.add_column(sa.Column("acknowledged_by", sa.String(64), nullable=True))
        batch.add_column(sa.Column("acknowledged_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("sla_misses") as batch:
        batch.drop_column("acknowledged_at")
        batch.drop_column("acknowledged_by")
    with op.batch_alter_table("outbox") as batch:
        batch.drop_column("edit_key")
    with op.batch_alter_table("run_events") as batch:
        for column in _EVENT_COLUMNS:
            batch.drop_column(column.name)
    with op.batch_alter_table("incidents") as batch:
        for column in _INCIDENT_COLUMNS:
            batch.drop_column(column.name)
    with op.batch_alter_table("backfill_requests") as batch:
        batch.drop_index("ix_backfill_requests_incident_id")
        for column in _REQUEST_COLUMNS:
            batch.drop_column(column.name)
