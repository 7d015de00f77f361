"""The App Home tab: open incidents, running backfills, recent SLA misses and the data
backfills restated lately, for the DAGs the viewing user's teams own (teams by membership or
user group, from BOT_CONFIG)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import date, datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.backfill.rules.options import RunOptions
from bot.backfill.service import requests as requests_read
from bot.backfill.service.verify import Summary, restated_since
from bot.config import BotConfig
from bot.core.model import DagRef
from bot.core.tables import utcnow
from bot.home import messages as home_messages
from bot.home.messages import HomeBackfill, HomeIncident, HomeRestated, HomeSlaMiss
from bot.incidents.service import queries
from bot.ownership.rules import owners
from bot.ownership.service import GroupDirectory
from bot.sla.service import recent_misses

RECENT = timedelta(days=7)
RESTATED = timedelta(days=30)


class HomeService:
    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        config: BotConfig,
        groups: GroupDirectory,
        *,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.sessions = sessions
        self.config = config
        self.groups = groups
        self.clock = clock

    async def teams_of(self, user: str) -> list[str]:
        found = []
        for team in self.config.teams:
            if user in team.members:
                found.append(team.name)
                continue
            for group in team.user_groups:
                if user in await self.groups.members(group):
                    found.append(team.name)
                    break
        return found

    def _ours(self, teams: list[str], namespace: str, dag_id: str) -> bool:
        return bool(set(owners(self.config, DagRef(namespace, dag_id))) & set(teams))

    async def view(self, user: str) -> dict[str, Any]:
        teams = await self.teams_of(user)
        since = self.clock() - RECENT
        async with self.sessions() as session:
            incidents = [
                i
                for i in await queries.open_alerts(session)
                if self._ours(teams, i.namespace, i.dag_id)
            ]
            requests = [
                r
                for r in await requests_read.under_way(session)
                if r.requester == user or self._ours(teams, r.root_namespace, r.root_dag)
            ]
            missed = [
                m
                for m in await recent_misses(session, since)
                if self._ours(teams, m.namespace, m.dag_id)
            ]
            restated = await restated_since(session, self.clock() - RESTATED)
        return home_messages.home_view(
            teams,
            [
                HomeIncident(
                    dag_id=i.dag_id,
                    day=i.interval_key.removeprefix("data|").removeprefix("day:")[:10],
                    grouped=i.grouped,
                    backfill=i.backfill_request_id,
                    data=i.kind == "data",
                )
                for i in incidents
            ],
            [
                HomeBackfill(
                    request_id=r.id,
                    root_dag=r.root_dag,
                    start=r.start_date,
                    end=r.end_date,
                    state=r.state,
                    dags=len(r.steps),
                    held_by=r.paused_by,
                    until=r.resume_at,
                    options=RunOptions.from_json(r.options).described() if r.options else (),
                    reason=str((r.options or {}).get("reason") or ""),
                )
                for r in requests
            ],
            [
                HomeSlaMiss(dag_id=m.dag_id, kind=m.kind, day=m.interval_key[:10], due=m.due)
                for m in missed
            ],
            self._restated(teams, restated),
        )

    def _restated(self, teams: list[str], rows: Sequence[Summary]) -> list[HomeRestated]:
        """Per backfill (newest first), what it restated of the teams' DAGs: the days, and
        how many dataset intervals were verified right, still wrong, or could not be."""
        by_request: dict[str, list[Summary]] = {}
        for row in rows:
            if self._ours(teams, row.dag_namespace, row.dag_id):
                by_request.setdefault(row.request_id, []).append(row)
        found = []
        for request_id, theirs in by_request.items():
            counts = {"right": 0, "wrong": 0, "unknown": 0}
            days: set[date] = set()
            for row in theirs:
                counts[row.verdict] = counts.get(row.verdict, 0) + row.intervals
                first, last = row.first.date(), row.last.date()
                days.update(
                    first + timedelta(days=n) for n in range(min((last - first).days, 366) + 1)
                )
            found.append(
                HomeRestated(
                    request_id=request_id,
                    dags=tuple(dict.fromkeys(row.dag_id for row in theirs)),
                    days=tuple(sorted(days)),
                    right=counts["right"],
                    wrong=counts["wrong"],
                    unknown=counts["unknown"],
                    at=max(row.at for row in theirs),
                )
            )
        return found
