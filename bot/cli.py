"""The `backfill-bot` command. The only module that reads the process environment."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import importlib.util
import json
import logging
import os
import signal
import socket
import sys
import traceback
from collections.abc import Awaitable, Sequence
from importlib import metadata
from typing import NoReturn, TypeVar

import bot.schema  # noqa: F401  (every table registered before a session is made)
from bot import doctor
from bot.clients.marquez import MarquezClient, MarquezError, MarquezUnavailable
from bot.config import BotConfig, load_config
from bot.config.base import ConfigError
from bot.core.logs import configure
from bot.core.progress import with_notice
from bot.events import cli as events_cli
from bot.lineage.messages import render_impact_text, render_plan_text, still_asking_text
from bot.lineage.rules.errors import PlanningError
from bot.lineage.rules.planner import PlanError
from bot.lineage.rules.ranges import RangeError
from bot.lineage.service.catalog import AmbiguousDag, TaskNotDag, UnknownDag
from bot.lineage.service.planning import Planner, PlanRequest
from bot.settings import (
    Settings,
    SettingsError,
    describe_variables,
    load_log_format,
    load_settings,
)

T = TypeVar("T")
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_MARQUEZ = 3
EXIT_CONFIG = 4
EXIT_DATA = 5


class CliError(Exception):
    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="backfill-bot",
        description="Plan lineage-aware backfills of Airflow DAGs from Marquez.",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks and debug logs")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def marquez_options(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("--namespace", help="Marquez namespace of the DAG (default: search all)")
        sub.add_argument("--marquez-url", help="Marquez base URL (default: $MARQUEZ_URL)")
        sub.add_argument("--json", action="store_true", help="print one JSON object")

    plan = commands.add_parser("plan", help="print the backfill plan for a DAG and date range")
    plan.add_argument("dag", metavar="DAG", help="DAG id, e.g. example.etl_orders")
    plan.add_argument("range", metavar="START..END", help="inclusive ISO dates, or one date")
    plan.add_argument("--only", action="store_true", help="this DAG only, nothing downstream")
    plan.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="DAG[,DAG]",
        help="skip DAGs (and what is downstream only through them); repeatable",
    )
    marquez_options(plan)

    impact = commands.add_parser("impact", help="print what is downstream of a DAG")
    impact.add_argument("dag", metavar="DAG")
    marquez_options(impact)

    standin = commands.add_parser("standin", help="run a local stand-in of an external service")
    services = standin.add_subparsers(dest="service", required=True, metavar="SERVICE")
    marquez = services.add_parser("marquez", help="a Marquez 0.51 API stand-in")
    marquez.add_argument("--host", default="127.0.0.1")
    marquez.add_argument("--port", type=int, default=5000)
    marquez.add_argument("--seed", choices=["food_delivery"], help="load sample lineage")
    marquez.add_argument(
        "--latency",
        action="append",
        default=[],
        type=_latency,
        metavar="ROUTE=SECONDS",
        help="answer ROUTE this much later, as a big Marquez does (lineage=15, jobs=2, *=1; "
        "repeatable)",
    )

    commands.add_parser(
        "serve",
        help="run the Slack bot (HTTP on BOT_HOST:BOT_PORT, Socket Mode with SLACK_APP_TOKEN)",
        description="Run the Slack bot: HTTP on BOT_HOST:BOT_PORT (POST /slack/events, "
        "POST /api/v1/lineage, GET /healthz, GET /readyz, GET /metrics), or Socket Mode when "
        "SLACK_APP_TOKEN is set. Migrates DATABASE_URL at start-up; SIGTERM or Ctrl-C shuts "
        "it down cleanly.",
        epilog=_environment_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )

    slack = services.add_parser("slack", help="a Slack Web API stand-in")
    slack.add_argument("--host", default="127.0.0.1")
    slack.add_argument("--port", type=int, default=3001)
    slack.add_argument(
        "--events-url", help="the bot's Request URL, e.g. http://127.0.0.1:3000/slack/events"
    )
    slack.add_argument(
        "--bad-day",
        type=int,
        metavar="SEED",
        help="misbehave like Slack's edge on a bad day, reproducibly for SEED: 429s, 5xx, "
        "resets, hangs and answers lost after posting, on about a quarter of chat.* calls",
    )

    airflow = services.add_parser(
        "airflow", help="an Airflow REST API stand-in with the food_delivery DAGs"
    )
    airflow.add_argument("--host", default="127.0.0.1")
    airflow.add_argument("--port", type=int, default=8080)
    airflow.add_argument(
        "--api", type=int, choices=[2, 3], default=3, help="3: /api/v2 (Airflow 3); 2: /api/v1"
    )
    airflow.add_argument("--run-seconds", type=float, default=2.0, help="how long each run takes")

    db = commands.add_parser("db", help="database maintenance")
    db_actions = db.add_subparsers(dest="action", required=True, metavar="ACTION")
    db_actions.add_parser("upgrade", help="apply migrations to $DATABASE_URL")

    events_cli.add_parser(commands)
    doctor.add_parser(commands)

    demo = commands.add_parser(
        "demo",
        help="play the whole story (a failure, the alert, a backfill, an SLA miss) on stand-ins "
        "and leave the workspace open in a browser page",
    )
    demo.add_argument(
        "--headless",
        action="store_true",
        help="print the workspace's final transcript and exit (non-zero if the story stops short)",
    )
    demo.add_argument(
        "--port",
        type=_port,
        default=3001,
        help="the page's port (any free one if it is taken; 0: any free one)",
    )
    commands.add_parser(
        "chat", help="like demo, but you type /backfill commands and click buttons yourself"
    )
    return parser


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port (0 to 65535)")
    return port


def _version() -> str:
    try:
        return metadata.version("backfill-bot")
    except metadata.PackageNotFoundError:  # imported from a source tree that was never installed
        return "(not installed)"


def _environment_help() -> str:
    lines = ["environment variables (all optional; read at start-up):"]
    for name, default, meaning in describe_variables():
        lines += [f"  {name} (default: {default})", f"      {meaning}"]
    return "\n".join(lines)


def _settings(args: argparse.Namespace) -> Settings:
    try:
        return load_settings(os.environ, marquez_url=getattr(args, "marquez_url", None))
    except SettingsError as exc:
        message = str(exc)
        if getattr(args, "marquez_url", None):
            message = message.replace("MARQUEZ_URL:", "--marquez-url:")
        raise CliError(message, EXIT_CONFIG) from None


def _config(settings: Settings) -> BotConfig:
    try:
        return load_config(settings.bot_config, os.environ)
    except ConfigError as exc:
        raise CliError(str(exc), EXIT_CONFIG) from None


def _latency(text: str) -> tuple[str, float]:
    route, sep, seconds = text.partition("=")
    try:
        value = float(seconds) if sep else -1.0
    except ValueError:
        value = -1.0
    if not route or not 0 <= value <= 600:
        raise argparse.ArgumentTypeError(f"expected ROUTE=SECONDS (0 to 600), got {text!r}")
    return route, value


def _client(settings: Settings) -> MarquezClient:
    key = settings.marquez_api_key.get_secret_value() if settings.marquez_api_key else None
    return MarquezClient(
        settings.marquez_url,
        api_key=key,
        timeout_s=settings.marquez_timeout_s,
        lineage_timeout_s=settings.marquez_lineage_timeout_s,
    )


async def _plan(args: argparse.Namespace, settings: Settings, config: BotConfig) -> str:
    exclude = tuple(name for item in args.exclude for name in item.split(","))
    request = PlanRequest(args.dag, args.range, args.namespace, args.only, exclude)
    async with _client(settings) as client:
        planner = Planner(client, config, default_namespace=settings.marquez_namespace)
        plan = await _told_when_slow(planner.plan(request), args.dag, config)
    if args.json:
        return json.dumps(plan.to_json(), indent=2, ensure_ascii=False)
    return render_plan_text(plan)


async def _told_when_slow(work: Awaitable[T], dag: str, config: BotConfig) -> T:
    async def say() -> None:
        print(still_asking_text(dag), file=sys.stderr, flush=True)

    return await with_notice(work, after_s=config.limits.still_planning_s, notice=say)


async def _impact(args: argparse.Namespace, settings: Settings, config: BotConfig) -> str:
    async with _client(settings) as client:
        planner = Planner(client, config, default_namespace=settings.marquez_namespace)
        impact = await _told_when_slow(planner.impact(args.dag, args.namespace), args.dag, config)
    if args.json:
        from bot.lineage.messages import impact_view

        return json.dumps(impact_view(impact), indent=2, ensure_ascii=False)
    return render_impact_text(impact)


DEMO_EXTRA = "pip install 'backfill-bot[demo]'"


def _needs_standins(command: str) -> None:
    """The stand-ins ship apart from the bot (the `demo` extra); without them, one line."""
    if importlib.util.find_spec("standins") is None:
        raise CliError(f"`{command}` needs the stand-ins: {DEMO_EXTRA}", EXIT_CONFIG)


def _run(args: argparse.Namespace) -> str | None:
    if args.command in {"standin", "demo", "chat"}:
        _needs_standins(f"backfill-bot {args.command}")
    if args.command == "standin" and args.service == "slack":
        from standins.slack import server as slack
        from standins.slack.faults import BadDay

        bad_day = None if args.bad_day is None else BadDay.typical(args.bad_day)
        asyncio.run(
            slack.serve_forever(args.host, args.port, events_url=args.events_url, bad_day=bad_day)
        )
        return None
    if args.command == "standin" and args.service == "airflow":
        from standins.airflow import server as airflow

        asyncio.run(airflow.serve_forever(args.host, args.port, args.api, args.run_seconds))
        return None
    if args.command == "standin":
        from standins.marquez.server import LATENCY_ROUTES, serve_forever

        unknown = sorted({route for route, _ in args.latency} - {*LATENCY_ROUTES, "*"})
        if unknown:
            known = ", ".join([*LATENCY_ROUTES, "*"])
            raise CliError(
                f"--latency: unknown route {unknown[0]!r} (one of {known})", EXIT_BAD_INPUT
            )
        asyncio.run(serve_forever(args.host, args.port, args.seed, dict(args.latency)))
        return None
    settings = _settings(args)
    if args.command == "db":
        from bot.core.db import describe_url, upgrade

        upgrade(settings.database_url)
        return f"Database at {describe_url(settings.database_url)} is at the latest migration."
    if args.command == "events":
        problem = events_cli.check(args)
        if problem:
            raise CliError(problem, EXIT_BAD_INPUT)
        return asyncio.run(events_cli.run(args, settings.database_url))
    if args.command == "doctor":  # before _config: doctor reports a bad BOT_CONFIG as a row
        sys.exit(doctor.main(settings, environ=os.environ))
    config = _config(settings)
    if args.command == "plan":
        return asyncio.run(_plan(args, settings, config))
    if args.command == "impact":
        return asyncio.run(_impact(args, settings, config))
    if args.command == "serve":
        from bot.serving import CannotListen, SetupError

        try:
            _check_address(settings.bot_host, settings.bot_port)
        except OSError as exc:
            raise CliError(_listen_error(settings, exc), EXIT_CONFIG) from None
        try:
            asyncio.run(_serve(settings, config))
        except SetupError as exc:
            raise CliError(str(exc), EXIT_CONFIG) from None
        except CannotListen as exc:  # the port was taken after the check above
            raise CliError(_listen_error(settings, exc.error), EXIT_CONFIG) from None
        except asyncio.CancelledError:  # SIGTERM: the bot shut down cleanly, as asked
            return None
        return None
    if args.command in {"demo", "chat"}:

        def out(text: str) -> None:
            end = "" if text.endswith("> ") else "\n"
            sys.stdout.write(text + end)
            sys.stdout.flush()

        try:
            if args.command == "chat":
                from standins.demo.chat import interactive

                asyncio.run(interactive(settings, config, out))
                return None
            from standins.demo.story import scripted

            finished = asyncio.run(
                scripted(
                    settings, config, out, headless=args.headless, port=args.port,
                    ansi=sys.stdout.isatty(),
                )
            )  # fmt: skip
        except KeyboardInterrupt:  # Ctrl-C is how a person ends the demo
            return None
        if not finished:
            raise CliError("the demo's story stopped short (see above)", EXIT_FAILED)
        return None
    raise CliError(f"unknown command {args.command}", EXIT_BAD_INPUT)


async def _serve(settings: Settings, config: BotConfig) -> None:
    from bot.serving import serve

    main = asyncio.current_task()
    if main is not None:
        # A PaaS (and systemd, and docker stop) stops the bot with SIGTERM: shut down as on
        # Ctrl-C, letting work in flight finish, instead of dying mid-transaction.
        with contextlib.suppress(NotImplementedError):  # no loop signal handlers on Windows
            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, main.cancel)
    await serve(settings, config)


def _check_address(host: str, port: int) -> None:
    """Bind BOT_HOST:BOT_PORT and let go, as aiohttp will: a taken port is then one line before
    anything starts (migrations, polling). `serve` still handles a port taken meanwhile."""
    for family, kind, proto, _, address in socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    ):
        with socket.socket(family, kind, proto) as probe:
            # What asyncio's create_server does: without V6ONLY, `::` would also claim the IPv4
            # port and be "in use" wherever only that is held, though aiohttp can listen.
            if os.name == "posix":
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6 and hasattr(socket, "IPPROTO_IPV6"):
                probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            probe.bind(address)


def _listen_error(settings: Settings, exc: OSError) -> str:
    """One line for an address `serve` cannot listen on, naming what to set when it can."""
    host, port = settings.bot_host, settings.bot_port
    if exc.errno == errno.EADDRINUSE:
        return f"port {port} on {host} is in use (set BOT_PORT to a free port)"
    if exc.errno == errno.EACCES:
        return f"cannot listen on {host}:{port}: permission denied (set BOT_PORT above 1023)"
    if exc.errno == errno.EADDRNOTAVAIL or isinstance(exc, socket.gaierror):
        return (
            f"cannot listen on {host}:{port}: {host} is not an address of this machine "
            "(set BOT_HOST, e.g. 0.0.0.0 or 127.0.0.1)"
        )
    return f"cannot listen on {host}:{port}: {exc.strerror or exc}"


def _fail(message: str, code: int) -> NoReturn:
    database = os.environ.get("DATABASE_URL")
    if database:  # whatever raised it, the error line never shows the database password
        from bot.core.db import redact

        message = redact(message, database)
    print(f"backfill-bot: error: {message}", file=sys.stderr)
    sys.exit(code)


def main(argv: Sequence[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    # One-shot commands promise one clear line on failure, so retries stay quiet unless asked.
    quiet = logging.INFO if args.command in {"standin", "serve"} else logging.ERROR
    if args.command in {"demo", "chat"}:
        quiet = logging.CRITICAL  # the transcript is the output
    try:
        # Read on its own: logging starts before the other settings are (standin never reads them).
        log_format = load_log_format(os.environ)
    except SettingsError as exc:
        _fail(str(exc), EXIT_CONFIG)
    configure(logging.DEBUG if args.debug else quiet, fmt=log_format)
    try:
        output = _run(args)
    except CliError as exc:
        _fail(str(exc), exc.code)
    except (RangeError, UnknownDag, AmbiguousDag, TaskNotDag, PlanError) as exc:
        _fail(str(exc), EXIT_BAD_INPUT)
    except MarquezUnavailable as exc:
        _fail(f"{exc} (set MARQUEZ_URL or --marquez-url)", EXIT_MARQUEZ)
    except MarquezError as exc:
        _fail(f"Marquez answered badly: {exc}", EXIT_MARQUEZ)
    except PlanningError as exc:  # a cycle, a schedule, or any planning failure to come
        _fail(str(exc), EXIT_DATA)
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as exc:  # the promise is one clear line, never a traceback
        if args.debug:
            traceback.print_exc()
        from bot.core.db import DatabaseError

        if isinstance(exc, DatabaseError):  # one line, naming the database without its password
            _fail(str(exc), 1)
        _fail(f"unexpected {type(exc).__name__}: {exc} (rerun with --debug for details)", 1)
    if output is not None:
        sys.stdout.write(output if output.endswith("\n") else output + "\n")
