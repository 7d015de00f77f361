"""The BOT_CONFIG YAML file: teams, ownership, approvers, reports, schedules, SLA rules, limits.

Its parts: `base` (the error, DAG patterns, durations), `hub` (routes, quiet hours, escalation),
`sinks` (where notices go besides Slack) and `execution` (how backfills run, their off-peak
windows); this module is the file as a whole.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Literal

import yaml
from croniter import croniter
from pydantic import Field, ValidationError, field_validator, model_validator

from bot.config.base import ConfigError, Duration, Strict, matcher, matches, parse_duration
from bot.config.execution import AirflowExecution as AirflowExecution
from bot.config.execution import Execution as Execution
from bot.config.execution import SparkExecution as SparkExecution
from bot.config.execution import WindowRule, clock_text, days_text, zone_name
from bot.config.hub import Escalation, QuietHours, Route
from bot.config.quality import Quality
from bot.config.sinks import HubSettings, PagerDutySink, Sink, expand_references
from bot.core.model import DagRef
from bot.core.windows import Deadline, parse_clock, parse_days


class Team(Strict):
    """A team: who is in it (Slack user and user-group ids) and where it hears from the bot."""

    name: str = Field(min_length=1)
    channel: str | None = None
    members: tuple[str, ...] = ()
    user_groups: tuple[str, ...] = ()
    sinks: tuple[str, ...] = ()
    """Names from `sinks:` that get this team's failures (opened, acknowledged, resolved): the
    same as a route `{events: [failures], to: [...]}`."""
    routes: tuple[Route, ...] = ()
    """More of the team's events to sinks, by event class, DAG pattern and severity."""
    quiet_hours: QuietHours | None = None
    escalation: Escalation | None = None

    def sink_names(self) -> tuple[str, ...]:
        """Every sink the team sends to, each once."""
        names = [*self.sinks, *(n for r in self.routes for n in r.to)]
        if self.escalation is not None:
            names += self.escalation.sinks
        return tuple(dict.fromkeys(names))


class Ownership(Strict):
    """Which DAGs a team owns; `second_approver` means the requester cannot approve alone;
    `approve: all_owners` means a backfill of a matching DAG also needs one approval from each
    team owning a DAG it reruns downstream (a global approver's approval counts for all)."""

    pattern: str = Field(min_length=1)
    team: str
    second_approver: bool = False
    approve: Literal["any_owner", "all_owners"] = "any_owner"


class Approvers(Strict):
    """People and groups who may approve any backfill, whoever owns the DAG."""

    users: tuple[str, ...] = ()
    user_groups: tuple[str, ...] = ()


class Report(Strict):
    """A report (dashboard, export) declared by the datasets it reads."""

    name: str = Field(min_length=1)
    url: str | None = None
    team: str | None = None
    datasets: tuple[str, ...] = Field(min_length=1)
    ready_by: str | None = None
    """When people read it ("08:00" on `days` in `timezone`): backfills of its data go first
    in the queue for the budget as that time nears (`execution.budget.urgent_within`)."""
    days: str = "daily"
    timezone: str = "UTC"

    @field_validator("ready_by")
    @classmethod
    def _clock(cls, value: str | None) -> str | None:
        return None if value is None else clock_text(value)

    @field_validator("days")
    @classmethod
    def _days(cls, value: str) -> str:
        return days_text(value)

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str) -> str:
        return zone_name(value)

    def deadline(self) -> Deadline | None:
        """When the report is read, as a recurring wall-clock time (None: not said)."""
        if self.ready_by is None:
            return None
        return Deadline(parse_days(self.days), parse_clock(self.ready_by), self.timezone)


class ScheduleRule(Strict):
    """An explicit cron schedule (or Airflow preset such as `@daily`) for matching DAGs."""

    pattern: str = Field(min_length=1)
    cron: str

    @field_validator("cron")
    @classmethod
    def _valid_cron(cls, value: str) -> str:
        if not croniter.is_valid(value):
            raise ValueError(f"'{value}' is not a cron expression (e.g. '0 0 * * 0' or '@weekly')")
        return value


