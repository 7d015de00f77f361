"""Process settings from environment variables, validated once at start-up.

Only `bot/cli.py` builds these (from `os.environ`); everything else receives a Settings object.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from bot.core.logs import LogFormat
from bot.core.urls import display_url

DEFAULT_DATABASE_URL = "sqlite:///./var/backfill-bot.db"


class SetupError(ValueError):
    """`serve` cannot start as configured; the message names the variable to set."""


class SettingsError(ValueError):
    """An environment variable has an invalid value; the message names the variable."""


class Settings(BaseSettings):
    """Environment variables (names are the upper-case field names). Every field has a
    one-line description: `serve --help` lists them from here, so the list cannot drift."""

    model_config = SettingsConfigDict(extra="ignore", frozen=True, case_sensitive=False)

    marquez_url: str = Field(default="http://localhost:5000", description="Marquez base URL")
    marquez_api_key: SecretStr | None = Field(
        default=None, description="sent to Marquez as Authorization: Bearer"
    )
    marquez_namespace: str | None = Field(
        default=None, description="preferred namespace when a DAG name exists in several"
    )
    marquez_timeout_s: float = Field(
        default=10.0, gt=0, le=300, description="seconds each Marquez request may take"
    )
    marquez_lineage_timeout_s: float = Field(
        default=60.0,
        gt=0,
        le=600,
        description="seconds Marquez's heavy reads may take: /lineage and the jobs listing",
    )
    database_url: str = Field(
        default=DEFAULT_DATABASE_URL,
        repr=False,  # may hold a password
        description="SQLite (sqlite:///path.db) or PostgreSQL (postgresql://user@host/db)",
    )
    bot_config: Path | None = Field(
        default=None,
        description="YAML file: teams, ownership, approvers, reports, schedules, SLAs, limits",
    )
    slack_bot_token: SecretStr | None = Field(
        default=None, description="the Slack app's bot token (xoxb-...); serve needs it"
    )
    slack_signing_secret: SecretStr | None = Field(
        default=None, description="verifies every request to /slack/events (HTTP mode)"
    )
    slack_app_token: SecretStr | None = Field(
        default=None, description="xapp-... token: Socket Mode instead of a public Request URL"
    )
    slack_api_url: str = Field(
        default="https://slack.com/api/", description="Slack Web API base URL"
    )
    bot_host: str = Field(
        default="127.0.0.1",
        description="address serve listens on (0.0.0.0 behind a PaaS router or in a container)",
    )
    bot_port: int = Field(
        default=3000, ge=0, le=65535, description="port serve listens on (unset: PORT, or 3000)"
    )
    port: int | None = Field(
        default=None,
        ge=0,
        le=65535,
        description="the port a PaaS (Heroku, Render) assigns; used when BOT_PORT is unset",
    )
    airflow_url: str | None = Field(
        default=None, description="Airflow base URL; when set, approved backfills run there"
    )
    airflow_username: str | None = Field(
        default=None, description="Airflow user (Airflow 3: exchanged for a JWT; 2: basic auth)"
    )
    airflow_password: SecretStr | None = Field(default=None, description="that user's password")
    spark_master: str | None = Field(
        default=None,
        description="Spark master for the Spark executor: local[*] (unset) or spark://HOST:PORT",
    )
    spark_master_ui_url: str | None = Field(
        default=None,
        description="the Spark master's web UI, where doctor counts its workers "
        "(unset: port 8080 of SPARK_MASTER's host)",
    )
    openlineage_api_key: SecretStr | None = Field(
        default=None,
        description="when set, POST /api/v1/lineage requires Authorization: Bearer with it",
    )
    bot_executor: Literal["auto", "airflow", "spark", "manual"] = Field(
        default="auto",
        description="auto (Airflow if AIRFLOW_URL, else local Spark), airflow, spark or manual",
    )
    log_format: LogFormat = Field(
        default="text", description="log lines as text, or as one JSON object each (json)"
    )

    @property
    def executor_kind(self) -> Literal["airflow", "spark", "manual"]:
        """`auto` runs on Airflow when AIRFLOW_URL is set, else on the local Spark session."""
        if self.bot_executor != "auto":
            return self.bot_executor
        return "airflow" if self.airflow_url else "spark"

    @field_validator("marquez_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        from yarl import URL

        try:
            url = URL(value)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"'{display_url(value)}' is not a URL ({exc})") from None
        if url.scheme not in {"http", "https"} or not url.host:
            raise ValueError(
                f"'{display_url(value)}' is not an http(s) URL such as http://localhost:5000"
            )
        return value.rstrip("/")

    @field_validator("airflow_url")
    @classmethod
    def _airflow_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not value.startswith(("http://", "https://")):
            raise ValueError(
                f"'{display_url(value)}' is not an http(s) URL such as http://localhost:8080"
            )
        return value.rstrip("/")

    @field_validator("spark_master_ui_url")
    @classmethod
    def _spark_ui_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not value.startswith(("http://", "https://")):
            raise ValueError(
                f"'{display_url(value)}' is not an http(s) URL such as http://spark-master:8080"
            )
        return value.rstrip("/")

    @field_validator("slack_api_url")
    @classmethod
    def _slack_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError(
                f"'{display_url(value)}' is not an http(s) URL such as https://slack.com/api/"
            )
        return value if value.endswith("/") else value + "/"

    @field_validator(
        "marquez_namespace",
        "marquez_api_key",
        "bot_config",
        "slack_bot_token",
        "slack_signing_secret",
        "slack_app_token",
        "airflow_url",
        "airflow_username",
        "airflow_password",
        "spark_master",
        "spark_master_ui_url",
        "openlineage_api_key",
        "port",
        mode="before",
    )
    @classmethod
    def _blank_is_unset(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("database_url")
    @classmethod
    def _database_url(cls, value: str) -> str:
        # Messages show the URL through describe_url only: it may carry a password.
        from sqlalchemy.engine import make_url

        from bot.core.db import describe_url

        supported = ("sqlite:", "sqlite+aiosqlite:", "postgres://", "postgresql")
        if not value.startswith(supported):
            raise ValueError(
                f"'{describe_url(value)}' is not supported; use sqlite:///path/to/file.db or "
                "postgresql://user@host:5432/dbname"
            )
        try:
            make_url(value)
        except Exception:  # its text may quote the password (e.g. as a port that is no number)
            raise ValueError(
                f"'{describe_url(value)}' is not a valid URL (is the port a number, and are "
                "'@', ':' and '/' in the user or password %-encoded?)"
            ) from None
        return value

    @field_validator("bot_config")
    @classmethod
    def _config_exists(cls, value: Path | None) -> Path | None:
        if value is not None and not value.is_file():
            raise ValueError(f"'{value}' is not a readable file")
        return value


def load_settings(environ: Mapping[str, str], **overrides: object) -> Settings:
    """Settings from an environment mapping plus explicit overrides (e.g. CLI flags)."""
    values: dict[str, object] = {
        key.lower(): value for key, value in environ.items() if key.lower() in Settings.model_fields
    }
    values.update({k: v for k, v in overrides.items() if v is not None})
    try:
        settings = Settings.model_validate(values)
    except ValidationError as exc:
        problems = []
        for item in exc.errors():
            variable = str(item["loc"][0]).upper() if item["loc"] else "settings"
            message = str(item["msg"]).removeprefix("Value error, ")
            problems.append(f"{variable}: {message}")
        raise SettingsError("; ".join(problems)) from None
    if "bot_port" not in settings.model_fields_set and settings.port is not None:
        # Heroku, Render and the like say where to listen in PORT; an explicit BOT_PORT wins.
        settings = settings.model_copy(update={"bot_port": settings.port})
    return settings


def load_log_format(environ: Mapping[str, str]) -> LogFormat:
    """LOG_FORMAT alone, validated like the other settings (same one-line SettingsError):
    logging is set up before the other settings are read, and `standin` never reads them."""
    return load_settings({k: v for k, v in environ.items() if k.lower() == "log_format"}).log_format


def describe_variables() -> list[tuple[str, str, str]]:
    """(variable, default, meaning) for every setting, in declaration order."""
    rows: list[tuple[str, str, str]] = []
    for name, field in Settings.model_fields.items():
        default = "unset" if field.default is None else str(field.default)
        rows.append((name.upper(), default, field.description or ""))
    return rows
