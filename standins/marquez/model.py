"""The rows of the Marquez stand-in's in-memory model: what Marquez 0.51.1 keeps in Postgres.

Each class is one table (or view) of Marquez's schema, reduced to what the API answers show.
state.py fills them the way OpenLineageDao does; views.py and queries.py read them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from uuid import UUID

from standins.marquez.events import JsonDict

Key = tuple[str, str]  # (namespace, name)
TERMINAL = frozenset({"COMPLETED", "FAILED", "ABORTED"})
_STATES = {"COMPLETE": "COMPLETED", "FAIL": "FAILED", "ABORT": "ABORTED", "START": "RUNNING"}


def run_state_for(event_type: str) -> str:
    """OpenLineageDao.getRunState (#L1103-L1119): lower-cased, anything unknown (RUNNING, OTHER,
    typos) means RUNNING."""
    return _STATES.get(event_type.upper(), "RUNNING")


@dataclass
class Namespace:
    """`namespaces`: NamespaceDao.doUpsertNamespaceRow inserts `ON CONFLICT(name) DO NOTHING`
    (#L115-L131), so `updated_at` stays the first event's time."""

    name: str
    created_at: datetime
    updated_at: datetime
    owner_name: str = "anonymous"
    description: str | None = None
    is_hidden: bool = False


@dataclass
class DatasetVersion:
    version: UUID
    created_at: datetime
    run_uuid: UUID | None
    fields: list[JsonDict]
    facets: JsonDict = field(default_factory=dict)
    lifecycle_state: str | None = None
    namespace: str = ""  # as reported: `dataset_versions.namespace_name`, never checked


@dataclass
class Dataset:
    """A `datasets` row. Its identity is its primary symlink, `key`; `MarquezState.datasets`
    maps every symlink name (aliases from the symlinks facet too) to it, as `datasets_view`
    has one row per symlink (R__Datasets_view.sql)."""

    namespace: str
    name: str
    created_at: datetime
    updated_at: datetime
    source_name: str = "default"
    description: str | None = None
    physical_name: str = ""  # the last name it was written under (`physical_name = EXCLUDED…`)
    is_hidden: bool = False  # DELETE …/datasets/{name}; the next event's upsert un-hides it
    current_version: DatasetVersion | None = None
    last_modified_at: datetime | None = None
    versions: dict[UUID, DatasetVersion] = field(default_factory=dict)

    @property
    def key(self) -> Key:
        return (self.namespace, self.name)


@dataclass
class JobVersion:
    version: UUID
    created_at: datetime
    inputs: frozenset[Key]
    outputs: frozenset[Key]
    latest_run: Run | None = None


@dataclass
class Job:
    """A `jobs` row. `name` is the full name (`<parent>.<simple>`), fixed when the row is
    inserted (rewrite_jobs_fqn_table computes it from the parent, R__Jobs_view…sql#L36-L41)."""

    namespace: str
    name: str
    simple_name: str
    parent: Job | None
    uuid: UUID
    created_at: datetime
    updated_at: datetime
    type: str = "BATCH"
    description: str | None = None
    location: str | None = None
    current_version: JobVersion | None = None
    current_run: Run | None = None
    # job_versions_io_mapping rows flagged is_current_job_version, per side.
    current_inputs: frozenset[Key] = frozenset()
    current_outputs: frozenset[Key] = frozenset()
    versions: dict[UUID, JobVersion] = field(default_factory=dict)
    runs: list[Run] = field(default_factory=list)
    is_hidden: bool = False  # DELETE …/jobs/{name}; jobs_view leaves it out until re-upserted

    @property
    def key(self) -> Key:
        return (self.namespace, self.name)


@dataclass
class StoredEvent:
    """A `lineage_events` row. `answer` is the event as Marquez stored and answers it (the bound
    event re-serialised, `GET /events/lineage`); `body` is what the producer posted, kept so a
    test can read what was sent."""

    seq: int
    kind: str
    event_time: datetime
    body: JsonDict
    answer: JsonDict


@dataclass(frozen=True)
class FacetRow:
    """Facets inserted for a run by one event (run_facets / job_facets rows): merged by
    `lineage_event_time`, later ones winning (JSON_AGG … ORDER BY lineage_event_time)."""

    event_time: datetime
    seq: int
    facets: JsonDict


@dataclass
class Run:
    uuid: UUID
    job: Job
    created_at: datetime
    updated_at: datetime
    args: dict[str, str]
    nominal_start: datetime | None = None
    nominal_end: datetime | None = None
    state: str | None = None  # None reads back as NEW
    transitioned_at: datetime | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    job_version: JobVersion | None = None
    inputs: dict[Key, DatasetVersion] = field(default_factory=dict)
    outputs: dict[Key, DatasetVersion] = field(default_factory=dict)
    input_facets: dict[Key, JsonDict] = field(default_factory=dict)
    output_facets: dict[Key, JsonDict] = field(default_factory=dict)
    run_facets: list[FacetRow] = field(default_factory=list)
    job_facets: list[FacetRow] = field(default_factory=list)
