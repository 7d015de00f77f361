"""A failure with more DAGs downstream than an incident's snapshot names: the alert counts them
all, the row keeps the first hundred, and a failure of a DAG past the hundredth still joins the
incident instead of alerting on its own (the incident's downstream rows say it is below)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import func, select

from bot.config import parse_config
from bot.incidents.store.models import Incident, IncidentDownstream
from bot.lineage.rules.impact import KEPT
from standins.marquez.server import running_standin
from standins.marquez.state import MarquezState
from tests.incidents.test_incidents import CONFIG
from tests.incidents.test_watch_flow import WATCH, alerts, run_event, shown
from tests.incidents.test_watch_grouping import grouped_replies, post, says
from tests.support.e2e import eventually, running_bot


def downstream_of(alert: Any) -> str:
    """The alert's "*Downstream:*" line."""
    for block in alert.blocks:
        for line in str((block.get("text") or {}).get("text", "")).splitlines():
            if "*Downstream:*" in line:
                return line
    return ""


NS = "food_delivery"
PARTS = 150  # DAGs reading the root's output, named in lineage order part_000…part_149
DAY = datetime(2021, 6, 10, tzinfo=UTC)


def lineage(
    job: str, day: datetime, n: int, *, reads: str | None, writes: str
) -> list[dict[str, Any]]:
    """A completed run of `job` for `day`, reading and writing these datasets, ending `n`
    seconds after the others (Marquez pages jobs by updatedAt with no tie-breaker:
    tests/fixtures/marquez/FIDELITY.md row 6)."""
    run_id = str(uuid.uuid4())
    events = []
    for kind in ("START", "COMPLETE"):
        event = run_event(kind, day, run_id=run_id, dag=job)
        at = datetime.fromisoformat(event["eventTime"]) + timedelta(seconds=n)
        event["eventTime"] = at.isoformat().replace("+00:00", "Z")
        event["inputs"] = [{"namespace": NS, "name": reads}] if reads else []
        event["outputs"] = [{"namespace": NS, "name": writes}]
        events.append(event)
    return events


def wide_marquez() -> MarquezState:
    state = MarquezState()
    for day in (DAY - timedelta(days=1), DAY - timedelta(days=2)):
        for event in lineage("root", day, 0, reads=None, writes="public.root"):
            state.ingest(event)
        for n in range(PARTS):
            part = f"part_{n:03d}"
            for event in lineage(part, day, n + 1, reads="public.root", writes=f"out_{n}"):
                state.ingest(event)
    return state


async def test_a_failure_past_the_hundredth_dag_downstream_joins_the_incident(
    tmp_path: Path,
) -> None:
    config = parse_config(
        {
            **CONFIG,
            "ownership": [{"pattern": f"{NS}::*", "team": "orders"}],
            "reports": [],
            # the alert and the grouped reply sent at once (group_wait_s 0): what joins the
            # incident is the subject here, not how the watcher gathers its Slack calls
            "watch": {**WATCH, "group_wait_s": 0},
        }
    )
    database = f"sqlite:///{tmp_path / 'bot.db'}"
    async with (
        running_standin(state=wide_marquez()) as marquez,
        running_bot(database, marquez, config) as bot,
    ):
        await post(bot, run_event("FAIL", DAY, run_id=str(uuid.uuid4()), dag="root"))
        [alert] = await eventually(lambda: alerts(bot), timeout_s=20)
        await eventually(lambda: "being worked out" not in downstream_of(alerts(bot)[0]))
        [alert] = alerts(bot)
        # the alert names the first DAGs and counts every one
        assert f"and {PARTS - 8} more DAGs" in downstream_of(alert)
        assert f"{PARTS} DAGs downstream" in shown(alert)

        async with bot.services.sessions() as session:
            incident = await session.scalar(select(Incident).where(Incident.dag_id == "root"))
            assert incident is not None
            assert len(incident.impact["downstream"]) == KEPT
            assert incident.impact["downstream_count"] == PARTS
            assert incident.impact["downstream"][-1]["dag_id"] == f"part_{KEPT - 1:03d}"
        rows = select(func.count()).where(IncidentDownstream.incident_id == incident.id)

        async def rows_written() -> bool:  # just after the alert's own transaction
            async with bot.services.sessions() as session:
                return await session.scalar(rows) == PARTS

        await eventually(rows_written)

        last = f"part_{PARTS - 1:03d}"  # not in the snapshot's list
        await post(bot, run_event("FAIL", DAY, run_id=str(uuid.uuid4()), dag=last))
        await says(bot, alert, 1)
        [reply] = grouped_replies(bot, alert)
        assert reply.text == f"1 failure(s) downstream joined this incident: `{last}`"
        assert len(alerts(bot)) == 1  # it joined: no alert of its own
