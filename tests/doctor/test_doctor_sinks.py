"""`backfill-bot doctor`'s sink rows against real local servers: the PagerDuty, webhook and
Teams stand-ins (plain http), a TLS server, an SMTP relay (aiosmtpd with STARTTLS or implicit
TLS, and AUTH), a socket that never answers and a closed port, plus a real database's view of
each sink. Doctor is run as bot/cli.py runs it (`main` with the settings and the environment),
in a thread while the servers serve on the test's loop; the printed table is what is read.
Nothing may reach a stand-in or a mailbox, and no secret may reach the table.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlalchemy import select

from bot import doctor
from bot.core.db import make_engine, session_factory, upgrade
from bot.doctor import sinks as doctor_sinks
from bot.hub.store import deliveries
from bot.hub.store.models import SinkDelivery
from bot.settings import Settings, load_settings
from standins.marquez.server import StandInServer
from standins.sinks.pagerduty import running_pagerduty_standin
from standins.sinks.teams import running_teams_standin
from standins.sinks.webhook import running_webhook_receiver
from standins.slack.server import SlackStandIn, running_slack_standin
from tests.support.smtp import PASSWORD, USER, certificate, smtp_server

ROUTING_KEY = "R0UTINGKEY0DOCTOR0000000000000AB"  # 32 characters, as PagerDuty's are
HOOK_SECRET = "doctor-hook-signing-secret"
TEAMS_SIG = "teams-sig-0123456789"
CHANNELS = {"C0ORDERS01": "orders", "C0DATA0001": "data"}


@dataclass(frozen=True)
class Shown:
    result: str
    detail: str
    fix: str


@dataclass(frozen=True)
class Report:
    code: int
    text: str
    rows: dict[str, Shown]

    def row(self, check: str) -> Shown:
        assert check in self.rows, self.text
        return self.rows[check]


def parse(text: str) -> dict[str, Shown]:
    """The table back into rows by check (the sink rows' names are unique)."""
    lines = text.splitlines()
    column = lines[0].index("RESULT")
    rows: dict[str, Shown] = {}
    last = ""
    for line in lines[1:]:
        if not line.strip():
            break  # the summary follows
        if line.startswith(" "):
            rows[last] = Shown(rows[last].result, rows[last].detail, line.strip()[len("fix: ") :])
        else:
            last, rest = line[:column].strip(), line[column:]
            rows[last] = Shown(rest[:6].strip(), rest[8:], "")
    return rows


@dataclass
class World:
    slack: SlackStandIn
    marquez: StandInServer
    database_url: str
    config: Path
    environ: dict[str, str] = field(default_factory=dict)

    def settings(self, **changes: str) -> Settings:
        env = {
            "MARQUEZ_URL": self.marquez.url,
            "DATABASE_URL": self.database_url,
            "BOT_CONFIG": str(self.config),
            "SLACK_BOT_TOKEN": self.slack.bot_token,
            "SLACK_SIGNING_SECRET": "secret",
            "SLACK_API_URL": f"{self.slack.url}/api/",
        }
        return load_settings({**env, **changes})

    def configure(self, sinks: list[dict[str, Any]], **teams: list[str]) -> None:
        """BOT_CONFIG with `sinks` and teams orders and data sending to the sinks named in
        `orders=` and `data=` (data by a route and its escalation, orders by `sinks:`)."""
        data = teams.get("data", [])
        team_data: dict[str, Any] = {"name": "data", "channel": "C0DATA0001"}
        if data:
            team_data["routes"] = [{"events": ["sla"], "to": data[:1]}]
            team_data["escalation"] = {"after": "30m", "sinks": data[1:], "channel": "C0DATA0001"}
        document = {
            "teams": [
                {"name": "orders", "channel": "C0ORDERS01", "sinks": teams.get("orders", [])},
                team_data,
            ],
            "ownership": [{"pattern": "*", "team": "orders"}],
            "sinks": sinks,
        }
        self.config.write_text(yaml.safe_dump(document), encoding="utf-8")

    async def doctor(self, **changes: str) -> Report:
        out = StringIO()
        code = await asyncio.to_thread(doctor.main, self.settings(**changes), out, self.environ)
        return Report(code, out.getvalue(), parse(out.getvalue()))


@pytest.fixture
async def world(food_delivery_marquez: StandInServer, tmp_path: Path) -> AsyncIterator[World]:
    database_url = f"sqlite:///{tmp_path / 'bot.db'}"
    upgrade(database_url)
    async with running_slack_standin(rate_limits=False) as slack:
        for channel, name in CHANNELS.items():
            slack.state.add_channel(channel, name)
        yield World(slack, food_delivery_marquez, database_url, tmp_path / "bot-config.yml")


def pagerduty(name: str, url: str) -> dict[str, Any]:
    return {"name": name, "kind": "pagerduty", "url": url, "routing_key": "${PD_KEY}"}


def webhook(name: str, url: str) -> dict[str, Any]:
    return {"name": name, "kind": "webhook", "url": url, "secret": "${HOOK_SECRET}"}


def email(name: str, port: int, ca: Path | None, **more: Any) -> dict[str, Any]:
    return {
        "name": name, "kind": "email", "host": "127.0.0.1", "port": port,
        "username": USER, "password": "${SMTP_PASSWORD}", "sender": "bot@example.com",
        "to": ["oncall@example.com", "data@example.com"],
        **({"ca_file": str(ca)} if ca else {}), **more,
    }  # fmt: skip


def closed_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Listener:
    """A server that accepts connections and records what each sent, answering nothing."""

    port: int
    received: list[bytes] = field(default_factory=list)


@asynccontextmanager
async def listening(context: ssl.SSLContext | None = None) -> AsyncIterator[Listener]:
    """A TLS server (with `context`) or a plain socket that never says a word."""
    listener = Listener(0)

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            listener.received.append(await reader.read())  # until the client closes
        except OSError:
            listener.received.append(b"")
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=context)
    listener.port = server.sockets[0].getsockname()[1]
    async with server:
        yield listener


