"""Run events in: OpenLineage parsing (pure) and storage without duplicates.

Both sources of run events end here: the Marquez poller (`bot/services/poller.py`) and the
OpenLineage receiver (`bot/receiver.py`). An event's identity is (run id, event type, event
time), as in shared/fixtures/marquez/NOTES.md §1.7, so the same event read twice across a poll
overlap, or pushed to the bot and read back from Marquez, is stored once.

Parsing follows what Marquez 0.51 accepts (NOTES.md §1.8) where refusing would lose a failure
that Marquez keeps (an `eventTime` without a zone is UTC, a missing `eventType` is "OTHER"), and
the OpenLineage spec where the bot needs a usable identity (`run.runId` is a UUID, `eventType`
one of the spec's values). Every string stored is checked against the columns' limits here, so
no malformed event can make the database fail.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, NoReturn, TypeVar

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncSession

from bot.store.models import utcnow
from bot.store.watch_models import EventSource, RunEvent

__all__ = [
    "ERROR_MAX",
    "EVENT_TYPES",
    "NAME_MAX",
    "InvalidEvent",
    "ParsedEvent",
    "event_kind",
    "parse_event_time",
    "parse_run_event",
    "store_events",
]

EVENT_TYPES = frozenset({"START", "RUNNING", "COMPLETE", "ABORT", "FAIL", "OTHER"})
RUN_EVENT, DATASET_EVENT, JOB_EVENT = "RunEvent", "DatasetEvent", "JobEvent"
NAME_MAX = 1024  # run_events.namespace / job_name / dag_* columns
ERROR_MAX = 2000  # run_events.error_message

# What Marquez (Jackson's ZonedDateTime) parses: date, 'T', time with optional seconds and
# fraction (up to nanoseconds), optional zone. A date alone is refused, as Marquez does.
_TIMESTAMP = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?"
    r"(Z|[+-]\d{2}(?::?\d{2})?)?$",
    re.ASCII,  # \d is 0-9 only, not every Unicode digit
)
# Marquez rewrites job namespaces on ingest (OpenLineageDao.formatNamespaceName); the jobs API,
# where the incident processor looks DAGs up, knows them by the rewritten name.
_NAMESPACE_SANITIZER = re.compile(r"[^a-z:/A-Z0-9\-_.@+]")
_KIND_SUFFIXES = {
    # OpenLineage 2.x schemas say `#/$defs/X`, 1.x `#/definitions/X`; Marquez checks only the
    # latter, but a dataset or job event is never a run event whichever spec the producer used.
    f"/{where}/{kind}": kind
    for where in ("definitions", "$defs")
    for kind in (DATASET_EVENT, JOB_EVENT)
}


_T = TypeVar("_T")
_TABLE = RunEvent.__table__
_LOOKUP = 500  # run ids per lookup of stored nominal intervals


class InvalidEvent(ValueError):
    """A run event the bot cannot use; the message is the reason a client sees (HTTP 422)."""


@dataclass(frozen=True)
class ParsedEvent:
    """What the watcher keeps of one OpenLineage run event.

    `dag_*` is the DAG the run belongs to: the `parent` run facet's job for a task, else the
    job itself. Times are UTC-aware.
    """

    run_id: str
    event_type: str
    event_time: datetime
    namespace: str
    job_name: str
    dag_namespace: str
    dag_id: str
    nominal_start: datetime | None = None
    nominal_end: datetime | None = None
    error_message: str | None = None

    @property
    def key(self) -> tuple[str, str, datetime]:
        """The event's identity: (run id, event type, event time)."""
        return (self.run_id, self.event_type, self.event_time)


def event_kind(body: dict[str, Any]) -> str:
    """RunEvent, DatasetEvent or JobEvent, by `schemaURL` (anything else is a RunEvent)."""
    schema_url = body.get("schemaURL")
    if isinstance(schema_url, str):
        for suffix, kind in _KIND_SUFFIXES.items():
            if schema_url.endswith(suffix):
                return kind
    return RUN_EVENT


def parse_event_time(value: Any, where: str = "eventTime") -> datetime:
    """An OpenLineage time as a UTC-aware datetime; no zone means UTC (as in Marquez).

    Nanoseconds are cut to microseconds, the store's precision, the same way for every source.
    """
    if value is None:
        raise InvalidEvent(f"{where} is required")
    if not isinstance(value, str):
        raise InvalidEvent(f"{where} must be an ISO-8601 date-time string")
    match = _TIMESTAMP.match(value)
    if match is None:
        raise InvalidEvent(f"{where} is not an ISO-8601 date-time: {_shown(value)}")
    year, month, day, hour, minute, second, fraction, zone = match.groups()
    try:
        local = datetime(
            int(year), int(month), int(day), int(hour), int(minute), int(second or 0),
            int((fraction or "0").ljust(9, "0")) // 1000, tzinfo=_zone(zone),
        )  # fmt: skip
        return local.astimezone(UTC)
    except (ValueError, OverflowError) as exc:
        raise InvalidEvent(f"{where} is not a valid date-time: {_shown(value)} ({exc})") from exc


