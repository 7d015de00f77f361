"""How Marquez 0.51.1 binds a POSTed event: Jackson's types, then Bean Validation's @NotNull.

The body is bound to `marquez.service.models.LineageEvent` (or DatasetEvent/JobEvent,
EventTypeResolver.java#L68-L86), validated, and written to `lineage_events` with the NON_NULL
mapper (OpenLineageDao.java#L1152-L1161, Utils.java#L89-L96); `GET /events/lineage` reads that
JSON back into a LineageEvent and writes it with Dropwizard's mapper, which keeps nulls
(OpenLineageResource.java#L170-L177). So what a client reads back is the *bound* event, not the
posted one: typed properties in Jackson's order (null when absent), `parentRun` renamed `parent`
(LineageEvent.java#L93-L94), keys no class declares dropped where the class has no any-setter
(RunLink, JobLink), kept after the typed ones elsewhere — sorted for `BaseJsonModel` subclasses
(`@JsonPropertyOrder(alphabetic = true)` on its any-getter, BaseJsonModel.java#L18-L22), in
arrival order for the facet containers (LineageEvent.java#L98-L108).

`bind_event` walks the body once against a table of those classes and returns a tree in which
typed-but-null properties are `ABSENT` (events.stored_json drops them, NON_NULL; events.feed_json
writes them as null). Times are `Timestamp`s, moved to UTC as Dropwizard's mapper moves them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import tzinfo
from typing import Any, Final

from standins.marquez.events import (
    ABSENT,
    DATASET_EVENT,
    JOB_EVENT,
    EventFormatError,
    EventValidationError,
    JsonDict,
    ParsedEvent,
    Timestamp,
    event_kind,
    timestamp_from_epoch,
    timestamp_from_text,
)

__all__ = ["BoundEvent", "bind_event", "parse_event"]


# Property kinds. A `Bean` is a Java class; the others are leaf types.
STR, TIME, URI, ANY = "String", "ZonedDateTime", "URI", "Object"


@dataclass(frozen=True)
class ListOf:
    item: Kind


@dataclass(frozen=True)
class Bean:
    """A Jackson-bound class: properties in serialisation order, @NotNull ones, extra keys.

    `extra` is what happens to keys the class does not declare: "sorted" (BaseJsonModel's
    any-getter, alphabetical), "kept" (a plain @JsonAnySetter map, arrival order) or "dropped"
    (no any-setter; Dropwizard disables FAIL_ON_UNKNOWN_PROPERTIES)."""

    name: str
    props: tuple[tuple[str, Kind], ...]
    required: frozenset[str] = frozenset()
    extra: str = "sorted"
    extra_kind: Kind = ANY
    validate_extra: bool = False
    aliases: tuple[tuple[str, str], ...] = ()


Kind = str | ListOf | Bean

_BASE_FACET = (("_producer", URI), ("_schemaURL", URI))
_FACET_REQUIRED = frozenset({"_producer", "_schemaURL"})


def _facet(name: str, *props: tuple[str, Kind], required: tuple[str, ...] = ()) -> Bean:
    """A BaseFacet subclass (LineageEvent.java#L119-L142): `_producer` and `_schemaURL` first
    (superclass fields come first in Jackson's order), both @NotNull, extra keys kept."""
    return Bean(name, (*_BASE_FACET, *props), _FACET_REQUIRED | frozenset(required), "kept")


_RUN_LINK = Bean("RunLink", (("runId", STR),), frozenset({"runId"}), "dropped")
_JOB_LINK = Bean(
    "JobLink", (("namespace", STR), ("name", STR)), frozenset({"namespace", "name"}), "dropped"
)
_RUN_FACET = Bean(
    "RunFacet",
    (
        (
            "nominalTime",
            _facet(
                "NominalTimeRunFacet",
                ("nominalStartTime", TIME),
                ("nominalEndTime", TIME),
                required=("nominalStartTime",),
            ),
        ),
        (
            "parent",
            _facet(
                "ParentRunFacet", ("run", _RUN_LINK), ("job", _JOB_LINK), required=("run", "job")
            ),
        ),
    ),
    extra="kept",
    aliases=(("parentRun", "parent"),),  # LineageEvent.java#L93-L94
)
_JOB_FACET = Bean(
    "JobFacet",  # @JsonPropertyOrder, LineageEvent.java#L252
    (
        (
            "documentation",
            _facet("DocumentationJobFacet", ("description", STR), required=("description",)),
        ),
        ("sourceCodeLocation", _facet("SourceCodeLocationJobFacet", ("type", STR), ("url", STR))),
        ("sql", _facet("SQLJobFacet", ("query", STR), required=("query",))),
        (
            "jobType",
            _facet(
                "JobTypeJobFacet",
                ("processingType", STR),
                ("integration", STR),
                ("jobType", STR),
                required=("processingType", "integration", "jobType"),
            ),
        ),
    ),
    extra="kept",
)
_COLUMN_LINEAGE_INPUT = Bean(
    "ColumnLineageInputField",
    (("namespace", STR), ("name", STR), ("field", STR)),
    frozenset({"namespace", "name", "field"}),
)
_COLUMN_LINEAGE_OUTPUT = Bean(
    "ColumnLineageOutputColumn",
    (
        ("inputFields", ListOf(_COLUMN_LINEAGE_INPUT)),
        ("transformationDescription", STR),
        ("transformationType", STR),
    ),
    frozenset({"inputFields"}),
)
_SCHEMA_FIELD = Bean(
    "SchemaField", (("name", STR), ("type", STR), ("description", STR)), frozenset({"name"})
)
_SYMLINK_IDENTIFIER = Bean(
    "SymlinkIdentifier",
    (("namespace", STR), ("name", STR), ("type", STR)),
    frozenset({"namespace", "name"}),
)
# The output columns sit in an any-setter map without @Valid: bound, never validated.
_COLUMN_LINEAGE_FIELDS = Bean(
    "ColumnLineageDatasetFacetFields", (), extra="kept", extra_kind=_COLUMN_LINEAGE_OUTPUT
)
_DATASET_FACETS = Bean(
    "DatasetFacets",  # @JsonPropertyOrder, LineageEvent.java#L402-L410
    (
        (
            "documentation",
            _facet("DocumentationDatasetFacet", ("description", STR), required=("description",)),
        ),
        ("schema", _facet("SchemaDatasetFacet", ("fields", ListOf(_SCHEMA_FIELD)))),
        ("dataSource", _facet("DatasourceDatasetFacet", ("name", STR), ("uri", STR))),
        ("description", STR),
        (
            "lifecycleStateChange",
            _facet("LifecycleStateChangeFacet", ("lifecycleStateChange", STR)),
        ),
        ("columnLineage", _facet("ColumnLineageDatasetFacet", ("fields", _COLUMN_LINEAGE_FIELDS))),
        ("symlinks", _facet("DatasetSymlinkFacet", ("identifiers", ListOf(_SYMLINK_IDENTIFIER)))),
    ),
    extra="kept",
)
_DATASET = Bean(
    "Dataset",
    (
        ("namespace", STR),
        ("name", STR),
        ("facets", _DATASET_FACETS),
        ("inputFacets", Bean("InputDatasetFacets", (), extra="kept")),
        ("outputFacets", Bean("OutputDatasetFacets", (), extra="kept")),
    ),
    frozenset({"namespace", "name"}),
)
_RUN = Bean("Run", (("runId", STR), ("facets", _RUN_FACET)), frozenset({"runId"}))
_JOB = Bean(
    "Job",
    (("namespace", STR), ("name", STR), ("facets", _JOB_FACET)),
    frozenset({"namespace", "name"}),
)

EVENT_CLASSES: Final[dict[str, Bean]] = {
    "RUN_EVENT": Bean(
        "LineageEvent",  # LineageEvent.java#L45-L53, in declaration order
        (
            ("eventType", STR),
            ("eventTime", TIME),
            ("run", _RUN),
            ("job", _JOB),
            ("inputs", ListOf(_DATASET)),
            ("outputs", ListOf(_DATASET)),
            ("producer", STR),
            ("schemaURL", URI),
        ),
        frozenset({"eventTime", "run", "job", "producer"}),
    ),
    DATASET_EVENT: Bean(
        "DatasetEvent",  # DatasetEvent.java: `dataset` is @Valid but not @NotNull
        (("eventTime", TIME), ("dataset", _DATASET), ("producer", STR), ("schemaURL", URI)),
        frozenset({"eventTime", "producer", "schemaURL"}),
    ),
    JOB_EVENT: Bean(
        "JobEvent",
        (
            ("eventTime", TIME),
            ("job", _JOB),
            ("inputs", ListOf(_DATASET)),
            ("outputs", ListOf(_DATASET)),
            ("producer", STR),
            ("schemaURL", URI),
        ),
        frozenset({"eventTime", "job", "producer", "schemaURL"}),
    ),
}

# java.net.URI rejects these characters anywhere, and a '%' not followed by two hex digits.
_URI_BAD = re.compile(r"[\x00-\x20\"<>\\^`{|}\x7f]|%(?![0-9A-Fa-f]{2})")


@dataclass
class BoundEvent:
    """An event as Jackson bound it: its kind, the tree (ABSENT for typed nulls), the errors
    Bean Validation reports (Dropwizard's `<path> must not be null`)."""

    kind: str
    tree: JsonDict
    errors: list[str] = field(default_factory=list)


def parse_event(body: Any, zone: tzinfo) -> ParsedEvent:
    """Bind, then validate one event: EventFormatError (Jackson) before EventValidationError
    (Bean Validation, 422). `zone` is the server's, for times without an offset."""
    if body is None:  # an empty body: Jersey hands the resource null, @NotNull refuses it
        raise EventValidationError(["The request body must not be null"])
    if not isinstance(body, dict):
        raise EventFormatError(
            "Cannot deserialize value of type `marquez.service.models.BaseEvent` from "
            f"{type(body).__name__} value (no delegate- or property-based Creator)"
        )
    bound = bind_event(body, zone)
    if bound.errors:
        raise EventValidationError(sorted(bound.errors))
    return ParsedEvent.from_tree(bound.kind, bound.tree)


def bind_event(body: JsonDict, zone: tzinfo) -> BoundEvent:
    """Bind `body` (a JSON object); EventFormatError where Jackson cannot."""
    kind = event_kind(body)
    bound = BoundEvent(kind, {})
    bound.tree = _Walker(zone, bound.errors).bean(EVENT_CLASSES[kind], body, "", validate=True)
    return bound


class _Walker:
    def __init__(self, zone: tzinfo, errors: list[str]) -> None:
        self.zone = zone
        self.errors = errors
        self.leaves: dict[str, Callable[[Any, str], Any]] = {
            STR: self.string,
            TIME: self.time,
            URI: self.uri,
            ANY: lambda value, _: value,
        }

    def value(self, kind: Kind, value: Any, where: str, *, validate: bool) -> Any:
        """Bind one value; `where` is its path for messages (`run.facets.parent`)."""
        if value is None:
            return None
        if isinstance(kind, Bean):
            if not isinstance(value, dict):
                raise _mismatch(kind.name, value, where)
            return self.bean(kind, value, f"{where}.", validate=validate)
        if isinstance(kind, ListOf):
            if not isinstance(value, list):
                raise _mismatch(_java_name(kind), value, where)
            return [
                self.value(kind.item, item, f"{where}[{index}]", validate=validate)
                for index, item in enumerate(value)
            ]
        return self.leaves[kind](value, where)

    def bean(self, bean: Bean, obj: JsonDict, path: str, *, validate: bool) -> JsonDict:
        """Bind an object to `bean`; `path` prefixes its properties' names (`run.facets.`).

        A key and its alias set the same property: the later one in the body wins, as
        Jackson calls the setter for each."""
        declared = dict(bean.props)
        aliases = dict(bean.aliases)
        values: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for key, raw in obj.items():
            name = aliases.get(key, key)
            if name in declared:
                values[name] = self.value(declared[name], raw, f"{path}{name}", validate=validate)
            elif bean.extra != "dropped":
                extra[key] = self.value(
                    bean.extra_kind, raw, f"{path}{key}", validate=validate and bean.validate_extra
                )
        tree: JsonDict = {}
        for name, _ in bean.props:
            value = values.get(name)
            if value is None and validate and name in bean.required:
                self.errors.append(f"{path}{name} must not be null")
            tree[name] = ABSENT if value is None else value
        keys = sorted(extra) if bean.extra == "sorted" else list(extra)
        tree.update((key, extra[key]) for key in keys)
        return tree

    def string(self, value: Any, path: str) -> str:
        # Jackson coerces scalars to String but refuses objects and arrays.
        if isinstance(value, str):
            return value
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, int | float):
            return str(value)
        raise _mismatch("java.lang.String", value, path)

    def time(self, value: Any, path: str) -> Timestamp | None:
        # InstantDeserializer: numbers are epoch millis (seconds with a fraction), a blank string
        # is null (lenient), anything else goes through FlexibleDateTimeDeserializer's format.
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise _mismatch("java.time.ZonedDateTime", value, path)
        if isinstance(value, int | float):
            return timestamp_from_epoch(value)
        if not value.strip():
            return None
        return timestamp_from_text(value.strip(), path, self.zone)

    def uri(self, value: Any, path: str) -> str:
        text = self.string(value, path)
        if _URI_BAD.search(text):
            raise EventFormatError(
                f'Cannot deserialize value of type `java.net.URI` from String "{text}": '
                f"not a valid textual representation (through reference chain: {path})"
            )
        return text


def _java_name(kind: Kind) -> str:
    if isinstance(kind, Bean):
        return f"marquez.service.models.LineageEvent${kind.name}"
    if isinstance(kind, ListOf):
        return f"java.util.List<{_java_name(kind.item)}>"
    return {STR: "java.lang.String", TIME: "java.time.ZonedDateTime", URI: "java.net.URI"}.get(
        kind, "java.lang.Object"
    )


def _mismatch(java_type: str, value: Any, path: str) -> EventFormatError:
    token = (
        "START_ARRAY"
        if isinstance(value, list)
        else "START_OBJECT"
        if isinstance(value, dict)
        else "VALUE_STRING"
        if isinstance(value, str)
        else "VALUE_TRUE"
        if value is True
        else "VALUE_FALSE"
        if value is False
        else "VALUE_NUMBER_INT"
        if isinstance(value, int)
        else "VALUE_NUMBER_FLOAT"
    )
    if "." not in java_type and "<" not in java_type:
        java_type = f"marquez.service.models.LineageEvent${java_type}"
    return EventFormatError(
        f"Cannot deserialize value of type `{java_type}` from {token} token "
        f"(through reference chain: {path or 'LineageEvent'})"
    )
