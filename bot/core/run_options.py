"""The options someone chooses for one backfill: which runs to redo, in which order, with what
DAG run conf, how many runs at once, why, and whether to stop at the first failed run.

Parsed from `/backfill` words (bot/slack/rules/commands.py) or the Review plan modal, kept whole
in the request's `options` JSON, and read by every backend (bot/backfill/run/); which runs each
`--rerun` choice redoes is a backfill rule (bot/backfill/rules/options.py). A value object of
the core: the command parser (below the backfill capability) builds it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal, get_args

Rerun = Literal["missing", "failed", "all"]
Priority = Literal["high", "normal", "low"]
PRIORITIES: tuple[Priority, ...] = get_args(Priority)
RERUN_CHOICES: tuple[Rerun, ...] = get_args(Rerun)
REPROCESS_BEHAVIOR: Mapping[Rerun, str] = {
    "missing": "none",
    "failed": "failed",
    "all": "completed",
}
"""Airflow 3's `reprocess_behavior` for each choice."""
RERUN_WORDS: Mapping[Rerun, str] = {
    "missing": "only intervals with no run",
    "failed": "failed and missing runs",
    "all": "every interval",
}
MAX_ACTIVE = 64
"""The most runs at once a request may ask for (Airflow's own bound on a backfill is 1..)."""
REASON_CHARS = 300
CONF_CHARS = 3000
"""A DAG run conf longer than this is refused: it is kept in the request and shown in Slack."""


class OptionError(ValueError):
    """An option's value cannot be used; the message says what to give instead."""


@dataclass(frozen=True)
class RunOptions:
    """What one backfill request asked for, beyond its DAG and dates."""

    rerun: Rerun | None = None
    """None until the request is recorded: then the bot's default (`execution.airflow.
    reprocess_behavior`) is written in."""
    backwards: bool = False
    """Newest interval first (for DAGs that do not depend on their past)."""
    conf: Mapping[str, Any] | None = None
    """The DAG run conf (Airflow `params`) every rerun gets."""
    max_active: int | None = None
    """The most of this backfill's runs of one DAG active at once (None: the bot's setting)."""
    reason: str = ""
    stop_on_failure: bool = False
    """Pause the whole backfill at its first failed run instead of running on."""
    clear_failed: tuple[str, ...] = ()
    """A Retry's DAGs whose failed runs have only their failed tasks cleared (Airflow's
    clearTaskInstances) instead of new runs of every task; the other DAGs of the plan (those
    skipped downstream) run anew."""
    with_asset_consumers: bool = False
    """Include the DAGs scheduled on the Airflow assets the plan's DAGs produce, as steps after
    their producers, one run per interval (`--with-asset-consumers`)."""
    asset_triggered: tuple[str, ...] = ()
    """The plan's steps added so: Airflow DAG ids run as one triggered run per interval (Airflow
    3 cannot backfill a DAG scheduled on assets)."""
    priority: Priority = "normal"
    """Where it stands in the queue for the bot's budget (`execution.budget`): high before
    normal before low; within one level, urgent report deadlines first."""

    def to_json(self) -> dict[str, Any]:
        return {
            "rerun": self.rerun,
            "backwards": self.backwards,
            "conf": dict(self.conf) if self.conf is not None else None,
            "max_active": self.max_active,
            "reason": self.reason,
            "stop_on_failure": self.stop_on_failure,
            "priority": self.priority,
            **({"clear_failed": list(self.clear_failed)} if self.clear_failed else {}),
            **({"with_asset_consumers": True} if self.with_asset_consumers else {}),
            **({"asset_triggered": list(self.asset_triggered)} if self.asset_triggered else {}),
        }

    @classmethod
    def from_json(
        cls, data: Mapping[str, Any] | None, *, default_rerun: Rerun = "all"
    ) -> RunOptions:
        """Options as stored; a request from before options existed gets the defaults."""
        if not isinstance(data, Mapping):
            data = {}
        rerun = data.get("rerun")
        conf = data.get("conf")
        max_active = data.get("max_active")
        return cls(
            rerun=next((c for c in RERUN_CHOICES if c == rerun), default_rerun),
            backwards=bool(data.get("backwards", False)),
            conf=dict(conf) if isinstance(conf, dict) else None,
            max_active=max_active
            if isinstance(max_active, int)
            and not isinstance(max_active, bool)
            and 0 < max_active <= MAX_ACTIVE
            else None,
            reason=str(data.get("reason") or ""),
            stop_on_failure=bool(data.get("stop_on_failure", False)),
            priority=next((p for p in PRIORITIES if p == data.get("priority")), "normal"),
            clear_failed=_names(data.get("clear_failed")),
            with_asset_consumers=data.get("with_asset_consumers") is True,
            asset_triggered=_names(data.get("asset_triggered")),
        )

    @property
    def chosen_rerun(self) -> Rerun:
        return self.rerun or "all"

    @property
    def reprocess_behavior(self) -> str:
        return REPROCESS_BEHAVIOR[self.chosen_rerun]

    def resolved(self, default: Rerun) -> RunOptions:
        """These options with the bot's default where no `--rerun` was given."""
        return self if self.rerun is not None else replace(self, rerun=default)

    def described(self) -> tuple[str, ...]:
        """The options in words, for the preview, the status message and the audit."""
        words = [f"reruns {RERUN_WORDS[self.chosen_rerun]}"]
        if self.backwards:
            words.append("newest interval first")
        if self.max_active is not None:
            words.append(f"at most {self.max_active} run{'s' if self.max_active != 1 else ''} "
                         "of a DAG at once")  # fmt: skip
        if self.conf:
            words.append(f"conf {conf_text(self.conf)}")
        if self.stop_on_failure:
            words.append("pauses at the first failed run")
        if self.clear_failed:
            n = len(self.clear_failed)
            words.append(f"clears only the failed tasks of the failed runs of {n} "
                         f"DAG{'s' if n != 1 else ''}")  # fmt: skip
        if self.with_asset_consumers and self.asset_triggered:
            n = len(self.asset_triggered)
            words.append(f"with {n} DAG{'s' if n != 1 else ''} scheduled on its assets, one "
                         "run per interval")  # fmt: skip
        elif self.with_asset_consumers:
            words.append("no DAG outside it is scheduled on its assets (--with-asset-consumers)")
        if self.priority != "normal":
            words.append(f"{self.priority} priority")
        return tuple(words)