def parse_run_event(body: Any) -> ParsedEvent | None:
    """The run event in an OpenLineage event body; None for a DatasetEvent or JobEvent (valid,
    but nothing the watcher stores). Raises InvalidEvent naming every problem found."""
    if not isinstance(body, dict):
        raise InvalidEvent("an OpenLineage event must be a JSON object")
    if event_kind(body) != RUN_EVENT:
        return None
    problems: list[str] = []
    event_time = _check(problems, lambda: parse_event_time(body.get("eventTime")))
    event_type = _check(problems, lambda: _event_type(body.get("eventType")))
    run = _section(problems, body, "run")
    job = _section(problems, body, "job")
    run_id = _check(problems, lambda: _run_id(run)) if run is not None else None
    namespace = (
        _check(problems, lambda: _name(job, "namespace", "job.")) if job is not None else None
    )
    job_name = _check(problems, lambda: _name(job, "name", "job.")) if job is not None else None
    facets = _facets(problems, run) if run is not None else {}
    dag = _check(problems, lambda: _parent_job(facets.get("parent"), job_name))
    nominal = _check(problems, lambda: _nominal(facets.get("nominalTime")))
    error = _check(problems, lambda: _error_message(facets.get("errorMessage")))
    if (
        problems
        or event_time is None
        or event_type is None
        or run_id is None
        or namespace is None
        or job_name is None
        or nominal is None
    ):
        raise InvalidEvent("; ".join(problems))
    namespace = _NAMESPACE_SANITIZER.sub("_", namespace)
    dag_namespace, dag_id = dag if dag is not None else (namespace, job_name)
    return ParsedEvent(
        run_id=run_id,
        event_type=event_type,
        event_time=event_time,
        namespace=namespace,
        job_name=job_name,
        dag_namespace=_NAMESPACE_SANITIZER.sub("_", dag_namespace),
        dag_id=dag_id,
        nominal_start=nominal[0],
        nominal_end=nominal[1],
        error_message=error,
    )


async def store_events(
    session: AsyncSession,
    events: Iterable[ParsedEvent],
    *,
    source: EventSource,
    received_at: datetime | None = None,
) -> int:
    """Insert the events not stored yet, in the caller's transaction; returns how many were new.

    `INSERT … ON CONFLICT (run_id, event_type, event_time) DO NOTHING` on both SQLite and
    PostgreSQL: a duplicate is skipped by the unique constraint itself, so two writers (the
    receiver and the poller, or two bot processes) racing on one event store it once.

    The nominal interval is the run's, not the event's: Airflow and Marquez's samples send the
    `nominalTime` facet on START only (Marquez keeps it for the run), so an event without it
    takes its run's from the batch or from rows already stored — a FAIL row names its interval.
    """
    unique: dict[tuple[str, str, datetime], ParsedEvent] = {}
    for event in events:
        unique.setdefault(event.key, event)
    if not unique:
        return 0
    at = received_at or utcnow()
    rows = [
        {**asdict(event), "source": source.value, "received_at": at, "processed_at": None}
        for event in await _with_run_intervals(session, list(unique.values()))
    ]
    dialect = session.get_bind().dialect.name
    if dialect == "postgresql":
        insert: Any = postgresql_insert
    elif dialect == "sqlite":
        insert = sqlite_insert
    else:
        raise ValueError(f"run events are stored on SQLite or PostgreSQL, not {dialect}")
    # The Core table, not the ORM entity: no ORM bookkeeping for rows nobody loads. One
    # compiled statement, sent as SQLAlchemy's batched "insertmanyvalues" (RETURNING counts
    # the rows actually inserted; conflicting ones return nothing).
    statement = (
        insert(_TABLE)
        .on_conflict_do_nothing(index_elements=["run_id", "event_type", "event_time"])
        .returning(_TABLE.c.id)
    )
    return len((await session.execute(statement, rows)).all())


# -- helpers ----------------------------------------------------------------------------------


async def _with_run_intervals(
    session: AsyncSession, events: list[ParsedEvent]
) -> list[ParsedEvent]:
    """`events`, those without a nominal interval given their run's where it is known."""
    missing = {e.run_id for e in events if e.nominal_start is None}
    if not missing:
        return events
    known = {e.run_id: (e.nominal_start, e.nominal_end) for e in events if e.nominal_start}
    wanted = sorted(missing - known.keys())
    for first in range(0, len(wanted), _LOOKUP):  # bounded IN lists (bind-parameter limits)
        found = await session.execute(
            select(_TABLE.c.run_id, _TABLE.c.nominal_start, _TABLE.c.nominal_end).where(
                _TABLE.c.run_id.in_(wanted[first : first + _LOOKUP]),
                _TABLE.c.nominal_start.is_not(None),
            )
        )
        for run_id, start, end in found:
            known.setdefault(run_id, (start, end))
    return [
        replace(e, nominal_start=known[e.run_id][0], nominal_end=known[e.run_id][1])
        if e.nominal_start is None and e.run_id in known
        else e
        for e in events
    ]


