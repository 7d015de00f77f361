"""What a COMPLETE run event says about the data it wrote and checked (pure).

OpenLineage carries it in dataset facets (spec 2-0-2, `spec/facets/`):
- `outputs[].outputFacets.outputStatistics` {rowCount, size (bytes), fileCount}: what the run
  wrote (the Spark integration sends it on COMPLETE);
- `schema` {fields: [{name, type, fields}]} on a dataset (nested fields as `a.b`);
- `columnLineage` {fields: {column: {inputFields: [{namespace, name, field}]}}} on an output;
- `lifecycleStateChange` {lifecycleStateChange: DROP | TRUNCATE | OVERWRITE | …} on an output;
- `dataQualityAssertions` {assertions: [{assertion, success, column}]}: dbt tests and Great
  Expectations put it in a dataset's `inputFacets` (the spec's input facet), older producers
  in its `facets`; both are read, on inputs and outputs.

What counts depends on the event: a COMPLETE's counts, schemas and assertions are the run's
final word; a FAIL keeps its assertions (dbt fails the run of a failed test); a START keeps its
DROP and TRUNCATE, which the Spark integration sends on START only for a DROP
(`DropTableCommandVisitor` finds no table once it is gone).

Nothing here refuses an event: a value that is negative, absurd or of the wrong type is left
out and the reason kept in `ignored`, for the log of whoever handles the event.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any, TypeGuard

__all__ = [
    "Assertion",
    "DataFacts",
    "OutputFacts",
    "data_facts",
    "event_data",
]

_COUNT_MAX = 10**15  # rows or files in one run's output: more is not a count
_SIZE_MAX = 10**18  # bytes (an exabyte)
_DATASETS = 200  # datasets read per event
_FIELDS = 500  # schema fields kept per dataset
_LINEAGE_INPUTS = 50  # input fields kept per output column
_ASSERTIONS = 200
_TEXT = 250  # a column, type or assertion name
_LIFECYCLE = frozenset({"ALTER", "CREATE", "DROP", "OVERWRITE", "RENAME", "TRUNCATE"})

ColumnRef = tuple[str, str, str]
"""(dataset namespace, dataset name, column)."""


@dataclass(frozen=True)
class Assertion:
    """One data-quality assertion a run made about a dataset."""

    namespace: str
    name: str
    assertion: str
    success: bool
    column: str | None = None


@dataclass(frozen=True)
class OutputFacts:
    """What a run says of one dataset it wrote."""

    namespace: str
    name: str
    rows: int | None = None
    size: int | None = None
    files: int | None = None
    fields: tuple[tuple[str, str | None], ...] | None = None
    """The schema as (column, type), in the producer's order; None when it sent none."""
    lifecycle: str | None = None
    columns: tuple[tuple[str, tuple[ColumnRef, ...]], ...] | None = None
    """Column lineage: each output column and the input columns it is computed from."""
    odd_statistics: bool = False
    """It sent `outputStatistics` whose values were all left out (negative, not numbers):
    an odd count, not a missing one."""

    @property
    def has_statistics(self) -> bool:
        return self.rows is not None or self.size is not None


@dataclass(frozen=True)
class DataFacts:
    outputs: tuple[OutputFacts, ...] = ()
    assertions: tuple[Assertion, ...] = ()
    ignored: tuple[str, ...] = ()
    """Why values were left out ("outputs[0] rowCount is negative: -5")."""

    def __bool__(self) -> bool:
        return bool(self.outputs or self.assertions or self.ignored)

    def to_json(self) -> dict[str, Any]:
        return {
            "outputs": [_output_json(o) for o in self.outputs],
            "assertions": [
                [a.namespace, a.name, a.assertion, a.success, a.column] for a in self.assertions
            ],
            "ignored": list(self.ignored),
        }

    @classmethod
    def from_json(cls, data: Any) -> DataFacts:
        """The facts stored with a run event (the store wrote them with `to_json`)."""
        if not isinstance(data, dict):
            return cls()
        return cls(
            outputs=tuple(_output_from(o) for o in data.get("outputs") or ()),
            assertions=tuple(
                Assertion(a[0], a[1], a[2], bool(a[3]), a[4]) for a in data.get("assertions") or ()
            ),
            ignored=tuple(data.get("ignored") or ()),
        )


def _output_json(o: OutputFacts) -> dict[str, Any]:
    return {
        "namespace": o.namespace,
        "name": o.name,
        "rows": o.rows,
        "size": o.size,
        "files": o.files,
        "fields": [list(f) for f in o.fields] if o.fields is not None else None,
        "lifecycle": o.lifecycle,
        "columns": [[c, [list(i) for i in ins]] for c, ins in o.columns]
        if o.columns is not None
        else None,
        "odd_statistics": o.odd_statistics,
    }


def _output_from(o: dict[str, Any]) -> OutputFacts:
    fields, columns = o.get("fields"), o.get("columns")
    return OutputFacts(
        namespace=o["namespace"],
        name=o["name"],
        rows=o.get("rows"),
        size=o.get("size"),
        files=o.get("files"),
        fields=tuple((f[0], f[1]) for f in fields) if fields is not None else None,
        lifecycle=o.get("lifecycle"),
        columns=tuple((c, tuple((i[0], i[1], i[2]) for i in ins)) for c, ins in columns)
        if columns is not None
        else None,
        odd_statistics=bool(o.get("odd_statistics")),
    )


