"""Symlinked datasets are one dataset in the local lineage index, as in Marquez 0.51.1.

Marquez registers each dataset of a run event (OpenLineageDao.java:373-396, inputs then
outputs) by its own name and then by every identifier of its `symlinks` facet, all pointing at
one dataset (OpenLineageDao.java:873-903); a name is registered once, by whoever names it first
(DatasetSymlinkDao.java:48, `ON CONFLICT (name, namespace_uuid) DO NOTHING`), and a dataset
named by an alias is the alias's dataset (DatasetDao.upsert, `ON CONFLICT (uuid)`, on the
symlink's dataset uuid, OpenLineageDao.java:910-923). DatasetDaoTest.testGetDatasetBySymlink
(DatasetDaoTest.java:236-260) finds a dataset by its symlink's name. LineageServiceTest
.testSymlinkDatasetLineage (LineageServiceTest.java:614-671) states the lineage checked here, a
job reading the alias connected to the dataset's job, though its facet goes in `additional`,
which DatasetFacets.getSymlinks never reads. Events go through `parse_run_event` and
`record_events` on SQLite and PostgreSQL; what counts is the DAG graph and the impact.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

import pytest

from bot.clients.marquez import MarquezClient
from bot.core.model import DagRef, DatasetRef
from bot.events.rules.event import ParsedEvent
from bot.events.rules.parse import NAME_MAX, parse_run_event
from bot.lineage.service.index import LineageIndex
from bot.lineage.service.index_planner import IndexPlanner
from bot.lineage.store.index import JobFacts, apply_jobs, record_events
from tests.lineage.test_lineage_index import CONFIG, PRODUCER, edges, engine_on, ready_index

NS = "spark"
SYMLINKS = "https://openlineage.io/spec/facets/1-0-1/SymlinksDatasetFacet.json"
RUN_EVENT = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
PATH = ("s3://bucket", "/warehouse/orders")
TABLE = ("hive://metastore", "db.orders")


def dataset(name: tuple[str, str], *aliases: tuple[str, str]) -> dict[str, Any]:
    """An OpenLineage dataset with a `symlinks` facet naming `aliases` (as Spark sends a
    Hive table's path, with the table as its symlink)."""
    identifiers = [{"namespace": ns, "name": n, "type": "TABLE"} for ns, n in aliases]
    facet = {"_producer": PRODUCER, "_schemaURL": SYMLINKS, "identifiers": identifiers}
    return {"namespace": name[0], "name": name[1], "facets": {"symlinks": facet}}


def body(job: str, *, reads: Sequence[Any] = (), writes: Sequence[Any] = ()) -> dict[str, Any]:
    """A COMPLETE run event of `job` (its own DAG); a dataset is a dict or a (ns, name) pair."""
    return {
        "eventType": "COMPLETE",
        "eventTime": "2021-06-10T01:05:00Z",
        "producer": PRODUCER,
        "schemaURL": RUN_EVENT,
        "run": {"runId": str(uuid.uuid4())},
        "job": {"namespace": NS, "name": job},
        "inputs": [d if isinstance(d, dict) else dataset(d) for d in reads],
        "outputs": [d if isinstance(d, dict) else dataset(d) for d in writes],
    }


def parsed(item: dict[str, Any]) -> ParsedEvent:
    event = parse_run_event(item)
    assert event is not None
    return event


def no_marquez() -> AbstractAsyncContextManager[MarquezClient]:
    raise AssertionError("the index knows every DAG here: Marquez is never asked")


def dag(name: str) -> DagRef:
    return DagRef(NS, name)


async def record(index: LineageIndex, batches: Sequence[Sequence[dict[str, Any]]]) -> None:
    """Each batch parsed and recorded in a transaction of its own, as ingest does."""
    for batch in batches:
        async with index.sessions.begin() as session:
            await record_events(session, [parsed(item) for item in batch])
    await index.catch_up()


def one_or_each(events: list[dict[str, Any]], batched: bool) -> list[list[dict[str, Any]]]:
    return [events] if batched else [[e] for e in events]


@pytest.mark.parametrize("batched", [False, True], ids=["one-per-batch", "one-batch"])
async def test_a_job_reading_the_alias_is_downstream_of_the_job_writing_the_path(
    database_url: str, batched: bool
) -> None:
    """Spark writes a path with its Hive table as symlink (OpenLineageDao.java:883-903 makes
    the table another name of the path's dataset); a job reading the table is downstream of the
    writer (LineageServiceTest.java:614), and the alias is no dataset of its own."""
    events = [
        body("write_orders", writes=[dataset(PATH, TABLE)]),
        body("read_orders", reads=[TABLE], writes=[("hive://metastore", "db.report")]),
    ]
    async with engine_on(database_url) as engine:
        index = await ready_index(database_url, engine)
        await record(index, one_or_each(events, batched))
        impact = await IndexPlanner(index, CONFIG, no_marquez).impact("write_orders", NS)
        assert edges(index) == {("write_orders", "read_orders")}
        assert impact.downstream == (dag("read_orders"),)
        assert impact.datasets == (DatasetRef("hive://metastore", "db.report"), DatasetRef(*PATH))
        restarted = await ready_index(database_url, engine)  # loads every row from scratch
        assert edges(restarted) == edges(index)
        assert restarted.outputs([dag("write_orders")]) == [DatasetRef(*PATH)]


@pytest.mark.parametrize("batched", [False, True], ids=["one-per-batch", "one-batch"])
async def test_the_first_registration_of_a_name_wins(database_url: str, batched: bool) -> None:
    """DatasetSymlinkDao.java:48 inserts a name `ON CONFLICT (name, namespace_uuid) DO
    NOTHING`: a table already read as a dataset of its own stays one (no edge to its reader),
    and an alias already pointing at one dataset keeps pointing there, while a new alias in the
    same facet joins the dataset. The order counts within a batch too."""
    second_path = ("s3://bucket", "/warehouse/orders_v2")
    events = [
        body("early_reader", reads=[TABLE]),  # the table is a dataset before any symlink
        body("write_orders", writes=[dataset(PATH, TABLE, ("hive://metastore", "db.orders_v1"))]),
        body("write_v2", writes=[dataset(second_path, ("hive://metastore", "db.orders_v1"))]),
        body("v1_reader", reads=[("hive://metastore", "db.orders_v1")]),
        body("late_reader", reads=[TABLE]),
    ]
    async with engine_on(database_url) as engine:
        index = await ready_index(database_url, engine)
        await record(index, one_or_each(events, batched))
        assert edges(index) == {("write_orders", "v1_reader")}
        assert index.outputs([dag("write_v2")]) == [DatasetRef(*second_path)]


async def test_an_event_naming_an_alias_as_its_dataset_means_the_aliases_dataset(
    database_url: str,
) -> None:
    """An event whose dataset's own name is a known alias writes the alias's dataset: Marquez
    looks the name up (DatasetSymlinkDao.java:20-24) and upserts the dataset by the symlink's
    dataset uuid (OpenLineageDao.java:910-923, DatasetDao `ON CONFLICT (uuid)`); the symlinks
    of that event point there too (OpenLineageDao.java:891-892, `symlink.getUuid()`)."""
    view = ("hive://metastore", "db.orders_view")
    events = [
        body("write_orders", writes=[dataset(PATH, TABLE)]),
        body("hive_compaction", writes=[dataset(TABLE, view)]),  # by the table's name
        body("path_reader", reads=[PATH]),
        body("view_reader", reads=[view]),
    ]
    async with engine_on(database_url) as engine:
        index = await ready_index(database_url, engine)
        await record(index, [[e] for e in events])
        impact = await IndexPlanner(index, CONFIG, no_marquez).impact("hive_compaction", NS)
        assert edges(index) == {
            (writer, reader)
            for writer in ("write_orders", "hive_compaction")
            for reader in ("path_reader", "view_reader")
        }
        assert impact.datasets == (DatasetRef(*PATH),)


async def test_malformed_symlink_facets_are_ignored_and_the_event_kept(database_url: str) -> None:
    """Marquez requires an identifier's namespace and name and reads `type` as a string
    (LineageEvent.java:532-536, SymlinkIdentifier); the bot keeps the event and the dataset and
    drops only the entries it cannot use, with the limits of the datasets' own names."""
    facets: list[Any] = [
        "not an object",
        {"symlinks": "not an object"},
        {"symlinks": {"identifiers": {"namespace": "hive", "name": "single.object"}}},
        {"symlinks": {"identifiers": [
            "not an object",
            {"namespace": "hive"},
            {"namespace": "  ", "name": "blank.namespace"},
            {"namespace": "hive", "name": 7},
            {"namespace": "hive", "name": "x" * (NAME_MAX + 1)},
            {"namespace": "hive", "name": "nul\x00name"},
            {"namespace": "hive", "name": "typed.object", "type": {"kind": "TABLE"}},
            {"namespace": PATH[0], "name": PATH[1]},  # the dataset's own name
            {"namespace": "hive", "name": "good.alias"},
        ]}},
    ]  # fmt: skip
    outputs = [{"namespace": PATH[0], "name": PATH[1], "facets": f} for f in facets]
    unnamed = dataset(("x", "no.namespace"), ("hive", "of.an.unnamed"))
    del unnamed["namespace"]
    event = parsed(body("write_orders", writes=[*outputs, unnamed]))
    assert event.outputs == (PATH,)
    assert event.symlinks == ((("hive", "good.alias"), PATH),)
    readers = [
        body(f"reader_{i}", reads=[name])
        for i, name in enumerate([("hive", "good.alias"), ("hive", "single.object"),
                                  ("hive", "typed.object"), ("hive", "of.an.unnamed")])
    ]  # fmt: skip
    async with engine_on(database_url) as engine:
        index = await ready_index(database_url, engine)
        await record(index, [[body("write_orders", writes=[*outputs, unnamed])], readers])
        assert edges(index) == {("write_orders", "reader_0")}


async def test_names_from_marquez_resolve_through_known_aliases(database_url: str) -> None:
    """Marquez's own answers are merged already (its job IO names the dataset); a name there
    that the index knows as an alias still means the alias's dataset, and a name new to the
    index becomes a dataset of its own."""
    async with engine_on(database_url) as engine:
        index = await ready_index(database_url, engine)
        await record(index, [[body("write_orders", writes=[dataset(PATH, TABLE)])]])
        reader = JobFacts(NS, "reader", dag("reader"), frozenset({DatasetRef(*TABLE)}))
        async with index.sessions.begin() as session:
            await apply_jobs(session, [reader], source="marquez")
        await index.catch_up()
        assert edges(index) == {("write_orders", "reader")}
