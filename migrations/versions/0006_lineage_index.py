"""The local lineage index: jobs, datasets, job IO, DAG run history and the change counter.

Revision ID: 0006
Revises: 0005
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create the index tables (empty: the first full reconcile with Marquez fills them)."""
    state = op.create_table(
        "lineage_state",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("full_reconcile_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("reconciled_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("high_water", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_lineage_state")),
    )
    op.bulk_insert(state, [{"id": 1, "seq": 0}])
    op.create_table(
        "lineage_jobs",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("namespace", sa.String(length=1024), nullable=False),
        sa.Column("name", sa.String(length=1024), nullable=False),
        sa.Column("dag_namespace", sa.String(length=1024), nullable=False),
        sa.Column("dag_id", sa.String(length=1024), nullable=False),
        sa.Column("is_dag", sa.Boolean(), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("in_marquez", sa.Boolean(), nullable=False),
        sa.Column("owners", sa.JSON(), nullable=True),
        sa.Column("marquez_updated_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("deleted", sa.Boolean(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_lineage_jobs")),
        sa.UniqueConstraint("namespace", "name", name=op.f("uq_lineage_jobs_namespace_name")),
    )
    op.create_index("ix_lineage_jobs_seq", "lineage_jobs", ["seq"])
    op.create_table(
        "lineage_datasets",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("namespace", sa.String(length=1024), nullable=False),
        sa.Column("name", sa.String(length=1024), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_lineage_datasets")),
        sa.UniqueConstraint("namespace", "name", name=op.f("uq_lineage_datasets_namespace_name")),
    )
    op.create_table(
        "lineage_io",
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("dataset_id", sa.Integer(), nullable=False),
        sa.Column("direction", sa.String(length=3), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["lineage_jobs.id"],
            name=op.f("fk_lineage_io_job_id_lineage_jobs"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["dataset_id"],
            ["lineage_datasets.id"],
            name=op.f("fk_lineage_io_dataset_id_lineage_datasets"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("job_id", "dataset_id", "direction", name=op.f("pk_lineage_io")),
    )
    op.create_table(
        "lineage_runs",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("dag_namespace", sa.String(length=1024), nullable=False),
        sa.Column("dag_id", sa.String(length=1024), nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("nominal_start", sa.DateTime(timezone=True), nullable=False),
        sa.Column("nominal_end", sa.DateTime(timezone=True), nullable=True),
        sa.Column("state", sa.String(length=16), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_lineage_runs")),
        sa.UniqueConstraint(
            "dag_namespace",
            "dag_id",
            "run_id",
            name=op.f("uq_lineage_runs_dag_namespace_dag_id_run_id"),
        ),
    )
    op.create_index("ix_lineage_runs_seq", "lineage_runs", ["seq"])


def downgrade() -> None:
    op.drop_index("ix_lineage_runs_seq", table_name="lineage_runs")
    op.drop_table("lineage_runs")
    op.drop_table("lineage_io")
    op.drop_table("lineage_datasets")
    op.drop_index("ix_lineage_jobs_seq", table_name="lineage_jobs")
    op.drop_table("lineage_jobs")
    op.drop_table("lineage_state")
