"""BOT_CONFIG `quality:`: when a COMPLETE run's data is wrong (`bot/quality/rules/checks.py`)."""

from __future__ import annotations

from pydantic import Field

from bot.config.base import Strict, matches


class DatasetRule(Strict):
    """How one set of datasets is judged; the first rule whose pattern matches applies."""

    pattern: str = Field(min_length=1)
    """`GLOB` on the dataset's name, or `NAMESPACE_GLOB::NAME_GLOB`."""
    min_fraction: float = Field(default=0.5, ge=0, le=1)
    """A run writing fewer rows than this fraction of the usual (the median of `history`
    earlier intervals) is wrong."""
    max_factor: float = Field(default=5.0, ge=0)
    """… and one writing more than this many times the usual (0: never too many)."""
    history: int = Field(default=14, ge=1, le=100)
    """How many earlier intervals make "usual" (the latest run of each)."""
    min_runs: int = Field(default=5, ge=1, le=100)
    """No judgement of a volume from fewer earlier intervals than this."""
    allow_empty: bool = False
    """Writing 0 rows is fine (a table that is often empty)."""
    checks: bool = True
    """False: no data incident for these datasets at all."""


DEFAULT_RULE = DatasetRule(pattern="*")


class Quality(Strict):
    """Data incidents: zero or unusual row counts, failed assertions, lost columns, dropped or
    truncated tables that others read."""

    enabled: bool = True
    datasets: tuple[DatasetRule, ...] = ()
    verify_within_s: int = Field(default=1800, ge=0, le=7 * 86400)
    """How long after a backfill ends the bot waits for its reruns' statistics before it
    verifies with what arrived (it verifies as soon as all are in)."""

    def rule_for(self, namespace: str, name: str) -> DatasetRule:
        return next((r for r in self.datasets if matches(r.pattern, namespace, name)), DEFAULT_RULE)
