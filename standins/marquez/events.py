"""OpenLineage event binding for the Marquez stand-in: the checks Marquez 0.51 makes on ingest.

Marquez binds the body with Jackson (type errors and unparsable dates answer 400) and then runs
Bean Validation (missing required fields answer 422 with one message per field). This module
does both, in that order, and returns a small typed view of the event.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

JsonDict = dict[str, Any]

RUN_EVENT, DATASET_EVENT, JOB_EVENT = "RUN_EVENT", "DATASET_EVENT", "JOB_EVENT"

# Job namespaces are rewritten on ingest (OpenLineageDao.formatNamespaceName).
_NAMESPACE_SANITIZER = re.compile(r"[^a-z:/A-Z0-9\-_.@+]")
# Marquez's NamespaceName rule, enforced for dataset namespaces (issue #2312).
_NAMESPACE_NAME = re.compile(r"^[a-zA-Z:;=/0-9_\-.@+]{1,1024}$")
_TIMESTAMP = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?"
    r"(Z|[+-]\d{2}(?::?\d{2})?)?$"
)

# Facets that Marquez binds to typed classes: their extra required fields (besides
# `_producer`/`_schemaURL`). Every other facet is kept as an opaque map.
_RUN_FACETS = {"nominalTime": ("nominalStartTime",), "parent": ("run", "job")}
_JOB_FACETS = {"documentation": ("description",), "sourceCodeLocation": (), "sql": ("query",)}
_DATASET_FACETS = {"documentation": ("description",), "schema": (), "dataSource": ()}


class EventValidationError(ValueError):
    """Marquez answers 422: required fields are missing. `errors` holds Dropwizard's messages."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors


class EventFormatError(ValueError):
    """Marquez answers 400 `{"code":400,"message":...}`: Jackson could not bind the body."""


class EventRejectedError(ValueError):
    """Marquez answers 400 with an empty body: ingestion raised IllegalArgumentException."""


@dataclass(frozen=True)
class Timestamp:
    """An OpenLineage time: the instant (UTC) plus Java's `ZonedDateTime.toString()` of it."""

    instant: datetime
    java: str


@dataclass(frozen=True)
class DatasetRef:
    namespace: str
    name: str
    facets: JsonDict = field(default_factory=dict)
    io_facets: JsonDict = field(default_factory=dict)  # inputFacets or outputFacets


@dataclass(frozen=True)
class ParentRef:
    run_id: str
    job_namespace: str
    job_name: str


@dataclass(frozen=True)
class ParsedEvent:
    """The parts of an OpenLineage event the stand-in's model uses."""

    kind: str
    event_time: Timestamp
    event_type: str | None = None
    run_id: str | None = None
    job_namespace: str | None = None
    job_name: str | None = None
    job_facets: JsonDict = field(default_factory=dict)
    run_facets: JsonDict = field(default_factory=dict)
    nominal_start: Timestamp | None = None
    nominal_end: Timestamp | None = None
    parent: ParentRef | None = None
    inputs: tuple[DatasetRef, ...] = ()
    outputs: tuple[DatasetRef, ...] = ()


def iso_z(value: datetime | None) -> str | None:
    """Jackson's rendering of a `java.time.Instant`: UTC, `Z`, 0, 3 or 6 fraction digits."""
    if value is None:
        return None
    value = value.astimezone(UTC)
    text = value.strftime("%Y-%m-%dT%H:%M:%S")
    if value.microsecond:
        micros = f"{value.microsecond:06d}"
        text += "." + (micros[:3] if micros.endswith("000") else micros)
    return text + "Z"


def parse_timestamp(value: Any, where: str) -> Timestamp:
    """Parse an OpenLineage time; a missing zone means UTC, nanoseconds are accepted."""
    if not isinstance(value, str):
        raise EventFormatError(f"Cannot deserialize value of type `ZonedDateTime` from {value!r}")
    match = _TIMESTAMP.match(value)
    if match is None:
        raise EventFormatError(
            f"Cannot deserialize value of type `java.time.ZonedDateTime` from String "
            f'"{value}" (through reference chain: {where})'
        )
    year, month, day, hour, minute, second, fraction, zone = match.groups()
    nanos = int((fraction or "0").ljust(9, "0"))
    offset = _offset(zone)
    try:
        local = datetime(
            int(year), int(month), int(day), int(hour), int(minute), int(second or 0),
            nanos // 1000, tzinfo=offset,
        )  # fmt: skip
    except ValueError as exc:
        raise EventFormatError(f'Invalid date-time "{value}": {exc}') from exc
    return Timestamp(local.astimezone(UTC), _java_string(local, nanos, offset))


def _offset(zone: str | None) -> timezone:
    if zone is None or zone == "Z":
        return UTC
    digits = zone[1:].replace(":", "")
    delta = timedelta(hours=int(digits[:2]), minutes=int(digits[2:4] or 0))
    return timezone(-delta if zone[0] == "-" else delta)