class SlaRule(Strict):
    """A DAG run is late when it has not succeeded `deadline` after its data interval ends
    (`deadline: 6h` on a daily DAG: done by 06:00 UTC the next day), or when it has been running
    longer than `max_duration`."""

    pattern: str = Field(min_length=1)
    deadline: Duration | None = None
    max_duration: Duration | None = None
    notify: tuple[str, ...] = ()

    @field_validator("deadline", "max_duration", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> timedelta | None:
        return None if value is None else parse_duration(value)

    @model_validator(mode="after")
    def _something(self) -> SlaRule:
        if self.deadline is None and self.max_duration is None:
            raise ValueError("an SLA rule needs a deadline, a max_duration, or both")
        return self


class Limits(Strict):
    max_range_days: int = Field(default=92, ge=1, le=3660)
    max_plan_dags: int = Field(default=500, ge=1)
    still_planning_s: float = Field(default=5.0, gt=0, le=600)
    """After this long without a plan, `/backfill` tells the person it is still asking Marquez
    (a big Marquez takes 10-15 s for a deep lineage graph), so the wait is never silent."""


MAX_LATE_BUCKETS = 288
"""Buckets the late-event sweep keeps at most (24 h of 5-minute buckets)."""


class Watch(Strict):
    """The watcher: where run events come from and where alerts go."""

    poll: bool = True
    """Poll Marquez's GET /api/v1/events/lineage (the receiver works either way)."""
    poll_interval_s: float = Field(default=30.0, ge=0.05, le=3600)
    retry_max_s: float = Field(default=60.0, ge=0.05, le=3600)
    """While Marquez fails, polls back off (doubling from poll_interval_s) to at most this:
    how late, at worst, its recovery is noticed."""
    overlap_s: float = Field(default=300.0, ge=0, le=86400)
    """Each poll re-reads this far before its cursor: late events carry old eventTimes."""
    start_from: datetime | None = None
    """Where the first poll starts (ISO time); default: `lookback_s` before the bot started."""
    lookback_s: float = Field(default=3600.0, ge=0)
    page_size: int = Field(default=100, ge=1, le=1000)
    late_window_s: float = Field(default=86400.0, ge=0, le=30 * 86400)
    """Events whose eventTime is up to this far behind the clock when they reach Marquez are
    still caught (bot/events/service/late_sweep.py); 0 turns the late-event sweep off."""
    late_bucket_s: float = Field(default=600.0, ge=60, le=86400)
    """The sweep's bucket width: one count per bucket is kept; a changed bucket is re-read."""
    ops_channel: str | None = None
    """Where "Marquez unreachable" / "recovered" notices go (none: logged only)."""
    alert_channel: str | None = None
    """Where alerts for DAGs that no team with a channel owns go (none: not alerted)."""
    marquez_web_url: str | None = None
    """Marquez's web UI, for "Open in Marquez" links (default: MARQUEZ_URL)."""
    impact_wait_s: float = Field(default=0.4, ge=0, le=60)
    """How long an alert waits for its impact; past that it is posted and the impact edited in."""
    group_wait_s: float = Field(default=2.0, ge=0, le=300)
    """An alert, and each edit the watcher makes to it, waits this long and takes in what
    changes meanwhile (Alertmanager's group_wait): events arriving together make one Slack
    call. Edits from a click go at once; 0 sends everything at once."""
    snooze: Literal["owners", "anyone_in_channel"] = "owners"
    """Who may Snooze and Unsnooze an alert: `owners`, whoever may approve a backfill of its DAG
    (its owning teams' members, the configured approvers); `anyone_in_channel`, anyone who can
    click in the alert's channel."""

    @model_validator(mode="after")
    def _bounded_sweep(self) -> Watch:
        # Each bucket is one count request when it first closes (all at once on the first
        # poll), which must fit in one poll.
        buckets = self.late_window_s / self.late_bucket_s
        if buckets > MAX_LATE_BUCKETS:
            raise ValueError(
                f"watch.late_window_s / watch.late_bucket_s is {buckets:.0f} buckets; at most "
                f"{MAX_LATE_BUCKETS} are allowed: raise late_bucket_s to at least "
                f"{self.late_window_s / MAX_LATE_BUCKETS:.0f}"
            )
        return self


class IndexSettings(Strict):
    """The local lineage index `serve` plans from (the CLI always reads Marquez directly)."""

    enabled: bool = True
    """Plan, and compute impact, from the index; false: crawl Marquez per request."""
    reconcile_interval_s: float = Field(default=300.0, ge=1, le=86400)
    """Incremental reconcile: jobs Marquez updated since the last one."""
    full_reconcile_s: float = Field(default=21600.0, ge=60)
    """Full reconcile (every job; deleted jobs are found here only); also once at start."""
    overlap_s: float = Field(default=300.0, ge=0, le=86400)
    """An incremental read goes this far below the newest `updatedAt` it saw last time."""
    history_days: int = Field(default=400, ge=1)
    """DAG runs older than this are forgotten (schedules are learned from the newest 60)."""
    page_size: int = Field(default=100, ge=1, le=1000)
    """Jobs per `GET /api/v1/jobs` page while reconciling."""


_OWNER_TESTS: dict[int, tuple[tuple[Ownership, ...], OwnerTests]] = {}
OwnerTests = tuple[tuple[Callable[[str, str], bool], str], ...]


def _owner_tests(ownership: tuple[Ownership, ...]) -> OwnerTests:
    """Each ownership rule's pattern compiled (`matcher`), with its team: an alert on a DAG
    with 100,000 downstream asks whose each one is. Kept by the rules' identity (hashing
    them costs more than the match); the entry holds them, so the id is not reused."""
    found = _OWNER_TESTS.get(id(ownership))
    if found is None or found[0] is not ownership:
        if len(_OWNER_TESTS) > 8:  # configs reloaded (tests parse hundreds)
            _OWNER_TESTS.clear()
        found = _OWNER_TESTS[id(ownership)] = (
            ownership,
            tuple((matcher([o.pattern]), o.team) for o in ownership),
        )
    return found[1]


class BotConfig(Strict):
    """The whole BOT_CONFIG file. Every section is optional; an empty file is valid."""

    teams: tuple[Team, ...] = ()
    ownership: tuple[Ownership, ...] = ()
    approvers: Approvers = Approvers()
    reports: tuple[Report, ...] = ()
    schedules: tuple[ScheduleRule, ...] = ()
    sla: tuple[SlaRule, ...] = ()
    limits: Limits = Limits()
    execution: Execution = Execution()
    watch: Watch = Watch()
    index: IndexSettings = IndexSettings()
    sinks: tuple[Sink, ...] = ()
    hub: HubSettings = HubSettings()
    quality: Quality = Quality()

    @model_validator(mode="after")
    def _references(self) -> BotConfig:
        names = [t.name for t in self.teams]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"team names must be unique; repeated: {', '.join(duplicates)}")
        known = set(names)
        referenced = [("ownership", o.team) for o in self.ownership]
        referenced += [("reports", r.team) for r in self.reports if r.team]
        referenced += [("sla", team) for rule in self.sla for team in rule.notify]
        referenced += [("execution.windows", w.team) for w in self.execution.windows if w.team]
        for section, team in referenced:
            if team not in known:
                raise ValueError(
                    f"{section} refers to team '{team}', which is not declared under teams"
                )
        sinks = [s.name for s in self.sinks]
        repeated = sorted({n for n in sinks if sinks.count(n) > 1})
        if repeated:
            raise ValueError(f"sink names must be unique; repeated: {', '.join(repeated)}")
        for team_config in self.teams:
            for name in team_config.sink_names():
                if name not in sinks:
                    raise ValueError(
                        f"team '{team_config.name}' sends to sink '{name}', which is not "
                        "declared under sinks"
                    )
            for route in team_config.routes:
                paging = [n for n in route.to if isinstance(self.sink(n), PagerDutySink)]
                if paging and set(route.events) != {"failures"}:
                    raise ValueError(
                        f"team '{team_config.name}' routes {', '.join(route.events)} to "
                        f"PagerDuty sink '{paging[0]}': PagerDuty pages failures only (one page "
                        "per outage, resolved by its resolution); send sla, backfills and "
                        "reports to e-mail, a webhook or Teams"
                    )
        return self

    def sink(self, name: str) -> Sink | None:
        return next((s for s in self.sinks if s.name == name), None)

    def team(self, name: str) -> Team | None:
        return next((t for t in self.teams if t.name == name), None)

    def owners_of(self, dag: DagRef) -> tuple[str, ...]:
        """Teams owning a DAG by the ownership patterns, in file order, without repeats."""
        found = [t for test, t in _owner_tests(self.ownership) if test(dag.namespace, dag.dag_id)]
        return tuple(dict.fromkeys(found))

    def cron_for(self, dag: DagRef) -> str | None:
        rule = next(
            (s for s in self.schedules if matches(s.pattern, dag.namespace, dag.dag_id)), None
        )
        return rule.cron if rule else None

    def window_for(self, dag: DagRef) -> WindowRule | None:
        """The first `execution.windows` rule for a backfill of `dag`: one naming a DAG pattern
        that matches it, a team that owns it, or neither (every DAG)."""
        owners: tuple[str, ...] | None = None
        for rule in self.execution.windows:
            if rule.dags is not None and not matches(rule.dags, dag.namespace, dag.dag_id):
                continue
            if rule.team is not None:
                owners = self.owners_of(dag) if owners is None else owners
                if rule.team not in owners:
                    continue
            return rule
        return None

    def sla_for(self, dag: DagRef) -> SlaRule | None:
        return next((r for r in self.sla if matches(r.pattern, dag.namespace, dag.dag_id)), None)


def _describe(error: ValidationError, source: str) -> str:
    lines = []
    for item in error.errors():
        where = ".".join(str(part) for part in item["loc"]) or "(top level)"
        lines.append(f"{source}: {where}: {item['msg']}")
    return "\n".join(lines)


def parse_config(
    data: Any, *, source: str = "BOT_CONFIG", environ: Mapping[str, str] | None = None
) -> BotConfig:
    """Validate an already-parsed YAML document; `environ` fills the sinks' `${VAR}`s."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the top level must be a mapping of sections, not {data!r}")
    try:
        data = expand_references(data, environ or {})
    except KeyError as exc:
        raise ConfigError(f"{source}: sinks: ${{{exc.args[0]}}} is not set") from None
    try:
        return BotConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, source)) from None


def load_config(path: Path | None, environ: Mapping[str, str] | None = None) -> BotConfig:
    """Read BOT_CONFIG; no path means the defaults (no teams, no rules). `environ` fills the
    sinks' `${VAR}` references (the composition root passes the process environment)."""
    if path is None:
        return BotConfig()
    source = f"BOT_CONFIG {path}"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{source}: cannot be read: {exc.strerror or exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: is not valid YAML: {exc}") from None
    return parse_config(data, source=source, environ=environ)
