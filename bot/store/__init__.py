"""The store: what the bot owes before it acts, in SQLite or PostgreSQL (SQLAlchemy 2, async).

`db` builds engines and sessions and runs the Alembic migrations in `migrations/`; `models` holds
the tables; `repository` is the API services call, inside a transaction the caller owns.
"""

from bot.store import (
    hub_models,  # noqa: F401  (registers the hub's sink tables)
    lineage_models,  # noqa: F401  (registers the lineage index tables)
    watch_models,  # noqa: F401  (registers the watcher's tables)
)
from bot.store.db import (
    async_url,
    downgrade,
    ensure_sqlite_directory,
    make_engine,
    session_factory,
    sync_url,
    upgrade,
)
from bot.store.models import (
    REQUEST_TRANSITIONS,
    STEP_TRANSITIONS,
    AuditEntry,
    BackfillRequest,
    BackfillStep,
    Base,
    RequestState,
    StepState,
)
from bot.store.repository import (
    InvalidTransition,
    RequestNotFound,
    StepNotFound,
    StoreError,
    add_audit,
    create_request,
    delete_request,
    get_request,
    list_audit,
    list_requests,
    set_status_message,
    transition_request,
    transition_step,
)

__all__ = [
    "REQUEST_TRANSITIONS",
    "STEP_TRANSITIONS",
    "AuditEntry",
    "BackfillRequest",
    "BackfillStep",
    "Base",
    "InvalidTransition",
    "RequestNotFound",
    "RequestState",
    "StepNotFound",
    "StepState",
    "StoreError",
    "add_audit",
    "async_url",
    "create_request",
    "delete_request",
    "downgrade",
    "ensure_sqlite_directory",
    "get_request",
    "list_audit",
    "list_requests",
    "make_engine",
    "session_factory",
    "set_status_message",
    "sync_url",
    "transition_request",
    "transition_step",
    "upgrade",
]
