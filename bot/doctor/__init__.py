"""`backfill-bot doctor`: check the settings and BOT_CONFIG against Slack, Marquez, Airflow, the
Spark master (bot/doctor/spark.py), the database and the sinks, and print one row per check
with its result and, for each problem, the fix. Sinks are reached without being sent anything
(bot/doctor/sinks.py).

Exit code: 0 when every check is OK, WARN or SKIP; 1 when any is FAIL. The checks run side by
side and each stands alone: Slack down does not stop the Marquez check. A check that breaks in a
way nobody foresaw is a FAIL row too (its traceback is logged at debug level, for --debug),
never a traceback on the terminal.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Awaitable, Mapping
from typing import TextIO

from bot.core.db import redact
from bot.core.logs import escaped
from bot.doctor.checks import (
    Result,
    Row,
    airflow_rows,
    config_row,
    database_rows,
    load_dags,
    marquez_rows,
)
from bot.doctor.sinks import sink_rows
from bot.doctor.slack import slack_rows
from bot.doctor.spark import spark_rows
from bot.settings import Settings

__all__ = ["EXIT_PROBLEMS", "Result", "Row", "add_parser", "check", "main", "render"]

logger = logging.getLogger(__name__)
EXIT_PROBLEMS = 1
CHECK_TIMEOUT_S = 120.0  # a system that neither answers nor refuses (a firewall drops packets)
CELL_LIMIT = 600  # characters of one cell: outside text (error bodies, DAG ids) may be huge
CHECK_WIDTH = 44


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    commands.add_parser(
        "doctor",
        help="check the settings and BOT_CONFIG against Slack, Marquez, Airflow, the Spark "
        "master, the database and the sinks",
        description="Check the settings and BOT_CONFIG against the real systems; one row per "
        "check, with the fix for each problem. Exit code 1 when any check FAILs (WARN is 0).",
    )


async def _guarded(name: str, checks: Awaitable[list[Row]]) -> list[Row]:
    try:
        return await asyncio.wait_for(checks, CHECK_TIMEOUT_S)
    except TimeoutError:
        detail = f"no answer within {CHECK_TIMEOUT_S:.0f} s"
        return [Row(name, Result.FAIL, detail, f"check that {name} is reachable from here")]
    except Exception as exc:  # one broken check must not hide the others' rows
        logger.debug("doctor: the %s check failed", name, exc_info=True)
        detail = f"the check broke: {type(exc).__name__}: {exc}"
        return [Row(name, Result.FAIL, detail, "rerun with --debug for the traceback")]


async def check(settings: Settings, environ: Mapping[str, str] | None = None) -> list[Row]:
    """Every check's rows, in a fixed order (`environ` fills BOT_CONFIG's `${VAR}`s)."""
    config, first = config_row(settings, environ)
    catalog = asyncio.create_task(load_dags(settings))
    try:
        found = await asyncio.gather(
            _guarded("Slack", slack_rows(settings, config)),
            _guarded("Marquez", marquez_rows(settings, config, catalog)),
            _guarded("Airflow", airflow_rows(settings, config, catalog)),
            _guarded("Spark", spark_rows(settings)),
            _guarded("Database", database_rows(settings, config)),
            _guarded("Sinks", sink_rows(settings, config)),
        )
    finally:
        if not catalog.done():  # a check that timed out may leave it running
            catalog.cancel()
    return [first, *(row for rows in found for row in rows)]


def shown(text: str, limit: int = CELL_LIMIT) -> str:
    """`text` safe for a terminal: control and format characters (escape sequences, newlines,
    bidi overrides) written as escapes, and cut to `limit` characters."""
    safe = escaped(text)
    return safe if len(safe) <= limit else safe[: limit - 1] + "…"


def render(rows: list[Row]) -> str:
    width = min(CHECK_WIDTH, max(len("CHECK"), *(len(shown(r.check)) for r in rows)))
    pad = " " * (width + 2 + 6 + 2)
    lines = [f"{'CHECK':<{width}}  {'RESULT':<6}  DETAIL"]
    for row in rows:
        name = shown(row.check)  # longer than the column: the row shifts, nothing is cut
        lines.append(f"{name:<{width}}  {row.result.value:<6}  {shown(row.detail)}")
        if row.fix and row.result in (Result.FAIL, Result.WARN):
            lines.append(f"{pad}fix: {shown(row.fix)}")
    failed = sum(r.result == Result.FAIL for r in rows)
    warned = sum(r.result == Result.WARN for r in rows)
    warnings = "1 warning" if warned == 1 else f"{warned} warnings"
    if failed:
        lines.append(f"\n{failed} failed, {warnings}: fix the FAIL rows above.")
    elif warned:
        lines.append(f"\nNothing failed; {warnings}.")
    else:
        lines.append("\nEverything checks out.")
    return "\n".join(lines) + "\n"


def main(
    settings: Settings, out: TextIO | None = None, environ: Mapping[str, str] | None = None
) -> int:
    """Run every check, print the table to `out` (stdout), and return the exit code."""
    rows = asyncio.run(check(settings, environ))
    text = redact(render(rows), settings.database_url)  # no row may show the database password
    (out or sys.stdout).write(text)
    return EXIT_PROBLEMS if any(r.result == Result.FAIL for r in rows) else 0
