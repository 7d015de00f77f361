"""`backfill-bot doctor` against the Slack, Marquez and Airflow stand-ins and a real database.

Doctor is invoked the way bot/cli.py invokes it: its `add_parser` on a parser's subcommands, then
`main(settings)`, whose printed table and exit code are what the tests read. `main` runs its own
event loop, so it runs in a thread while the stand-ins serve on the test's loop.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import re
import socket
import sys
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from bot import doctor
from bot.clients.marquez import MarquezClient
from bot.config import IndexSettings
from bot.core.db import downgrade, make_engine, session_factory, sync_url, upgrade
from bot.core.tables import utcnow
from bot.lineage.service.index import LineageIndex
from bot.lineage.service.reconcile import Reconciler
from bot.lineage.store.reconcile_state import record_failure
from bot.settings import Settings, load_settings
from standins.airflow.server import FOOD_DELIVERY_DAGS, AirflowStandin, running_airflow_standin
from standins.marquez.server import StandInServer
from standins.slack.server import SlackStandIn, running_slack_standin

CHANNELS = {"C0ORDERS01": "orders", "C0LOGIST01": "logistics", "C0ANALYT01": "analytics"}
CONFIG = """
teams:
  - {name: orders, channel: C0ORDERS01, members: [U0ALICE001]}
  - {name: logistics, channel: C0LOGIST01}
  - {name: analytics, channel: C0ANALYT01, user_groups: [S0ANALYTIC]}
ownership:
  - {pattern: "example.etl_orders*", team: orders}
  - {pattern: "example.*delivery*", team: logistics}
  - {pattern: "example.*", team: analytics}
  - {pattern: "reporting::*", team: analytics}
