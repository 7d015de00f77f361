"""Installed as the package `bot.examples` (pyproject.toml maps this folder into `bot`), so the
demo finds bot-config.yml through importlib.resources wherever it is installed. A regular
package, not a namespace one: setuptools' editable installs cannot map a namespace package."""