def _names(found: object) -> tuple[str, ...]:
    """A stored list of DAG ids (anything else: none)."""
    return tuple(d for d in found if isinstance(d, str)) if isinstance(found, list) else ()


def default_rerun(reprocess_behavior: str) -> Rerun:
    """The choice the bot's `execution.airflow.reprocess_behavior` stands for."""
    for choice, behaviour in REPROCESS_BEHAVIOR.items():
        if behaviour == reprocess_behavior:
            return choice
    return "all"


def conf_text(conf: Mapping[str, Any]) -> str:
    return json.dumps(dict(conf), separators=(", ", ": "), ensure_ascii=False, sort_keys=True)


# --- parsing one value (the slash command and the modal share these) --------------------------


def parse_priority(text: str) -> Priority:
    value = text.strip().lower()
    for choice in PRIORITIES:
        if value == choice:
            return choice
    raise OptionError(
        f"--priority takes high, normal or low, not {text.strip()[:40]!r}: high goes first "
        "in the queue for the bot's budget (approvers only), low lets every other backfill go "
        "before it"
    )


def parse_rerun(text: str) -> Rerun:
    value = text.strip().lower()
    for choice in RERUN_CHOICES:
        if value == choice:
            return choice
    raise OptionError(
        f"--rerun takes missing, failed or all, not {text.strip()[:40]!r}: missing redoes only "
        "intervals with no run, failed also the failed ones, all every interval."
    )


def parse_conf(text: str) -> dict[str, Any]:
    """A JSON object, as `--conf '{"k": "v"}'` gives it."""
    cleaned = text.strip()
    if len(cleaned) > CONF_CHARS:
        raise OptionError(f"--conf is {len(cleaned)} characters long; at most {CONF_CHARS}.")
    try:
        value = json.loads(cleaned, parse_constant=_no_constant, parse_float=_finite)
    except RecursionError:
        raise OptionError("--conf is nested too deeply; keep it to a few levels.") from None
    except _NotJson as exc:
        raise OptionError(
            f"--conf must be JSON: {exc.args[0]} is not a JSON number (use null or a string)."
        ) from None
    except json.JSONDecodeError as exc:
        raise OptionError(
            f"--conf must be a JSON object, e.g. --conf '{{\"full_refresh\": true}}' "
            f"({exc.msg} at character {exc.pos + 1})."
        ) from None
    if not isinstance(value, dict):
        raise OptionError(
            f'--conf must be a JSON object ({{"key": value, …}}), not a {type(value).__name__}.'
        )
    return value


class _NotJson(ValueError):
    """NaN or Infinity: Python's json reads them, JSON (and PostgreSQL's JSON) does not."""


def _no_constant(name: str) -> Any:
    raise _NotJson(name)


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e400: too large for a JSON number anyone reads back
        raise _NotJson(text)
    return value


def parse_max_active(text: str) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise OptionError(f"--max-active takes a whole number from 1 to {MAX_ACTIVE}.") from None
    if not 1 <= value <= MAX_ACTIVE:
        raise OptionError(f"--max-active takes a whole number from 1 to {MAX_ACTIVE}, not {value}.")
    return value


def parse_reason(text: str) -> str:
    cleaned = " ".join(text.split())
    if not cleaned:
        raise OptionError('--reason needs some words, e.g. --reason "orders feed was late"')
    if len(cleaned) > REASON_CHARS:
        raise OptionError(f"--reason is {len(cleaned)} characters long; at most {REASON_CHARS}.")
    if any(not c.isprintable() for c in cleaned):
        raise OptionError("--reason cannot contain control characters.")
    return cleaned
