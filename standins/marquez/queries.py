"""The list queries of the Marquez stand-in: pages of jobs, runs and events, and search.

Marquez sorts these lists on keys with no unique tie-breaker — events `ORDER BY le.event_time`
(OpenLineageDao.java#L135-L157), jobs `ORDER BY j.updated_at DESC` (JobDao.java#L246-L248), runs
`ORDER BY r.started_at DESC NULLS LAST` (RunDao.java#L220-L221) — and PostgreSQL does not keep
the order of equal keys stable from one LIMIT/OFFSET query to the next. The stand-in orders each
tie group by a hash of (row, offset, limit): the same request always answers the same page, but a
tie group that spans a page boundary can repeat or skip rows (FIDELITY.md row 6).

Search has no effective order at all (`ORDER BY :sort` binds a constant, SearchDao.java#L60-L83),
so its rows come in a stable hash order unrelated to the name, and `q` is an ILIKE pattern.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from datetime import datetime
from operator import attrgetter

from standins.marquez.events import RUN_EVENT, JsonDict, iso_z
from standins.marquez.model import Job
from standins.marquez.state import MarquezState
from standins.marquez.views import RUN_STATES, job_json, run_json

__all__ = ["events_page", "jobs_page", "runs_page", "search"]


def _scramble(row: str, *context: object) -> bytes:
    """A deterministic stand-in for the order PostgreSQL happens to give equal keys."""
    text = "\x00".join([row, *map(str, context)])
    return hashlib.blake2b(text.encode(), digest_size=8).digest()


def jobs_page(
    jobs: Iterable[Job], states: set[str] | None, limit: int, offset: int
) -> tuple[list[JsonDict], int]:
    """Jobs by updatedAt DESC; `lastRunStates` filters on the current run, never the count."""
    every = list(jobs)
    # SQL `current_run_state IN (...) OR r.uuid IS NULL`: a run without a state never matches.
    allowed = RUN_STATES if states is None else states
    kept = [j for j in every if j.current_run is None or j.current_run.state in allowed]
    kept.sort(key=attrgetter("updated_at"), reverse=True)  # one pass when already in order
    if offset >= len(kept) or limit <= 0:
        return [], len(every)
    # Only the tie groups the page touches need the scrambled order (hashing every job for
    # every page made a 100,000-job listing quadratic in the stand-in, not in Marquez).
    last = min(offset + limit, len(kept)) - 1
    low, high = offset, last + 1
    while low > 0 and kept[low - 1].updated_at == kept[offset].updated_at:
        low -= 1
    while high < len(kept) and kept[high].updated_at == kept[last].updated_at:
        high += 1
    segment = sorted(kept[low:high], key=lambda j: _scramble(str(j.uuid), offset, limit))
    segment.sort(key=lambda j: j.updated_at, reverse=True)
    kept[low:high] = segment
    return [job_json(j) for j in kept[offset : offset + limit]], len(every)


def runs_page(job: Job, limit: int, offset: int) -> tuple[list[JsonDict], int]:
    """Runs by startedAt DESC NULLS LAST."""
    runs = sorted(job.runs, key=lambda r: _scramble(str(r.uuid), offset, limit))
    runs.sort(
        key=lambda r: (r.started_at is None, -(r.started_at.timestamp() if r.started_at else 0))
    )
    return [run_json(r) for r in runs[offset : offset + limit]], len(runs)


def events_page(
    state: MarquezState,
    after: datetime,
    before: datetime,
    ascending: bool,
    limit: int,
    offset: int,
) -> tuple[list[JsonDict], int]:
    """Events with after <= eventTime < before; RUN events listed, every kind counted (also
    with `limit=0`, which Marquez accepts: the count alone)."""
    window = state.events_between(after, before)
    if limit == 0:
        return [], len(window)
    listed = [e for e in window if e.kind == RUN_EVENT]
    listed.sort(key=lambda e: _scramble(str(e.seq), offset, limit))
    listed.sort(key=lambda e: e.event_time, reverse=not ascending)
    return [e.answer for e in listed[offset : offset + limit]], len(window)


def ilike(query: str) -> re.Pattern[str]:
    """`name ILIKE '%' || q || '%'` (SearchDao.java#L69,#L79), nothing escaped by Marquez: `%`
    matches any run of characters, `_` any one, and a backslash (PostgreSQL's default LIKE
    escape) makes the next character literal."""
    pattern, body, index = f"%{query}%", [], 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\" and index + 1 < len(pattern):
            body.append(re.escape(pattern[index + 1]))
            index += 2
            continue
        body.append(".*" if char == "%" else "." if char == "_" else re.escape(char))
        index += 1
    return re.compile("".join(body), re.IGNORECASE | re.DOTALL)


def search(
    state: MarquezState,
    query: str,
    kind: str | None,
    namespace: str | None,
    after: datetime | None,
    before: datetime | None,
    limit: int,
) -> list[JsonDict]:
    """GET /search over `datasets_view` (every name of a dataset, aliases too) and jobs; `after`
    and `before` are strict (SearchDao.java#L67-L68,#L77-L78); no offset, no real order."""
    matcher = ilike(query)
    found: set[tuple[str, str, str, datetime]] = set()  # UNION: duplicates collapse
    if kind in (None, "DATASET"):
        found.update(
            ("DATASET", ns, name, d.updated_at)
            for (ns, name), d in state.datasets.items()
            if not d.is_hidden
        )
    if kind in (None, "JOB"):
        found.update(
            ("JOB", j.namespace, j.name, j.updated_at)
            for j in state.jobs.values()
            if not j.is_hidden
        )
    rows = sorted(found, key=lambda row: _scramble(*row[:3]))
    return [
        {
            "type": typ,
            "name": name,
            "updatedAt": iso_z(updated),
            "namespace": ns,
            "nodeId": f"{typ.lower()}:{ns}:{name}",
        }
        for typ, ns, name, updated in rows
        if matcher.fullmatch(name)
        and (namespace is None or ns == namespace)
        and (after is None or updated > after)
        and (before is None or updated < before)
    ][:limit]
