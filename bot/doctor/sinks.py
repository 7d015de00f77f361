"""`backfill-bot doctor`'s rows for BOT_CONFIG's `sinks:`: one row per sink, and one per sink
the database still owes notices that BOT_CONFIG no longer declares.

A row says where the sink goes (an HTTP sink by its URL's origin only, e-mail by host, port and
security), whether it can be reached, which teams send to it and what the database knows of it
(notices pending or refused for good, and a failing spell from `sink_health`). Nothing is ever
sent: an HTTP sink gets a DNS lookup, a TCP connect and (https) a TLS handshake, no request; an
SMTP relay gets EHLO, STARTTLS or implicit TLS, AUTH when a login is set, and QUIT, never MAIL.
Unreachable is FAIL, failing in `sink_health` or used by no team is WARN. No row shows a secret:
each sink's secrets are redacted from every row (a relay may echo a refused password).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import smtplib
import socket
import ssl
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import case, func, select
from sqlalchemy.ext.asyncio import AsyncSession
from yarl import URL

from bot.config import BotConfig
from bot.config.sinks import EmailSink, PagerDutySink, Sink, TeamsSink, WebhookSink
from bot.core.db import DatabaseError, make_engine, reported
from bot.core.schema_state import read_schema_state
from bot.core.tables import utcnow
from bot.doctor.checks import Result, Row, listed, missing_sqlite_file
from bot.hub.service.sender import REMOVED_SINK_WAIT_S
from bot.hub.sinks.base import public_url, redact, url_secrets
from bot.hub.sinks.email import log_in, tls_context
from bot.hub.store.models import DeliveryState, SinkDelivery, SinkHealth
from bot.settings import Settings

__all__ = ["sink_rows"]

logger = logging.getLogger(__name__)
CONNECT_TIMEOUT_S = 5.0  # each of: the DNS lookup, the TCP connect, the TLS handshake
SMTP_TIMEOUT_S = 10.0  # each SMTP step (smtplib's socket timeout)
DATABASE_TIMEOUT_S = 30.0
NOT_READ = "the database was not read (see the Database row)"


@dataclass(frozen=True)
class Reach:
    """What trying to reach a sink came to: the steps that worked, or the one that failed."""

    ok: bool
    detail: str
    fix: str = ""


@dataclass(frozen=True)
class Ledger:
    """The database's view of one sink."""

    pending: int = 0
    held: int = 0  # of `pending`: held for quiet hours
    failed: int = 0  # refused for good by the sink
    failures: int = 0  # failed attempts in a row
    failing_since: datetime | None = None
    last_error: str | None = None


async def sink_rows(settings: Settings, config: BotConfig | None) -> list[Row]:
    """A row per configured sink, then one per undeclared sink the database still owes."""
    if config is None:  # the BOT_CONFIG row says why
        return []
    ledgers = asyncio.create_task(_read_ledgers(settings.database_url))
    reaches = await asyncio.gather(*(_reach(sink) for sink in config.sinks))
    found = await ledgers
    secrets = [secret for sink in config.sinks for secret in _secrets(sink)]
    pairs = zip(config.sinks, reaches, strict=True)
    rows = [_row(sink, reach, config, found) for sink, reach in pairs]
    declared = {sink.name for sink in config.sinks}
    for name, ledger in sorted((found or {}).items()):
        if name not in declared and ledger.pending:
            rows.append(_undeclared_row(name, ledger))
    return [
        Row(row.check, row.result, redact(row.detail, secrets), redact(row.fix, secrets))
        for row in rows
    ]


def _secrets(sink: Sink) -> list[str]:
    if isinstance(sink, PagerDutySink):
        return [sink.routing_key.get_secret_value(), *url_secrets(sink.url)]
    if isinstance(sink, WebhookSink):
        return [sink.secret.get_secret_value(), *url_secrets(sink.url)]
    if isinstance(sink, TeamsSink):  # the whole URL is the secret; its origin is shown
        url = sink.url.get_secret_value()
        parsed = URL(url)
        paths = [p for p in (parsed.raw_path, parsed.path) if len(p) > 1]
        return [url, *paths, *url_secrets(url)]
    return [sink.password.get_secret_value()] if sink.password else []


