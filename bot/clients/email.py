"""The e-mail sink: one message per notice over SMTP (STARTTLS or implicit TLS, AUTH), plain
text with an HTML alternative.

One attempt per `send`, classified like every sink (`bot.clients.sinks`): SMTP's 4xx replies,
a refused or dropped connection and timeouts are retried; 530/534/535 (authentication) and a
certificate the bot cannot trust mean the relay refuses the bot: retried slowly until a person
fixes the settings; other 5xx refuse this message for good. The Message-ID comes from the
delivery id, so a resend after a lost answer is recognisably the same message. The standard
library's smtplib runs in a thread: one message at a time per sink is all a notice needs.
"""

from __future__ import annotations

import asyncio
import smtplib
import ssl
from email import policy
from email.message import EmailMessage
from email.utils import formatdate
from typing import Any

from bot.clients.sinks import MISCONFIGURED_RETRY_S, Outcome, clean, redact
from bot.config_sinks import EmailSink

__all__ = ["EmailClient", "build_message"]

_AUTH_FAILED = {530, 534, 535}


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
    # The same notice gets the same Message-ID on every try: a mail client shows it once.
    message["Message-ID"] = f"<{_token(delivery_id)}@{domain}>"
    message.set_content(str(body.get("text", "")))
    message.add_alternative(str(body.get("html", "")), subtype="html")
    return message


def _token(delivery_id: str) -> str:
    return "".join(c if c.isalnum() or c in "-." else "-" for c in delivery_id)[:120]


class EmailClient:
    def __init__(self, sink: EmailSink, *, timeout_s: float = 20.0) -> None:
        self.sink, self.timeout_s = sink, timeout_s
        self.label = f"SMTP {sink.host}:{sink.port}"
        password = sink.password.get_secret_value() if sink.password else ""
        self._secrets = [password] if password else []

    async def send(self, body: dict[str, Any], *, delivery_id: str) -> Outcome:
        message = build_message(self.sink, body, delivery_id=delivery_id)
        try:
            await asyncio.to_thread(self._send, message)
        except smtplib.SMTPResponseException as exc:
            return self._answered(exc.smtp_code, exc.smtp_error)
        except smtplib.SMTPRecipientsRefused as exc:
            codes = sorted({code for code, _ in exc.recipients.values()})
            refused = ", ".join(exc.recipients)
            detail = self._detail(f"refused every recipient ({refused}): {codes}")
            return Outcome.retry(detail) if all(c < 500 for c in codes) else Outcome.fail(detail)
        except ssl.SSLCertVerificationError as exc:
            return Outcome.retry(self._detail(f"untrusted certificate: {exc.verify_message}"),
                                 MISCONFIGURED_RETRY_S)  # fmt: skip
        except smtplib.SMTPNotSupportedError as exc:
            return Outcome.retry(self._detail(str(exc)), MISCONFIGURED_RETRY_S)
        except (OSError, smtplib.SMTPException) as exc:  # refused, reset, timed out, TLS
            return Outcome.retry(self._detail(f"{type(exc).__name__}: {exc}"))
        return Outcome.ok(self._detail(f"accepted for {len(self.sink.to)} recipient(s)"))

    def _send(self, message: EmailMessage) -> None:
        sink = self.sink
        context = ssl.create_default_context()
        if sink.ca_file:
            context.load_verify_locations(cafile=sink.ca_file)
        if sink.security == "tls":
            smtp: smtplib.SMTP = smtplib.SMTP_SSL(
                sink.host, sink.port, timeout=self.timeout_s, context=context
            )
        else:
            smtp = smtplib.SMTP(sink.host, sink.port, timeout=self.timeout_s)
        with smtp:
            smtp.ehlo()
            if sink.security == "starttls":
                smtp.starttls(context=context)  # raises SMTPNotSupportedError if not offered
                smtp.ehlo()
            if sink.username and sink.password:
                smtp.user, smtp.password = sink.username, sink.password.get_secret_value()
                if "PLAIN" in smtp.esmtp_features.get("auth", "").upper().split():
                    # One mechanism, one answer: login() would go on to try LOGIN after a
                    # refused PLAIN, which some relays leave hanging until the timeout.
                    smtp.auth("PLAIN", smtp.auth_plain)
                else:
                    smtp.login(sink.username, sink.password.get_secret_value())
            smtp.send_message(message)

    def _answered(self, code: int, text: bytes | str) -> Outcome:
        reason = text.decode(errors="replace") if isinstance(text, bytes) else str(text)
        detail = self._detail(f"answered {code}: {reason}")
        if code in _AUTH_FAILED:  # the relay refuses the bot, not this message
            return Outcome.retry(detail, MISCONFIGURED_RETRY_S)
        if 400 <= code < 500:
            return Outcome.retry(detail)
        return Outcome.fail(detail)

    def _detail(self, text: str) -> str:
        return clean(redact(f"{self.label} {text}", self._secrets))

    async def close(self) -> None:
        return None
