"""What stored run events teach the local lineage index (jobs, their DAGs, datasets, DAG run
intervals): after the events' commit, in a transaction of its own."""

from __future__ import annotations

import logging

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.events.rules.event import ParsedEvent
from bot.lineage.store.index import record_events

logger = logging.getLogger(__name__)


async def record_lineage(
    sessions: async_sessionmaker[AsyncSession], events: list[ParsedEvent]
) -> None:
    """What stored run events say (jobs, their DAGs, datasets, DAG run intervals) into the
    local lineage index, in a transaction of its own after the events' commit.

    The index is a cache that the reconcile with Marquez keeps whole, while the events are
    what the bot owes alerts for: a failure here is logged and never costs an event.
    """
    if not events:
        return
    for attempt in (1, 2):
        try:
            async with sessions.begin() as session:
                await record_events(session, events)
            return
        except IntegrityError:  # another writer added the same new job first: once more
            if attempt == 2:
                logger.exception("recording %d run events in the lineage index failed", len(events))
        except Exception:
            logger.exception("recording %d run events in the lineage index failed", len(events))
            return
