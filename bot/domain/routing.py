"""The hub's routing: which sinks an event goes to, decided once per event from plain data.

Slack keeps its own routing (the owning team's channel, BOT_CONFIG's alert and ops channels);
this decides the sinks beyond Slack. Today: every sink named by a team that owns the DAG, in
BOT_CONFIG's order, each once however many of its teams name it; the end of an outage also
reaches every sink its start reached.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from bot.config import BotConfig
from bot.config_sinks import Sink
from bot.domain.model import DagRef

__all__ = ["HubEvent", "HubKind", "route"]

HubKind = Literal["failure.opened", "failure.acknowledged", "failure.resolved"]


@dataclass(frozen=True)
class HubEvent:
    """One thing that happened, as every sink hears of it."""

    kind: HubKind
    incident_id: str
    dag: DagRef
    intervals: str  # the failed intervals in words ("2021-06-04 to 2021-06-06")
    at: datetime
    error: str | None = None
    failures: int = 1
    acknowledged_by: str | None = None  # a Slack user id
    backfill_request_id: str | None = None
    owners: Sequence[str] = ()  # the owning teams: BOT_CONFIG's, then the lineage's


def route(event: HubEvent, config: BotConfig, *, paged: Sequence[str] = ()) -> tuple[Sink, ...]:
    """The sinks `event` goes to: those of the teams owning its DAG (`event.owners`: BOT_CONFIG's
    and the lineage's), each once; an acknowledgement or resolution also goes to every sink
    told of the outage's opening (`paged`), so a routing change cannot leave a page open."""
    names: dict[str, None] = {}
    for owner in event.owners:
        team = config.team(owner.removeprefix("team:"))
        if team is not None:
            names.update(dict.fromkeys(team.sinks))
    if event.kind != "failure.opened":
        names.update(dict.fromkeys(paged))
    found = (config.sink(name) for name in names)
    return tuple(sink for sink in found if sink is not None)
