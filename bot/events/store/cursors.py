"""The watcher's cursor over Marquez's event feed (one `watch_cursors` row per feed): where
the next poll reads from, whether Marquez was reachable, the late-event sweep's counts. Like
`repository`, every function works inside the caller's transaction and never commits."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import update
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncSession

from bot.events.store.models import WatchCursor

ERROR_MAX = 500  # characters of a poll's error kept (the column's size)


@dataclass(frozen=True)
class Cursor:
    position: datetime
    reachable: bool
    updated_at: datetime
    """When the position or the reachability last changed."""
    late_counts: dict[str, Any] | None


async def read(session: AsyncSession, name: str, *, start: datetime, now: datetime) -> Cursor:
    """The cursor, created at `start` the first time (two processes creating it at once make
    one row)."""
    row = await session.get(WatchCursor, name)
    if row is None:
        dialect = session.get_bind().dialect.name
        insert: Any = postgresql_insert if dialect == "postgresql" else sqlite_insert
        await session.execute(
            insert(WatchCursor)
            .values(
                name=name,
                position=start,
                reachable=True,
                failures=0,
                last_error=None,
                updated_at=now,
            )
            .on_conflict_do_nothing(index_elements=["name"])
        )
        row = await session.get(WatchCursor, name, populate_existing=True)
        assert row is not None
    return _cursor(row)


async def lock_for_commit(session: AsyncSession, name: str) -> Cursor:
    """Clear the failure count and return the cursor. This writes first, so the row (on
    SQLite the database) is the caller's until its transaction ends: two polls cannot move
    the cursor past each other."""
    row = (
        await session.execute(
            update(WatchCursor)
            .where(WatchCursor.name == name)
            .values(failures=0, last_error=None)
            .returning(
                WatchCursor.position,
                WatchCursor.reachable,
                WatchCursor.updated_at,
                WatchCursor.late_counts,
            )
        )
    ).one()
    return Cursor(row.position, row.reachable, row.updated_at, row.late_counts)


async def change(session: AsyncSession, name: str, **values: Any) -> None:
    """Set the cursor's position, reachability, sweep counts or `updated_at`."""
    await session.execute(update(WatchCursor).where(WatchCursor.name == name).values(**values))


async def record_failure(session: AsyncSession, name: str, reason: str, *, now: datetime) -> bool:
    """Count a failed poll and keep its reason; True when this failure makes Marquez
    unreachable (it was reachable until now: an outage to announce)."""
    reachable = await session.scalar(
        update(WatchCursor)
        .where(WatchCursor.name == name)
        .values(failures=WatchCursor.failures + 1, last_error=reason[:ERROR_MAX])
        .returning(WatchCursor.reachable)
    )
    if not reachable:
        return False
    await change(session, name, reachable=False, updated_at=now)
    return True


def _cursor(row: WatchCursor) -> Cursor:
    return Cursor(row.position, row.reachable, row.updated_at, row.late_counts)
