"""What an incident records of its impact: a typed snapshot of the planner's answer (the DAGs
downstream and their owners, the datasets, the reports, the teams to tell), stored as JSON on
the incident and read back as the same type. Whether it is known, still being worked out, or
could not be worked out is explicit, so no caller guesses from missing keys."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from itertools import chain
from typing import Any

from bot.config import BotConfig, Report
from bot.core.model import DagRef, DatasetRef
from bot.lineage.rules.graph import Affected
from bot.ownership.rules import reports

SCHEMA = 2
"""Version of the stored JSON (1 was the CLI's text view, converted by migration 0007)."""
KEPT = 100
"""DAGs downstream (and datasets) a snapshot names, in lineage order; the rest are counted.
A failure at the top of 100,000 DAGs has tens of thousands downstream: listed, they were
megabytes of JSON on the row, read back whenever the alert was drawn. Who is downstream,
for grouping later failures under this one, is the incident's `incident_downstream` rows."""


class ImpactStatus(StrEnum):
    KNOWN = "known"
    PENDING = "pending"  # the alert went out before the lineage answered; edited in later
    UNAVAILABLE = "unavailable"  # the lineage could not say (unknown DAG, Marquez down, cycle)


@dataclass(frozen=True)
class DagImpact:
    namespace: str
    dag_id: str
    owners: tuple[str, ...] = ()


@dataclass(frozen=True)
class ReportImpact:
    name: str
    dataset: str
    team: str | None = None
    url: str | None = None


@dataclass(frozen=True)
class ImpactSnapshot:
    status: ImpactStatus
    root_owners: tuple[str, ...] = ()
    downstream: tuple[DagImpact, ...] = ()
    """The first `KEPT` DAGs downstream in lineage order (`downstream_count` says how many)."""
    datasets: tuple[str, ...] = ()
    """The first `KEPT` datasets they write (`datasets_count` says how many)."""
    reports: tuple[ReportImpact, ...] = ()
    teams: tuple[str, ...] = ()
    """Every team that owns the root, a DAG downstream or a report reading what they write."""
    error: str | None = None
    """Why the impact is unavailable, in words for the alert."""
    downstream_total: int | None = None
    datasets_total: int | None = None
    owners_downstream: tuple[str, ...] | None = None
    """Every owner named by a DAG downstream, listed or not (who may act on the alert)."""
    reach: tuple[DagRef, ...] = field(default=(), compare=False, repr=False)
    """Every DAG downstream when just worked out (each once): what the store writes
    as the incident's downstream rows. Not part of the JSON."""

    @property
    def downstream_count(self) -> int:
        return len(self.downstream) if self.downstream_total is None else self.downstream_total

    @property
    def datasets_count(self) -> int:
        return len(self.datasets) if self.datasets_total is None else self.datasets_total

    @property
    def downstream_owners(self) -> tuple[str, ...]:
        if self.owners_downstream is not None:
            return self.owners_downstream
        return tuple(dict.fromkeys(o for d in self.downstream for o in d.owners))

    @classmethod
    def pending(cls) -> ImpactSnapshot:
        return cls(ImpactStatus.PENDING)

    @classmethod
    def unavailable(cls, error: str) -> ImpactSnapshot:
        return cls(ImpactStatus.UNAVAILABLE, error=error[:300])

    @property
    def is_pending(self) -> bool:
        return self.status == ImpactStatus.PENDING

    def with_root_owners(self, owners: Sequence[str]) -> ImpactSnapshot:
        """The snapshot naming `owners` for the root when the lineage named nobody (a DAG
        Marquez does not know yet, or Marquez down when the incident opened)."""
        if self.root_owners or not owners:
            return self
        return replace(self, root_owners=tuple(owners))

    def to_json(self) -> dict[str, Any]:
        return {
            "v": SCHEMA,
            "status": self.status.value,
            "root_owners": list(self.root_owners),
            "downstream": [
                {"namespace": d.namespace, "dag_id": d.dag_id, "owners": list(d.owners)}
                for d in self.downstream
            ],
            "datasets": list(self.datasets),
            "reports": [
                {"name": r.name, "dataset": r.dataset, "team": r.team, "url": r.url}
                for r in self.reports
            ],
            "teams": list(self.teams),
            "error": self.error,
            "downstream_count": self.downstream_count,
            "datasets_count": self.datasets_count,
            "downstream_owners": list(self.downstream_owners),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> ImpactSnapshot:
        """The stored snapshot; a grouped failure's empty record reads as no impact known."""
        if not data:
            return cls(ImpactStatus.UNAVAILABLE, error="no impact recorded")
        return cls(
            status=ImpactStatus(data["status"]),
            root_owners=tuple(data.get("root_owners", ())),
            downstream=tuple(
                DagImpact(d["namespace"], d["dag_id"], tuple(d.get("owners", ())))
                for d in data.get("downstream", ())
            ),
            datasets=tuple(data.get("datasets", ())),
            reports=tuple(
                ReportImpact(r["name"], r["dataset"], r.get("team"), r.get("url"))
                for r in data.get("reports", ())
            ),
            teams=tuple(data.get("teams", ())),
            error=data.get("error"),
            # absent from snapshots stored before they were capped: those list everything
            downstream_total=_count(data.get("downstream_count")),
            datasets_total=_count(data.get("datasets_count")),
            owners_downstream=(
                tuple(data["downstream_owners"]) if "downstream_owners" in data else None
            ),
        )


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class ReportHit:
    report: Report
    dataset: DatasetRef
    writers: tuple[DagRef, ...] = ()
    """The DAGs downstream (or the root) that write `dataset`: once they have rerun, the
    report reads correct data again."""


@dataclass(frozen=True)
class Impact:
    """What a failure or backfill of `root` touches downstream, and who must hear about it."""

    root: DagRef
    downstream: tuple[DagRef, ...]
    datasets: tuple[DatasetRef, ...]
    reports: tuple[ReportHit, ...]
    owners: dict[DagRef, tuple[str, ...]]

    @classmethod
    def of(
        cls,
        affected: Affected,
        datasets: Sequence[DatasetRef],
        config: BotConfig,
        owners_of: Callable[[DagRef], tuple[str, ...]],
        outputs_of: Callable[[DagRef], Iterable[DatasetRef]] | None = None,
    ) -> Impact:
        """The impact of `affected.root`, whichever lineage (index or crawl) it came from;
        `outputs_of` (a DAG's datasets) names the DAGs that write each report's dataset."""
        hits = reports(config, datasets)
        writes: dict[DatasetRef, list[DagRef]] = {d: [] for _, d in hits}
        if hits and outputs_of is not None:
            for dag in affected.order:
                for dataset in outputs_of(dag):
                    if dataset in writes:
                        writes[dataset].append(dag)
        return cls(
            root=affected.root,
            downstream=affected.downstream,
            datasets=tuple(datasets),
            reports=tuple(ReportHit(r, d, tuple(writes[d])) for r, d in hits),
            owners={dag: owners_of(dag) for dag in affected.order},
        )

    @property
    def teams(self) -> tuple[str, ...]:
        return self._teams(self._owners_below())

    def _owners_below(self) -> tuple[str, ...]:
        """Every owner of a DAG downstream, once each, in lineage order."""
        owners = self.owners
        return tuple(dict.fromkeys(chain.from_iterable(owners.get(d, ()) for d in self.downstream)))

    def _teams(self, below: tuple[str, ...]) -> tuple[str, ...]:
        reporting = (hit.report.team for hit in self.reports if hit.report.team)
        return tuple(sorted({*self.owners.get(self.root, ()), *below, *reporting}))

    def snapshot(self) -> ImpactSnapshot:
        """What an incident records of this impact (the first `KEPT` DAGs and datasets)."""
        owners = self.owners
        below = self._owners_below()
        return ImpactSnapshot(
            status=ImpactStatus.KNOWN,
            root_owners=owners.get(self.root, ()),
            downstream=tuple(
                DagImpact(d.namespace, d.dag_id, owners.get(d, ())) for d in self.downstream[:KEPT]
            ),
            datasets=tuple(str(d) for d in self.datasets[:KEPT]),
            reports=tuple(
                ReportImpact(h.report.name, str(h.dataset), h.report.team, h.report.url)
                for h in self.reports
            ),
            teams=self._teams(below),
            downstream_total=len(self.downstream),
            datasets_total=len(self.datasets),
            owners_downstream=below,
            reach=self.downstream,
        )