@contextmanager
def tls_context(folder: Path) -> Iterator[tuple[ssl.SSLContext, Path]]:
    cert, key = certificate(folder)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(str(cert), str(key))
    yield context, cert


def assert_no_secret(report: Report, *secrets: str) -> None:
    for secret in (ROUTING_KEY, HOOK_SECRET, TEAMS_SIG, PASSWORD, *secrets):
        assert secret not in report.text, report.text


# -- HTTP sinks -------------------------------------------------------------------------------


async def test_http_sinks_are_reached_and_named_by_origin_without_a_request(
    world: World,
) -> None:
    async with (
        running_pagerduty_standin() as pd,
        running_webhook_receiver(HOOK_SECRET) as hook,
        running_teams_standin(sig=TEAMS_SIG) as teams,
    ):
        world.environ = {
            "PD_KEY": ROUTING_KEY, "HOOK_SECRET": HOOK_SECRET, "TEAMS_URL": teams.workflow_url,
            "CONNECTOR_URL": teams.connector_url,
        }  # fmt: skip
        world.configure(
            [
                pagerduty("pager", pd.enqueue_url),
                webhook("hook", hook.url_for("orders")),
                {"name": "chat", "kind": "teams", "url": "${TEAMS_URL}"},
                {"name": "old-chat", "kind": "teams", "url": "${CONNECTOR_URL}"},
            ],
            orders=["pager", "hook"],
            data=["chat", "old-chat"],
        )
        report = await world.doctor()
        assert (pd.requests, hook.attempts, teams.attempts) == (0, [], []), report.text
    assert report.code == 0, report.text
    plain = "reachable (TCP connect; plain http, no TLS)"
    assert report.row("Sink pager (pagerduty)") == Shown(
        "OK", f"PagerDuty at {pd.url}: {plain}; used by team orders; nothing pending", ""
    )
    assert report.row("Sink hook (webhook)").detail == (
        f"webhook at {hook.url}: {plain}; used by team orders; nothing pending"
    )
    # data sends to chat by a route and to old-chat by its escalation: both count as used
    for name in ("chat", "old-chat"):
        assert report.row(f"Sink {name} (teams)") == Shown(
            "OK", f"Teams at {teams.url}: {plain}; used by team data; nothing pending", ""
        )
    assert_no_secret(report, teams.hook_path, teams.workflow_id, "/v2/enqueue", "/hooks/")


