"""A dataset's key in the tables that keep facts about datasets (pure)."""

from __future__ import annotations

import hashlib


def dataset_key(namespace: str, name: str) -> str:
    """A dataset's fixed-width key: names run to 1,024 characters each, too long to index
    together on PostgreSQL (a B-tree entry holds about 2,700 bytes)."""
    return hashlib.sha1(f"{namespace}\x00{name}".encode(), usedforsecurity=False).hexdigest()


def name_key(name: str) -> str:
    """A dataset name's key, whatever its namespace."""
    return hashlib.sha1(name.encode(), usedforsecurity=False).hexdigest()