def _check(problems: list[str], read: Callable[[], _T]) -> _T | None:
    """Run one field's check; its InvalidEvent becomes a problem so all are reported at once."""
    try:
        return read()
    except InvalidEvent as exc:
        problems.append(str(exc))
        return None


def _section(problems: list[str], body: dict[str, Any], key: str) -> dict[str, Any] | None:
    value = body.get(key)
    if isinstance(value, dict):
        return value
    problems.append(f"{key} must be an object" if key in body else f"{key} is required")
    return None


def _facets(problems: list[str], run: dict[str, Any]) -> dict[str, Any]:
    facets = run.get("facets")
    if facets is None:
        return {}
    if not isinstance(facets, dict):
        problems.append("run.facets must be an object")
        return {}
    return facets


def _event_type(value: Any) -> str:
    # The spec makes eventType optional; an event without one carries no transition (OTHER).
    if value is None:
        return "OTHER"
    if not isinstance(value, str) or value not in EVENT_TYPES:
        raise InvalidEvent(f"eventType must be one of {', '.join(sorted(EVENT_TYPES))}")
    return value


def _run_id(run: dict[str, Any]) -> str:
    value = run.get("runId")
    if value is None:
        raise InvalidEvent("run.runId is required")
    try:
        # Canonical lowercase form: the same run spelled in upper case is the same run.
        return str(uuid.UUID(value)) if isinstance(value, str) else _not_uuid(value)
    except ValueError:
        return _not_uuid(value)


def _not_uuid(value: Any) -> NoReturn:
    raise InvalidEvent(f"run.runId must be a UUID, got {_shown(value)}")


def _name(owner: dict[str, Any], key: str, path: str) -> str:
    value = owner.get(key)
    where = f"{path}{key}"
    if value is None:
        raise InvalidEvent(f"{where} is required")
    if not isinstance(value, str) or not value.strip():
        raise InvalidEvent(f"{where} must be a non-empty string")
    if len(value) > NAME_MAX:
        raise InvalidEvent(f"{where} is longer than {NAME_MAX} characters")
    if not _storable(value):
        raise InvalidEvent(f"{where} contains a NUL character or invalid Unicode")
    return value


def _parent_job(facet: Any, job_name: str | None) -> tuple[str, str] | None:
    """(namespace, name) of the parent facet's job, the DAG a task rolls up to.

    Airflow's parent facet may also name a `root` (the DAG run of a nested run); the direct
    parent is what Marquez files the task under, so it is what the bot rolls up to.
    """
    if facet is None:
        return None
    if not isinstance(facet, dict) or not isinstance(facet.get("job"), dict):
        raise InvalidEvent("run.facets.parent.job must be an object")
    job = facet["job"]
    namespace = _name(job, "namespace", "run.facets.parent.job.")
    name = _name(job, "name", "run.facets.parent.job.")
    # Old Airflow integrations reported the parent under the task's own `dag.task` name;
    # Marquez then takes everything before the last dot (Utils.parseParentJobName).
    if name == job_name and "." in name:
        name = name[: name.rfind(".")]
    return namespace, name


def _nominal(facet: Any) -> tuple[datetime | None, datetime | None]:
    if facet is None:
        return None, None
    if not isinstance(facet, dict):
        raise InvalidEvent("run.facets.nominalTime must be an object")
    where = "run.facets.nominalTime."
    if facet.get("nominalStartTime") is None:
        raise InvalidEvent(f"{where}nominalStartTime is required")
    start = parse_event_time(facet["nominalStartTime"], f"{where}nominalStartTime")
    raw_end = facet.get("nominalEndTime")
    end = None if raw_end is None else parse_event_time(raw_end, f"{where}nominalEndTime")
    return start, end


def _error_message(facet: Any) -> str | None:
    # An odd errorMessage facet is not worth refusing the failure it reports: keep what is usable.
    message = facet.get("message") if isinstance(facet, dict) else None
    if not isinstance(message, str) or not message.strip():
        return None
    text = message.replace("\x00", "").encode("utf-8", "replace").decode("utf-8")
    return text if len(text) <= ERROR_MAX else text[: ERROR_MAX - 1] + "…"


def _storable(text: str) -> bool:
    """No NUL (PostgreSQL text cannot hold it) and no lone surrogates (not encodable)."""
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _zone(zone: str | None) -> timezone:
    if zone is None or zone == "Z":
        return UTC
    digits = zone[1:].replace(":", "")
    delta = timedelta(hours=int(digits[:2]), minutes=int(digits[2:4] or 0))
    if delta >= timedelta(hours=24):
        raise ValueError(f"offset {zone} is out of range")
    return timezone(-delta if zone[0] == "-" else delta)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:79] + "…"