async def test_a_sink_no_team_sends_to_is_a_warning(world: World) -> None:
    async with running_webhook_receiver(HOOK_SECRET) as hook:
        world.environ = {"HOOK_SECRET": HOOK_SECRET}
        world.configure([webhook("hook", hook.url_for("x")), webhook("spare", hook.url)])
        report = await world.doctor()
    assert report.code == 0, report.text
    for name in ("hook", "spare"):
        row = report.row(f"Sink {name} (webhook)")
        assert row.result == "WARN", report.text
        assert "; no team sends to it;" in row.detail
        assert row.fix == (
            f"name {name} in a team's sinks, routes[].to or escalation.sinks in BOT_CONFIG, "
            "or remove it"
        )


async def test_a_tls_sink_gets_a_handshake_and_not_a_byte_of_http(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    world.environ = {"HOOK_SECRET": HOOK_SECRET}
    with tls_context(tmp_path) as (context, cert):
        async with listening(context) as server:
            url = f"https://127.0.0.1:{server.port}/hooks/orders?token=query-secret-42"
            world.configure([webhook("hook", url)], orders=["hook"])
            untrusted = await world.doctor()
            monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # the machine's CA store, for doctor
            trusted = await world.doctor()
            await asyncio.sleep(0.1)  # the server's side of the last close
    origin = f"https://127.0.0.1:{server.port}"
    assert (trusted.code, trusted.row("Sink hook (webhook)")) == (0, Shown(
        "OK", f"webhook at {origin}: reachable (TCP connect and TLS handshake); used by team "
        "orders; nothing pending", "",
    )), trusted.text  # fmt: skip
    row = untrusted.row("Sink hook (webhook)")
    assert (untrusted.code, row.result) == (1, "FAIL"), untrusted.text
    assert row.detail.startswith(
        f"webhook at {origin}: connected to 127.0.0.1:{server.port}, but untrusted certificate: "
    )
    assert "SSL_CERT_FILE" in row.fix
    assert server.received[-1] == b"", "the trusted handshake was followed by nothing"
    for report in (trusted, untrusted):
        assert_no_secret(report, "query-secret-42", "/hooks/orders")


async def test_unreachable_http_sinks_fail_naming_the_setting(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(doctor_sinks, "CONNECT_TIMEOUT_S", 0.5)
    world.environ = {"PD_KEY": ROUTING_KEY, "HOOK_SECRET": HOOK_SECRET}
    async with listening() as silent:  # accepts, then never answers the TLS ClientHello
        world.configure(
            [
                pagerduty("pager", f"http://127.0.0.1:{closed_port()}/v2/enqueue"),
                webhook("nowhere", "https://nowhere.invalid/hooks/x"),
                webhook("silent", f"https://127.0.0.1:{silent.port}/hooks/x"),
            ],
            orders=["pager", "nowhere", "silent"],
        )
        report = await world.doctor()
    assert report.code == 1, report.text
    pager = report.row("Sink pager (pagerduty)")
    assert pager.result == "FAIL"
    assert ": cannot connect to 127.0.0.1:" in pager.detail
    assert pager.detail.endswith(": connection refused; used by team orders; nothing pending")
    assert pager.fix.startswith("check the url of sink pager (its host and port)")
    nowhere = report.row("Sink nowhere (webhook)")
    assert nowhere.result == "FAIL"
    assert "resolve nowhere.invalid" in nowhere.detail, report.text
    assert "check the url of sink nowhere" in nowhere.fix
    silent_row = report.row("Sink silent (webhook)")
    assert silent_row.result == "FAIL"
    assert f"connected to 127.0.0.1:{silent.port}, but no TLS handshake within 0.5 s" in (
        silent_row.detail
    )
    [hello] = silent.received  # a TLS ClientHello (a handshake record), and no HTTP after it
    assert hello.startswith(b"\x16\x03"), hello
    assert b"POST" not in hello
    assert report.row("Database").result == "OK"  # the other checks are untouched
    assert_no_secret(report)


# -- e-mail -----------------------------------------------------------------------------------


async def test_smtp_relays_are_logged_into_and_no_mail_is_sent(
    world: World, tmp_path: Path
) -> None:
    world.environ = {"SMTP_PASSWORD": PASSWORD}
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with (
        smtp_server(tmp_path / "a") as (box, port, ca),
        smtp_server(tmp_path / "b", implicit_tls=True) as (tls_box, tls_port, tls_ca),
    ):
        world.configure(
            [email("mail", port, ca), email("mail-tls", tls_port, tls_ca, security="tls")],
            orders=["mail", "mail-tls"],
        )
        report = await world.doctor()
    assert (box.messages, tls_box.messages) == ([], [])
    assert report.code == 0, report.text
    assert report.row("Sink mail (email)") == Shown(
        "OK",
        f"SMTP 127.0.0.1:{port} (starttls) to 2 addresses: reachable (connected, STARTTLS, "
        "login accepted; no mail sent); used by team orders; nothing pending",
        "",
    )
    assert report.row("Sink mail-tls (email)").detail.startswith(
        f"SMTP 127.0.0.1:{tls_port} (tls) to 2 addresses: reachable (connected with TLS, login "
        "accepted; no mail sent)"
    )
    assert_no_secret(report)


async def test_a_refused_login_fails_without_showing_the_password_the_relay_echoed(
    world: World, tmp_path: Path
) -> None:
    wrong = "not-the-relay-password-42"  # the test relay repeats it in its refusal
    world.environ = {"SMTP_PASSWORD": wrong}
    with smtp_server(tmp_path) as (box, port, ca):
        world.configure([email("mail", port, ca)], orders=["mail"])
        report = await world.doctor()
    row = report.row("Sink mail (email)")
    assert (report.code, row.result, box.messages) == (1, "FAIL", []), report.text
    assert "connected, STARTTLS, login failed: answered 535 5.7.8 [redacted] is not valid" in (
        row.detail
    )
    assert row.fix == "check username and password of sink mail: the relay refused the login"
    assert_no_secret(report, wrong)


async def test_smtp_tls_and_port_mistakes_fail_naming_the_setting_to_check(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(doctor_sinks, "SMTP_TIMEOUT_S", 0.5)
    world.environ = {"SMTP_PASSWORD": PASSWORD}
    down = closed_port()
    with smtp_server(tmp_path) as (box, port, ca):
        async with listening() as silent:  # a port that never greets (an implicit-TLS one)
            world.configure(
                [
                    email("untrusted", port, None),  # the relay's CA is not given
                    email("implicit", port, ca, security="tls"),  # a STARTTLS port
                    email("silent", silent.port, ca),
                    email("down", down, ca),
                    email("bad-ca", port, tmp_path / "missing.pem"),
                ],
                orders=["untrusted", "implicit", "silent", "down", "bad-ca"],
            )
            report = await world.doctor()
    assert (report.code, box.messages) == (1, []), report.text
    rows = {name: report.row(f"Sink {name} (email)") for name in
            ("untrusted", "implicit", "silent", "down", "bad-ca")}  # fmt: skip
    assert {row.result for row in rows.values()} == {"FAIL"}, report.text
    assert "connected, STARTTLS failed: untrusted certificate: " in rows["untrusted"].detail
    assert rows["untrusted"].fix.startswith("set ca_file of sink untrusted to the CA bundle")
    assert "connect failed: TLS failed: " in rows["implicit"].detail
    assert rows["implicit"].fix.startswith("check security and port of sink implicit: tls talks")
    assert "connect failed: Connection unexpectedly closed: timed out" in rows["silent"].detail
    assert "connect failed: connection refused; used by team orders" in rows["down"].detail
    for name in ("silent", "down"):
        assert rows[name].fix.startswith(f"check host and port of sink {name} (port 0 means")
    assert f"cannot read ca_file {tmp_path / 'missing.pem'}: " in rows["bad-ca"].detail
    assert rows["bad-ca"].fix.startswith("check ca_file of sink bad-ca")
    assert_no_secret(report)


# -- the database's view ----------------------------------------------------------------------

FAILING_SINCE = datetime(2024, 5, 1, 12, 3, tzinfo=UTC)


async def owe(url: str) -> None:
    """Rows for `hook` (three pending, one held for quiet hours, one refused for good, and a
    failing spell whose last error is hostile) and one for a sink BOT_CONFIG no longer has."""
    engine = make_engine(url)
    sessions = session_factory(engine)
    later = datetime.now(UTC) + timedelta(days=1)
    async with sessions.begin() as session:
        for n in range(3):
            await deliveries.enqueue(
                session, sink="hook", kind="webhook", event_key=f"incident:{n}:opened",
                body={"n": n}, held_until=later if n == 0 else None,
            )  # fmt: skip
        await deliveries.enqueue(session, sink="hook", kind="webhook", event_key="bad", body={})
        await deliveries.enqueue(session, sink="gone", kind="webhook", event_key="x", body={})
    async with sessions.begin() as session:
        bad = await session.scalar(select(SinkDelivery.id).where(SinkDelivery.event_key == "bad"))
        assert bad is not None
        await deliveries.mark_failed(session, bad, error="webhook answered HTTP 400")
        for _ in range(3):
            error = f"webhook answered HTTP 503: down\x1b[2J {HOOK_SECRET}"
            await deliveries.failed_attempt(session, "hook", error=error, now=FAILING_SINCE)
    await engine.dispose()


async def test_the_database_view_shows_what_is_owed_and_a_failing_spell(
    world: World, database_url: str
) -> None:
    upgrade(database_url)
    await owe(database_url)
    world.environ = {"HOOK_SECRET": HOOK_SECRET}
    async with running_webhook_receiver(HOOK_SECRET) as hook:
        world.configure([webhook("hook", hook.url_for("orders"))], orders=["hook"])
        report = await world.doctor(DATABASE_URL=database_url)
    assert report.code == 0, report.text
    row = report.row("Sink hook (webhook)")
    assert row.result == "WARN"
    assert row.detail.endswith(
        "; used by team orders; 3 pending (1 held for quiet hours), 1 refused for good; failing "
        "since 2024-05-01 12:03 UTC (3 failed attempts in a row): webhook answered HTTP 503: "
        "down\\x1b[2J [redacted]"
    ), report.text
    assert row.fix.startswith("the bot keeps retrying, nothing is dropped")
    gone = report.row("Sink gone (not in BOT_CONFIG)")
    assert gone.result == "WARN"
    assert gone.detail == (
        "BOT_CONFIG declares no sink gone, but the database holds notices for it (1 pending): "
        "the bot keeps them and tries again every 15 minutes"
    )
    assert "\x1b" not in report.text
    assert_no_secret(report)


async def test_without_a_readable_database_the_sink_rows_say_so(
    world: World, tmp_path: Path
) -> None:
    missing = tmp_path / "nowhere" / "bot.db"
    world.environ = {"HOOK_SECRET": HOOK_SECRET}
    async with running_webhook_receiver(HOOK_SECRET) as hook:
        world.configure([webhook("hook", hook.url)], orders=["hook"])
        report = await world.doctor(DATABASE_URL=f"sqlite:///{missing}")
    assert report.row("Database").result == "FAIL"
    row = report.row("Sink hook (webhook)")
    assert row.result == "OK", report.text
    assert row.detail.endswith("; the database was not read (see the Database row)")
    assert not missing.parent.exists()


async def test_without_sinks_there_are_no_sink_rows(world: World) -> None:
    world.configure([])
    report = await world.doctor()
    assert report.code == 0, report.text
    assert not [check for check in report.rows if check.startswith("Sink")], report.text
