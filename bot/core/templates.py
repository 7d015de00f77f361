"""One Jinja2 environment for every text the bot renders (Slack Block Kit, the CLI's text):
the repository's templates/, as installed. View models keep logic out of templates."""

from __future__ import annotations

from functools import cache

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from bot.core.resources import resource_dir

TEMPLATES = resource_dir("bot.templates")  # the repository's templates/, as installed


@cache
def environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        undefined=StrictUndefined,
        autoescape=False,  # text templates; Block Kit templates escape through |tojson
        extensions=["jinja2.ext.do"],  # templates gather Block Kit elements into lists
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    return env
