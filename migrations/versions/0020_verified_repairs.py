"""Verified repairs and the restatement ledger: when each observation was taken in and which
job sent it, a backfill's owed verification, and what each backfill rewrote.

Revision ID: 0020
Revises: 0019
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "quality_observations", sa.Column("seen_at", sa.DateTime(timezone=True), nullable=True)
    )
    op.add_column(
        "quality_observations", sa.Column("job_name", sa.String(length=1024), nullable=True)
    )
    op.create_index(
        "ix_quality_observations_dag", "quality_observations", ["dag_id", "interval_start"]
    )
    op.add_column(
        "backfill_requests", sa.Column("verify_due_at", sa.DateTime(timezone=True), nullable=True)
    )
    op.add_column(
        "backfill_requests", sa.Column("verified_at", sa.DateTime(timezone=True), nullable=True)
    )
    op.create_index("ix_backfill_requests_verify_due_at", "backfill_requests", ["verify_due_at"])
    op.create_table(
        "restatements",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("request_id", sa.String(length=32), nullable=False),
        sa.Column("dag_namespace", sa.String(length=1024), nullable=False),
        sa.Column("dag_id", sa.String(length=250), nullable=False),
        sa.Column("interval_start", sa.DateTime(timezone=True), nullable=False),
        sa.Column("interval_end", sa.DateTime(timezone=True), nullable=False),
        sa.Column("dataset_key", sa.String(length=40), nullable=True),
        sa.Column("namespace", sa.String(length=1024), nullable=True),
        sa.Column("name", sa.String(length=1024), nullable=True),
        sa.Column("name_key", sa.String(length=40), nullable=True),
        sa.Column("rows_before", sa.BigInteger(), nullable=True),
        sa.Column("rows_after", sa.BigInteger(), nullable=True),
        sa.Column("unit", sa.String(length=8), nullable=False),
        sa.Column("verdict", sa.String(length=16), nullable=False),
        sa.Column("why", sa.String(length=64), nullable=True),
        sa.Column("usual", sa.BigInteger(), nullable=True),
        sa.Column("incident_id", sa.String(length=32), nullable=True),
        sa.Column("reason", sa.String(length=300), nullable=True),
        sa.Column("requested_by", sa.String(length=64), nullable=False),
        sa.Column("approved_by", sa.String(length=64), nullable=True),
        sa.Column("restated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "verdict IN ('right', 'wrong', 'unknown')", name=op.f("ck_restatements_verdict")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_restatements")),
    )
    op.create_index("ix_restatements_dag", "restatements", ["dag_id", "restated_at"])
    op.create_index("ix_restatements_dataset", "restatements", ["dataset_key", "restated_at"])
    op.create_index("ix_restatements_name", "restatements", ["name_key", "restated_at"])
    op.create_index("ix_restatements_request", "restatements", ["request_id"])
    op.create_index("ix_restatements_restated_at", "restatements", ["restated_at"])
    op.create_table(
        "restated_reports",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("request_id", sa.String(length=32), nullable=False),
        sa.Column("report", sa.String(length=250), nullable=False),
        sa.Column("days", sa.JSON(), nullable=False),
        sa.Column("wrong_days", sa.JSON(), nullable=False),
        sa.Column("dags", sa.JSON(), nullable=False),
        sa.Column("restated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_restated_reports")),
    )
    op.create_index("ix_restated_reports_report", "restated_reports", ["report", "restated_at"])


def downgrade() -> None:
    op.drop_index("ix_restated_reports_report", table_name="restated_reports")
    op.drop_table("restated_reports")
    for index in (
        "ix_restatements_name",
        "ix_restatements_restated_at",
        "ix_restatements_request",
        "ix_restatements_dataset",
        "ix_restatements_dag",
    ):
        op.drop_index(index, table_name="restatements")
    op.drop_table("restatements")
    op.drop_index("ix_backfill_requests_verify_due_at", table_name="backfill_requests")
    with op.batch_alter_table("backfill_requests") as batch:
        batch.drop_column("verified_at")
        batch.drop_column("verify_due_at")
    op.drop_index("ix_quality_observations_dag", table_name="quality_observations")
    with op.batch_alter_table("quality_observations") as batch:
        batch.drop_column("job_name")
        batch.drop_column("seen_at")