def _where(sink: Sink) -> str:
    if isinstance(sink, EmailSink):
        count = len(sink.to)
        to = "1 address" if count == 1 else f"{count} addresses"
        return f"SMTP {sink.host}:{sink.smtp_port} ({sink.security}) to {to}"
    if isinstance(sink, TeamsSink):
        return f"Teams at {public_url(sink.url.get_secret_value())}"
    name = "PagerDuty" if isinstance(sink, PagerDutySink) else "webhook"
    return f"{name} at {public_url(sink.url)}"


def _row(sink: Sink, reach: Reach, config: BotConfig, ledgers: dict[str, Ledger] | None) -> Row:
    result, parts, fixes = Result.OK, [f"{_where(sink)}: {reach.detail}"], []
    if not reach.ok:
        result = Result.FAIL
        fixes.append(reach.fix)
    users = [team.name for team in config.teams if sink.name in team.sink_names()]
    if users:
        parts.append(f"used by {'team' if len(users) == 1 else 'teams'} {listed(users)}")
    else:
        parts.append("no team sends to it")
        fixes.append(
            f"name {sink.name} in a team's sinks, routes[].to or escalation.sinks in BOT_CONFIG, "
            "or remove it"
        )
        result = Result.FAIL if result == Result.FAIL else Result.WARN
    if ledgers is None:
        parts.append(NOT_READ)
    else:
        ledger = ledgers.get(sink.name, Ledger())
        parts.append(_queue(ledger))
        if ledger.failures:
            parts.append(_failing(ledger))
            fixes.append(
                "the bot keeps retrying, nothing is dropped: fix what the last error names "
                f"(sink {sink.name}'s settings in BOT_CONFIG, or the service itself)"
            )
            result = Result.FAIL if result == Result.FAIL else Result.WARN
    return Row(f"Sink {sink.name} ({sink.kind})", result, "; ".join(parts), "; ".join(fixes))


def _queue(ledger: Ledger) -> str:
    text = f"{ledger.pending} pending" if ledger.pending else "nothing pending"
    if ledger.held:
        text += f" ({ledger.held} held for quiet hours)"
    if ledger.failed:
        text += f", {ledger.failed} refused for good"
    return text


def _failing(ledger: Ledger) -> str:
    attempts = "1 failed attempt" if ledger.failures == 1 else f"{ledger.failures} failed attempts"
    since = ledger.failing_since
    when = f" since {since.astimezone(UTC):%Y-%m-%d %H:%M} UTC" if since else ""
    return f"failing{when} ({attempts} in a row): {ledger.last_error or 'no error recorded'}"


def _undeclared_row(name: str, ledger: Ledger) -> Row:
    detail = (
        f"BOT_CONFIG declares no sink {name}, but the database holds notices for it "
        f"({_queue(ledger)}): "
        f"the bot keeps them and tries again every {REMOVED_SINK_WAIT_S / 60:g} minutes"
    )
    fix = f"declare {name} under sinks in BOT_CONFIG again, so they go out"
    return Row(f"Sink {name} (not in BOT_CONFIG)", Result.WARN, detail, fix)


# -- the database's view ----------------------------------------------------------------------


async def _read_ledgers(url: str) -> dict[str, Ledger] | None:
    """Each sink's ledger (by name), or None when the database cannot say: missing, down, or
    not at the bot's schema (the Database row says which)."""
    if missing_sqlite_file(url) is not None:  # connecting would create it
        return None
    try:
        engine = make_engine(url)
    except ValueError:
        return None
    try:
        async with asyncio.timeout(DATABASE_TIMEOUT_S):
            with reported(url, "read the sinks' state"):
                if not (await read_schema_state(engine)).is_current:
                    return None
                async with AsyncSession(engine) as session:
                    return await _ledgers(session)
    except DatabaseError as exc:
        logger.debug("doctor: the sinks' state was not read: %s", exc)
        return None
    except Exception:  # the sink rows go on without it; the Database row has its own check
        logger.debug("doctor: reading the sinks' state failed", exc_info=True)
        return None
    finally:
        await engine.dispose()


