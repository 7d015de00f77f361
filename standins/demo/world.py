"""The demo's outside world: the people of the example config in the Slack stand-in, Airflow's
OpenLineage provider, and the control panel the browser page shows.

The bot learns about runs only as it would in production: OpenLineage events POSTed to its
receiver. `DemoWorld` sends the scheduled runs the control panel fails or recovers, and, like
the Airflow provider, an event for every run the Airflow stand-in finishes (the backfill's
reruns), so the incident resolves by itself. The SLA clock is the demo's own: it moves only
when a person (or the scripted story) moves it, and each move runs the SLA check at once.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Iterable
from datetime import UTC, date, datetime, timedelta
from typing import Any

import aiohttp

from bot.config import BotConfig
from pipeline.food_delivery.generator import ORDERS_PER_DAY, orders_for_day
from standins.airflow.server import AirflowStandin
from standins.slack.state import SlackState

__all__ = ["DemoClock", "DemoWorld", "lineage_event", "seed_workspace"]

JsonDict = dict[str, Any]
DAG = "example.etl_orders"
NAMESPACE = "food_delivery"
PRODUCER = "https://github.com/apache/airflow/tree/providers-openlineage/2.3.0"
SLA_START = datetime(2021, 6, 7, 3, 0, tzinfo=UTC)  # the morning after the failures
HISTORY_DAYS = tuple(date(2021, 6, d) for d in (1, 2, 3))  # runs that succeeded before them
# Bounds on what the page may ask: dates near the example's lineage, a month at a time, and
# a clock that moves forward by at most 31 days per click.
EARLIEST, LATEST = date(2021, 1, 1), date(2021, 12, 31)
MAX_FAILED_DAYS = 31
MAX_ADVANCE_H = 31 * 24.0
# The example config's people (examples/bot-config.yml), named as the page shows them.
PEOPLE = {
    "U0ALICE001": ("alice", "Alice Ng"),
    "U0BOB00001": ("bob", "Bob Diaz"),
    "U0CAROL001": ("carol", "Carol Ito"),
    "U0PAT00001": ("pat", "Pat Kim"),
}
GROUPS = {  # user group → (handle, members, title of its members)
    "S0ANALYTIC": ("analytics-team", ["U0CAROL001"], "analytics team"),
    "S0PLATFORM": ("data-platform", ["U0PAT00001"], "data platform · approver"),
}


class DemoClock:
    """The SLA clock: SLA_START plus whatever it was moved forward by."""

    def __init__(self, start: datetime = SLA_START) -> None:
        self.start, self.moved = start, timedelta(0)

    def now(self) -> datetime:
        return self.start + self.moved


def seed_workspace(state: SlackState, config: BotConfig, *, main_channel: str) -> None:
    """The config's teams as channels, their members and user groups as people with a title."""
    state.add_channel(main_channel, "backfill")
    for team in config.teams:
        if team.channel:
            state.add_channel(team.channel, team.name)
        for member in team.members:
            name, real = PEOPLE.get(member, (member.lower(), member))
            state.add_user(member, name, real_name=real, title=f"{team.name} team")
    for group_id, (handle, members, title) in GROUPS.items():
        for member in members:
            name, real = PEOPLE.get(member, (member.lower(), member))
            state.add_user(member, name, real_name=real, title=title)
        state.add_usergroup(group_id, members, handle=handle)
    state.users["U0REQUEST1"].title = "data engineer"


def _facet(schema: str, **fields: Any) -> JsonDict:
    return {
        "_producer": PRODUCER,
        "_schemaURL": f"https://openlineage.io/spec/facets/{schema}.json",
        **fields,
    }


def lineage_event(
    kind: str,
    dag: str,
    start: datetime,
    end: datetime,
    *,
    at: datetime,
    error: str | None = None,
    run_id: str | None = None,
) -> JsonDict:
    """A DAG-level OpenLineage run event as Airflow's provider sends it (nominal time, the
    Airflow DAG run facet, the DAG job type, an error message on FAIL)."""
    facet = _facet
    facets: JsonDict = {
        "nominalTime": facet(
            "1-0-0/NominalTimeRunFacet", nominalStartTime=_iso(start), nominalEndTime=_iso(end)
        ),
        "airflowDagRun": facet(
            "1-2-0/AirflowDagRunFacet",
            dag={"dag_id": dag},
            dagRun={"dag_id": dag, "run_id": f"scheduled__{start.isoformat()}"},
        ),
    }
    if error is not None:
        facets["errorMessage"] = facet(
            "1-0-0/ErrorMessageRunFacet", message=error, programmingLanguage="python"
        )
    job_type = facet(
        "2-0-3/JobTypeJobFacet", processingType="BATCH", integration="AIRFLOW", jobType="DAG"
    )
    return {
        "eventType": kind,
        "eventTime": _iso(at),
        "run": {"runId": run_id or str(uuid.uuid4()), "facets": facets},
        "job": {"namespace": NAMESPACE, "name": dag, "facets": {"jobType": job_type}},
        "producer": PRODUCER,
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        "inputs": [],
        "outputs": [],
    }


