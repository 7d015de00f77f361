"""Managed backfills: the `scheduled` and `paused` request states, who paused a request, when
and why, when a scheduled or window-paused request starts or resumes by itself, and how many
failed runs `--stop-on-failure` has already paused for.

Revision ID: 0017
Revises: 0016
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_BEFORE = ("previewed", "approved", "running", "succeeded", "failed", "cancelled", "refused")
_AFTER = ("previewed", "approved", "scheduled", "running", "paused", "succeeded", "failed",
          "cancelled", "refused")  # fmt: skip


def _states(values: Sequence[str]) -> str:
    return f"state IN ({', '.join(repr(v) for v in values)})"


def upgrade() -> None:
    # Batch mode: SQLite cannot alter a CHECK constraint in place, so the table is copied.
    with op.batch_alter_table("backfill_requests") as batch:
        batch.drop_constraint(op.f("ck_backfill_requests_state"), type_="check")
        batch.create_check_constraint("state", _states(_AFTER))
        batch.add_column(sa.Column("start_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("paused_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("paused_by", sa.String(length=64), nullable=True))
        batch.add_column(sa.Column("pause_reason", sa.String(length=300), nullable=True))
        batch.add_column(sa.Column("resume_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(
            sa.Column("failures_seen", sa.Integer(), nullable=False, server_default="0")
        )
    op.create_index(
        "ix_backfill_requests_state_resume_at", "backfill_requests", ["state", "resume_at"]
    )


def downgrade() -> None:
    op.drop_index("ix_backfill_requests_state_resume_at", table_name="backfill_requests")
    # A paused request runs on, as before pauses existed. A scheduled one was handed off
    # already (its hand-off is audited), so `approved` would never start: it is cancelled.
    op.execute("UPDATE backfill_requests SET state = 'running' WHERE state = 'paused'")
    op.execute(
        "UPDATE backfill_requests SET state = 'cancelled', finished_at = CURRENT_TIMESTAMP "
        "WHERE state = 'scheduled'"
    )
    with op.batch_alter_table("backfill_requests") as batch:
        for column in ("failures_seen", "resume_at", "pause_reason", "paused_by", "paused_at",
                       "start_at"):  # fmt: skip
            batch.drop_column(column)
        batch.drop_constraint(op.f("ck_backfill_requests_state"), type_="check")
        batch.create_check_constraint("state", _states(_BEFORE))
