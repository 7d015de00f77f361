"""Namespaces and datasets written from events, as OpenLineageDao.upsertLineageDataset writes
them (OpenLineageDao.java#L837-L1012), symlinks included.

A dataset row is found through `dataset_symlinks` by (namespace, name); a new name makes a new
dataset whose primary symlink it is. The `symlinks` facet adds the identifiers as further names of
the *same* dataset (#L873-L903, `ON CONFLICT (name, namespace_uuid) DO NOTHING`), so a job that
later reads or writes an alias name reads or writes that dataset, and lineage connects through it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from standins.marquez.events import (
    DatasetRef,
    EventFailedError,
    JsonDict,
    name_based_uuid,
    sanitize_job_namespace,
)
from standins.marquez.model import Dataset, DatasetVersion, Key, Namespace, Run

__all__ = ["DatasetWriter"]


class DatasetWriter:
    """The namespace and dataset half of MarquezState's writes."""

    clock: Callable[[], datetime]
    namespaces: dict[str, Namespace]
    datasets: dict[Key, Dataset]

    def _namespace(self, name: str, now: datetime) -> Namespace:
        """NamespaceDao.upsertNamespaceRow: `ON CONFLICT(name) DO NOTHING` (#L115-L131)."""
        ns = self.namespaces.get(name)
        if ns is None:
            ns = self.namespaces[name] = Namespace(name, now, now)
        return ns

    def _upsert_dataset(
        self, ref: DatasetRef, now: datetime, run: Run | None, *, is_input: bool
    ) -> tuple[Dataset, DatasetVersion]:
        facets = ref.facets or {}
        # The reported namespace and its sanitized form both get a row (dsNamespace and
        # datasetNamespace, #L840-L871); datasets_view shows the symlink's (reported) one.
        self._namespace(ref.namespace, now)
        self._namespace(sanitize_job_namespace(ref.namespace), now)
        source = facets.get("dataSource") or {}
        source_name = source.get("name") or "default"
        dataset = self.datasets.get((ref.namespace, ref.name))
        if dataset is None:
            dataset = Dataset(ref.namespace, ref.name, now, now, source_name)
            self.datasets[dataset.key] = dataset
        self._symlinks(ref, dataset, now)
        # DatasetDao.upsert ON CONFLICT (uuid): updated_at, physical_name and description are
        # overwritten (a missing documentation facet clears it); source_name stays the first.
        dataset.updated_at, dataset.physical_name, dataset.is_hidden = now, ref.name, False
        dataset.description = (facets.get("documentation") or {}).get("description")
        version = dataset.current_version if is_input else None
        if version is None:
            # Inputs reuse the current version; outputs (and unseen inputs) get a new one.
            fields = [_field(f) for f in (facets.get("schema") or {}).get("fields") or []]
            run_uuid = None if is_input or run is None else run.uuid
            version_uuid = name_based_uuid(
                f"{ref.namespace}:{source_name}:{ref.name}:{fields}:{run_uuid}"
            )
            version = dataset.versions.get(version_uuid)
            if version is None:
                version = DatasetVersion(version_uuid, now, run_uuid, fields,
                                         namespace=ref.namespace)  # fmt: skip
                dataset.versions[version_uuid] = version
            dataset.current_version = version
        version.facets.update(facets)
        lifecycle = facets.get("lifecycleStateChange") or {}
        version.lifecycle_state = lifecycle.get("lifecycleStateChange", version.lifecycle_state)
        return dataset, version

    def _symlinks(self, ref: DatasetRef, dataset: Dataset, now: datetime) -> None:
        identifiers = ref.symlinks
        if identifiers is None:
            if "symlinks" in (ref.facets or {}):  # el.getIdentifiers().stream(): NPE
                raise EventFailedError("Cannot invoke List.stream() on null identifiers")
            return
        for identifier in identifiers:
            if identifier is None:
                raise EventFailedError("Cannot invoke SymlinkIdentifier.getName() on null")
            namespace, name = identifier["namespace"], identifier["name"]
            self._namespace(namespace, now)  # upsertNamespaceRow(id.getNamespace()), unsanitized
            self.datasets.setdefault((namespace, name), dataset)  # ON CONFLICT DO NOTHING


def _field(raw: Any) -> JsonDict:
    item = raw if isinstance(raw, dict) else {}
    return {
        "name": item.get("name"),
        "type": item.get("type"),
        "tags": [],
        "description": item.get("description"),
    }
