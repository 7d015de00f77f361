"""The incidents table: a failed DAG run for one interval, and the outage it belongs to."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, CheckConstraint, ForeignKey, Index, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from bot.core.tables import Base, UTCDateTime, new_id, one_of, utcnow
from bot.incidents.rules.lifecycle import IncidentKind, IncidentState


class Incident(Base):
    """A failed DAG run (tasks roll up to their DAG) for one interval, or a failure grouped
    under an open incident upstream of it (`root_id`). The alert is a Slack message whose ts is
    recorded once posted; repeats and grouped failures update it and reply in its thread."""

    __tablename__ = "incidents"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    namespace: Mapped[str] = mapped_column(String(1024))
    dag_id: Mapped[str] = mapped_column(String(1024))
    interval_key: Mapped[str] = mapped_column(String(64))
    """ISO start of the failed run's nominal interval (`day:YYYY-MM-DD` of its event if none);
    a data incident's is prefixed `data|`, so one interval can hold both kinds."""
    kind: Mapped[str] = mapped_column(
        String(16), default=IncidentKind.FAILURE.value, server_default=IncidentKind.FAILURE.value
    )
    """`failure`: runs that failed; `data`: runs that completed with bad data (`findings`)."""
    findings: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON)
    """A data incident's problems: each finding (`bot/quality/rules/checks.py`) with its
    interval, when it was found and whether a later run put it right."""
    interval_start: Mapped[datetime | None] = mapped_column(UTCDateTime())
    interval_end: Mapped[datetime | None] = mapped_column(UTCDateTime())
    state: Mapped[str] = mapped_column(String(16), default=IncidentState.OPEN.value)
    root_id: Mapped[str | None] = mapped_column(
        String(32), ForeignKey("incidents.id", ondelete="SET NULL")
    )
    failures: Mapped[int] = mapped_column(Integer, default=1)
    grouped: Mapped[int] = mapped_column(Integer, default=0)
    """Failures downstream that joined this incident instead of alerting on their own."""
    error_message: Mapped[str | None] = mapped_column(String(2000))
    dag_run_id: Mapped[str | None] = mapped_column(String(64))
    """The failed DAG run: its task failures and the DAG's own failure count once."""
    error_job: Mapped[str | None] = mapped_column(String(1024))
    """The job whose failure `error_message` is: the first real error of the DAG run."""
    failed_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    """Event time of the latest failure: only a success after it resolves the incident."""
    impact: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    """The typed impact snapshot (`bot/lineage/rules/impact.py`) as JSON; `{}` for a grouped
    failure."""
    runs: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON)
    """The outage's failed intervals (`bot/incidents/store/incidents.py` reads them); None before
    0007."""
    channel: Mapped[str | None] = mapped_column(String(64))
    alert_ts: Mapped[str | None] = mapped_column(String(32))
    snoozed_until: Mapped[datetime | None] = mapped_column(UTCDateTime())
    snoozed_by: Mapped[str | None] = mapped_column(String(64))
    acknowledged_by: Mapped[str | None] = mapped_column(String(64))
    acknowledged_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    try_number: Mapped[int | None] = mapped_column(Integer)
    """Airflow's try number of the failure the alert shows."""
    airflow_run_id: Mapped[str | None] = mapped_column(String(250))
    airflow_task_id: Mapped[str | None] = mapped_column(String(250))
    proposal: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    """The backfill the alert proposes (`bot/incidents/rules/proposal.py`), planned with the
    impact."""
    backfill_request_id: Mapped[str | None] = mapped_column(
        String(32), ForeignKey("backfill_requests.id", ondelete="SET NULL")
    )
    opened_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    resolved_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    alerted_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    """When the bot opened (or last reopened) this outage: its hub notices are keyed by it and
    its escalation counts from it (a repeat failure does not move it)."""
    escalated_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    """When the outage was escalated (nobody acknowledged it in time); cleared as it reopens."""

    __table_args__ = (
        UniqueConstraint("namespace", "dag_id", "interval_key"),
        CheckConstraint(one_of("state", IncidentState), name="state"),
        CheckConstraint(one_of("kind", IncidentKind), name="kind"),
        Index("ix_incidents_state_opened_at", "state", "opened_at"),
    )


class IncidentDownstream(Base):
    """Every DAG downstream of an incident when its impact was worked out (its snapshot names
    the first hundred): a later failure of one joins the incident instead of alerting on its
    own, and a late run of one is explained by it. Looked up by DAG, so tens of thousands of
    rows cost one index probe per event, not a read of every open alert's impact."""

    __tablename__ = "incident_downstream"

    incident_id: Mapped[str] = mapped_column(
        String(32), ForeignKey("incidents.id", ondelete="CASCADE"), primary_key=True
    )
    namespace: Mapped[str] = mapped_column(String(1024), primary_key=True)
    dag_id: Mapped[str] = mapped_column(String(1024), primary_key=True)

    __table_args__ = (Index("ix_incident_downstream_dag", "namespace", "dag_id"),)
