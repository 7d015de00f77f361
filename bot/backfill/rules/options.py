"""Which runs a `--rerun` choice redoes, after Airflow 3's `reprocess_behavior`
(airflow/models/backfill.py `_get_dag_run_no_create_reason`): a run still in flight is never
redone, `missing` redoes only intervals with no run at all, `failed` also those whose run failed,
`all` every one. Airflow 2 has no backfill endpoint, so the bot applies the same rule to the DAG's
run history itself (bot/backfill/run/airflow2.py)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from bot.core.run_options import (
    RERUN_CHOICES,
    Rerun,
    RunOptions,
    default_rerun,
)
from bot.lineage.rules.planner import Plan, PlanNote

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
ASSET_CONSUMERS = "asset_consumers"
"""The request's `options` key for the DAGs outside the plan that Airflow schedules on assets
the plan's DAGs produce: [{dag, asset, consumer}] (the preview warns of them)."""
OPTION_NOTES = "notes"
"""Key of the request's `options` holding what the executor found about them per DAG (a conf
the DAG's params refuse): `[{"dag_id", "text", "blocking"}]`."""


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


def json_type(value: object) -> str:
    """The JSON Schema type of a JSON value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def conf_problems(
    conf: Mapping[str, Any], params: Mapping[str, Sequence[str]]
) -> tuple[list[str], list[tuple[str, str, str]]]:
    """What a DAG's params say of `conf` (`params`: each param's allowed JSON types, empty for
    any): keys that are no param of the DAG, and (key, allowed, given) for values of a type the
    param's schema refuses. A DAG without params takes any conf (`dag_run.conf`)."""
    if not params:
        return [], []
    unknown = sorted(k for k in conf if k not in params)
    wrong = []
    for key, value in conf.items():
        allowed = params.get(key) or ()
        given = json_type(value)
        if not allowed or given in allowed or (given == "integer" and "number" in allowed):
            continue
        wrong.append((key, " or ".join(allowed), given))
    return unknown, wrong


def with_option_notes(plan: Plan, options: Mapping[str, Any] | None) -> Plan:
    """The plan with what the executor found about the request's options (its conf) joined to
    each DAG's notes: one note per DAG, blocking if either is."""
    raw = (options or {}).get(OPTION_NOTES) or []
    found = [PlanNote(str(n["dag_id"]), str(n["text"]), bool(n.get("blocking")))
             for n in raw if isinstance(n, Mapping) and "dag_id" in n and "text" in n]  # fmt: skip
    if not found:
        return plan
    merged = {n.dag_id: n for n in plan.notes}
    for note in found:
        before = merged.get(note.dag_id)
        if before is not None:
            note = PlanNote(note.dag_id, f"{before.text}; {note.text}",
                            before.blocking or note.blocking)  # fmt: skip
        merged[note.dag_id] = note
    return replace(plan, notes=tuple(merged.values()))
