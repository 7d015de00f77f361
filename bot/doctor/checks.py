"""The checks of `backfill-bot doctor` other than Slack's (bot/doctor/slack.py): BOT_CONFIG,
Marquez, DAG ownership, Airflow and the database. Each returns rows and never raises for what
it checks: a system that fails becomes a FAIL row naming the fix (bot/doctor/__init__.py guards the
rest).
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from alembic.script import ScriptDirectory
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.backfill.run.airflow import AirflowBackend
from bot.backfill.run.backends import Finding
from bot.clients.airflow import AirflowAuthError, AirflowError
from bot.clients.marquez import (
    MarquezBadResponse,
    MarquezClient,
    MarquezError,
    MarquezRequestError,
)
from bot.config import BotConfig, IndexSettings, load_config
from bot.config.base import ConfigError
from bot.core.db import DatabaseError, make_engine, reported, session_factory, sync_url
from bot.core.model import DagRef
from bot.core.schema_state import SchemaState, migrations_location, read_schema_state
from bot.core.tables import utcnow
from bot.core.urls import display_url
from bot.lineage.service.catalog import Catalog, load_catalog
from bot.lineage.service.progress import describe
from bot.lineage.store.reconcile_state import read_progress
from bot.ownership.rules import owning_teams
from bot.settings import Settings

LISTED = 10  # names a row lists before "… and N more"
CONFIG_FIX = "fix BOT_CONFIG (see the BOT_CONFIG section of README.md)"
UPGRADE_FIX = "run `backfill-bot db upgrade` (`backfill-bot serve` also migrates at start)"


class Result(StrEnum):
    OK = "OK"
    WARN = "WARN"  # works, but may surprise someone; the exit code stays 0
    FAIL = "FAIL"  # the bot cannot do part of its job until this is fixed
    SKIP = "SKIP"  # not checked: it needs something that is not set, or another check failed


@dataclass(frozen=True)
class Row:
    check: str
    result: Result
    detail: str
    fix: str = ""


def listed(names: Sequence[str]) -> str:
    """`a, b, c` with at most LISTED names, then how many more."""
    shown = ", ".join(names[:LISTED])
    return shown + (f" … and {len(names) - LISTED} more" if len(names) > LISTED else "")


def dag_name(dag: DagRef) -> str:
    return f"{dag.namespace}/{dag.dag_id}"


# -- BOT_CONFIG -------------------------------------------------------------------------------


def config_row(
    settings: Settings, environ: Mapping[str, str] | None = None
) -> tuple[BotConfig | None, Row]:
    """The loaded BOT_CONFIG (None when it is invalid) and its row."""
    if settings.bot_config is None:
        row = Row(
            "BOT_CONFIG",
            Result.WARN,
            "BOT_CONFIG is not set: no teams, owners or approvers, so no one may approve",
            "set BOT_CONFIG to a YAML file with teams and ownership rules "
            "(examples/bot-config.yml is one)",
        )
        return BotConfig(), row
    try:
        config = load_config(settings.bot_config, environ)
    except ConfigError as exc:
        return None, Row("BOT_CONFIG", Result.FAIL, str(exc), CONFIG_FIX)
    detail = (
        f"{settings.bot_config}: {len(config.teams)} teams, {len(config.ownership)} ownership rules"
    )
    return config, Row("BOT_CONFIG", Result.OK, detail)


# -- Marquez and ownership --------------------------------------------------------------------


async def load_dags(settings: Settings) -> Catalog:
    """Every job Marquez knows, grouped by DAG (raises MarquezError)."""
    key = settings.marquez_api_key.get_secret_value() if settings.marquez_api_key else None
    async with MarquezClient(
        settings.marquez_url, api_key=key, timeout_s=settings.marquez_timeout_s
    ) as client:
        return await load_catalog(client)


async def marquez_rows(
    settings: Settings, config: BotConfig | None, catalog: Awaitable[Catalog]
) -> list[Row]:
    try:
        found = await catalog
    except MarquezError as exc:
        if isinstance(exc, MarquezRequestError) and exc.status in (401, 403):
            fix = "check MARQUEZ_API_KEY: Marquez refused it"
        elif isinstance(exc, MarquezBadResponse):
            fix = "point MARQUEZ_URL at Marquez's API (port 5000 by default), not its web UI"
        else:
            # MARQUEZ_URL may carry basic-auth credentials: rows show it through display_url only.
            shown = display_url(settings.marquez_url)
            fix = f"check that Marquez is up and MARQUEZ_URL ({shown}) is right"
        return [
            Row("Marquez", Result.FAIL, str(exc), fix),
            Row("DAG ownership", Result.SKIP, "needs Marquez's list of DAGs"),
        ]
    namespaces = {dag.namespace for dag in found.dags}
    detail = (
        f"reachable at {display_url(settings.marquez_url)}: {len(found.dags)} DAGs "
        f"in {len(namespaces)} namespaces"
    )
    return [Row("Marquez", Result.OK, detail), ownership_row(config, found)]


def unowned(config: BotConfig, catalog: Catalog) -> list[DagRef]:
    """DAGs no team declared in BOT_CONFIG owns, by its ownership rules or by the OpenLineage
    ownership facet (a facet naming an undeclared team lets no one approve, so it does not
    count)."""
    from_facets = catalog.owners_from_facets()
    return [dag for dag in catalog.dags if not owning_teams(config, dag, from_facets.get(dag, ()))]


def ownership_row(config: BotConfig | None, catalog: Catalog) -> Row:
    if config is None:
        return Row("DAG ownership", Result.SKIP, "needs a valid BOT_CONFIG")
    if not catalog.dags:
        fix = "point MARQUEZ_URL at the Marquez your pipelines send their OpenLineage events to"
        return Row("DAG ownership", Result.WARN, "Marquez knows no DAGs yet", fix)
    orphans = unowned(config, catalog)
    if not orphans:
        return Row(
            "DAG ownership", Result.OK, f"every one of the {len(catalog.dags)} DAGs has an owner"
        )
    detail = (
        f"{len(orphans)} of {len(catalog.dags)} DAGs have no owning team: "
        f"{listed([dag_name(d) for d in orphans])}"
    )
    example = orphans[0].dag_id
    fix = (
        f'add ownership rules to BOT_CONFIG, e.g. {{pattern: "{example}", team: TEAM}} '
        "(until then only approvers may approve their backfills, and their alerts go to "
        "watch.alert_channel, if it is set)"
    )
    return Row("DAG ownership", Result.FAIL, detail, fix)


# -- Airflow ----------------------------------------------------------------------------------


async def airflow_rows(
    settings: Settings, config: BotConfig | None, catalog: Awaitable[Catalog]
) -> list[Row]:
    if settings.airflow_url is None:
        detail = f"AIRFLOW_URL is not set: backfills run on {settings.executor_kind}"
        return [Row("Airflow", Result.SKIP, detail)]
    execution = (config or BotConfig()).execution.airflow
    password = settings.airflow_password
    backend = AirflowBackend(
        settings.airflow_url,
        settings.airflow_username,
        password.get_secret_value() if password else None,
        execution,
    )
    try:
        try:
            await backend.steps()
        except AirflowError as exc:
            return [
                Row("Airflow", Result.FAIL, str(exc), _airflow_fix(exc, settings)),
                Row("Airflow DAGs", Result.SKIP, "needs Airflow"),
            ]
        shown = display_url(settings.airflow_url)  # without the credentials it may carry
        rows = [Row("Airflow", Result.OK, f"Airflow {backend.version} at {shown}")]
        try:
            dags = (await catalog).dags
        except Exception:  # the Marquez row says what went wrong
            return [*rows, Row("Airflow DAGs", Result.SKIP, "needs Marquez's list of DAGs")]
        if config is None:
            return [*rows, Row("Airflow DAGs", Result.SKIP, "needs a valid BOT_CONFIG")]
        try:
            findings = await backend.check(dags)
        except AirflowError as exc:
            return [*rows, Row("Airflow DAGs", Result.FAIL, str(exc), _airflow_fix(exc, settings))]
        return [*rows, *_dag_rows(dags, findings)]
    finally:
        await backend.close()


def _airflow_fix(exc: AirflowError, settings: Settings) -> str:
    if isinstance(exc, AirflowAuthError):
        return "check AIRFLOW_USERNAME and AIRFLOW_PASSWORD (the user needs DAG read and edit)"
    shown = display_url(settings.airflow_url or "")
    return f"check that Airflow's API server is up and AIRFLOW_URL ({shown}) is right"


def _dags(count: int) -> str:
    return "1 DAG is" if count == 1 else f"{count} DAGs are"


def _dag_rows(dags: Sequence[DagRef], findings: Mapping[DagRef, Finding]) -> list[Row]:
    missing: list[str] = []
    paused: list[str] = []
    unpaused_later: list[str] = []
    for dag, finding in sorted(findings.items()):
        # AirflowBackend.check words a missing DAG "no DAG `id` in Airflow" and a paused one
        # "paused in Airflow: …"; blocking says whether the bot would refuse to run it.
        if not finding.text.startswith("paused"):
            missing.append(f"{dag_name(dag)} ({finding.text})")
        elif finding.blocking:
            paused.append(dag_name(dag))
        else:
            unpaused_later.append(dag_name(dag))
    rows: list[Row] = []
    if missing:
        rows.append(
            Row(
                "Airflow DAGs",
                Result.FAIL,
                f"{len(missing)} of {len(dags)} DAGs are not in Airflow: {listed(missing)}",
                "deploy them to Airflow, or map each Marquez name to its Airflow dag_id under "
                "execution.airflow.dag_ids in BOT_CONFIG",
            )
        )
    if paused:
        rows.append(
            Row(
                "Airflow DAGs",
                Result.FAIL,
                f"{_dags(len(paused))} paused in Airflow, so backfills of them are refused: "
                f"{listed(paused)}",
                "unpause them in Airflow, or set execution.airflow.on_paused: unpause",
            )
        )
    if unpaused_later:
        rows.append(
            Row(
                "Airflow DAGs",
                Result.WARN,
                f"{_dags(len(unpaused_later))} paused in Airflow; a backfill unpauses them "
                f"(on_paused: unpause): {listed(unpaused_later)}",
                "unpause them in Airflow if they should also run on their schedule",
            )
        )
    if not rows:
        rows.append(
            Row("Airflow DAGs", Result.OK, f"all {len(dags)} DAGs are in Airflow and unpaused")
        )
    return rows


# -- the database -----------------------------------------------------------------------------


def missing_sqlite_file(url: str) -> Path | None:
    """The file of a SQLite DATABASE_URL when it does not exist (connecting would create it)."""
    if not sync_url(url).startswith("sqlite"):
        return None
    database = make_url(sync_url(url)).database
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    path = Path(database)
    return None if path.is_file() else path


async def database_rows(settings: Settings, config: BotConfig | None = None) -> list[Row]:
    """The database's migration state and, once it is current, the lineage index's."""
    url = settings.database_url
    missing = missing_sqlite_file(url)
    if missing is not None:
        return [Row("Database", Result.FAIL, f"no database file at {missing}", UPGRADE_FIX)]
    engine = make_engine(url)
    try:
        with reported(url, "read the migration state of the database"):
            state = await read_schema_state(engine)
            rows = [_migration_row(state)]
            if state.is_current:
                rows.append(await index_row(engine, (config or BotConfig()).index))
    except DatabaseError as exc:
        fix = "check DATABASE_URL, and that the database server is up and lets this user in"
        return [Row("Database", Result.FAIL, str(exc), fix)]
    finally:
        await engine.dispose()
    return rows


def _migration_row(state: SchemaState) -> Row:
    if state.is_current:
        return Row("Database", Result.OK, state.describe())
    script = ScriptDirectory(str(migrations_location()))
    unknown = set(state.current) - {r.revision for r in script.walk_revisions()}
    if unknown:  # `db upgrade` cannot help: Alembic cannot find the revision to start from
        detail = (
            f"{state.describe()}, and {', '.join(sorted(unknown))} is unknown to this "
            "backfill-bot: a newer version migrated it"
        )
        return Row("Database", Result.FAIL, detail, "run the backfill-bot version that did")
    return Row("Database", Result.FAIL, state.describe(), UPGRADE_FIX)


# -- the lineage index ------------------------------------------------------------------------

INDEX_CHECK = "Lineage index"


async def index_row(engine: AsyncEngine, settings: IndexSettings) -> Row:
    if not settings.enabled:
        return Row(INDEX_CHECK, Result.SKIP, "index.enabled is false: plans crawl Marquez")
    async with session_factory(engine)() as session:
        progress = await read_progress(session)
    detail = describe(progress, settings, utcnow())
    if detail["state"] == "behind":
        fix = "look at serve's log for the reconcile's error, and check that Marquez answers"
        return Row(INDEX_CHECK, Result.WARN, detail["summary"], fix)
    if detail["state"] == "loading" and not progress.reconciling(utcnow()):
        return Row(
            INDEX_CHECK,
            Result.OK,
            "empty: no serve has read Marquez's catalog yet (serve does at start; plans "
            "fetch what they need meanwhile)",
        )
    return Row(INDEX_CHECK, Result.OK, detail["summary"])
