"""Installed as the package `bot.migrations` (pyproject.toml maps this folder into `bot`), so
`backfill-bot db upgrade` finds the Alembic scripts through importlib.resources wherever it is
installed. A regular package, not a namespace one: setuptools' editable installs cannot map a
namespace package."""
