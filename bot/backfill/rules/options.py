"""Which runs a `--rerun` choice redoes, after Airflow 3's `reprocess_behavior`
(airflow/models/backfill.py `_get_dag_run_no_create_reason`): a run still in flight is never
redone, `missing` redoes only intervals with no run at all, `failed` also those whose run failed,
`all` every one. Airflow 2 has no backfill endpoint, so the bot applies the same rule to the DAG's
run history itself (bot/backfill/run/airflow2.py)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from bot.core.run_options import (
    RERUN_CHOICES,
    Rerun,
    RunOptions,
    default_rerun,
)

__all__ = [
    "RERUN_CHOICES",
    "Rerun",
    "RerunCounts",
    "RunOptions",
    "default_rerun",
    "redone",
    "rerun_counts",
]  # fmt: skip

IN_FLIGHT = frozenset({"queued", "running"})


# --- which runs a choice redoes --------------------------------------------------------------


def redone(state: str | None, rerun: Rerun) -> bool:
    """Whether an interval whose latest run is in `state` (None: no run) is run again."""
    if state is None:
        return True
    if state in IN_FLIGHT:
        return rerun == "all"  # Airflow 3 skips it; the Airflow 2 runner follows it instead
    if rerun == "missing":
        return False
    return rerun == "all" or state == "failed"


@dataclass(frozen=True)
class RerunCounts:
    """How many runs each `--rerun` choice means, from the DAGs' run history."""

    missing: int
    failed: int
    all: int
    known: bool = True
    """False when the backend keeps no run history: every choice reruns every interval."""

    def of(self, rerun: Rerun) -> int:
        return {"missing": self.missing, "failed": self.failed, "all": self.all}[rerun]

    def to_json(self) -> dict[str, Any]:
        return {
            "missing": self.missing,
            "failed": self.failed,
            "all": self.all,
            "known": self.known,
        }

    @classmethod
    def from_json(cls, data: object) -> RerunCounts | None:
        if not isinstance(data, dict):
            return None
        try:
            return cls(int(data["missing"]), int(data["failed"]), int(data["all"]),
                       bool(data.get("known", True)))  # fmt: skip
        except (KeyError, TypeError, ValueError):
            return None


def rerun_counts(states: Iterable[str | None]) -> RerunCounts:
    """Each choice's count over the latest run state of every planned interval."""
    seen = list(states)
    return RerunCounts(
        missing=sum(redone(s, "missing") for s in seen),
        failed=sum(redone(s, "failed") for s in seen),
        all=len(seen),
    )
