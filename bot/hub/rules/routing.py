"""The hub's routing: where one event goes beyond the owning team's Slack channel, decided once
per event from plain data (the event, BOT_CONFIG, the subscriptions, the clock).

- **Sinks** (PagerDuty, e-mail, webhooks, Teams): those of each team owning the event's DAG,
  by the team's `sinks:` (its failures) and `routes:` (event class, DAG pattern, severity);
  an escalation goes to the escalation's sinks only; the end of an outage (acknowledged,
  resolved) also reaches every sink told of its start, so a routing change cannot leave a page
  open. In a team's quiet hours a sink's notices are held until they end (then sent as one
  digest), unless the sink is PagerDuty, the notice is urgent, or another team not in quiet
  hours routes it there too.
- **Slack channels and DMs subscribed** with `/backfill subscribe`, less those the bot's own
  routing reaches anyway (`reached`): a channel reached both ways gets one message.

The Slack routing of BOT_CONFIG (the owning team's channel, reports' teams, `watch` channels)
stays where it is; this only adds to it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Literal
from zoneinfo import ZoneInfo

from bot.config import BotConfig, Team
from bot.config.base import matches
from bot.config.hub import EventClass, QuietHours, Severity, severity_rank
from bot.config.sinks import PagerDutySink, Sink
from bot.core.model import DagRef
from bot.ownership.rules import team_name

__all__ = [
    "Decision",
    "HubEvent",
    "HubKind",
    "SinkTarget",
    "Subscription",
    "covers",
    "escalation_due",
    "event_class",
    "quiet_until",
    "route",
    "severity_of",
]

HubKind = Literal[
    "failure.opened",
    "failure.acknowledged",
    "failure.resolved",
    "failure.escalated",
    "sla.missed",
    "backfill.approved",
    "backfill.ended",
]


def event_class(kind: HubKind) -> EventClass:
    prefix = kind.partition(".")[0]
    return {"failure": "failures", "sla": "sla", "backfill": "backfills"}[prefix]  # type: ignore[return-value]


def severity_of(*, downstream: int, reports: int) -> Severity:
    """A failure (or lateness) with a report downstream is critical; with DAGs downstream,
    major; a leaf's is minor."""
    if reports:
        return "critical"
    return "major" if downstream else "minor"


@dataclass(frozen=True)
class HubEvent:
    """One thing that happened, as every sink hears of it."""

    kind: HubKind
    dag: DagRef
    """The DAG it is about (a backfill's: the DAG it was asked for)."""
    at: datetime
    intervals: str = ""
    """The intervals in words ("2021-06-04 to 2021-06-06")."""
    owners: Sequence[str] = ()
    """The owning teams: BOT_CONFIG's, then the lineage's."""
    severity: Severity = "minor"
    upstream: frozenset[DagRef] = frozenset()
    """The DAGs upstream of `dag`, for subscriptions `--downstream` of them."""
    dags: tuple[DagRef, ...] = ()
    """More DAGs the event is about: the DAGs a backfill reruns."""
    reports: tuple[str, ...] = ()
    """Reports at risk (downstream of a failure, late because of a late DAG)."""
    incident_id: str = ""
    incident_kind: str = "failure"
    """`failure` (runs failed) or `data` (runs completed with bad data, said in `error`)."""
    error: str | None = None
    failures: int = 1
    acknowledged_by: str | None = None  # a Slack user id
    backfill_request_id: str | None = None
    miss_id: str | None = None
    """An SLA miss's id; `reason` says why it is late."""
    reason: str | None = None
    state: str | None = None
    """How a backfill ended (succeeded, failed, cancelled, …)."""
    actor: str | None = None
    """Who approved a backfill (a Slack user id)."""


@dataclass(frozen=True)
class Subscription:
    """A channel or DM's `/backfill subscribe`, as routing reads it."""

    id: str
    channel: str
    pattern: str
    events: frozenset[EventClass]
    downstream: bool = False


@dataclass(frozen=True)
class SinkTarget:
    sink: Sink
    held_until: datetime | None = None
    """Set in quiet hours: held until then, and sent in one digest with the sink's others."""


@dataclass(frozen=True)
class Decision:
    sinks: tuple[SinkTarget, ...] = ()
    channels: tuple[str, ...] = ()
    """Subscribed channels and DMs to post in, each once, none the bot reaches anyway."""
    subscriptions: tuple[str, ...] = field(default=())
    """The ids of the subscriptions that matched (for the log)."""


