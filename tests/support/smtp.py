"""A real SMTP server for the e-mail sink's tests: aiosmtpd with STARTTLS (a certificate made
for the test by openssl), AUTH required over TLS, and replies a test can choose."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from email.message import EmailMessage
from pathlib import Path
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

USER, PASSWORD = "backfill-bot", "relay-password-123"


@dataclass
class Mailbox:
    """What the server accepted, and the replies it gives next (`"451 …"`, `"550 …"`)."""

    messages: list[EmailMessage] = field(default_factory=list)
    recipients: list[list[str]] = field(default_factory=list)
    replies: list[str] = field(default_factory=list)
    unknown: set[str] = field(default_factory=set)  # recipients refused at RCPT TO

    async def handle_RCPT(
        self, server: Any, session: Any, envelope: Any, address: str, options: Any
    ) -> str:
        if address in self.unknown:
            return "550 5.1.1 no such user here"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        if self.replies:
            return self.replies.pop(0)
        parsed = message_from_bytes(envelope.content, policy=policy.default)
        assert isinstance(parsed, EmailMessage)
        self.messages.append(parsed)
        self.recipients.append(list(envelope.rcpt_tos))
        return "250 OK"


def certificate(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and localhost (cert, key)."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=localhost",
         "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _authenticate(server: Any, session: Any, envelope: Any, mechanism: str, data: Any) -> Any:
    ok = isinstance(data, LoginPassword) and (data.login, data.password) == (
        USER.encode(),
        PASSWORD.encode(),
    )
    if ok:
        return AuthResult(success=True, handled=False)
    # Like some relays, the refusal repeats what was tried: the client must not pass it on.
    tried = data.password.decode(errors="replace") if isinstance(data, LoginPassword) else ""
    return AuthResult(success=False, handled=False, message=f"535 5.7.8 {tried} is not valid")


@contextmanager
def smtp_server(
    folder: Path, *, starttls: bool = True, implicit_tls: bool = False
) -> Iterator[tuple[Mailbox, int, Path]]:
    """A running server: its mailbox, port and CA file (the certificate it presents).
    `implicit_tls`: TLS from the first byte (port 465 style) instead of STARTTLS."""
    import ssl

    cert, key = certificate(folder)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(str(cert), str(key))
    mailbox = Mailbox()
    port = _free_port()
    options: dict[str, Any] = {"authenticator": _authenticate, "auth_require_tls": True}
    if implicit_tls:
        # aiosmtpd counts only STARTTLS as TLS for AUTH (and warns when AUTH is required
        # without it); here the whole connection is TLS, so AUTH is offered, not required.
        options.update(auth_require_tls=False)
        controller = Controller(
            mailbox, hostname="127.0.0.1", port=port, ssl_context=context, **options
        )
    else:
        if starttls:
            options.update(tls_context=context, require_starttls=True, auth_required=True)
        controller = Controller(mailbox, hostname="127.0.0.1", port=port, **options)
    controller.start()
    try:
        yield mailbox, port, cert
    finally:
        controller.stop()
