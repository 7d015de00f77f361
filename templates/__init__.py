"""Installed as the package `bot.templates` (pyproject.toml maps this folder into `bot`), so the
bot finds its Jinja2 templates through importlib.resources wherever it is installed. A regular
package, not a namespace one: setuptools' editable installs cannot map a namespace package."""
