"""Data incidents: the data facts of each COMPLETE run event, what runs wrote to each dataset
(the history the next run is judged against), each dataset's latest schema and column lineage,
and incidents of kind `data` with their findings.

Revision ID: 0019
Revises: 0018
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("run_events", sa.Column("data", sa.JSON(), nullable=True))
    # Batch mode: SQLite cannot add a CHECK constraint in place, so the table is copied.
    with op.batch_alter_table("incidents") as batch:
        batch.add_column(
            sa.Column("kind", sa.String(length=16), nullable=False, server_default="failure")
        )
        batch.add_column(sa.Column("findings", sa.JSON(), nullable=True))
        batch.create_check_constraint("kind", "kind IN ('failure', 'data')")
    op.create_table(
        "quality_observations",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("dataset_key", sa.String(length=40), nullable=False),
        sa.Column("namespace", sa.String(length=1024), nullable=False),
        sa.Column("name", sa.String(length=1024), nullable=False),
        sa.Column("interval_key", sa.String(length=64), nullable=False),
        sa.Column("interval_start", sa.DateTime(timezone=True), nullable=True),
        sa.Column("event_time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("dag_namespace", sa.String(length=1024), nullable=False),
        sa.Column("dag_id", sa.String(length=1024), nullable=False),
        sa.Column("rows", sa.BigInteger(), nullable=True),
        sa.Column("size", sa.BigInteger(), nullable=True),
        sa.Column("usual", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_quality_observations")),
    )
    op.create_index(
        "ix_quality_observations_dataset", "quality_observations", ["dataset_key", "event_time"]
    )
    op.create_index("ix_quality_observations_run", "quality_observations", ["run_id"])
    op.create_table(
        "quality_schemas",
        sa.Column("dataset_key", sa.String(length=40), nullable=False),
        sa.Column("namespace", sa.String(length=1024), nullable=False),
        sa.Column("name", sa.String(length=1024), nullable=False),
        sa.Column("fields", sa.JSON(), nullable=False),
        sa.Column("event_time", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("dataset_key", name=op.f("pk_quality_schemas")),
    )
    op.create_table(
        "quality_columns",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("out_key", sa.String(length=40), nullable=False),
        sa.Column("out_namespace", sa.String(length=1024), nullable=False),
        sa.Column("out_name", sa.String(length=1024), nullable=False),
        sa.Column("out_column", sa.String(length=250), nullable=False),
        sa.Column("in_key", sa.String(length=40), nullable=False),
        sa.Column("in_column", sa.String(length=250), nullable=False),
        sa.Column("dag_namespace", sa.String(length=1024), nullable=False),
        sa.Column("dag_id", sa.String(length=1024), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_quality_columns")),
    )
    op.create_index("ix_quality_columns_in", "quality_columns", ["in_key", "in_column"])
    op.create_index("ix_quality_columns_out", "quality_columns", ["out_key"])


def downgrade() -> None:
    op.drop_index("ix_quality_columns_out", table_name="quality_columns")
    op.drop_index("ix_quality_columns_in", table_name="quality_columns")
    op.drop_table("quality_columns")
    op.drop_table("quality_schemas")
    op.drop_index("ix_quality_observations_run", table_name="quality_observations")
    op.drop_index("ix_quality_observations_dataset", table_name="quality_observations")
    op.drop_table("quality_observations")
    # Data incidents have no meaning before this revision.
    op.execute("DELETE FROM incidents WHERE kind = 'data'")
    with op.batch_alter_table("incidents") as batch:
        batch.drop_constraint(op.f("ck_incidents_kind"), type_="check")
        batch.drop_column("findings")
        batch.drop_column("kind")
    op.drop_column("run_events", "data")
