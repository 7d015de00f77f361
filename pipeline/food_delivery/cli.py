"""Command line: `python -m pipeline.food_delivery run|full ...` (what the Airflow tasks call).

Exit status: 0 success, 1 a run failed (one line on stderr), 2 bad arguments. Arguments are
checked before Spark starts, so a typo costs milliseconds, not a JVM start. Spark logs to
stderr only; stdout gets one summary line per run.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, date, datetime
from pathlib import Path

from pipeline.food_delivery.catalog import JOBS, periods_of
from pipeline.food_delivery.jobs import JobFailed, PipelineSettings, parse_dates, run_interval
from pipeline.food_delivery.runs import Outcome, full_plan, run_stages
from pipeline.food_delivery.session import shared_session


def _instant(text: str) -> datetime:
    """An ISO 8601 time; without a zone it is UTC (a bare date is its midnight)."""
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 time: {text!r}") from None
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _day(text: str) -> date:
    try:
        return date.fromisoformat(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a date (YYYY-MM-DD): {text!r}") from None


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--warehouse", type=Path, help="default $FOOD_DELIVERY_WAREHOUSE")
    common.add_argument(
        "--lineage-url",
        help="OpenLineage base URL, '' for none (default $FOOD_DELIVERY_LINEAGE_URL or "
        "$OPENLINEAGE_URL)",
    )
    common.add_argument(
        "--fail-dates", help="days the order load fails, e.g. 2021-06-04,2021-06-05"
    )
    common.add_argument("--empty-dates", help="days the order load gets no orders and writes none")
    common.add_argument("--orders-per-day", type=int, help="default 300")
    common.add_argument("--master", help="Spark master (default $SPARK_MASTER or local[*])")
    parser = argparse.ArgumentParser(
        prog="python -m pipeline.food_delivery", description="The food_delivery example jobs."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", parents=[common], help="run one DAG for one interval")
    run.add_argument("dag", help=", ".join(JOBS))
    run.add_argument("--start", required=True, type=_instant, help="interval start (ISO 8601)")
    run.add_argument("--end", required=True, type=_instant, help="interval end (ISO 8601)")
    full = commands.add_parser(
        "full", parents=[common], help="run every DAG for every interval over some days"
    )
    full.add_argument("--from", dest="first", required=True, type=_day)
    full.add_argument("--to", dest="last", required=True, type=_day)
    full.add_argument("--parallel", type=int, default=1, help="runs at a time (default 1)")
    return parser


def _settings(args: argparse.Namespace, environ: Mapping[str, str]) -> PipelineSettings:
    settings = PipelineSettings.from_env(environ)
    if args.warehouse is not None:
        settings = replace(settings, warehouse=args.warehouse.absolute())
    if args.lineage_url is not None:
        settings = replace(settings, lineage_url=args.lineage_url.strip() or None)
    if args.fail_dates is not None:
        settings = replace(settings, fail_dates=parse_dates(args.fail_dates))
    if args.empty_dates is not None:
        settings = replace(settings, empty_dates=parse_dates(args.empty_dates))
    if args.orders_per_day is not None:
        if args.orders_per_day < 1:
            raise ValueError("--orders-per-day must be at least 1")
        settings = replace(settings, orders_per_day=args.orders_per_day)
    return settings


def _one_line(text: str) -> str:
    return " ".join(text.split())


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse has printed why
        return exc.code if isinstance(exc.code, int) else 2
    if not logging.getLogger().handlers:
        logging.basicConfig(
            level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s"
        )
    try:
        settings = _settings(args, os.environ if environ is None else environ)
        if args.command == "run":
            job = JOBS.get(args.dag)
            if job is None:
                raise ValueError(f"unknown DAG {args.dag!r}; choose from {', '.join(JOBS)}")
            periods_of(job, args.start, args.end)
        elif args.first > args.last or args.parallel < 1:
            raise ValueError("--from must not be after --to, and --parallel must be at least 1")
    except ValueError as exc:
        parser.print_usage(sys.stderr)
        print(f"{parser.prog}: error: {_one_line(str(exc))}", file=sys.stderr)
        return 2
    # One process per run (an Airflow task): the JVM's quick compiler alone warms up sooner.
    os.environ.setdefault("FOOD_DELIVERY_JAVA_OPTIONS", "-XX:TieredStopAtLevel=1")
    spark = shared_session(args.master)
    if args.command == "run":
        try:
            result = run_interval(spark, args.dag, args.start, args.end, settings)
        except JobFailed as exc:
            interval = f"[{args.start.isoformat()}, {args.end.isoformat()})"
            print(f"error: {args.dag} {interval} failed: {_one_line(str(exc))}", file=sys.stderr)
            return 1
        print(result.summary(), flush=True)
        return 0
    printing = threading.Lock()  # parallel runs report from several threads

    def report(outcome: Outcome) -> None:
        run = outcome.run
        line = (
            outcome.result.summary()
            if outcome.result
            else f"FAILED {run.dag} [{run.start.isoformat()}, {run.end.isoformat()}): "
            + _one_line(outcome.error or "")
        )
        with printing:
            print(line, flush=True)

    outcomes = run_stages(
        spark, full_plan(args.first, args.last), settings, parallel=args.parallel, on_outcome=report
    )
    failed = [o for o in outcomes if not o.ok]
    if failed:
        print(f"error: {len(failed)} of {len(outcomes)} runs failed", file=sys.stderr)
        return 1
    return 0
