"""What the Marquez stand-in knows of an OpenLineage event once Marquez 0.51.1 has bound it.

binding.py binds and validates a POSTed body the way Jackson and Bean Validation do; this module
holds the pieces both it and the model share: the error types (with the status Marquez
answers), times as Jackson reads and writes them, the `ParsedEvent` view the model is updated
from, and Marquez's naming rules (namespaces, name-based UUIDs, parent job names).
"""

from __future__ import annotations

import hashlib
import re
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from typing import Any, Final

JsonDict = dict[str, Any]

RUN_EVENT, DATASET_EVENT, JOB_EVENT = "RUN_EVENT", "DATASET_EVENT", "JOB_EVENT"

# Job namespaces are rewritten on ingest (OpenLineageDao.formatNamespaceName, #L833-L835).
_NAMESPACE_SANITIZER = re.compile(r"[^a-z:/A-Z0-9\-_.@+]")
# NamespaceName.java's PATTERN: what `NamespaceName.of` accepts (else IllegalArgumentException).
_NAMESPACE_NAME = re.compile(r"[a-zA-Z:;=/0-9_\-.@+]{1,1024}")
# FlexibleDateTimeDeserializer.java#L28-L35: ISO_LOCAL_DATE_TIME (seconds optional), then an
# optional offset parsed leniently, all case-insensitive. A '.' is the only decimal point.
_TIMESTAMP = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{0,9}))?)?"
    r"([Zz]|[+-]\d{2}(?::?\d{2}(?::?\d{2})?)?)?"
)
# Utils.NAMESPACE_URL_UUID (RFC 4122 appendix C), used by Utils.toNameBasedUuid.
_NAMESPACE_URL = uuid.UUID("6ba7b811-9dad-11d1-80b4-00c04fd430c8")