approvers: {user_groups: [S0PLATFORM]}
"""


@dataclass
class World:
    slack: SlackStandIn
    marquez: StandInServer
    airflow: AirflowStandin
    database_url: str
    config: Path

    def settings(self, **changes: str) -> Settings:
        env = {
            "MARQUEZ_URL": self.marquez.url,
            "DATABASE_URL": self.database_url,
            "BOT_CONFIG": str(self.config),
            "SLACK_BOT_TOKEN": self.slack.bot_token,
            "SLACK_SIGNING_SECRET": "secret",
            "SLACK_API_URL": f"{self.slack.url}/api/",
            "AIRFLOW_URL": self.airflow.url,
            "AIRFLOW_USERNAME": self.airflow.username,
            "AIRFLOW_PASSWORD": self.airflow.password,
        }
        return load_settings({**env, **changes})

    def configure(self, text: str) -> None:
        self.config.write_text(text, encoding="utf-8")


@dataclass(frozen=True)
class Shown:
    result: str
    detail: str
    fix: str


@dataclass(frozen=True)
class Report:
    code: int
    text: str
    rows: dict[str, list[Shown]]

    def row(self, check: str) -> Shown:
        [found] = self.rows[check]
        return found

    def results(self) -> set[str]:
        return {row.result for rows in self.rows.values() for row in rows}


def parse(text: str) -> dict[str, list[Shown]]:
    """The table back into rows: CHECK, RESULT, DETAIL columns, and `fix:` lines under them."""
    lines = text.splitlines()
    column = lines[0].index("RESULT")
    found: list[tuple[str, Shown]] = []
    for line in lines[1:]:
        if not line.strip():
            break  # the summary follows
        if line.startswith(" "):
            check, row = found.pop()
            found.append((check, Shown(row.result, row.detail, line.strip().removeprefix("fix: "))))
        else:
            rest = line[column:]
            found.append((line[:column].strip(), Shown(rest[:6].strip(), rest[8:], "")))
    rows: dict[str, list[Shown]] = {}
    for check, row in found:
        rows.setdefault(check, []).append(row)
    return rows


def parser() -> argparse.ArgumentParser:
    # The part of bot/cli.py's parser that doctor brings.
    top = argparse.ArgumentParser(prog="backfill-bot")
    doctor.add_parser(top.add_subparsers(dest="command", required=True))
    return top


async def run_doctor(settings: Settings, capsys: pytest.CaptureFixture[str]) -> Report:
    assert parser().parse_args(["doctor"]).command == "doctor"
    capsys.readouterr()
    code = await asyncio.to_thread(doctor.main, settings)
    out = capsys.readouterr().out
    return Report(code, out, parse(out))


@pytest.fixture
async def world(food_delivery_marquez: StandInServer, tmp_path: Path) -> AsyncIterator[World]:
    # SQLite here; the database tests run on PostgreSQL too (`database_url`).
    database_url = f"sqlite:///{tmp_path / 'bot.db'}"
    upgrade(database_url)
    config = tmp_path / "bot-config.yml"
    config.write_text(CONFIG, encoding="utf-8")
    async with (
        running_slack_standin(rate_limits=False) as slack,
        running_airflow_standin(dags=FOOD_DELIVERY_DAGS) as airflow,
    ):
        for channel, name in CHANNELS.items():
            slack.state.add_channel(channel, name)
        slack.state.add_usergroup("S0ANALYTIC", ["U0APPROVE1"])
        slack.state.add_usergroup("S0PLATFORM", ["U0APPROVE1", "U0APPROVE2"])
        yield World(slack, food_delivery_marquez, airflow, database_url, config)


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def assert_fails(report: Report, check: str, detail: str, fix: str) -> None:
    row = report.row(check)
    assert (row.result, report.code) == ("FAIL", 1), report.text
    assert detail in row.detail, report.text
    assert fix in row.fix, report.text


# -- all good ---------------------------------------------------------------------------------


async def test_all_good_exits_0_and_prints_an_ok_row_per_check(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    report = await run_doctor(world.settings(), capsys)
    assert report.code == 0, report.text
    assert report.results() == {"OK"}, report.text
    for check in ("BOT_CONFIG", "Slack token", "Slack scopes", "Marquez", "DAG ownership"):
        assert report.row(check).result == "OK"
    assert report.row("Channel C0ORDERS01 (team orders)").detail == "#orders: the bot is a member"
    assert report.row("User group S0PLATFORM (approvers)").detail == "2 members"
    assert report.row("DAG ownership").detail == "every one of the 14 DAGs has an owner"
    assert report.row("Airflow").detail == f"Airflow 3 at {world.airflow.url}"
    assert report.row("Airflow DAGs").detail == "all 14 DAGs are in Airflow and unpaused"
    assert report.row("Database").detail.startswith("the database is at the bot's newest revision")
    assert report.text.endswith("Everything checks out.\n")


# -- Slack ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("scope", "use"),
    [
        ("chat:write", "chat.postMessage, chat.update and chat.postEphemeral"),
        ("commands", "the /backfill command"),
        ("usergroups:read", "usergroups.users.list"),
    ],
)
async def test_a_missing_scope_is_named_with_the_method_needing_it_and_the_fix(
    world: World, capsys: pytest.CaptureFixture[str], scope: str, use: str
) -> None:
    world.slack.state.scopes.discard(scope)
    report = await run_doctor(world.settings(), capsys)
    assert_fails(
        report,
        "Slack scopes",
        f"missing {scope}, needed by {use}",
        f"add {scope} under OAuth & Permissions",
    )
    assert "reinstall the app" in report.row("Slack scopes").fix
    assert report.row("Marquez").result == "OK"  # the other checks still ran


async def test_usergroups_read_is_not_needed_without_user_groups(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    world.configure(CONFIG.replace(", user_groups: [S0ANALYTIC]", "").replace(
        "approvers: {user_groups: [S0PLATFORM]}", ""
    ))  # fmt: skip
    world.slack.state.scopes.discard("usergroups:read")
    report = await run_doctor(world.settings(), capsys)
    assert (report.code, report.row("Slack scopes").result) == (0, "OK"), report.text


async def test_a_channel_that_does_not_exist_fails_with_the_fix(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    world.configure(CONFIG.replace("C0LOGIST01", "C0NOWHERE1"))
    # A private channel the bot was never invited to looks the same to it.
    world.slack.state.add_channel("G0SECRET01", "secret", member=False)
    world.configure(world.config.read_text().replace("C0ANALYT01", "G0SECRET01"))
    report = await run_doctor(world.settings(), capsys)
    for check in ("Channel C0NOWHERE1 (team logistics)", "Channel G0SECRET01 (team analytics)"):
        assert_fails(
            report,
            check,
            "no such channel, or a private one the bot was not invited to",
            "/invite @backfill-bot",
        )
    assert report.row("Channel C0ORDERS01 (team orders)").result == "OK"


async def test_an_archived_channel_and_one_without_the_bot_fail_with_their_fixes(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    world.slack.state.channels["C0LOGIST01"].is_archived = True
    world.slack.state.channels["C0ANALYT01"].is_member = False
    public = await run_doctor(world.settings(), capsys)
    assert_fails(
        public,
        "Channel C0LOGIST01 (team logistics)",
        "#logistics is archived",
        "unarchive #logistics, or give team logistics a live channel",
    )
    # Not a member, but chat:write.public lets the bot post in a public channel anyway.
    assert public.row("Channel C0ANALYT01 (team analytics)") == Shown(
        "OK", "#analytics: public; the bot posts with chat:write.public", ""
    )
    world.slack.state.scopes.discard("chat:write.public")
    invite_only = await run_doctor(world.settings(), capsys)
    assert_fails(
        invite_only,
        "Channel C0ANALYT01 (team analytics)",
        "the bot is not a member of #analytics",
        "type /invite @backfill-bot in #analytics",
    )
    assert invite_only.row("Slack scopes").result == "WARN"


async def test_without_channels_read_channels_are_a_warning_not_a_guess(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    world.slack.state.scopes.discard("channels:read")
    report = await run_doctor(world.settings(), capsys)
    assert report.code == 0, report.text
    row = report.row("Channel C0ORDERS01 (team orders)")
    assert (row.result, row.detail) == ("WARN", "not checked: the token lacks channels:read")
    assert "add channels:read" in row.fix
    assert report.text.endswith("Nothing failed; 4 warnings.\n")


async def test_a_user_group_that_does_not_resolve_fails_and_an_empty_one_warns(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    del world.slack.state.usergroups["S0PLATFORM"]
    world.slack.state.usergroups["S0ANALYTIC"] = []
    report = await run_doctor(world.settings(), capsys)
    assert_fails(
        report,
        "User group S0PLATFORM (approvers)",
        "no such user group",
        "check the id (S…) under teams[].user_groups or approvers.user_groups",
    )
    empty = report.row("User group S0ANALYTIC (team analytics)")
    assert (empty.result, empty.detail) == ("WARN", "has no members: it lets no one approve")


async def test_a_refused_token_fails_and_the_checks_needing_it_are_skipped(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    report = await run_doctor(world.settings(SLACK_BOT_TOKEN="xoxb-revoked"), capsys)
    assert_fails(report, "Slack token", "Slack refused it: invalid_auth", "SLACK_BOT_TOKEN")
    assert report.row("Slack scopes").result == "SKIP"
    assert report.row("Slack channels and groups").result == "SKIP"
    assert report.row("Database").result == "OK"


async def test_outside_text_reaches_the_terminal_escaped(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    evil = world.slack.state.add_channel("C0EVIL0001", "x\x1b[2J\u202eevil\nname")
    evil.is_archived = True
    world.configure(CONFIG.replace("C0ORDERS01", "C0EVIL0001"))
    report = await run_doctor(world.settings(), capsys)
    assert "\x1b" not in report.text
    assert "\u202e" not in report.text
    assert report.row("Channel C0EVIL0001 (team orders)").detail == (
        "#x\\x1b[2J\\u202eevil\\nname is archived: posts there fail"
    )


# -- Marquez and ownership --------------------------------------------------------------------


async def test_an_unowned_dag_is_listed_with_a_rule_to_add(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    world.configure(CONFIG.replace('  - {pattern: "reporting::*", team: analytics}\n', ""))
    report = await run_doctor(world.settings(), capsys)
    assert_fails(
        report,
        "DAG ownership",
        "1 of 14 DAGs have no owning team: reporting/reporting.weekly_kpis",
        'add ownership rules to BOT_CONFIG, e.g. {pattern: "reporting.weekly_kpis", team: TEAM}',
    )


async def test_marquez_down_fails_its_rows_and_the_other_checks_still_run(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    down = f"http://127.0.0.1:{closed_port()}"
    report = await run_doctor(world.settings(MARQUEZ_URL=down), capsys)
    assert_fails(report, "Marquez", "unreachable", f"MARQUEZ_URL ({down}) is right")
    assert report.row("DAG ownership").result == "SKIP"
    assert report.row("Airflow DAGs").result == "SKIP"
    for check in ("Slack token", "Slack scopes", "Airflow", "Database"):
        assert report.row(check).result == "OK", report.text


def with_user(url: str, password: str) -> str:
    return url.replace("http://", f"http://bot:{password}@", 1)


# Basic-auth credentials in a service URL, as given and percent-encoded (`p%40ss` is `p@ss`):
# neither spelling may reach the table or the log.
PASSWORDS = pytest.mark.parametrize(
    ("password", "spellings"), [("s3cret", ("s3cret",)), ("p%40ss", ("p%40ss", "p@ss"))]
)


@PASSWORDS
async def test_credentials_in_unreachable_service_urls_are_not_shown(
    world: World,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    password: str,
    spellings: tuple[str, ...],
) -> None:
    caplog.set_level(logging.DEBUG)  # the retry warnings name each request
    marquez, airflow = (f"http://127.0.0.1:{closed_port()}" for _ in range(2))
    settings = world.settings(
        MARQUEZ_URL=with_user(marquez, password), AIRFLOW_URL=with_user(airflow, password)
    )
    report = await run_doctor(settings, capsys)
    assert_fails(
        report, "Marquez", f"Marquez at {marquez} is unreachable", f"MARQUEZ_URL ({marquez}) is"
    )
    assert_fails(
        report, "Airflow", f"Airflow at AIRFLOW_URL={airflow}", f"AIRFLOW_URL ({airflow}) is"
    )
    assert "retry 1 of 2" in caplog.text  # the client did log its attempts
    for secret in spellings:
        assert secret not in report.text, report.text
        assert secret not in caplog.text, caplog.text


@PASSWORDS
async def test_credentials_in_a_working_marquez_url_are_not_shown(
    world: World,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    password: str,
    spellings: tuple[str, ...],
) -> None:
    caplog.set_level(logging.DEBUG)
    report = await run_doctor(
        world.settings(MARQUEZ_URL=with_user(world.marquez.url, password)), capsys
    )
    assert report.row("Marquez").detail.startswith(f"reachable at {world.marquez.url}: 14 DAGs")
    for secret in spellings:
        assert secret not in report.text, report.text
        assert secret not in caplog.text, caplog.text


# -- Airflow ----------------------------------------------------------------------------------


@pytest.mark.parametrize("api", [2, 3])
async def test_a_dag_missing_or_paused_in_airflow_fails_with_the_fix(
    world: World, capsys: pytest.CaptureFixture[str], api: int
) -> None:
    dags = [d for d in FOOD_DELIVERY_DAGS if d.dag_id != "example.etl_menus"]
    async with running_airflow_standin(api=api, dags=dags) as airflow:
        airflow.state.pause("example.etl_orders")
        world.airflow = airflow
        report = await run_doctor(world.settings(), capsys)
    assert report.row("Airflow").detail == f"Airflow {api} at {airflow.url}"
    missing, paused = report.rows["Airflow DAGs"]
    assert (missing.result, paused.result, report.code) == ("FAIL", "FAIL", 1), report.text
    assert missing.detail == (
        "1 of 14 DAGs are not in Airflow: food_delivery/example.etl_menus "
        "(no DAG `example.etl_menus` in Airflow)"
    )
    assert "execution.airflow.dag_ids" in missing.fix
    assert paused.detail.endswith("refused: food_delivery/example.etl_orders")
    assert paused.fix == "unpause them in Airflow, or set execution.airflow.on_paused: unpause"


async def test_a_paused_dag_the_bot_may_unpause_is_a_warning(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    world.configure(CONFIG + "execution: {airflow: {on_paused: unpause}}\n")
    world.airflow.state.pause("example.etl_orders")
    report = await run_doctor(world.settings(), capsys)
    assert (report.code, report.row("Airflow DAGs").result) == (0, "WARN"), report.text


async def test_without_airflow_url_airflow_is_skipped(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    report = await run_doctor(world.settings(AIRFLOW_URL=""), capsys)
    assert report.code == 0, report.text
    assert report.row("Airflow") == Shown(
        "SKIP", "AIRFLOW_URL is not set: backfills run on spark", ""
    )


# -- the database -----------------------------------------------------------------------------


async def test_a_database_behind_the_latest_migration_fails_with_the_upgrade_fix(
    world: World, capsys: pytest.CaptureFixture[str], database_url: str
) -> None:
    world.database_url = database_url
    upgrade(database_url)
    assert (await run_doctor(world.settings(), capsys)).code == 0
    downgrade(world.database_url, "0005")
    report = await run_doctor(world.settings(), capsys)
    assert_fails(
        report,
        "Database",
        "the database is at revision 0005; the bot's migrations end at",
        "backfill-bot db upgrade",
    )
    downgrade(world.database_url, "base")
    empty = await run_doctor(world.settings(), capsys)
    assert_fails(empty, "Database", "not migrated at all", "backfill-bot db upgrade")


async def test_a_database_a_newer_version_migrated_is_not_sent_to_db_upgrade(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    engine = create_engine(sync_url(world.database_url))
    with engine.begin() as connection:
        connection.execute(text("UPDATE alembic_version SET version_num = '0042'"))
    engine.dispose()
    report = await run_doctor(world.settings(), capsys)
    assert_fails(
        report,
        "Database",
        "0042 is unknown to this backfill-bot: a newer version migrated it",
        "run the backfill-bot version that did",
    )


async def test_a_missing_sqlite_file_is_not_created_by_the_check(
    world: World, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    missing = tmp_path / "nowhere" / "bot.db"
    report = await run_doctor(world.settings(DATABASE_URL=f"sqlite:///{missing}"), capsys)
    assert_fails(report, "Database", f"no database file at {missing}", "backfill-bot db upgrade")
    assert not missing.parent.exists()


# -- everything down, as a process ------------------------------------------------------------


def _fails(text: str, checks: Iterable[str]) -> list[str]:
    rows = parse(text)
    return [check for check in checks if [r.result for r in rows.get(check, [])] != ["FAIL"]]


async def test_with_every_system_down_each_fails_on_its_own_and_nothing_prints_a_traceback(
    tmp_path: Path,
) -> None:
    ports = [closed_port() for _ in range(3)]
    env = {
        "MARQUEZ_URL": f"http://127.0.0.1:{ports[0]}",
        "SLACK_API_URL": f"http://127.0.0.1:{ports[1]}/api/",
        "AIRFLOW_URL": f"http://127.0.0.1:{ports[2]}",
        "SLACK_BOT_TOKEN": "xoxb-anything",
        "DATABASE_URL": "postgresql://bot:s3cret-pw@127.0.0.1:1/bot",
        "PATH": "/usr/bin:/bin",
    }
    # What bot/cli.py does for `backfill-bot doctor`: settings from the environment, then main.
    script = (
        "import os, sys; from bot import doctor; from bot.settings import load_settings; "
        "sys.exit(doctor.main(load_settings(os.environ)))"
    )
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", script, env=env, cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), timeout=120)
    text, errors = out.decode(), err.decode()
    assert process.returncode == 1, text + errors
    assert "Traceback" not in text + errors
    assert "s3cret-pw" not in text + errors
    assert _fails(text, ("Slack", "Slack requests", "Marquez", "Airflow", "Database")) == [], text
    assert re.search(r"^BOT_CONFIG +WARN ", text, re.MULTILINE), text


# -- the lineage index --------------------------------------------------------------------------


async def test_the_lineage_index_row_says_how_far_serve_has_read_marquez(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    report = await run_doctor(world.settings(), capsys)
    assert report.row("Lineage index").result == "OK"
    assert report.row("Lineage index").detail.startswith("empty: no serve has read")
    engine = make_engine(world.database_url)
    try:
        index = LineageIndex(session_factory(engine))
        make = lambda: MarquezClient(world.marquez.url)  # noqa: E731
        await Reconciler(index.sessions, make, index, IndexSettings()).full()
        current = await run_doctor(world.settings(), capsys)
        assert current.row("Lineage index").result == "OK"
        assert current.row("Lineage index").detail.startswith("current: last reconciled")
        async with index.sessions.begin() as session:
            await record_failure(session, "full reconcile: Marquez answered 503", utcnow())
    finally:
        await engine.dispose()
    behind = await run_doctor(world.settings(), capsys)
    row = behind.row("Lineage index")
    assert (row.result, behind.code) == ("WARN", 0), behind.text
    assert "the last reconcile failed (full reconcile: Marquez answered 503)" in row.detail
    assert "serve's log" in row.fix
