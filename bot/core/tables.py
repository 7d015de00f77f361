"""What every table of the bot shares: the declarative base, portable types and ids.

Portable types only (the same models run on SQLite and PostgreSQL). Ids are UUID4 hex strings made
in Python, datetimes are UTC-aware on the way in and out, states are short strings guarded by CHECK
constraints, and every constraint has a stable name through the MetaData naming convention. Each
capability declares its own tables on this `Base` (`bot.schema` gathers them all).
"""

from __future__ import annotations

import importlib
import uuid
from collections.abc import Iterable
from datetime import UTC, datetime

from sqlalchemy import DateTime, Dialect, MetaData, event
from sqlalchemy.orm import DeclarativeBase
from sqlalchemy.types import TypeDecorator

NAMING_CONVENTION: dict[str, str] = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def new_id() -> str:
    """A fresh row id: a UUID4 as 32 hex characters."""
    return uuid.uuid4().hex


def utcnow() -> datetime:
    """The current time, UTC-aware."""
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator[datetime]):
    """`DateTime(timezone=True)` that only accepts aware datetimes and always returns UTC ones.

    SQLite keeps no offset, so values are stored as UTC wall time and tagged UTC on the way out.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"naive datetime {value!r}: the store keeps UTC-aware datetimes only")
        utc = value.astimezone(UTC)
        return utc.replace(tzinfo=None) if dialect.name == "sqlite" else utc

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


def one_of(column: str, values: Iterable[str]) -> str:
    return f"{column} IN ({', '.join(repr(str(v)) for v in values)})"


class Base(DeclarativeBase):
    """Declarative base whose MetaData names constraints the same way on every backend."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)


@event.listens_for(Base.registry, "before_configured")
def _every_table(*_: object) -> None:
    """A capability's table may point at another's by name (the outbox at backfill_requests
    and incidents, the audit log at backfill_requests, sink deliveries at incidents). Before
    the ORM first resolves those names, every table is registered, whichever store was imported
    first. Imported by name: core knows no capability (`bot.schema` knows them all)."""
    importlib.import_module("bot.schema")
