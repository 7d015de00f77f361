"""Work that must wait for the caller's transaction to commit: log lines and counters that say
something happened (a backfill moved, an alert was owed), and waking whatever delivers the work
the transaction owed (`wake_after_commit`: a row written is a row delivered, without anyone
remembering to wake its sender). Said inside the transaction, a line
could tell of a change that a later failure rolled back; said after `begin()`'s block, it would
need every caller to remember it. Registered where the change is made, it runs once the change
is in the database, and never if it is not.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from sqlalchemy.orm import Session, SessionTransaction

__all__ = ["after_commit", "log_after_commit", "wake_after_commit", "wake_on_commit"]

logger = logging.getLogger(__name__)

_ACTIONS = "bot.after_commit"  # key in Session.info: the actions owed by the open transaction
_LISTENING = "bot.after_commit.listening"
WAKERS = "bot.wakers"
"""Key in a session factory's `info` (`bot.core.db.session_factory` makes it): kind of owed
work → what delivers it, woken once a transaction that owed such work commits."""


def after_commit(session: AsyncSession, action: Callable[[], object]) -> None:
    """Run `action` once the session's outermost transaction commits; drop it on a rollback.

    Actions run in the order they were registered, synchronously, right after the COMMIT (so
    they must be quick: a log line, a counter). One that raises is logged and the rest still
    run. A SAVEPOINT's commit or rollback does not run or drop them (the bot uses none)."""
    sync = session.sync_session
    if not sync.info.get(_LISTENING):
        event.listen(sync, "after_commit", _run)
        event.listen(sync, "after_soft_rollback", _drop)
        sync.info[_LISTENING] = True
    sync.info.setdefault(_ACTIONS, []).append(action)


def log_after_commit(
    session: AsyncSession, log: logging.Logger, message: str, *args: object, **fields: Any
) -> None:
    """An INFO line once the transaction commits; `fields` become the record's attributes (the
    JSON log's fields: ids such as request_id, incident_id, dag_id)."""

    def emit() -> None:
        log.info(message, *args, extra=fields)

    after_commit(session, emit)


def _run(sync: Session) -> None:
    if sync.in_nested_transaction():
        return  # a SAVEPOINT was released: the outer transaction may still roll back
    actions: list[Callable[[], object]] = sync.info.pop(_ACTIONS, [])
    for action in actions:
        try:
            action()
        except Exception:  # the commit happened: what reports it must not undo the caller
            logger.exception("an after-commit action failed")


def _drop(sync: Session, previous: SessionTransaction) -> None:
    if previous.parent is None:  # the outermost transaction rolled back
        sync.info.pop(_ACTIONS, None)


def wake_on_commit(
    sessions: async_sessionmaker[AsyncSession], kind: str, wake: Callable[[], None]
) -> None:
    """Register `wake` (a sender's, a runner's) for every transaction of `sessions` that owes
    `kind` work: whoever writes such a row calls `wake_after_commit`, never `wake` itself."""
    info = sessions.kw.setdefault("info", {})
    info.setdefault(WAKERS, {}).setdefault(kind, []).append(wake)


def wake_after_commit(session: AsyncSession, kind: str) -> None:
    """What delivers `kind` work (a Slack message, a sink's notice, a run event, a backfill
    handed over) looks at it once this transaction commits; nothing if no one registered."""
    wakers: dict[str, list[Callable[[], None]]] = session.sync_session.info.get(WAKERS, {})
    for wake in wakers.get(kind, ()):
        after_commit(session, wake)
