"""The e-mail sink: one message per notice over SMTP (STARTTLS or implicit TLS, AUTH), plain
text with an HTML alternative.

One attempt per `send`, classified like every sink (`bot.hub.sinks.base`): SMTP's 4xx replies,
a refused or dropped connection and timeouts are retried; 530/534/535 (authentication) and a
certificate the bot cannot trust mean the relay refuses the bot: retried slowly until a person
fixes the settings, and so do a refused sender, every recipient refused with a 5xx and any
5.7.x (policy: relaying, send-as); other 5xx refuse this message for good. The Message-ID comes
from the delivery id, so a resend after a lost answer is recognisably the same message (clients
that thread by Message-ID show it once; others may show it twice). The standard
library's smtplib runs in a thread: one message at a time per sink is all a notice needs.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import smtplib
import ssl
from email import policy
from email.message import EmailMessage
from email.utils import formatdate
from typing import Any

from bot.config.sinks import EmailSink
from bot.hub.sinks.base import MISCONFIGURED_RETRY_S, Outcome, clean, redact

__all__ = ["EmailClient", "build_message"]

_AUTH_FAILED = {530, 534, 535}


def _text(value: bytes | str) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def tls_context(sink: EmailSink) -> ssl.SSLContext:
    """The system's trust, plus the sink's `ca_file` (a private relay's CA) when set."""
    context = ssl.create_default_context()
    if sink.ca_file:
        context.load_verify_locations(cafile=sink.ca_file)
    return context


def log_in(smtp: smtplib.SMTP, sink: EmailSink) -> None:
    """AUTH with the sink's login, when it has one (after EHLO, over TLS)."""
    if not (sink.username and sink.password):
        return
    smtp.user, smtp.password = sink.username, sink.password.get_secret_value()
    if "PLAIN" in smtp.esmtp_features.get("auth", "").upper().split():
        # One mechanism, one answer: login() would go on to try LOGIN after a refused PLAIN,
        # which some relays leave hanging until the timeout.
        smtp.auth("PLAIN", smtp.auth_plain)
    else:
        smtp.login(sink.username, sink.password.get_secret_value())


def build_message(sink: EmailSink, body: dict[str, Any], *, delivery_id: str) -> EmailMessage:
    """`body` ({subject, text, html}) as the message sent to the sink's recipients."""
    # Headers up to SMTP's own line limit: a subject folded at 78 characters reads back with a
    # leading space in some clients.
    message = EmailMessage(policy=policy.SMTP.clone(max_line_length=998))
    message["Subject"] = clean(str(body.get("subject", "")), 200)
    message["From"] = sink.sender
    message["To"] = ", ".join(sink.to)
    message["Date"] = formatdate(usegmt=True)
    domain = sink.sender.rpartition("@")[2]
    # The same notice gets the same Message-ID on every try (a digest of the delivery id: always
    # a valid id, never two events on one): clients that thread by it show a resend once.
    digest = hashlib.sha256(delivery_id.encode()).hexdigest()[:40]
    message["Message-ID"] = f"<{digest}.backfill-bot@{domain}>"
    message.set_content(str(body.get("text", "")))
    message.add_alternative(str(body.get("html", "")), subtype="html")
    return message


class EmailClient:
    def __init__(self, sink: EmailSink, *, timeout_s: float = 20.0) -> None:
        self.sink, self.timeout_s = sink, timeout_s
        self.label = f"SMTP {sink.host}:{sink.smtp_port}"
        password = sink.password.get_secret_value() if sink.password else ""
        self._secrets = [password] if password else []

    async def send(self, body: dict[str, Any], *, delivery_id: str) -> Outcome:
        message = build_message(self.sink, body, delivery_id=delivery_id)
        try:
            refused = await asyncio.to_thread(self._send, message)
        except smtplib.SMTPSenderRefused as exc:  # the relay will not send as `sender`
            detail = self._detail(f"refused the sender: {exc.smtp_code} {_text(exc.smtp_error)}")
            return Outcome.retry(detail, MISCONFIGURED_RETRY_S)
        except smtplib.SMTPResponseException as exc:
            return self._answered(exc.smtp_code, exc.smtp_error)
        except smtplib.SMTPRecipientsRefused as exc:  # every one: `to` or relaying is wrong
            codes = sorted({code for code, _ in exc.recipients.values()})
            detail = self._detail(f"refused every recipient ({', '.join(exc.recipients)}): {codes}")
            return Outcome.retry(
                detail, 0.0 if all(c < 500 for c in codes) else MISCONFIGURED_RETRY_S
            )
        except ssl.SSLCertVerificationError as exc:
            return Outcome.retry(self._detail(f"untrusted certificate: {exc.verify_message}"),
                                 MISCONFIGURED_RETRY_S)  # fmt: skip
        except smtplib.SMTPNotSupportedError as exc:
            return Outcome.retry(self._detail(str(exc)), MISCONFIGURED_RETRY_S)
        except (OSError, smtplib.SMTPException) as exc:  # refused, reset, timed out, TLS
            return Outcome.retry(self._detail(f"{type(exc).__name__}: {exc}"))
        accepted = len(self.sink.to) - len(refused)
        note = f"; refused {', '.join(sorted(refused))}" if refused else ""
        # Some recipients had it: sending again would give them a second copy.
        return Outcome.ok(self._detail(f"accepted for {accepted} recipient(s){note}"))

    def _send(self, message: EmailMessage) -> dict[str, tuple[int, bytes]]:
        """Send over one connection; the recipients the relay refused (the others have it)."""
        sink = self.sink
        context = tls_context(sink)
        if sink.security == "tls":
            smtp: smtplib.SMTP = smtplib.SMTP_SSL(
                sink.host, sink.smtp_port, timeout=self.timeout_s, context=context
            )
        else:
            smtp = smtplib.SMTP(sink.host, sink.smtp_port, timeout=self.timeout_s)
        try:
            smtp.ehlo()
            if sink.security == "starttls":
                smtp.starttls(context=context)  # raises SMTPNotSupportedError if not offered
                smtp.ehlo()
            log_in(smtp, sink)
            refused = smtp.send_message(message)
        except BaseException:
            smtp.close()
            raise
        # Sent: an odd answer to QUIT (or none) must not make it look unsent and go again.
        with contextlib.suppress(smtplib.SMTPException, OSError):
            smtp.quit()
        smtp.close()
        return dict(refused)

    def _answered(self, code: int, text: bytes | str) -> Outcome:
        reason = _text(text)
        detail = self._detail(f"answered {code}: {reason}")
        if code in _AUTH_FAILED or reason.startswith("5.7."):
            # the relay refuses the bot (login, relaying, send-as), not this message
            return Outcome.retry(detail, MISCONFIGURED_RETRY_S)
        if 400 <= code < 500:
            return Outcome.retry(detail)
        return Outcome.fail(detail)

    def _detail(self, text: str) -> str:
        """One line for logs and the row's error; never the password."""
        return clean(redact(f"{self.label} {text}", self._secrets))

    async def close(self) -> None:
        return None
