"""Dataset aliases: a `lineage_datasets` row may be another name of a dataset (an OpenLineage
`symlinks` identifier, which Marquez merges into the same dataset).

Revision ID: 0012
Revises: 0011
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add `alias_of` (empty: every name stored so far is a dataset of its own, and stays one,
    as the first registration of a name wins in Marquez)."""
    # Batch mode: SQLite cannot add a foreign key in place, so the table is copied there;
    # PostgreSQL gets a plain ALTER TABLE.
    with op.batch_alter_table("lineage_datasets") as batch:
        batch.add_column(sa.Column("alias_of", sa.Integer(), nullable=True))
        batch.create_foreign_key(
            op.f("fk_lineage_datasets_alias_of_lineage_datasets"),
            "lineage_datasets",
            ["alias_of"],
            ["id"],
            ondelete="CASCADE",
        )


def downgrade() -> None:
    # Aliases have no job IO (it references their datasets): without the column they would
    # read as datasets of their own.
    op.execute(sa.text("DELETE FROM lineage_datasets WHERE alias_of IS NOT NULL"))
    with op.batch_alter_table("lineage_datasets") as batch:
        batch.drop_constraint(
            op.f("fk_lineage_datasets_alias_of_lineage_datasets"), type_="foreignkey"
        )
        batch.drop_column("alias_of")
