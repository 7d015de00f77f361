"""What other capabilities read of incidents, in their own transaction: the open alerts, and
the open incident that explains a late DAG run."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession

from bot.incidents.store import incidents as store
from bot.incidents.store.models import Incident


async def open_alerts(session: AsyncSession, *, limit: int = 500) -> list[Incident]:
    """Open incidents with an alert of their own (not grouped under another), newest first."""
    return list(reversed(await store.open_roots(session)))[:limit]


async def cause_of_lateness(
    session: AsyncSession,
    namespace: str,
    dag_id: str,
    start: datetime,
    end: datetime | None,
    *,
    now: datetime,
) -> str | None:
    """The DAG of the open incident that explains a late run of `dag_id` (itself, or one
    upstream), if any (`bot.incidents.store.incidents.cause_of_lateness`)."""
    return await store.cause_of_lateness(session, namespace, dag_id, start, end, now=now)