ORDERS = "public.orders"  # what example.etl_orders writes


def orders_rows(day: date) -> int:
    """The orders the pipeline's generator makes for `day`: what a real run writes."""
    return len(orders_for_day(day, ORDERS_PER_DAY))


def run_with_rows(day: date, rows: int, *, at: datetime) -> list[JsonDict]:
    """A run of example.etl_orders for `day` that COMPLETEs having written `rows` orders: the
    DAG's START and COMPLETE and, between them, its Spark task's COMPLETE with the dataset it
    wrote and the `outputStatistics` facet, as the pipeline's runs report them
    (pipeline/food_delivery/lineage.py; built here without PySpark, which the demo does not
    install)."""
    start = _day(day)
    end = start + timedelta(days=1)
    dag_run = str(uuid.uuid4())
    task = lineage_event("COMPLETE", DAG, start, end, at=at)
    task["job"] = {
        "namespace": NAMESPACE,
        "name": f"{DAG}.spark_job",
        "facets": {
            "jobType": _facet(
                "2-0-3/JobTypeJobFacet", processingType="BATCH", integration="SPARK",
                jobType="JOB",
            )
        },
    }  # fmt: skip
    task["run"]["facets"] = {
        "nominalTime": task["run"]["facets"]["nominalTime"],
        "parent": _facet(
            "1-1-0/ParentRunFacet",
            run={"runId": dag_run},
            job={"namespace": NAMESPACE, "name": DAG},
        ),
    }
    task["outputs"] = [
        {
            "namespace": NAMESPACE,
            "name": ORDERS,
            "facets": {},
            "outputFacets": {
                "outputStatistics": _facet(
                    "1-0-2/OutputStatisticsOutputDatasetFacet", rowCount=rows
                )
            },
        }
    ]
    return [
        lineage_event("START", DAG, start, end, at=at - timedelta(minutes=4), run_id=dag_run),
        task,
        lineage_event("COMPLETE", DAG, start, end, at=at, run_id=dag_run),
    ]


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _day(d: date) -> datetime:
    return datetime(d.year, d.month, d.day, tzinfo=UTC)


