"""One run event as the watcher keeps it: what ingest parses and the store records."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

__all__ = ["DatasetName", "ParsedEvent", "Symlink"]

DatasetName = tuple[str, str]
"""(namespace, name) of a dataset, as the producer named it."""
Symlink = tuple[DatasetName, DatasetName]
"""(alias, dataset): another name a dataset's `symlinks` facet gives it (a Hive table for a
path), which names the same dataset in Marquez."""


@dataclass(frozen=True)
class ParsedEvent:
    """What the watcher keeps of one OpenLineage run event.

    `dag_*` is the DAG the run belongs to and `dag_run_id` its run (`bot/events/rules/producers.py`
    decides from the job type, the Airflow facets, `parent` and `parent.root`). Times are
    UTC-aware.
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
    dag_run_id: str | None = None
    job_type: str | None = None
    inputs: tuple[DatasetName, ...] = ()
    """(namespace, name) of the event's input datasets, as the producer named them."""
    outputs: tuple[DatasetName, ...] = ()
    parent_run_id: str | None = None
    """The parent run whose recorded DAG, if the store knows it, this event belongs to."""
    airflow_run_id: str | None = None
    """Airflow's own id of the DAG run (`scheduled__2021-06-04T00:00:00+00:00`), for links."""
    task_id: str | None = None
    """The Airflow task of a task's event (or of the task a job under it ran in)."""
    try_number: int | None = None
    """That task's try, for a link to the log of the try that failed."""
    symlinks: tuple[Symlink, ...] = ()
    """(alias, dataset) of each identifier in the `symlinks` facets of `inputs` and `outputs`,
    in the event's order. Like `inputs`, no run_events column: the lineage index keeps it."""
    data: dict[str, Any] | None = None
    """The event's data facts (`bot/events/rules/data_facts.py` `DataFacts.to_json`): row
    counts written, schemas, column lineage, lifecycle changes, data-quality assertions."""

    @property
    def key(self) -> tuple[str, str, datetime]:
        """The event's identity: (run id, event type, event time)."""
        return (self.run_id, self.event_type, self.event_time)

    def dataset_names(self) -> list[tuple[DatasetName, tuple[DatasetName, ...]]]:
        """Each dataset named, with its aliases, in the order Marquez 0.51.1 registers them
        (OpenLineageDao.java:373-396: inputs, then outputs; :873-903: a dataset's own name,
        then its symlinks). The order decides which registration of a name wins."""
        aliases: dict[DatasetName, list[DatasetName]] = {}
        for alias, dataset in self.symlinks:
            aliases.setdefault(dataset, []).append(alias)
        names = dict.fromkeys(self.inputs + self.outputs)
        return [(name, tuple(aliases.get(name, ()))) for name in names]
