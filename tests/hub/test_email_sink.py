"""The e-mail sink against a real SMTP server (aiosmtpd): STARTTLS and AUTH, a plain-text and
an HTML part, and each failure classified as the sender needs it (retry, retry slowly while the
relay refuses the bot, or refuse this message), without the password in any detail."""

from __future__ import annotations

import re
import socket
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bot.config.sinks import EmailSink
from bot.core.model import DagRef
from bot.hub.messages.documents import email_body
from bot.hub.rules.routing import HubEvent
from bot.hub.sinks.email import EmailClient
from tests.support.smtp import PASSWORD, USER, smtp_server

HOSTILE_DAG = "etl<script>alert(1)</script>&"


def sink(port: int, ca_file: Path | None, **more: Any) -> EmailSink:
    data: dict[str, Any] = {
        "name": "mail", "kind": "email", "host": "127.0.0.1", "port": port,
        "username": USER, "password": PASSWORD, "sender": "bot@example.com",
        "to": ["oncall@example.com", "data@example.com"],
        "ca_file": str(ca_file) if ca_file else None, **more,
    }  # fmt: skip
    return EmailSink.model_validate(data)


def body(dag: str = "example.etl_orders") -> dict[str, Any]:
    event = HubEvent(
        kind="failure.opened", incident_id="abc", dag=DagRef("food_delivery", dag),
        intervals="2021-06-04", at=datetime(2021, 6, 5, tzinfo=UTC), error="disk <full> & more",
        owners=("orders",),
    )  # fmt: skip
    return email_body(event)


async def test_a_notice_goes_over_starttls_with_auth_as_text_and_html(tmp_path: Path) -> None:
    with smtp_server(tmp_path) as (mailbox, port, ca):
        client = EmailClient(sink(port, ca))
        outcome = await client.send(body(HOSTILE_DAG), delivery_id="mail/incident:abc:opened:1")
        again = await client.send(body(HOSTILE_DAG), delivery_id="mail/incident:abc:opened:1")
    assert outcome.delivered, outcome.detail
    assert again.delivered
    first, second = mailbox.messages
    assert mailbox.recipients[0] == ["oncall@example.com", "data@example.com"]
    assert first["Subject"] == f"[backfill-bot] {HOSTILE_DAG} failed for 2021-06-04"
    assert first["From"] == "bot@example.com"
    assert first["Message-ID"] == second["Message-ID"]  # a resend is the same message
    text = first.get_body(preferencelist=("plain",))
    html = first.get_body(preferencelist=("html",))
    assert text is not None
    assert html is not None
    assert "Error:\r\ndisk <full> & more" in text.get_content()
    shown = html.get_content()
    assert "<script>" not in shown
    assert "etl&lt;script&gt;alert(1)&lt;/script&gt;&amp;" in shown
    assert "disk &lt;full&gt; &amp; more" in shown


async def test_a_wrong_password_is_retried_slowly_and_never_shown(tmp_path: Path) -> None:
    with smtp_server(tmp_path) as (mailbox, port, ca):
        outcome = await EmailClient(sink(port, ca, password="not-the-password")).send(
            body(), delivery_id="1"
        )
    assert (outcome.delivered, outcome.retry_after_s) == (False, 300.0)
    assert "535" in outcome.detail
    assert "not-the-password" not in outcome.detail
    assert mailbox.messages == []


async def test_replies_are_classified_transient_or_final(tmp_path: Path) -> None:
    with smtp_server(tmp_path) as (mailbox, port, ca):
        client = EmailClient(sink(port, ca))
        mailbox.replies = ["451 4.3.0 try again later", "554 5.6.0 message refused"]
        busy = await client.send(body(), delivery_id="1")
        refused = await client.send(body(), delivery_id="2")
    assert (busy.delivered, busy.retry_after_s) == (False, 0.0)
    assert busy.detail.endswith("answered 451: 4.3.0 try again later")
    assert (refused.delivered, refused.retry_after_s) == (False, None)
    assert mailbox.messages == []


async def test_a_relay_the_bot_cannot_trust_or_that_offers_no_tls_gets_no_password(
    tmp_path: Path,
) -> None:
    with smtp_server(tmp_path) as (mailbox, port, _):
        untrusted = await EmailClient(sink(port, None)).send(body(), delivery_id="1")
    assert (untrusted.retry_after_s, mailbox.messages) == (300.0, [])
    assert "untrusted certificate" in untrusted.detail
    plain = tmp_path / "plain"
    plain.mkdir()
    with smtp_server(plain, starttls=False) as (mailbox, port, ca):
        no_tls = await EmailClient(sink(port, ca)).send(body(), delivery_id="1")
    assert (no_tls.retry_after_s, mailbox.messages) == (300.0, [])
    assert "STARTTLS" in no_tls.detail


async def test_a_relay_that_is_down_is_retried() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    outcome = await EmailClient(sink(port, None)).send(body(), delivery_id="1")
    assert (outcome.delivered, outcome.retry_after_s) == (False, 0.0)
    assert "ConnectionRefusedError" in outcome.detail


async def test_a_recipient_the_relay_does_not_know_does_not_stop_the_others(
    tmp_path: Path,
) -> None:
    with smtp_server(tmp_path) as (mailbox, port, ca):
        mailbox.unknown = {"data@example.com"}
        some = await EmailClient(sink(port, ca)).send(body(), delivery_id="1")
        mailbox.unknown = {"oncall@example.com", "data@example.com"}
        none = await EmailClient(sink(port, ca)).send(body(), delivery_id="2")
    # delivered to one: sending again would give them a second copy; the refusal is said
    assert some.delivered
    assert some.detail.endswith("accepted for 1 recipient(s); refused data@example.com")
    assert mailbox.recipients == [["oncall@example.com"]]
    # refused to every one with a 5xx: `to` or the relay is wrong, retried slowly until fixed
    assert (none.delivered, none.retry_after_s) == (False, 300.0)


async def test_implicit_tls_on_its_own_port(tmp_path: Path) -> None:
    with smtp_server(tmp_path, implicit_tls=True) as (mailbox, port, ca):
        outcome = await EmailClient(sink(port, ca, security="tls")).send(body(), delivery_id="1")
    assert outcome.delivered, outcome.detail
    assert len(mailbox.messages) == 1
    assert sink(0, None, security="tls").smtp_port == 465
    assert sink(0, None).smtp_port == 587


async def test_the_message_id_is_valid_and_different_for_each_event(tmp_path: Path) -> None:
    with smtp_server(tmp_path) as (mailbox, port, ca):
        client = EmailClient(sink(port, ca))
        long_name = "m" * 63
        await client.send(body(), delivery_id=f"{long_name}/incident:abc:opened:2021-06-05T02:00")
        await client.send(body(), delivery_id=f"{long_name}/incident:abc:opened:2021-06-09T02:00")
    first, second = (m["Message-ID"] for m in mailbox.messages)
    assert first != second
    assert re.fullmatch(r"<[0-9a-f]{40}\.backfill-bot@example\.com>", first)
