"""Every DAG downstream of an incident as rows (`incident_downstream`), so an incident's impact
snapshot names only the first hundred and counts the rest; filled from the snapshots stored so
far, which listed every DAG.

Revision ID: 0016
Revises: 0015
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CHUNK = 1_000


def upgrade() -> None:
    op.create_table(
        "incident_downstream",
        sa.Column("incident_id", sa.String(length=32), nullable=False),
        sa.Column("namespace", sa.String(length=1024), nullable=False),
        sa.Column("dag_id", sa.String(length=1024), nullable=False),
        sa.ForeignKeyConstraint(
            ["incident_id"],
            ["incidents.id"],
            name=op.f("fk_incident_downstream_incident_id_incidents"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "incident_id", "namespace", "dag_id", name=op.f("pk_incident_downstream")
        ),
    )
    op.create_index("ix_incident_downstream_dag", "incident_downstream", ["namespace", "dag_id"])
    incidents = sa.table("incidents", sa.column("id", sa.String), sa.column("impact", sa.JSON))
    rows = sa.table(
        "incident_downstream",
        sa.column("incident_id", sa.String),
        sa.column("namespace", sa.String),
        sa.column("dag_id", sa.String),
    )
    bind = op.get_bind()
    found: list[dict[str, str]] = []
    for incident_id, impact in bind.execute(sa.select(incidents.c.id, incidents.c.impact)):
        listed = impact.get("downstream") if isinstance(impact, dict) else None
        pairs = {
            (d["namespace"], d["dag_id"])
            for d in listed or ()
            if isinstance(d, dict)
            and isinstance(d.get("namespace"), str)
            and isinstance(d.get("dag_id"), str)
        }
        found += [{"incident_id": incident_id, "namespace": n, "dag_id": d} for n, d in pairs]
        while len(found) >= CHUNK:
            bind.execute(rows.insert(), found[:CHUNK])
            del found[:CHUNK]
    if found:
        bind.execute(rows.insert(), found)


def downgrade() -> None:
    op.drop_index("ix_incident_downstream_dag", table_name="incident_downstream")
    op.drop_table("incident_downstream")