class DemoWorld:
    """The control panel (standins.slack.web.DemoControls) and the OpenLineage producer."""

    def __init__(
        self,
        bot_url: str,
        *,
        airflow: AirflowStandin | None,
        clock: DemoClock,
        check_sla: Callable[[], Awaitable[int]],
        changed: Callable[[], None] = lambda: None,
    ) -> None:
        self.bot_url, self.airflow, self.clock = bot_url, airflow, clock
        self.check_sla = check_sla
        self.changed = changed  # the panel shows `describe()`: told when it changes by itself
        self.failed: set[date] = set()
        self.notes: list[str] = []
        self._emitted: set[tuple[int, datetime | None]] = set()  # (run id, when it ended)
        self._session: aiohttp.ClientSession | None = None
        self._event_time = SLA_START

    # -- events to the bot ----------------------------------------------------------------------

    def _at(self) -> datetime:
        # Strictly increasing event times, never behind the SLA clock: a rerun's COMPLETE must
        # come after the FAIL it resolves.
        self._event_time = max(self._event_time + timedelta(seconds=1), self.clock.now())
        return self._event_time

    async def post(self, events: Iterable[JsonDict]) -> None:
        if self._session is None:
            self._session = aiohttp.ClientSession()
        for event in events:
            async with self._session.post(f"{self.bot_url}/api/v1/lineage", json=event) as reply:
                if reply.status != 201:
                    text = await reply.text()
                    raise RuntimeError(f"the bot refused an event: {reply.status} {text}")

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def history(self) -> None:
        """The runs that succeeded before the story starts (the SLA rule learns the period)."""
        events = []
        for day in HISTORY_DAYS:  # with what they wrote: the usual the data checks know
            at = _day(day) + timedelta(days=1, minutes=50)
            events += run_with_rows(day, orders_rows(day), at=at)
        await self.post(events)

    # -- the control panel ----------------------------------------------------------------------

    async def describe(self) -> JsonDict:
        return {
            "dag": DAG,
            "clock": self.clock.now().isoformat(),
            "failed": sorted(d.isoformat() for d in self.failed),
            "notes": self.notes[-5:],
        }

    async def fail(self, start: date, end: date) -> str:
        if end < start:
            raise ValueError("The last date is before the first.")
        if start < EARLIEST or end > LATEST:
            raise ValueError(f"Pick dates between {EARLIEST} and {LATEST}.")
        days = [start + timedelta(days=n) for n in range((end - start).days + 1)]
        if len(days) > MAX_FAILED_DAYS:
            raise ValueError(f"At most {MAX_FAILED_DAYS} days at a time.")
        error = "java.io.IOException: No space left on device (writing orders/part-00000)"
        for d in days:  # one at a time: what was sent is known if the bot stops taking them
            end = _day(d) + timedelta(days=1)
            await self.post([lineage_event("FAIL", DAG, _day(d), end, at=self._at(), error=error)])
            self.failed.add(d)
        return self._note(f"{DAG} failed for {_span(days)}.")

    async def recover(self) -> str:
        if not self.failed:
            raise ValueError(f"No run of {DAG} is failing.")
        days = sorted(self.failed)
        for d in days:
            end = _day(d) + timedelta(days=1)
            await self.post([lineage_event("COMPLETE", DAG, _day(d), end, at=self._at())])
            self.failed.discard(d)
        return self._note(f"{DAG} was cleared in Airflow and succeeded for {_span(days)}.")

    async def empty(self, day: date) -> str:
        """example.etl_orders completes for `day` having written no orders (its source sent
        none): a run that succeeds with bad data."""
        if not EARLIEST <= day <= LATEST:
            raise ValueError(f"Pick a date between {EARLIEST} and {LATEST}.")
        await self.post(run_with_rows(day, 0, at=self._at()))
        return self._note(f"{DAG} completed for {day} having written 0 rows.")

    async def advance(self, hours: float) -> str:
        if not 0 < hours <= MAX_ADVANCE_H:
            raise ValueError(f"Move the clock forward by 1 to {MAX_ADVANCE_H:.0f} hours.")
        self.clock.moved += timedelta(hours=hours)
        found = await self.check_sla()
        misses = f"{found} new SLA miss{'es' if found != 1 else ''} notified"
        return self._note(f"SLA clock: {self.clock.now():%Y-%m-%d %H:%M} UTC; {misses}.")

    def _note(self, text: str) -> str:
        self.notes.append(text)
        return text

    # -- Airflow's OpenLineage provider ---------------------------------------------------------

    async def follow_airflow(self, every_s: float = 0.3) -> None:
        """Until cancelled: one event each time an Airflow run finishes (runs that had finished
        before the demo started are history the bot already knows). A run cleared and run again
        by a backfill keeps its id and finishes anew."""
        if self.airflow is None:
            return
        state = self.airflow.state
        self._emitted.update((run.id, run.end_date) for run in state.all_runs())
        while True:
            await asyncio.sleep(every_s)
            state.advance()
            finished = [
                run
                for run in state.all_runs()
                if run.state in ("success", "failed")
                and (run.id, run.end_date) not in self._emitted
            ]
            for run in finished:
                self._emitted.add((run.id, run.end_date))
                start, end = run.data_interval_start, run.data_interval_end
                if start is None or end is None:
                    continue
                kind = "COMPLETE" if run.state == "success" else "FAIL"
                error = None if kind == "COMPLETE" else f"Task failed in DAG run {run.run_id}"
                at = self._at()
                if kind == "COMPLETE" and run.dag_id == DAG:  # with what the rerun wrote
                    events = run_with_rows(start.date(), orders_rows(start.date()), at=at)
                else:
                    events = [lineage_event(kind, run.dag_id, start, end, at=at, error=error)]
                try:
                    await self.post(events)
                except (aiohttp.ClientError, RuntimeError) as exc:  # told; the demo goes on
                    self._note(f"The run {run.run_id} of {run.dag_id} was not reported: {exc}")
                    self.changed()
                    continue
                if kind == "COMPLETE" and run.dag_id == DAG and start.date() in self.failed:
                    self.failed.discard(start.date())  # rerun by a backfill: no longer failing
                    self.changed()


def _span(days: list[date]) -> str:
    return str(days[0]) if len(days) == 1 else f"{days[0]}..{days[-1]}"
