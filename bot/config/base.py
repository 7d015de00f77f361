"""What every part of BOT_CONFIG shares: its error, DAG patterns and durations.

Patterns are shell-style globs (`fnmatch`) over DAG ids, or over dataset names for reports.
A pattern may be prefixed with a namespace and a colon-free separator `NS::` to restrict it to
one Marquez namespace (namespaces may themselves contain `:` and `/`, hence the double colon).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from datetime import timedelta
from fnmatch import fnmatchcase, translate
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

_DURATION = re.compile(r"^\s*(?:(?P<d>\d+)d)?\s*(?:(?P<h>\d+)h)?\s*(?:(?P<m>\d+)m)?\s*$")


class ConfigError(ValueError):
    """BOT_CONFIG could not be read or is invalid; the message names the file and the field."""


def matches(pattern: str, namespace: str, name: str) -> bool:
    """Whether `NS::GLOB` or `GLOB` matches a (namespace, name) pair."""
    if "::" in pattern:
        ns_pattern, _, name_pattern = pattern.partition("::")
        return fnmatchcase(namespace, ns_pattern) and fnmatchcase(name, name_pattern)
    return fnmatchcase(name, pattern)


def matcher(patterns: Iterable[str]) -> Callable[[str, str], bool]:
    """`matches` for any of `patterns`, for testing many names: each pattern compiled once and
    each namespace tested once (tens of thousands of datasets share a few namespaces)."""
    compiled = []
    for pattern in patterns:
        space, _, name = pattern.partition("::") if "::" in pattern else ("*", "", pattern)
        compiled.append((re.compile(translate(space)), re.compile(translate(name))))
    names_in: dict[str, list[re.Pattern[str]]] = {}

    def test(namespace: str, name: str) -> bool:
        names = names_in.get(namespace)
        if names is None:
            names = names_in[namespace] = [n for s, n in compiled if s.match(namespace)]
        return any(n.match(name) for n in names)

    return test


def parse_duration(value: Any) -> timedelta:
    """`90m`, `2h`, `1d 6h`, or a number of seconds."""
    if isinstance(value, timedelta):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return timedelta(seconds=value)
    match = _DURATION.match(str(value)) if isinstance(value, str) and value.strip() else None
    if match is None or not any(match.groupdict().values()):
        raise ValueError(f"'{value}' is not a duration; write e.g. 30m, 2h or 1d 6h")
    parts = {k: int(v) for k, v in match.groupdict().items() if v}
    return timedelta(days=parts.get("d", 0), hours=parts.get("h", 0), minutes=parts.get("m", 0))


Duration = Annotated[timedelta, Field(json_schema_extra={"format": "duration"})]


class Strict(BaseModel):
    """A BOT_CONFIG section: unknown keys are refused, values are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)
