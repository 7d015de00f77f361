"""BOT_CONFIG's `sinks:` — where notices go besides Slack — and the `${VAR}` references that
keep their secrets out of the file.

A sink is named once and used by name from a team's `sinks:`. Its secrets (a PagerDuty
routing key, a webhook's signing secret) are best written as `${ENV_VAR}`: `load_config`
replaces a value that is exactly such a reference with that variable, and names the variable
when it is unset, so the file can be committed and the secret lives where the bot's others do.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

__all__ = [
    "EmailSink",
    "HubSettings",
    "PagerDutySink",
    "Sink",
    "TeamsSink",
    "WebhookSink",
    "expand_references",
]

_REFERENCE = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$")
_NAME = r"^[a-z0-9][a-z0-9_.-]{0,62}$"
_ADDRESS = re.compile(r"^[^@\s<>,;]+@[^@\s<>,;]+$")


class _SinkBase(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=_NAME)
    """How teams refer to it: lower-case letters, digits, `-`, `_` and `.`."""


class PagerDutySink(_SinkBase):
    """PagerDuty's Events API v2: a failure triggers an alert (its dedup_key is the incident),
    Acknowledge in Slack acknowledges it, the incident's resolution resolves it."""

    kind: Literal["pagerduty"]
    routing_key: SecretStr
    """The integration key of a PagerDuty service's Events API v2 integration (32 characters)."""
    url: str = Field(default="https://events.pagerduty.com/v2/enqueue", pattern=r"^https?://")
    severity: Literal["critical", "error", "warning", "info"] = "error"

    @field_validator("routing_key")
    @classmethod
    def _key_length(cls, value: SecretStr) -> SecretStr:
        if len(value.get_secret_value()) != 32:
            raise ValueError("a PagerDuty routing key is 32 characters")
        return value


class WebhookSink(_SinkBase):
    """A JSON document per event (docs/webhooks.md), signed with HMAC-SHA256 over the
    timestamp and body, as Slack signs its requests."""

    kind: Literal["webhook"]
    url: str = Field(pattern=r"^https?://")
    secret: SecretStr
    """The signing secret the receiver shares (at least 16 characters)."""

    @field_validator("secret")
    @classmethod
    def _secret_length(cls, value: SecretStr) -> SecretStr:
        if len(value.get_secret_value()) < 16:
            raise ValueError("a webhook's signing secret is at least 16 characters")
        return value


class EmailSink(_SinkBase):
    """E-mail over SMTP: one message per event, plain text and HTML. `security` is `starttls`
    (port 587, the default), `tls` (implicit TLS, port 465) or `none` (a relay on a trusted
    network only; no password is ever sent without TLS)."""

    kind: Literal["email"]
    host: str = Field(min_length=1)
    security: Literal["starttls", "tls", "none"] = "starttls"
    port: int = Field(default=0, ge=0, le=65535)
    """0 (the default): the usual port for `security`: 587, 465 or 25."""
    username: str | None = None
    password: SecretStr | None = None
    sender: str = Field(pattern=r"^[^@\s<>]+@[^@\s<>]+$")
    """The From address."""
    to: tuple[str, ...] = Field(min_length=1)
    ca_file: str | None = None
    """A CA bundle to trust besides the system's (a private mail relay's CA)."""

    @field_validator("to")
    @classmethod
    def _addresses(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for address in value:
            if not _ADDRESS.match(address):
                raise ValueError(f"'{address}' is not an e-mail address")
        return value

    @field_validator("username", "password")
    @classmethod
    def _ascii(cls, value: str | SecretStr | None) -> str | SecretStr | None:
        text = value.get_secret_value() if isinstance(value, SecretStr) else value
        if text is not None and not text.isascii():
            raise ValueError("SMTP logins are ASCII: use ASCII characters only")
        return value

    @property
    def smtp_port(self) -> int:
        return self.port or {"starttls": 587, "tls": 465, "none": 25}[self.security]

    @model_validator(mode="after")
    def _no_password_in_clear(self) -> EmailSink:
        if self.security == "none" and self.password is not None:
            raise ValueError("a password is only sent over TLS: set security to starttls or tls")
        if (self.username is None) != (self.password is None):
            raise ValueError("set both username and password, or neither")
        return self


class TeamsSink(_SinkBase):
    """A Microsoft Teams channel: an incoming webhook (Office 365 connector) or a Workflows
    (Power Automate) URL, posted an Adaptive Card per event. The URL is the secret: anyone who
    has it can post to the channel, so write it as `${VAR}`; it is shown by its origin only."""

    kind: Literal["teams"]
    url: SecretStr

    @field_validator("url")
    @classmethod
    def _https(cls, value: SecretStr) -> SecretStr:
        url = value.get_secret_value()
        # The URL is the secret: plain http only to this machine (a local stand-in).
        local = re.match(r"^http://(127\.0\.0\.1|localhost|\[::1\])(:|/)", url)
        if not url.startswith("https://") and local is None:
            raise ValueError("a Teams URL starts with https://")
        return value


Sink = Annotated[PagerDutySink | WebhookSink | EmailSink | TeamsSink, Field(discriminator="kind")]


class HubSettings(BaseModel):
    """The hub's settings. The sink sender retries a sink that fails after `retry_base_s`,
    doubling each attempt, up to `retry_max_s` (a sink's own Retry-After wins). Nothing owed is
    ever dropped."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    retry_base_s: float = Field(default=5.0, gt=0, le=300)
    retry_max_s: float = Field(default=900.0, gt=0, le=86400)
    subscriptions: Literal["owners", "anyone"] = "owners"
    """Who may subscribe a channel with `/backfill subscribe`: `owners`, the members of a team
    whose ownership covers the pattern (and the configured approvers); `anyone`. Anyone may
    subscribe their own DM to anything."""
    escalation_check_s: float = Field(default=30.0, ge=1, le=3600)
    """How often alerts are checked for an escalation that is due."""


def expand_references(data: Any, environ: Mapping[str, str]) -> Any:
    """`sinks:` with each value that is exactly `${VAR}` replaced by that variable (KeyError
    names an unset one). Only the sinks section: elsewhere `${` is just text."""
    if not isinstance(data, dict) or not isinstance(data.get("sinks"), list):
        return data

    def expand(value: Any) -> Any:
        if isinstance(value, str) and (found := _REFERENCE.match(value)):
            return environ[found.group(1)]
        if isinstance(value, dict):
            return {k: expand(v) for k, v in value.items()}
        return value

    return {**data, "sinks": [expand(sink) for sink in data["sinks"]]}
