"""Incidents store a typed impact snapshot (bot/lineage/rules/impact.py) instead of the CLI's
text view, and the failed intervals of their outage (`runs`).

Revision ID: 0007
Revises: 0006
"""

import json
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_incidents = sa.table("incidents", sa.column("id", sa.String()), sa.column("impact", sa.JSON()))


def _names(text: Any) -> list[str]:
    """The text view joined owners with ", " and said "unknown" for none (read once, here)."""
    if not isinstance(text, str) or text in ("", "unknown"):
        return []
    return [name for name in text.split(", ") if name]


def converted(old: dict[str, Any] | None) -> dict[str, Any]:
    """Schema 1 (render.impact_view, plus `pending` / `error`) as schema 2."""
    if not old or old.get("v") == 2:
        return old or {}
    status = "pending" if old.get("pending") else "unavailable" if old.get("error") else "known"
    return {
        "v": 2,
        "status": status,
        "root_owners": _names(old.get("root_owners")),
        "downstream": [
            {"namespace": d["namespace"], "dag_id": d["dag_id"], "owners": _names(d.get("owners"))}
            for d in old.get("downstream", [])
        ],
        "datasets": list(old.get("datasets", [])),
        "reports": [
            {
                "name": r["name"],
                "dataset": r.get("dataset", ""),
                "team": None if r.get("team") in (None, "", "no team") else r["team"],
                "url": r.get("url") or None,
            }
            for r in old.get("reports", [])
        ],
        "teams": list(old.get("teams", [])),
        "error": old.get("error"),
    }


def upgrade() -> None:
    op.add_column("incidents", sa.Column("runs", sa.JSON(), nullable=True))
    _rewrite(converted)


def _text_view(new: dict[str, Any] | None) -> dict[str, Any]:
    """Schema 2 back as schema 1, for the bot version before this migration."""
    if not new or new.get("v") != 2:
        return new or {}
    old: dict[str, Any] = {
        "root_owners": ", ".join(new["root_owners"]) or "unknown",
        "downstream": [
            {**d, "owners": ", ".join(d["owners"]) or "unknown"} for d in new["downstream"]
        ],
        "datasets": new["datasets"],
        "reports": [
            {**r, "team": r["team"] or "no team", "url": r["url"] or ""} for r in new["reports"]
        ],
        "teams": new["teams"],
    }
    if new["status"] == "pending":
        old["pending"] = True
    if new.get("error"):
        old["error"] = new["error"]
    return old


def _rewrite(convert: Any) -> None:
    bind = op.get_bind()
    for incident_id, impact in bind.execute(sa.select(_incidents.c.id, _incidents.c.impact)):
        data = json.loads(impact) if isinstance(impact, str) else impact
        new = convert(data)
        if new != data:
            bind.execute(
                _incidents.update().where(_incidents.c.id == incident_id).values(impact=new)
            )


def downgrade() -> None:
    _rewrite(_text_view)
    with op.batch_alter_table("incidents") as batch:
        batch.drop_column("runs")
