"""The store: what the bot owes before it acts, in SQLite or PostgreSQL (SQLAlchemy 2, async)."""

from bot.store import (
    hub_models,  # noqa: F401  (registers the hub's sink tables)
    lineage_models,  # noqa: F401  (registers the lineage index tables)
    watch_models,  # noqa: F401  (registers the watcher's tables)
)
