"""The store: what the bot owes before it acts, in SQLite or PostgreSQL (SQLAlchemy 2, async)."""