class EventValidationError(ValueError):
    """Marquez answers 422: required fields are missing. `errors` holds Dropwizard's messages.
    Bean Validation runs before the resource, so nothing is stored."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors


class EventFormatError(ValueError):
    """Jackson could not bind the body: Marquez's JsonProcessingExceptionMapper answers HTTP 500
    with `{"code":400,"message":...}` (JsonProcessingExceptionMapper.java#L21-L27). Nothing is
    stored."""


class ModelUpdateError(ValueError):
    """The model update failed after the raw event was stored (OpenLineageService.java#L122-L157
    runs the two as independent futures): OpenLineageResource.determineStatusCode answers
    `status` with an empty body (#L93-L109)."""

    status = 500


class EventRejectedError(ModelUpdateError):
    """An IllegalArgumentException during the update: 400, empty body."""

    status = 400


class EventFailedError(ModelUpdateError):
    """Any other exception during the update (an NPE, say): 500, empty body."""


@dataclass(frozen=True)
class Timestamp:
    """A bound `ZonedDateTime`. Dropwizard's mapper leaves ADJUST_DATES_TO_CONTEXT_TIME_ZONE on
    (only Utils.newObjectMapper turns it off, MarquezApp.java#L98-L99 does not), so Jackson's
    InstantDeserializer moves every posted time to the context zone, UTC, whatever its offset."""

    instant: datetime  # UTC, microseconds (PostgreSQL keeps no more)
    nanos: int  # nano-of-second, as Java keeps it

    @property
    def iso(self) -> str:
        """ISO_OFFSET_DATE_TIME (how the mappers write it): seconds always, the fraction with
        its trailing zeros stripped, `Z`."""
        text = self.instant.strftime("%Y-%m-%dT%H:%M:%S")
        if self.nanos:
            text += "." + f"{self.nanos:09d}".rstrip("0")
        return text + "Z"

    @property
    def java(self) -> str:
        """`ZonedDateTime.toString()` in zone `UTC` (a region, so `[UTC]` follows the offset):
        what OpenLineageDao.createRunArgs stores (#L1121-L1141)."""
        text = self.instant.strftime("%Y-%m-%dT%H:%M")
        if self.instant.second or self.nanos:
            text += f":{self.instant.second:02d}"
        if self.nanos:
            width = 3 if self.nanos % 1_000_000 == 0 else 6 if self.nanos % 1000 == 0 else 9
            text += "." + f"{self.nanos:09d}"[:width]
        return text + "Z[UTC]"


def timestamp_from_text(text: str, where: str, zone: tzinfo) -> Timestamp:
    """FlexibleDateTimeDeserializer: a zone-less time is in the server's zone (`zone`)."""
    match = _TIMESTAMP.fullmatch(text)
    try:
        if match is None:
            raise ValueError(f"Text '{text}' could not be parsed")
        year, month, day, hour, minute, second, fraction, offset = match.groups()
        nanos = int((fraction or "0").ljust(9, "0"))
        local = datetime(int(year), int(month), int(day), int(hour), int(minute),
                         int(second or 0), nanos // 1000)  # fmt: skip
        aware = local.replace(tzinfo=zone if offset is None else _offset(offset))
    except ValueError as exc:
        raise EventFormatError(
            f'Cannot deserialize value of type `java.time.ZonedDateTime` from String "{text}": '
            f"Failed to deserialize java.time.ZonedDateTime: "
            f"(java.time.format.DateTimeParseException) {exc} (through reference chain: {where})"
        ) from exc
    return Timestamp(aware.astimezone(UTC), nanos)


def timestamp_from_epoch(value: float) -> Timestamp:
    """A JSON number: epoch milliseconds, or epoch seconds when it has a fraction."""
    if isinstance(value, int):
        seconds, millis = divmod(value, 1000)
        nanos = millis * 1_000_000
    else:
        seconds = int(value // 1)
        nanos = round((value - seconds) * 1e9)
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    return Timestamp(epoch + timedelta(seconds=seconds, microseconds=nanos // 1000), nanos)


def _offset(text: str) -> tzinfo:
    if text in ("Z", "z"):
        return UTC
    digits = text[1:].replace(":", "")
    hours, minutes, seconds = int(digits[:2]), int(digits[2:4] or 0), int(digits[4:6] or 0)
    if hours > 18 or minutes > 59 or seconds > 59:
        raise ValueError(f"Zone offset not in valid range: {text}")
    delta = timedelta(hours=hours, minutes=minutes, seconds=seconds)
    return timezone(-delta if text[0] == "-" else delta)


def iso_z(value: datetime | None) -> str | None:
    """Jackson's rendering of a `java.time.Instant` (ISO_INSTANT): UTC, `Z`, 0/3/6 digits."""
    if value is None:
        return None
    value = value.astimezone(UTC)
    text = value.strftime("%Y-%m-%dT%H:%M:%S")
    if value.microsecond:
        micros = f"{value.microsecond:06d}"
        text += "." + (micros[:3] if micros.endswith("000") else micros)
    return text + "Z"


class _Absent:
    """A typed property that is null: omitted by the NON_NULL mapper, `null` in the feed."""

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Final = _Absent()


def stored_json(tree: Any) -> Any:
    """The NON_NULL mapper's JSON of a bound tree: what `lineage_events.event` and the facet
    tables hold (Utils.java#L89-L96)."""
    return _render(tree, keep_nulls=False)


def feed_json(tree: Any) -> Any:
    """Dropwizard's JSON of a bound tree (what `GET /events/lineage` answers): typed nulls kept."""
    return _render(tree, keep_nulls=True)


def _render(value: Any, *, keep_nulls: bool) -> Any:
    if isinstance(value, Timestamp):
        return value.iso
    if isinstance(value, dict):
        return {
            key: None if item is ABSENT else _render(item, keep_nulls=keep_nulls)
            for key, item in value.items()
            if keep_nulls or item is not ABSENT
        }
    if isinstance(value, list):
        return [_render(item, keep_nulls=keep_nulls) for item in value]
    return value


def _get(tree: Any, *path: str) -> Any:
    """tree[path...], None where a step is missing, null or ABSENT."""
    for key in path:
        if not isinstance(tree, dict):
            return None
        tree = tree.get(key)
    return None if tree is ABSENT else tree


@dataclass(frozen=True)
class DatasetRef:
    namespace: str
    name: str
    facets: JsonDict | None = None  # stored form; None when the event had no `facets`
    io_facets: JsonDict | None = None  # inputFacets or outputFacets

    @property
    def symlinks(self) -> list[Any] | None:
        """The symlinks facet's identifiers (None: no facet; the facet without `identifiers`
        makes OpenLineageDao.upsertLineageDataset throw an NPE, #L883-L903)."""
        facet = (self.facets or {}).get("symlinks")
        return None if facet is None else facet.get("identifiers")


@dataclass(frozen=True)
class ParentRef:
    run_id: str
    job_namespace: str
    job_name: str


@dataclass(frozen=True)
class ParsedEvent:
    """The parts of a bound event the stand-in's model is updated from."""

    kind: str
    event_time: Timestamp
    event_type: str | None = None
    run_id: str | None = None
    job_namespace: str | None = None
    job_name: str | None = None
    job_facets: JsonDict | None = None
    run_facets: JsonDict | None = None  # None: the event had no `run.facets` at all
    nominal_start: Timestamp | None = None
    nominal_end: Timestamp | None = None
    parent: ParentRef | None = None
    # `None` items are null list elements, which Bean Validation skips (@Valid on a List).
    inputs: tuple[DatasetRef | None, ...] = ()
    outputs: tuple[DatasetRef | None, ...] = ()
    dataset: DatasetRef | None = None  # a DatasetEvent's
    stored: JsonDict = field(default_factory=dict)  # what `lineage_events.event` holds
    feed: JsonDict = field(default_factory=dict)  # what `GET /events/lineage` lists

    @classmethod
    def from_tree(cls, kind: str, tree: JsonDict) -> ParsedEvent:
        run_facets = _get(tree, "run", "facets")
        parent = _get(run_facets, "parent")
        return cls(
            kind=kind,
            event_time=tree["eventTime"],
            event_type=_get(tree, "eventType"),
            run_id=_get(tree, "run", "runId"),
            job_namespace=_get(tree, "job", "namespace"),
            job_name=_get(tree, "job", "name"),
            job_facets=_stored_or_none(_get(tree, "job", "facets")),
            run_facets=_stored_or_none(run_facets),
            nominal_start=_get(run_facets, "nominalTime", "nominalStartTime"),
            nominal_end=_get(run_facets, "nominalTime", "nominalEndTime"),
            parent=None
            if parent is None
            else ParentRef(
                _get(parent, "run", "runId"),
                _get(parent, "job", "namespace"),
                _get(parent, "job", "name"),
            ),
            inputs=_datasets(_get(tree, "inputs"), "inputFacets"),
            outputs=_datasets(_get(tree, "outputs"), "outputFacets"),
            dataset=_dataset(_get(tree, "dataset"), "outputFacets"),
            stored=stored_json(tree),
            feed=feed_json(tree),
        )


def _stored_or_none(tree: Any) -> JsonDict | None:
    return None if tree is None else dict(stored_json(tree))


def _datasets(items: Any, io_key: str) -> tuple[DatasetRef | None, ...]:
    return tuple(_dataset(item, io_key) for item in items or ())


def _dataset(item: Any, io_key: str) -> DatasetRef | None:
    if item is None:
        return None
    return DatasetRef(
        _get(item, "namespace"),
        _get(item, "name"),
        _stored_or_none(_get(item, "facets")),
        _stored_or_none(_get(item, io_key)),
    )


def sanitize_job_namespace(namespace: str) -> str:
    return _NAMESPACE_SANITIZER.sub("_", namespace)


def is_valid_namespace(namespace: str) -> bool:
    return _NAMESPACE_NAME.fullmatch(namespace) is not None


def name_based_uuid(data: str | bytes) -> uuid.UUID:
    """Java's `UUID.nameUUIDFromBytes` (MD5, version 3)."""
    raw = data.encode() if isinstance(data, str) else data
    return uuid.UUID(bytes=hashlib.md5(raw).digest(), version=3)


def to_name_based_uuid(*parts: str) -> uuid.UUID:
    """Utils.toNameBasedUuid (Utils.java#L177-L188): the URL namespace's bytes, then the parts
    joined by dots."""
    return name_based_uuid(_NAMESPACE_URL.bytes + ".".join(parts).encode())


def run_uuid_for(run_id: str) -> uuid.UUID:
    """OpenLineageDao.runToUuid (#L1143-L1150): the runId, or MD5 of it when not a UUID."""
    try:
        return uuid.UUID(run_id)
    except ValueError:
        return name_based_uuid(run_id)


def parent_run_uuid(namespace: str, job_name: str, run_id: str) -> uuid.UUID:
    """Utils.findParentRunUuid (#L200-L231): the runId, else a name-based UUID of the parent's
    namespace, its name up to the last dot and the runId (old Airflow integrations)."""
    try:
        return uuid.UUID(run_id)
    except ValueError:
        return to_name_based_uuid(namespace, parent_job_name(job_name), run_id)


def parent_job_name(reported: str) -> str:
    """Utils.parseParentJobName: everything before the last dot (old Airflow `dag.task` ids)."""
    return reported[: reported.rfind(".")] if "." in reported else reported


def event_kind(body: JsonDict) -> str:
    """EventTypeResolver.typeFromId (#L68-L86) compares the schemaURL's last path segment only,
    so `#/definitions/JobEvent` (OpenLineage 1.x) and `#/$defs/JobEvent` (2.x) are both job
    events; anything else (or no schemaURL) is a run event."""
    schema_url = body.get("schemaURL")
    last = schema_url.rsplit("/", 1)[-1] if isinstance(schema_url, str) else None
    if last == "DatasetEvent":
        return DATASET_EVENT
    if last == "JobEvent":
        return JOB_EVENT
    return RUN_EVENT