async def _ledgers(session: AsyncSession) -> dict[str, Ledger]:
    pending = SinkDelivery.state == DeliveryState.PENDING.value
    held = pending & SinkDelivery.held_until.is_not(None) & (SinkDelivery.held_until > utcnow())
    counts = await session.execute(
        select(
            SinkDelivery.sink,
            func.sum(case((pending, 1), else_=0)),
            func.sum(case((held, 1), else_=0)),
            func.sum(case((SinkDelivery.state == DeliveryState.FAILED.value, 1), else_=0)),
        ).group_by(SinkDelivery.sink)
    )
    found = {
        sink: Ledger(pending=int(p or 0), held=int(h or 0), failed=int(f or 0))
        for sink, p, h, f in counts.all()
    }
    for health in await session.scalars(select(SinkHealth).where(SinkHealth.failures > 0)):
        ledger = found.get(health.sink, Ledger())
        found[health.sink] = Ledger(
            ledger.pending, ledger.held, ledger.failed,
            health.failures, health.failing_since, health.last_error,
        )  # fmt: skip
    return found


# -- reaching a sink, without sending it anything ---------------------------------------------


async def _reach(sink: Sink) -> Reach:
    try:
        if isinstance(sink, EmailSink):
            return await asyncio.to_thread(_smtp_reach, sink)
        url = URL(sink.url.get_secret_value() if isinstance(sink, TeamsSink) else sink.url)
        if not url.host or url.port is None:
            return Reach(False, "its url has no host", f"check the url of sink {sink.name}")
        return await _connect(url.host, url.port, tls=url.scheme == "https", name=sink.name)
    except Exception as exc:  # one broken check must not hide the other sinks' rows
        logger.debug("doctor: the check of sink %s failed", sink.name, exc_info=True)
        return Reach(False, f"the check broke: {type(exc).__name__}", "rerun with --debug")


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"untrusted certificate: {exc.verify_message}"
    if isinstance(exc, ssl.SSLError):
        return f"TLS failed: {exc.reason or exc}"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


async def _connect(host: str, port: int, *, tls: bool, name: str) -> Reach:
    """DNS, a TCP connect to each address in turn until one answers, then a TLS handshake (for
    https); the connection is closed without a byte of HTTP."""
    where = f"{host}:{port}"
    fix = (
        f"check the url of sink {name} (its host and port) and that this machine may connect "
        "to it (firewall, egress proxy)"
    )
    loop = asyncio.get_running_loop()
    try:
        async with asyncio.timeout(CONNECT_TIMEOUT_S):
            infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except TimeoutError:
        return Reach(False, f"{host} did not resolve within {CONNECT_TIMEOUT_S:g} s", fix)
    except OSError as exc:
        return Reach(False, f"cannot resolve {host}: {_reason(exc)}", fix)
    failed = Reach(False, f"{host} resolves to no address", fix)
    for address in dict.fromkeys(str(info[4][0]) for info in infos):
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT_S):
                _, writer = await asyncio.open_connection(address, port)
        except TimeoutError:
            failed = Reach(False, f"no connection to {where} within {CONNECT_TIMEOUT_S:g} s", fix)
            continue
        except OSError as exc:
            failed = Reach(False, f"cannot connect to {where}: {_reason(exc)}", fix)
            continue
        try:
            if not tls:
                return Reach(True, "reachable (TCP connect; plain http, no TLS)")
            async with asyncio.timeout(CONNECT_TIMEOUT_S):
                await writer.start_tls(ssl.create_default_context(), server_hostname=host)
            return Reach(True, "reachable (TCP connect and TLS handshake)")
        except TimeoutError:
            detail = f"connected to {where}, but no TLS handshake within {CONNECT_TIMEOUT_S:g} s"
            return Reach(False, detail, fix)
        except OSError as exc:  # ssl.SSLError too
            if isinstance(exc, ssl.SSLCertVerificationError):
                fix = (
                    f"make this machine trust the certificate of {host} (its CA store, or "
                    f"SSL_CERT_FILE), or check the url of sink {name}"
                )
            return Reach(False, f"connected to {where}, but {_reason(exc)}", fix)
        finally:
            await _close(writer)
    return failed