@dataclass
class _Reader:
    ignored: list[str] = field(default_factory=list)

    def count(self, facet: dict[str, Any], key: str, where: str, most: int) -> int | None:
        value = facet.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            self.ignored.append(f"{where}.{key} is not a number: {_shown(value)}")
            return None
        if value != value or value in (float("inf"), float("-inf")):  # NaN, ±inf
            self.ignored.append(f"{where}.{key} is not a finite number")
            return None
        if value < 0:
            self.ignored.append(f"{where}.{key} is negative: {_shown(value)}")
            return None
        if value > most or value != int(value):
            self.ignored.append(f"{where}.{key} is not a plausible count: {_shown(value)}")
            return None
        return int(value)


def event_data(event_type: str, inputs: Any, outputs: Any) -> DataFacts:
    """The data facts an event of `event_type` holds (see the module's docstring)."""
    facts = data_facts(inputs, outputs)
    if event_type == "COMPLETE":
        return facts
    if event_type in ("FAIL", "ABORT"):
        return DataFacts(assertions=facts.assertions)
    dropped = tuple(
        OutputFacts(o.namespace, o.name, lifecycle=o.lifecycle)
        for o in facts.outputs
        if o.lifecycle in ("DROP", "TRUNCATE")
    )
    return DataFacts(outputs=dropped)


def data_facts(inputs: Any, outputs: Any) -> DataFacts:
    """The data facts of an event's `inputs` and `outputs` (as the event carried them)."""
    reader = _Reader()
    written: list[OutputFacts] = []
    assertions: list[Assertion] = []
    for where, item, name in _datasets(outputs, "outputs"):
        facets = _dict(item.get("facets"))
        output = _dict(item.get("outputFacets"))
        stats = _dict(output.get("outputStatistics"))
        at = f"{where}.outputFacets.outputStatistics"
        facts = OutputFacts(
            namespace=name[0],
            name=name[1],
            rows=reader.count(stats, "rowCount", at, _COUNT_MAX),
            size=reader.count(stats, "size", at, _SIZE_MAX),
            files=reader.count(stats, "fileCount", at, _COUNT_MAX),
            fields=_fields(facets.get("schema")),
            lifecycle=_lifecycle(facets.get("lifecycleStateChange")),
            columns=_columns(facets.get("columnLineage")),
        )
        if stats and not facts.has_statistics:
            facts = replace(facts, odd_statistics=True)
        if facts.has_statistics or facts.fields is not None or facts.lifecycle or facts.columns:
            written.append(facts)
        assertions += _assertions(name, facets, output)
    for _, item, name in _datasets(inputs, "inputs"):
        assertions += _assertions(name, _dict(item.get("facets")), _dict(item.get("inputFacets")))
    return DataFacts(tuple(written), tuple(assertions[:_ASSERTIONS]), tuple(reader.ignored))


def _datasets(value: Any, where: str) -> Iterator[tuple[str, dict[str, Any], tuple[str, str]]]:
    if not isinstance(value, list):
        return
    for index, item in enumerate(value[:_DATASETS]):
        if not isinstance(item, dict):
            continue
        namespace, name = item.get("namespace"), item.get("name")
        if _text(namespace, 1024) and _text(name, 1024):
            yield f"{where}[{index}]", item, (namespace, name)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _text(value: Any, most: int = _TEXT) -> TypeGuard[str]:
    return isinstance(value, str) and 0 < len(value) <= most and "\x00" not in value


def _fields(facet: Any) -> tuple[tuple[str, str | None], ...] | None:
    fields = _dict(facet).get("fields")
    if not isinstance(fields, list):
        return None
    found: list[tuple[str, str | None]] = []
    _flatten(fields, "", found)
    return tuple(found[:_FIELDS])


def _flatten(fields: list[Any], prefix: str, found: list[tuple[str, str | None]]) -> None:
    for item in fields:
        if len(found) >= _FIELDS or not isinstance(item, dict) or not _text(item.get("name")):
            continue
        name = prefix + item["name"]
        kind = item.get("type")
        found.append((name, kind if _text(kind) else None))
        nested = item.get("fields")
        if isinstance(nested, list) and len(prefix) < _TEXT:
            _flatten(nested, f"{name}.", found)


def _lifecycle(facet: Any) -> str | None:
    value = _dict(facet).get("lifecycleStateChange")
    return value.upper() if isinstance(value, str) and value.upper() in _LIFECYCLE else None


def _columns(facet: Any) -> tuple[tuple[str, tuple[ColumnRef, ...]], ...] | None:
    fields = _dict(facet).get("fields")
    if not isinstance(fields, dict):
        return None
    found: list[tuple[str, tuple[ColumnRef, ...]]] = []
    for column, spec in list(fields.items())[:_FIELDS]:
        inputs = _dict(spec).get("inputFields")
        if not _text(column) or not isinstance(inputs, list):
            continue
        refs = [
            (i["namespace"], i["name"], i["field"])
            for i in inputs[:_LINEAGE_INPUTS]
            if isinstance(i, dict)
            and _text(i.get("namespace"), 1024)
            and _text(i.get("name"), 1024)
            and _text(i.get("field"))
        ]
        found.append((column, tuple(dict.fromkeys(refs))))
    return tuple(found)


def _assertions(
    name: tuple[str, str], facets: dict[str, Any], extra: dict[str, Any]
) -> list[Assertion]:
    found: list[Assertion] = []
    for facet in (extra.get("dataQualityAssertions"), facets.get("dataQualityAssertions")):
        items = _dict(facet).get("assertions")
        for item in items[:_ASSERTIONS] if isinstance(items, list) else ():
            if not isinstance(item, dict) or not _text(item.get("assertion")):
                continue
            if not isinstance(item.get("success"), bool):
                continue
            column = item.get("column")
            found.append(
                Assertion(
                    name[0], name[1], item["assertion"], item["success"],
                    column if _text(column) else None,
                )
            )  # fmt: skip
        if found:  # the input facet, else the dataset facet: one report, not two
            break
    return found


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"
