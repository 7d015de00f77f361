"""BOT_CONFIG's routing rules per team: which events go to which sinks (by DAG pattern and
severity), quiet hours (sinks' notices held, then sent as one digest) and escalation (an alert
nobody acknowledged goes to the next target). The decision itself is `bot/hub/rules/routing.py`.
"""

from __future__ import annotations

from datetime import time, timedelta
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import Field, field_validator, model_validator

from bot.config.base import Strict, parse_duration

__all__ = [
    "SEVERITIES",
    "Escalation",
    "EventClass",
    "QuietHours",
    "Route",
    "Severity",
    "severity_rank",
]

EventClass = Literal["failures", "sla", "backfills", "reports"]
"""failures: a DAG failed (opened, acknowledged, resolved, escalated); sla: a DAG is late;
backfills: a backfill was approved or ended; reports: a failure or lateness puts a report at
risk (the notice names the reports)."""
EVENT_CLASSES: tuple[EventClass, ...] = ("failures", "sla", "backfills", "reports")

Severity = Literal["minor", "major", "critical"]
"""minor: nothing known downstream; major: DAGs downstream; critical: a report downstream."""
SEVERITIES: tuple[Severity, ...] = ("minor", "major", "critical")


def severity_rank(severity: Severity) -> int:
    return SEVERITIES.index(severity)


class Route(Strict):
    """Events of the team's DAGs matching `dags` (`NS::GLOB` or `GLOB`) and at least `severity`
    go to the sinks named in `to`."""

    events: tuple[EventClass, ...] = Field(default=("failures",), min_length=1)
    dags: str = Field(default="*", min_length=1)
    severity: Severity = "minor"
    to: tuple[str, ...] = Field(min_length=1)


def _clock_time(value: Any) -> time:
    if isinstance(value, time):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        # YAML 1.1 reads an unquoted 22:00 as a sexagesimal number (1320)
        hours, minutes = divmod(value, 60)
        if 0 <= hours < 24:
            return time(hours, minutes)
    if isinstance(value, str):
        try:
            parsed = time.fromisoformat(value.strip())
        except ValueError:
            parsed = None
        if parsed is not None and parsed.tzinfo is not None:
            raise ValueError(f"'{value}' carries an offset: write the local time and `timezone:`")
        if parsed is not None:
            return parsed
    raise ValueError(f"'{value}' is not a time of day; write e.g. \"22:00\"")


class QuietHours(Strict):
    """From `start` to `end` (local to `timezone`; past midnight when `end` is earlier), the
    team's e-mail, webhook and Teams notices are held and sent as one digest per sink when they
    end. PagerDuty pages are never held (PagerDuty's own schedules decide who is woken), and
    neither are notices at least as severe as `urgent`, when it is set."""

    start: time
    end: time
    timezone: str = "UTC"
    urgent: Severity | None = None

    @field_validator("start", "end", mode="before")
    @classmethod
    def _time(cls, value: Any) -> time:
        return _clock_time(value)

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"'{value}' is not an IANA time zone (e.g. Europe/Berlin)") from None
        return value

    @model_validator(mode="after")
    def _not_empty(self) -> QuietHours:
        if self.start == self.end:
            raise ValueError("quiet hours start and end at the same time")
        return self


class Escalation(Strict):
    """An alert of the team's nobody acknowledged (or resolved) `after` it opened goes to
    `sinks` and is posted in `channel`: once per outage."""

    after: timedelta
    sinks: tuple[str, ...] = ()
    channel: str | None = None

    @field_validator("after", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> timedelta:
        return parse_duration(value)

    @model_validator(mode="after")
    def _somewhere(self) -> Escalation:
        if not self.sinks and not self.channel:
            raise ValueError("an escalation needs sinks, a channel, or both")
        if self.after < timedelta(minutes=1):
            raise ValueError("an escalation waits at least 1m")
        return self