async def _close(writer: asyncio.StreamWriter) -> None:
    writer.close()
    try:
        async with asyncio.timeout(1.0):
            await writer.wait_closed()
    except (TimeoutError, OSError):
        writer.transport.abort()


def _smtp_reach(sink: EmailSink) -> Reach:
    """EHLO, STARTTLS or implicit TLS, and AUTH with the sink's login (blocking: run it in a
    thread, as bot/hub/sinks/email.py sends). QUIT, never MAIL: nothing is sent."""
    secrets = [sink.password.get_secret_value()] if sink.password else []
    done: list[str] = []
    step = "connect"
    try:
        context = tls_context(sink)
    except (OSError, ssl.SSLError) as exc:
        fix = f"check ca_file of sink {sink.name}: a PEM bundle of CA certificates"
        return Reach(False, f"cannot read ca_file {sink.ca_file}: {_reason(exc)}", fix)
    smtp: smtplib.SMTP | None = None
    try:
        # Connected by the constructor, as the sender connects (a failure closes the socket).
        if sink.security == "tls":
            smtp = smtplib.SMTP_SSL(
                sink.host, sink.smtp_port, timeout=SMTP_TIMEOUT_S, context=context
            )
        else:
            smtp = smtplib.SMTP(sink.host, sink.smtp_port, timeout=SMTP_TIMEOUT_S)
        done.append("connected with TLS" if sink.security == "tls" else "connected")
        step = "EHLO"
        _ehlo(smtp)
        if sink.security == "starttls":
            step = "STARTTLS"
            smtp.starttls(context=context)
            _ehlo(smtp)
            done.append("STARTTLS")
        if sink.username and sink.password:
            step = "login"
            log_in(smtp, sink)  # as the sender logs in
            done.append("login accepted")
    except (OSError, smtplib.SMTPException) as exc:
        if smtp is not None:
            smtp.close()
        detail = f"{', '.join([*done, ''])}{step} failed: {_smtp_reason(exc)}"
        return Reach(False, redact(detail, secrets), _smtp_fix(sink, step, exc))
    with contextlib.suppress(OSError, smtplib.SMTPException):
        smtp.quit()
    smtp.close()
    return Reach(True, f"reachable ({', '.join(done)}; no mail sent)")


def _ehlo(smtp: smtplib.SMTP) -> None:
    code, text = smtp.ehlo()
    if code != 250:
        raise smtplib.SMTPHeloError(code, text)


def _smtp_reason(exc: BaseException) -> str:
    if isinstance(exc, smtplib.SMTPResponseException):
        text = exc.smtp_error
        said = text.decode(errors="replace") if isinstance(text, bytes) else str(text)
        return f"answered {exc.smtp_code} {said}"
    if isinstance(exc, TimeoutError):
        return f"no answer within {SMTP_TIMEOUT_S:g} s"
    if isinstance(exc, socket.gaierror):
        return f"cannot resolve the host: {_reason(exc)}"
    return _reason(exc)


def _smtp_fix(sink: EmailSink, step: str, exc: BaseException) -> str:
    name = f"sink {sink.name}"
    security = (
        f"check security and port of {name}: tls talks TLS from the first byte (port 465), "
        "starttls upgrades a plain connection (port 587)"
    )
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"set ca_file of {name} to the CA bundle that signed the relay's certificate"
    if isinstance(exc, socket.gaierror):
        return f"check host of {name}"
    if step == "login" and isinstance(exc, smtplib.SMTPNotSupportedError):
        return (
            f"the relay offers no AUTH here: remove username and password of {name} if it "
            f"needs no login, or {security}"
        )
    if step == "login" and isinstance(exc, smtplib.SMTPResponseException):
        return f"check username and password of {name}: the relay refused the login"
    if step == "connect" and not isinstance(exc, ssl.SSLError):
        return (
            f"check host and port of {name} (port 0 means the usual one for its security: "
            "587, 465 or 25), that the relay is up and reachable from here, and its security"
        )
    return security