def _java_string(local: datetime, nanos: int, offset: timezone) -> str:
    """`ZonedDateTime.toString()`: seconds dropped when zero, fraction in groups of 3 digits."""
    text = local.strftime("%Y-%m-%dT%H:%M")
    if local.second or nanos:
        text += f":{local.second:02d}"
    if nanos:
        digits = f"{nanos:09d}"
        width = 3 if nanos % 1_000_000 == 0 else 6 if nanos % 1000 == 0 else 9
        text += "." + digits[:width]
    delta = offset.utcoffset(None)
    if not delta:
        return text + "Z"
    sign = "-" if delta < timedelta(0) else "+"
    minutes = abs(int(delta.total_seconds())) // 60
    return f"{text}{sign}{minutes // 60:02d}:{minutes % 60:02d}"


def sanitize_job_namespace(namespace: str) -> str:
    return _NAMESPACE_SANITIZER.sub("_", namespace)


def is_valid_namespace(namespace: str) -> bool:
    return _NAMESPACE_NAME.match(namespace) is not None


def name_based_uuid(text: str) -> uuid.UUID:
    """Java's `UUID.nameUUIDFromBytes` (MD5, version 3)."""
    return uuid.UUID(bytes=hashlib.md5(text.encode()).digest(), version=3)


def run_uuid_for(run_id: str, job_name: str | None = None) -> uuid.UUID:
    """The run's UUID: `runId` itself when it is a UUID, else a name-based UUID."""
    try:
        return uuid.UUID(run_id)
    except ValueError:
        return name_based_uuid(f"{job_name}{run_id}" if job_name else run_id)


def parent_job_name(reported: str) -> str:
    """Utils.parseParentJobName: everything before the last dot (old Airflow `dag.task` ids)."""
    return reported[: reported.rfind(".")] if "." in reported else reported


_NODE_ID = re.compile(r"^(dataset|datasetField|job|run):.*$")
_NODE_ID_COLON = re.compile(r":(?!//|\d)")  # colons of `scheme://` and `host:port` are kept


def parse_node_id(value: str) -> tuple[str, str, str]:
    """NodeId.parts(3): (kind, namespace, name); ValueError for what Marquez cannot parse.

    Splits on ':' and '#'; when that gives too many parts, only colons not followed by '//'
    or a digit separate, and the name keeps the rest (so names may contain colons).
    """
    if not _NODE_ID.match(value):
        raise ValueError(
            f"node ID ({value}) must start with 'dataset', 'datasetField', 'job', or 'run'"
        )
    parts = re.split(r"[:#]", value)
    while parts and parts[-1] == "":  # Java's String.split drops trailing empty strings
        parts.pop()
    if len(parts) == 3:
        return parts[0], parts[1], parts[2]
    separators = list(_NODE_ID_COLON.finditer(value))[:2]
    if len(parts) < 3 or len(separators) < 2:
        raise ValueError(f"Expected NodeId of type {parts[0]} with 3 parts. Got: {value}")
    first, second = separators
    return (
        value[: first.start()],
        value[first.end() : second.start()],
        value[second.end() :],
    )


def event_kind(body: JsonDict) -> str:
    """Marquez compares the schemaURL's last path segment only, so `#/definitions/JobEvent`
    (OpenLineage 1.x) and `#/$defs/JobEvent` (2.x) are both job events."""
    schema_url = body.get("schemaURL")
    last = schema_url.rsplit("/", 1)[-1] if isinstance(schema_url, str) else None
    if last == "DatasetEvent":
        return DATASET_EVENT
    if last == "JobEvent":
        return JOB_EVENT
    return RUN_EVENT


def parse_event(body: Any) -> ParsedEvent:
    """Bind, then validate one event: EventFormatError (400) before EventValidationError (422)."""
    if body is None:
        raise EventValidationError(["The request body must not be null"])
    obj = _object(body, "")
    if obj is None:
        raise EventFormatError("Cannot deserialize LineageEvent from a non-object body")
    binder = _Binder()
    kind = event_kind(obj)
    event = binder.bind(obj, kind)
    if binder.errors:
        raise EventValidationError(sorted(binder.errors))
    assert event is not None
    return event