def route(
    event: HubEvent,
    config: BotConfig,
    *,
    now: datetime,
    subscriptions: Iterable[Subscription] = (),
    paged: Sequence[str] = (),
    reached: Iterable[str] = (),
) -> Decision:
    """Where `event` goes: see the module's docstring. `paged`: the sinks told of the outage's
    start; `reached`: the Slack channels the bot's own routing posts this event in."""
    teams = [t for o in event.owners if (t := config.team(team_name(o))) is not None]
    teams = list(dict.fromkeys(teams))
    escalation = next((t for t in teams if t.escalation is not None), None)
    if event.kind == "failure.escalated":
        teams = [escalation] if escalation is not None else []  # the first owner's policy
    by_sink: dict[str, list[Team]] = {}
    for team in teams:
        for name in _team_sinks(team, event):
            by_sink.setdefault(name, []).append(team)
    if event.kind in ("failure.acknowledged", "failure.resolved"):
        for name in paged:
            by_sink.setdefault(name, [])
    targets: list[SinkTarget] = []
    for name, routed_by in by_sink.items():
        sink = config.sink(name)
        if isinstance(sink, PagerDutySink) and event_class(event.kind) != "failures":
            continue  # a page is an outage's (BOT_CONFIG refuses such a route)
        if sink is not None:
            targets.append(SinkTarget(sink, _held_until(sink, routed_by, event, now)))
    matched = [s for s in subscriptions if _subscribed(s, event)]
    skip = set(reached)
    channels = [s.channel for s in matched]
    if event.kind == "failure.escalated":  # subscribers heard of the failure itself
        policy = escalation.escalation if escalation is not None else None
        channels = [policy.channel] if policy is not None and policy.channel else []
    channels = [c for c in channels if c not in skip]
    return Decision(
        sinks=tuple(targets),
        channels=tuple(dict.fromkeys(channels)),
        subscriptions=tuple(s.id for s in matched),
    )


def _team_sinks(team: Team, event: HubEvent) -> list[str]:
    """The sinks `team` sends this event to by its own rules."""
    if event.kind == "failure.escalated":  # the escalation's targets, and nothing else
        return list(team.escalation.sinks) if team.escalation is not None else []
    kind = event_class(event.kind)
    names = list(team.sinks) if kind == "failures" else []
    for rule in team.routes:
        wanted = kind in rule.events or ("reports" in rule.events and _about_reports(event))
        about = (event.dag, *event.dags)  # a backfill: any DAG it reruns
        if (
            wanted
            and any(matches(rule.dags, d.namespace, d.dag_id) for d in about)
            and severity_rank(event.severity) >= severity_rank(rule.severity)
        ):
            names += rule.to
    return names


def _about_reports(event: HubEvent) -> bool:
    """A failure or lateness that puts a report at risk is a `reports` event too."""
    return bool(event.reports) and event_class(event.kind) in ("failures", "sla")


def _subscribed(subscription: Subscription, event: HubEvent) -> bool:
    kind = event_class(event.kind)
    if kind not in subscription.events and not (
        "reports" in subscription.events and _about_reports(event)
    ):
        return False
    if event.kind == "failure.escalated":
        return False  # subscribers heard of the failure; the escalation is for the next target
    if any(covers(subscription, dag) for dag in event.dags):
        return True
    return covers(subscription, event.dag, event.upstream)


def covers(subscription: Subscription, dag: DagRef, upstream: Iterable[DagRef] = ()) -> bool:
    """Whether the subscription is about `dag`: its pattern matches the DAG or, subscribed
    `--downstream`, a DAG `upstream` of it."""
    if matches(subscription.pattern, dag.namespace, dag.dag_id):
        return True
    return subscription.downstream and any(
        matches(subscription.pattern, u.namespace, u.dag_id) for u in upstream
    )


def _held_until(
    sink: Sink, routed_by: list[Team], event: HubEvent, now: datetime
) -> datetime | None:
    """When the sink's notice may go, if every team routing it is in quiet hours now."""
    if isinstance(sink, PagerDutySink) or not routed_by:
        return None  # a page is never held; a sink told of the outage's start is told its end
    ends: list[datetime] = []
    for team in routed_by:
        quiet = team.quiet_hours
        if quiet is None or (
            quiet.urgent is not None
            and severity_rank(event.severity) >= severity_rank(quiet.urgent)
        ):
            return None
        end = quiet_until(quiet, now)
        if end is None:
            return None
        ends.append(end)
    return min(ends)


def quiet_until(quiet: QuietHours, now: datetime) -> datetime | None:
    """The end (UTC) of the quiet hours `now` falls in, or None outside them."""
    zone = ZoneInfo(quiet.timezone)
    local = now.astimezone(zone)
    clock = local.time().replace(tzinfo=None)
    today = local.date()

    def at(day: date) -> datetime:
        return datetime.combine(day, quiet.end, tzinfo=zone).astimezone(UTC)

    if quiet.start < quiet.end:  # within one day: 12:00-14:00
        return at(today) if quiet.start <= clock < quiet.end else None
    if clock >= quiet.start:  # past midnight: 22:00-07:00, in the evening part
        return at(today + timedelta(days=1))
    if clock < quiet.end:  # … in the morning part
        return at(today)
    return None


def escalation_due(
    after: timedelta,
    *,
    failed_at: datetime,
    now: datetime,
    acknowledged: bool,
    escalated: bool,
    snoozed: bool,
) -> bool:
    """Whether an open outage goes to the escalation's targets now: nobody acknowledged it
    `after` it failed, it was not escalated yet, and nobody snoozed it (a snooze says someone
    knows and chose to wait)."""
    return not (acknowledged or escalated or snoozed) and now - failed_at >= after
