"""Data folders that ship inside the bot (templates, migrations, examples), found through the
import system so an installed wheel finds its own copy."""

from __future__ import annotations

from importlib import resources
from pathlib import Path


def resource_dir(package: str) -> Path:
    """The folder of a data package that ships inside the bot: `bot.templates`, `bot.migrations`
    or `bot.examples` (pyproject.toml maps the repository's top-level folders to them).

    Found through the import system, never relative to a source checkout, so an installed wheel
    finds its own copy. Jinja2's FileSystemLoader and Alembic's script_location need a real
    folder, which every pip install (wheel or editable) gives."""
    found = resources.files(package)
    if isinstance(found, Path):
        return found
    raise RuntimeError(f"{package} is inside an archive ({found}); install backfill-bot with pip")
