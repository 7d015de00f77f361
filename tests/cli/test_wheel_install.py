"""backfill-bot built as a wheel, installed into a new venv and run from outside the repository:
the wheel carries its templates, migrations and example config, and its commands (plan,
impact, db upgrade, events list, doctor, serve, demo and the three stand-ins) work with nothing
from the checkout. The stand-ins are a wheel of their own (standins/pyproject.toml), brought by
the `demo` extra: without it, `demo` and `standin` answer with one line naming the extra.

Building and installing needs a package index (pip's cache makes it quick). Without one the
tests skip locally, but fail under CI=true, so CI can never go green by skipping them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tomllib
import zipfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest

REPO = Path(__file__).resolve().parents[2]
ROOT = "example.etl_orders"
DOWNSTREAM = [
    "example.etl_orders_7_days",
    "example.etl_delivery_7_days",
    "example.delivery_times_7_days",
]
# What the copy to build from leaves out: caches, environments, earlier builds, and what only
# the repository needs (tests, benchmarks, docs).
NOT_SOURCE = (
    ".git", ".venv*", "var", "build", "dist", "*.egg-info", "__pycache__", "*.pyc",
    ".mypy_cache", ".ruff_cache", ".pytest_cache", ".hypothesis", "tests", "bench", "docs",
)  # fmt: skip
OFFLINE = re.compile(
    r"No matching distribution found|Could not find a version that satisfies|"
    r"NewConnectionError|Failed to establish a new connection|"
    r"Temporary failure in name resolution|Network is unreachable",
)
APP_VARIABLES = (
    "MARQUEZ_", "DATABASE_", "BOT_", "SLACK_", "AIRFLOW_", "SPARK_", "OPENLINEAGE_", "LOG_FORMAT",
)  # fmt: skip


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in {"", "0", "false", "no"}


def clean_env() -> dict[str, str]:
    """The environment without the bot's settings and anything that could point Python at the
    checkout (PYTHONPATH, an activated venv)."""
    return {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(APP_VARIABLES)
        and key not in {"PORT", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"}
    }


def pip(*args: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", *args],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if result.returncode == 0:
        return
    output = result.stdout + result.stderr
    offline = OFFLINE.search(output)
    if offline and not in_ci():
        line = next(line for line in output.splitlines() if offline.group() in line)
        pytest.skip(f"pip cannot reach a package index: {line.strip()[:160]}")
    pytest.fail(f"pip {' '.join(args[:3])} … failed:\n{output[-4000:]}")


@dataclass
class Result:
    code: int
    out: str
    err: str


@dataclass(frozen=True)
class Installed:
    venv: Path
    wheel: Path
    standins_wheel: Path
    workdir: Path  # outside the repository: nothing there for Python to find by accident
    scratch: Path
    without_demo: dict[str, Result]
    """What `backfill-bot demo`, `chat` and `standin marquez` answered before the extra."""

    def command(self, name: str) -> str:
        return str(self.venv / "bin" / name)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    root = tmp_path_factory.mktemp("wheel")
    source = root / "source"
    # Build from a copy: an in-tree build writes build/ and *.egg-info into the checkout, and a
    # build/lib left from an earlier build would carry deleted files into the wheel.
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(*NOT_SOURCE))
    dist = root / "dist"
    pip("wheel", "--no-deps", "--wheel-dir", str(dist), str(source))
    pip("wheel", "--no-deps", "--wheel-dir", str(dist), str(source / "standins"))
    [wheel] = dist.glob("backfill_bot-*.whl")
    [standins_wheel] = dist.glob("backfill_bot_standins-*.whl")
    venv = root / "venv"
    # A new venv without --system-site-packages; pip installs into it from this one (--python),
    # which saves bootstrapping a second pip.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    constraints = str(REPO / "constraints.txt")
    pip("--python", python, "install", "-c", constraints, str(wheel))
    (root / "elsewhere").mkdir()
    (root / "scratch").mkdir()
    without_demo = {
        " ".join(args): _run_now(venv, root / "elsewhere", *args)
        for args in (("demo", "--headless"), ("chat",), ("standin", "marquez"))
    }
    # The extra, as a user adds it: the stand-ins' wheel found beside the bot's.
    pip("--python", python, "install", "-c", constraints, "--find-links", str(dist),
        f"{wheel}[demo]")  # fmt: skip
    return Installed(
        venv, wheel, standins_wheel, root / "elsewhere", root / "scratch", without_demo
    )


def _run_now(venv: Path, cwd: Path, *args: str) -> Result:
    done = subprocess.run(
        [str(venv / "bin" / "backfill-bot"), *args], cwd=cwd, env=clean_env(),
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    return Result(done.returncode, done.stdout, done.stderr)


async def run(installed: Installed, *args: str, **env: str) -> Result:
    process = await asyncio.create_subprocess_exec(
        installed.command("backfill-bot"), *args,
        cwd=installed.workdir, env={**clean_env(), **env},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), timeout=120)
    assert process.returncode is not None
    return Result(process.returncode, out.decode(), err.decode())


@dataclass(frozen=True)
class Upgraded:
    """A SQLite database `db upgrade` made, and what the command printed."""

    path: Path
    result: Result

    @property
    def url(self) -> str:
        return f"sqlite:///{self.path}"


@pytest.fixture(scope="module")
def upgraded(installed: Installed) -> Upgraded:
    # Once for the module (the tests that read the schema share it); a plain subprocess, as a
    # module-scoped fixture has no event loop to run `run` on.
    path = installed.scratch / "upgrade" / "bot.db"
    done = subprocess.run(
        [installed.command("backfill-bot"), "db", "upgrade"],
        cwd=installed.workdir, env={**clean_env(), "DATABASE_URL": f"sqlite:///{path}"},
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    return Upgraded(path, Result(done.returncode, done.stdout, done.stderr))


@asynccontextmanager
async def running(
    installed: Installed, *args: str, log: Path, **env: str
) -> AsyncIterator[tuple[asyncio.subprocess.Process, str]]:
    """A long-running `backfill-bot` command and the first line it prints (where it listens);
    its stderr goes to `log`, so a chatty process never blocks on a full pipe."""
    with log.open("wb") as stderr:
        process = await asyncio.create_subprocess_exec(
            installed.command("backfill-bot"), *args,
            cwd=installed.workdir, env={**clean_env(), **env},
            stdout=asyncio.subprocess.PIPE, stderr=stderr,
        )  # fmt: skip
        try:
            assert process.stdout is not None
            line = (await asyncio.wait_for(process.stdout.readline(), timeout=60)).decode()
            assert line, await asyncio.to_thread(log.read_text)
            yield process, line.strip()
        finally:
            with contextlib.suppress(ProcessLookupError):  # it may have exited already
                process.terminate()
            await asyncio.wait_for(process.wait(), timeout=30)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def url_in(line: str) -> str:
    found = re.search(r"https?://\S+", line)
    assert found, line
    return found.group()


def test_the_wheel_carries_every_module_templates_migrations_and_the_example(
    installed: Installed,
) -> None:
    with zipfile.ZipFile(installed.wheel) as wheel:
        shipped = set(wheel.namelist())
    with zipfile.ZipFile(installed.standins_wheel) as wheel:
        standins = set(wheel.namelist())

    def files(folder: str, pattern: str, prefix: str = "") -> set[str]:
        found = (REPO / folder).rglob(pattern)
        return {
            prefix + p.relative_to(REPO).as_posix()
            for p in found
            if p.is_file() and "__pycache__" not in p.parts
        }

    expected = {"bot/py.typed"}
    for top in ("bot", "handlers", "pipeline"):
        expected |= files(top, "*.py")
    for folder in ("templates", "migrations", "examples"):  # shipped inside bot/
        expected |= files(folder, "[!.]*", prefix="bot/")
    assert {"bot/templates/lineage/plan.txt.j2", "bot/migrations/env.py"} <= expected
    assert sorted(expected - shipped) == []
    # The stand-ins and the demo are not the product: they ship in their own wheel.
    assert sorted(name for name in shipped if name.startswith("standins/")) == []
    carried = files("standins", "*.py") | files("standins/seeds/data", "[!.]*")
    carried |= files("standins/slack/static", "[!.]*")
    assert {"standins/slack/static/index.html", "standins/demo/run.py"} <= carried
    assert sorted(carried - standins) == []


def test_without_the_demo_extra_demo_and_the_standins_name_it(installed: Installed) -> None:
    for command, result in installed.without_demo.items():
        assert result.code == 4, (command, result)
        assert result.out == "", (command, result)
        name = command.split()[0]
        assert result.err == (
            f"backfill-bot: error: `backfill-bot {name}` needs the stand-ins: "
            "pip install 'backfill-bot[demo]'\n"
        ), (command, result)


async def test_the_installed_bot_reads_its_files_from_the_install(installed: Installed) -> None:
    script = (
        "import bot.core.db, bot.core.resources, bot.core.templates\n"
        "example = bot.core.resources.resource_dir('bot.examples') / 'bot-config.yml'\n"
        "print(bot.core.templates.TEMPLATES, bot.core.db.MIGRATIONS_DIR, example)\n"
    )
    process = await asyncio.create_subprocess_exec(
        installed.command("python"), "-c", script, cwd=installed.workdir, env=clean_env(),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode == 0, err.decode()
    templates, migrations, example = (Path(p) for p in out.decode().split())
    for path in (templates, migrations, example):
        assert path.is_relative_to(installed.venv), path
    assert (templates / "lineage" / "plan.txt.j2").is_file()
    assert (migrations / "versions").is_dir()
    assert example.is_file()


async def test_version_is_the_packaged_one(installed: Installed) -> None:
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    result = await run(installed, "--version")
    assert (result.code, result.out, result.err) == (0, f"backfill-bot {version}\n", "")


async def test_plan_and_impact_against_the_installed_marquez_standin(
    installed: Installed,
) -> None:
    port = free_port()
    log = installed.scratch / "marquez-plan.log"
    args = ("standin", "marquez", "--seed", "food_delivery", "--port", str(port))
    async with running(installed, *args, log=log) as (_, line):
        marquez = url_in(line)
        assert marquez == f"http://127.0.0.1:{port}"
        plan = await run(installed, "plan", ROOT, "2021-06-04..2021-06-06", "--json",
                         "--marquez-url", marquez)  # fmt: skip
        assert plan.code == 0, plan.err
        names = [step["dag_id"] for step in json.loads(plan.out)["steps"]]
        assert names[0] == ROOT
        assert [name for name in names if name in DOWNSTREAM] == DOWNSTREAM
        # The text plan renders templates/lineage/plan.txt.j2 from the installed package.
        text = await run(installed, "plan", ROOT, "2021-06-04", "--marquez-url", marquez)
        assert text.code == 0, text.err
        assert ROOT in text.out
        assert DOWNSTREAM[0] in text.out
        impact = await run(installed, "impact", ROOT, "--json", "--marquez-url", marquez)
        assert impact.code == 0, impact.err
        found = json.loads(impact.out)
        assert found["root"] == ROOT
        below = [dag["dag_id"] for dag in found["downstream"]]
        assert [name for name in below if name in DOWNSTREAM] == DOWNSTREAM


def test_db_upgrade_applies_the_installed_migrations(upgraded: Upgraded) -> None:
    result = upgraded.result
    assert result.code == 0, result.err
    assert "latest migration" in result.out
    with sqlite3.connect(upgraded.path) as conn:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
        [(revision,)] = conn.execute("SELECT version_num FROM alembic_version").fetchall()
    assert {"backfill_requests", "backfill_steps", "audit_log", "alembic_version"} <= tables
    newest = max((REPO / "migrations" / "versions").glob("[0-9]*.py")).name
    assert newest.startswith(revision), (revision, newest)


async def test_events_list_reads_the_upgraded_database(
    installed: Installed, upgraded: Upgraded
) -> None:
    database = installed.scratch / "events" / "bot.db"
    database.parent.mkdir()
    shutil.copy(upgraded.path, database)  # its own copy: the shared one stays as migrated
    with contextlib.closing(sqlite3.connect(database)) as conn, conn:
        # A run event the watcher set aside, as the running bot leaves one (SQLite keeps UTC
        # wall time).
        conn.execute(
            "INSERT INTO run_events (id, run_id, event_type, event_time, namespace, job_name,"
            " dag_namespace, dag_id, source, received_at, attempts, failure, set_aside_at)"
            " VALUES (7, 'run-7', 'FAIL', '2021-06-04 01:00:00.000000', 'food_delivery',"
            " ?, 'food_delivery', ?, 'receiver', '2021-06-04 01:00:05.000000', 5,"
            " 'KeyError: boom', '2021-06-04 01:10:00.000000')",
            (ROOT, ROOT),
        )
    result = await run(installed, "events", "list", DATABASE_URL=f"sqlite:///{database}")
    assert result.code == 0, result.err
    [line] = result.out.splitlines()
    assert line.startswith(f"#7 FAIL food_delivery/{ROOT} at 2021-06-04T01:00:00+00:00: 5 tries")
    assert line.endswith(": KeyError: boom")


async def test_doctor_checks_the_installed_standins_and_the_database(
    installed: Installed, upgraded: Upgraded
) -> None:
    scratch = installed.scratch
    marquez_args = ("standin", "marquez", "--seed", "food_delivery", "--port", str(free_port()))
    slack_args = ("standin", "slack", "--port", str(free_port()))
    airflow_args = ("standin", "airflow", "--port", str(free_port()))
    async with (
        running(installed, *marquez_args, log=scratch / "marquez-doctor.log") as (_, marquez),
        running(installed, *slack_args, log=scratch / "slack-doctor.log") as (_, slack),
        running(installed, *airflow_args, log=scratch / "airflow-doctor.log") as (_, airflow),
    ):
        result = await run(
            installed, "doctor",
            MARQUEZ_URL=url_in(marquez),
            SLACK_API_URL=f"{url_in(slack)}/api/",
            SLACK_BOT_TOKEN="xoxb-standin",
            SLACK_SIGNING_SECRET="standin-signing-secret",
            AIRFLOW_URL=url_in(airflow),
            AIRFLOW_USERNAME="admin",
            AIRFLOW_PASSWORD="admin",
            DATABASE_URL=upgraded.url,
        )  # fmt: skip
    assert "Traceback" not in result.err, result.err
    header, *rows = result.out.split("\n\n")[0].splitlines()
    assert header.split() == ["CHECK", "RESULT", "DETAIL"]
    column = header.index("RESULT")
    shown = {row[:column].strip(): row[column:].split()[0] for row in rows if row[0] != " "}
    assert shown == {
        # Without BOT_CONFIG no team owns the stand-in's DAGs: the one FAIL, hence exit code 1.
        "BOT_CONFIG": "WARN",
        "DAG ownership": "FAIL",
        "Slack requests": "OK",
        "Slack token": "OK",
        "Slack scopes": "OK",
        "Marquez": "OK",
        "Airflow": "OK",
        "Airflow DAGs": "OK",
        "Database": "OK",
        "Lineage index": "OK",
    }, result.out
    assert result.code == 1, result.out


async def test_demo_plays_the_story_to_the_end(installed: Installed) -> None:
    # No BOT_CONFIG: the demo reads the example config inside the package, renders its Slack
    # messages from the package's templates, and runs on its own stand-ins and database.
    result = await run(installed, "demo", "--headless")
    assert result.code == 0, result.out + result.err
    assert "Traceback" not in result.err, result.err
    text = result.out
    assert "#orders" in text
    assert "failed, now resolved for 2021-06-04 to 2021-06-06" in text
    assert "🟢 Succeeded · backfill of `example.etl_orders` 2021-06-04..2021-06-06" in text
    assert "Weekly KPIs will be late" in text  # the SLA miss, told to the report's owners


async def test_serve_answers_healthz_and_stops_cleanly_on_sigterm(installed: Installed) -> None:
    scratch = installed.scratch
    marquez_args = ("standin", "marquez", "--seed", "food_delivery", "--port", str(free_port()))
    slack_args = ("standin", "slack", "--port", str(free_port()))
    async with (
        running(installed, *marquez_args, log=scratch / "marquez-serve.log") as (_, marquez),
        running(installed, *slack_args, log=scratch / "slack.log") as (_, slack),
    ):
        port = free_port()
        env = {
            "MARQUEZ_URL": url_in(marquez),
            "SLACK_API_URL": f"{url_in(slack)}/api/",
            "SLACK_BOT_TOKEN": "xoxb-standin",
            "SLACK_SIGNING_SECRET": "standin-signing-secret",
            "DATABASE_URL": f"sqlite:///{scratch / 'serve' / 'bot.db'}",
            "BOT_PORT": str(port),
        }
        log = scratch / "serve.log"
        async with running(installed, "serve", log=log, **env) as (bot, line):
            assert line == f"backfill-bot listening on http://127.0.0.1:{port}"
            async with aiohttp.ClientSession() as session:
                async with session.get(f"http://127.0.0.1:{port}/healthz") as reply:
                    assert reply.status == 200
                    assert (await reply.json())["ok"] is True
                # the Slack stand-in's page and its scripts come from the installed package
                for path in ("/", "/ui/main.js", "/ui/style.css"):
                    async with session.get(f"{url_in(slack)}{path}") as reply:
                        assert reply.status == 200, path
                        assert len(await reply.read()) > 100, path
            bot.send_signal(signal.SIGTERM)  # how a PaaS stops it
            code = await asyncio.wait_for(bot.wait(), timeout=60)
        errors = await asyncio.to_thread(log.read_text)
        assert code == 0, errors
        assert "Traceback" not in errors
