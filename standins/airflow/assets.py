"""The assets (Airflow 2: datasets) the stand-in's DAGs declare: what each DAG's last task
produces (`StandinDag.outlets`) and what DAGs are scheduled on (`StandinDag.asset_schedule`).

Airflow keeps them as rows referencing DAGs (`TaskOutletAssetReference`,
`DagScheduleAssetReference`); here they are read off the DAGs, numbered in the order the DAGs
were added and first name each URI. An asset's name is its URI, as for `Asset(uri)`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from datetime import datetime

from standins.airflow.state import DagState


@dataclass
class Asset:
    id: int
    uri: str
    created_at: datetime
    producers: list[tuple[str, str]] = field(default_factory=list)  # (dag id, task id)
    consumers: list[str] = field(default_factory=list)  # dag ids scheduled on it

    def related_to(self, dag_ids: Collection[str]) -> bool:
        """Whether any of `dag_ids` produces or is scheduled on it (the `dag_ids` filter of both
        APIs; Airflow 3 also matches a task's inlets, which the stand-in's DAGs have none of)."""
        return any(d in dag_ids for d, _ in self.producers) or any(
            d in dag_ids for d in self.consumers
        )


def index(dags: Iterable[DagState]) -> list[Asset]:
    """Every asset the DAGs name, by id."""
    found: dict[str, Asset] = {}

    def asset(uri: str, dag: DagState) -> Asset:
        if uri not in found:
            found[uri] = Asset(len(found) + 1, uri, dag.created_at)
        return found[uri]

    for dag in dags:
        for uri in dag.dag.outlets:
            asset(uri, dag).producers.append((dag.dag_id, dag.dag.tasks[-1]))
        for uri in dag.dag.asset_schedule:
            asset(uri, dag).consumers.append(dag.dag_id)
    return list(found.values())
