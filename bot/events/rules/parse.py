"""Run events in: OpenLineage parsing (pure); storage is `bot/events/store/run_events.py`.

Both sources of run events end here: the Marquez poller (`bot/events/service/poller.py`) and
the OpenLineage receiver (`bot/events/service/receiver.py`). An event's identity is (run id,
event type, event time), as in tests/fixtures/marquez/NOTES.md §1.7, so the same event read
twice across a poll overlap, or pushed to the bot and read back from Marquez, is stored once.

Parsing follows what Marquez 0.51 accepts (NOTES.md §1.8) where refusing would lose a failure
that Marquez keeps (an `eventTime` without a zone is UTC, a missing `eventType` is "OTHER"), and
the OpenLineage spec where the bot needs a usable identity (`run.runId` is a UUID, `eventType`
one of the spec's values, in any case as Marquez reads it; `parentRun` is the `parent` facet,
as Marquez binds it). Every string stored is checked against the columns' limits here, so
no malformed event can make the database fail.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta, timezone
from itertools import islice
from typing import Any, NoReturn, TypeVar

from bot.core import time_bounds
from bot.core.model import RUN_EVENT_TYPES
from bot.events.rules.data_facts import event_data
from bot.events.rules.event import DatasetName, ParsedEvent, Symlink
from bot.events.rules.producers import (
    Owner,
    RunLink,
    airflow_interval,
    airflow_ref,
    failed_tasks_message,
    job_type_of,
    owner_of,
    parent_facet,
)

__all__ = [
    "ERROR_MAX",
    "EVENT_TYPES",
    "NAME_MAX",
    "InvalidEvent",
    "ParsedEvent",
    "event_kind",
    "parse_event_time",
    "parse_run_event",
]

logger = logging.getLogger(__name__)

EVENT_TYPES = RUN_EVENT_TYPES
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


_T = TypeVar("_T")
_DATASETS_MAX = 1000  # inputs/outputs (and their symlinks) kept per event


class InvalidEvent(ValueError):
    """A run event the bot cannot use; the message is the reason a client sees (HTTP 422)."""


def event_kind(body: dict[str, Any]) -> str:
    """RunEvent, DatasetEvent or JobEvent by the last path segment of `schemaURL`, as Marquez
    decides: OpenLineage 1.x says `#/definitions/X`, 2.x `#/$defs/X`; anything else is a
    RunEvent."""
    schema_url = body.get("schemaURL")
    last = schema_url.rsplit("/", 1)[-1] if isinstance(schema_url, str) else None
    return last if last in (DATASET_EVENT, JOB_EVENT) else RUN_EVENT


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
        moment = local.astimezone(UTC)
    except (ValueError, OverflowError) as exc:
        raise InvalidEvent(f"{where} is not a valid date-time: {_shown(value)} ({exc})") from exc
    if not time_bounds.in_bounds(moment):
        raise InvalidEvent(
            f"{where} is out of range: {_shown(value)} (times must lie {time_bounds.described()})"
        )
    return moment


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
    owner = _check(problems, lambda: _owner(facets, job, namespace, job_name, run_id))
    nominal = _check(problems, lambda: _nominal(facets.get("nominalTime")))
    # Spark reports its error in `spark.exception`, everyone else in `errorMessage`.
    error = _error_message(facets.get("errorMessage")) or _error_message(
        facets.get("spark.exception")
    )
    if (
        problems
        or event_time is None
        or event_type is None
        or run_id is None
        or namespace is None
        or job_name is None
        or nominal is None
        or owner is None
    ):
        raise InvalidEvent("; ".join(problems))
    assert job is not None  # a problem was reported otherwise
    inputs, input_links = _datasets(body.get("inputs"))
    outputs, output_links = _datasets(body.get("outputs"))
    if nominal[0] is None:
        nominal = airflow_interval(facets)
    airflow = airflow_ref(facets)
    data = event_data(event_type, body.get("inputs"), body.get("outputs"))
    return ParsedEvent(
        run_id=run_id,
        event_type=event_type,
        event_time=event_time,
        namespace=_NAMESPACE_SANITIZER.sub("_", namespace),
        job_name=job_name,
        dag_namespace=_NAMESPACE_SANITIZER.sub("_", owner.namespace),
        dag_id=owner.name,
        nominal_start=nominal[0],
        nominal_end=nominal[1],
        error_message=error or failed_tasks_message(facets.get("airflowState")),
        dag_run_id=owner.run_id,
        job_type=job_type_of(job),
        inputs=inputs,
        outputs=outputs,
        parent_run_id=owner.parent_run_id,
        airflow_run_id=airflow.run_id,
        task_id=airflow.task_id,
        try_number=airflow.try_number,
        symlinks=input_links + output_links,
        data=data.to_json() if data else None,
    )


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
    # Marquez reads it in any case (OpenLineageDao.getRunState upper-cases it): `fail` is a
    # failure there, so it is one here too, stored in the spec's spelling.
    if not isinstance(value, str) or value.upper() not in EVENT_TYPES:
        raise InvalidEvent(f"eventType must be one of {', '.join(sorted(EVENT_TYPES))}")
    return value.upper()


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


def _owner(
    facets: dict[str, Any],
    job: dict[str, Any] | None,
    namespace: str | None,
    job_name: str | None,
    run_id: str | None,
) -> Owner | None:
    """The DAG and DAG run the event belongs to (`bot/events/rules/producers.py` has the rules).

    The `parent` facet is checked as the spec requires it (its job and run are required); a
    malformed `root`, optional in the spec, is ignored rather than refused.
    """
    facet = parent_facet(facets)
    where = "run.facets.parent." if facets.get("parent") is not None else "run.facets.parentRun."
    parent = _link(facet, where, job_name, strict=True)
    if job is None or namespace is None or job_name is None or run_id is None:
        return None
    root = None
    if isinstance(facet, dict):
        try:
            root = _link(facet.get("root"), f"{where}root.", None)
        except InvalidEvent:
            root = None
    return owner_of(
        namespace=namespace,
        name=job_name,
        run_id=run_id,
        job_type=job_type_of(job),
        facets=facets,
        parent=parent,
        root=root,
    )


def _link(facet: Any, where: str, job_name: str | None, *, strict: bool = False) -> RunLink | None:
    """A `parent` (or `parent.root`) reference: its job and, when well formed, its run id."""
    if facet is None:
        return None
    if not isinstance(facet, dict) or not isinstance(facet.get("job"), dict):
        raise InvalidEvent(f"{where}job must be an object")
    job = facet["job"]
    namespace = _name(job, "namespace", f"{where}job.")
    name = _name(job, "name", f"{where}job.")
    # Old Airflow integrations reported the parent under the task's own `dag.task` name;
    # Marquez then takes everything before the last dot (Utils.parseParentJobName).
    if name == job_name and "." in name:
        name = name[: name.rfind(".")]
    run = facet.get("run")
    raw = run.get("runId") if isinstance(run, dict) else None
    try:
        run_id = str(uuid.UUID(raw)) if isinstance(raw, str) else None
    except ValueError:
        run_id = None
    if strict and run_id is None and raw is not None and not isinstance(raw, str):
        raise InvalidEvent(f"{where}run.runId must be a string")
    return RunLink(namespace, name, run_id)


def _datasets(value: Any) -> tuple[tuple[DatasetName, ...], tuple[Symlink, ...]]:
    """(namespace, name) of each well-formed dataset in `inputs`/`outputs`, and (alias, dataset)
    of each well-formed identifier in their `symlinks` facets; others are skipped (the watcher
    needs runs; a malformed dataset or symlink costs only a lineage edge)."""
    if not isinstance(value, list):
        return (), ()
    found: list[DatasetName] = []
    links: list[Symlink] = []
    for item in value[:_DATASETS_MAX]:
        dataset = _dataset_name(item)
        if dataset is None:
            continue
        found.append(dataset)
        aliases = (alias for alias in _aliases(item) if alias != dataset)
        links.extend(islice(((alias, dataset) for alias in aliases), _DATASETS_MAX - len(links)))
    return tuple(dict.fromkeys(found)), tuple(dict.fromkeys(links))


def _aliases(item: dict[str, Any]) -> Iterator[DatasetName]:
    """The identifiers of a dataset's `symlinks` facet: other names of the same dataset in
    Marquez 0.51.1 (OpenLineageDao.java:883-903). Marquez requires their namespace and name
    and reads `type` as a string (LineageEvent.SymlinkIdentifier); an entry that is not so is
    skipped here, not the event."""
    facets = item.get("facets")
    symlinks = facets.get("symlinks") if isinstance(facets, dict) else None
    identifiers = symlinks.get("identifiers") if isinstance(symlinks, dict) else None
    if not isinstance(identifiers, list):
        return
    for identifier in identifiers[:_DATASETS_MAX]:
        alias = _dataset_name(identifier)
        if alias is not None and isinstance(identifier.get("type", ""), str | None):
            yield alias


def _dataset_name(item: Any) -> DatasetName | None:
    """(namespace, name) of a dataset or symlink identifier, if both fit the store."""
    if not isinstance(item, dict):
        return None
    namespace, name = item.get("namespace"), item.get("name")
    if not isinstance(namespace, str) or not isinstance(name, str):
        return None
    usable = (t.strip() and len(t) <= NAME_MAX and _storable(t) for t in (namespace, name))
    return (namespace, name) if all(usable) else None


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