class _Binder:
    """Walks the body like Jackson + Bean Validation, collecting every missing field."""

    def __init__(self) -> None:
        self.errors: list[str] = []

    def required(self, obj: JsonDict, key: str, path: str) -> str | None:
        value = _string(obj.get(key), f"{path}{key}")
        if value is None:
            self.errors.append(f"{path}{key} must not be null")
        return value

    def bind(self, obj: JsonDict, kind: str) -> ParsedEvent | None:
        raw_time = obj.get("eventTime")
        event_time = None if raw_time is None else parse_timestamp(raw_time, "eventTime")
        if event_time is None:
            self.errors.append("eventTime must not be null")
        self.required(obj, "producer", "")
        event_type = _string(obj.get("eventType"), "eventType")
        if kind == DATASET_EVENT:
            dataset = self.dataset(obj.get("dataset"), "dataset", "outputFacets")
            if event_time is None or dataset is None:
                return None
            return ParsedEvent(kind, event_time, outputs=(dataset,))
        job = self.section(obj, "job")
        ns = self.required(job, "namespace", "job.") if job is not None else None
        name = self.required(job, "name", "job.") if job is not None else None
        job_facets = self.facets(job, "job.", _JOB_FACETS) if job is not None else {}
        run_id, run_facets = None, {}
        if kind == RUN_EVENT:
            run = self.section(obj, "run")
            run_id = self.required(run, "runId", "run.") if run is not None else None
            run_facets = self.facets(run, "run.", _RUN_FACETS) if run is not None else {}
        nominal = run_facets.get("nominalTime") or {}
        nominal_start = _optional_time(nominal.get("nominalStartTime"), "nominalStartTime")
        nominal_end = _optional_time(nominal.get("nominalEndTime"), "nominalEndTime")
        inputs = self.datasets(obj, "inputs", "inputFacets")
        outputs = self.datasets(obj, "outputs", "outputFacets")
        if event_time is None or ns is None or name is None or self.errors:
            return None
        parent = run_facets.get("parent")
        return ParsedEvent(
            kind=kind,
            event_time=event_time,
            event_type=event_type,
            run_id=run_id,
            job_namespace=ns,
            job_name=name,
            job_facets=job_facets,
            run_facets=run_facets,
            nominal_start=nominal_start,
            nominal_end=nominal_end,
            parent=_parent(parent) if isinstance(parent, dict) else None,
            inputs=inputs,
            outputs=outputs,
        )

    def section(self, obj: JsonDict, key: str) -> JsonDict | None:
        value = _object(obj.get(key), key)
        if value is None:
            self.errors.append(f"{key} must not be null")
        return value

    def facets(self, owner: JsonDict, path: str, typed: dict[str, tuple[str, ...]]) -> JsonDict:
        facets = _object(owner.get("facets"), f"{path}facets") or {}
        for name, extra in typed.items():
            facet = _object(facets.get(name), f"{path}facets.{name}")
            if facet is None:
                continue
            where = f"{path}facets.{name}."
            for key in ("_producer", "_schemaURL", *extra):
                if key in ("run", "job"):
                    self.link(facet, key, where)
                elif key in ("nominalStartTime",):
                    if facet.get(key) is None:
                        self.errors.append(f"{where}{key} must not be null")
                else:
                    self.required(facet, key, where)
        if "schema" in typed:
            self.schema_fields(facets, path)
        return facets

    def link(self, facet: JsonDict, key: str, where: str) -> None:
        link = _object(facet.get(key), f"{where}{key}")
        if link is None:
            self.errors.append(f"{where}{key} must not be null")
            return
        for required in ("runId",) if key == "run" else ("namespace", "name"):
            self.required(link, required, f"{where}{key}.")

    def schema_fields(self, facets: JsonDict, path: str) -> None:
        schema = _object(facets.get("schema"), f"{path}facets.schema")
        fields = _array(schema.get("fields"), f"{path}facets.schema.fields") if schema else None
        for index, item in enumerate(fields or []):
            where = f"{path}facets.schema.fields[{index}]."
            entry = _object(item, where.rstrip("."))
            if entry is not None:
                # Only the name is required: Marquez 0.51 keeps a field without a type.
                self.required(entry, "name", where)

    def datasets(self, obj: JsonDict, key: str, io_key: str) -> tuple[DatasetRef, ...]:
        items = _array(obj.get(key), key) or []
        found = (self.dataset(item, f"{key}[{i}]", io_key) for i, item in enumerate(items))
        return tuple(ds for ds in found if ds is not None)

    def dataset(self, value: Any, path: str, io_key: str) -> DatasetRef | None:
        obj = _object(value, path)
        if obj is None:
            self.errors.append(f"{path} must not be null")
            return None
        ns = self.required(obj, "namespace", f"{path}.")
        name = self.required(obj, "name", f"{path}.")
        facets = self.facets(obj, f"{path}.", _DATASET_FACETS)
        io_facets = _object(obj.get(io_key), f"{path}.{io_key}") or {}
        if ns is None or name is None:
            return None
        return DatasetRef(ns, name, facets, io_facets)


def _parent(facet: JsonDict) -> ParentRef | None:
    run, job = facet.get("run") or {}, facet.get("job") or {}
    run_id, ns, name = run.get("runId"), job.get("namespace"), job.get("name")
    if run_id is None or ns is None or name is None:
        return None
    return ParentRef(str(run_id), str(ns), str(name))


def _optional_time(value: Any, where: str) -> Timestamp | None:
    return None if value is None else parse_timestamp(value, where)


def _string(value: Any, where: str) -> str | None:
    # Jackson coerces scalars to String but refuses objects and arrays.
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    raise EventFormatError(f"Cannot deserialize value of type `java.lang.String` at {where}")


def _object(value: Any, where: str) -> JsonDict | None:
    if value is None or isinstance(value, dict):
        return value
    raise EventFormatError(f"Cannot deserialize an object at {where or 'the body'} from {value!r}")


def _array(value: Any, where: str) -> list[Any] | None:
    if value is None or isinstance(value, list):
        return value
    raise EventFormatError(f"Cannot deserialize a list at {where} from {value!r}")
